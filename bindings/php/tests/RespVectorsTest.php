<?php

declare(strict_types=1);

namespace Redlock\Tests;

use PHPUnit\Framework\TestCase;
use Redlock\Exception\CoreException;
use Redlock\Ffi\Decoder;
use Redlock\Ffi\Native;

/**
 * The RESP decoder vectors (tests/vectors/resp/*.json) through the decoder the stream
 * driver reads with.
 */
final class RespVectorsTest extends TestCase
{
    /** @return iterable<string, array{string}> */
    public static function vectors(): iterable
    {
        $files = glob(VectorSupport::vectorsDir() . '/resp/*.json') ?: [];
        self::assertGreaterThan(10, count($files));
        foreach ($files as $file) {
            yield basename($file, '.json') => [$file];
        }
    }

    /** @dataProvider vectors */
    public function testVector(string $file): void
    {
        $vector = json_decode((string) file_get_contents($file), true, 512, JSON_THROW_ON_ERROR);
        $decoder = new Decoder(Native::get());
        $replies = [];
        $error = null;
        try {
            foreach ($vector['chunks'] as $chunk) {
                $decoder->feed((string) hex2bin($chunk));
                while (($reply = $decoder->next()) !== null) {
                    $replies[] = VectorSupport::replyToJson($reply);
                }
            }
        } catch (CoreException $e) {
            $error = $e->codeName;
        }
        $this->assertSame($vector['error'], $error, $vector['name']);
        $this->assertSame($vector['replies'], $replies, $vector['name']);
    }
}
