<?php

declare(strict_types=1);

namespace Redlock\Tests\Integration;

use PHPUnit\Framework\TestCase;
use Redlock\Options;
use Redlock\Redlock;

/**
 * PHP and the project's Rust command-line tool on one resource (ports 7530-7534): the
 * same keys, the same tokens, the same scripts, so each excludes the other and either
 * can release what the other acquired. The tool is REDLOCK_CLI (build.sh builds it),
 * else the project's target/{debug,release}/redlock.
 */
final class InteropTest extends TestCase
{
    private const BASE_PORT = 7530;
    /** @var list<string> */
    private static array $urls = [];

    public static function setUpBeforeClass(): void
    {
        self::$urls = Nodes::start(self::BASE_PORT);
    }

    public static function tearDownAfterClass(): void
    {
        Nodes::stop(self::BASE_PORT);
    }

    private static function cli(): string
    {
        $candidates = array_filter([
            getenv('REDLOCK_CLI') ?: null,
            Nodes::repo() . '/target/debug/redlock',
            Nodes::repo() . '/target/release/redlock',
        ]);
        foreach ($candidates as $candidate) {
            if (is_executable($candidate)) {
                return $candidate;
            }
        }
        self::fail('the redlock CLI was not found: run bindings/php/build.sh test, or set REDLOCK_CLI');
    }

    /**
     * @param list<string> $args
     * @return array{int, string, string} exit status, stdout, stderr
     */
    private static function redlockCli(array $args): array
    {
        $process = proc_open(
            array_merge([self::cli(), '--nodes', implode(',', self::$urls), '--quiet'], $args),
            [1 => ['pipe', 'w'], 2 => ['pipe', 'w']],
            $pipes,
        );
        $stdout = (string) stream_get_contents($pipes[1]);
        $stderr = (string) stream_get_contents($pipes[2]);
        return [proc_close($process), trim($stdout), trim($stderr)];
    }

    public function testEachExcludesTheOtherAndEitherReleasesTheOthersLock(): void
    {
        $redlock = Redlock::create(self::$urls, new Options(nodeTimeoutMs: 300, attempts: 1));

        // PHP holds it: the CLI is refused (exit 75), then PHP releases and the CLI gets it.
        $lock = $redlock->acquire('interop:orders', 10_000);
        [$status, , $stderr] = self::redlockCli(['acquire', 'interop:orders', '--ttl', '10000', '--retry', '0', '--node-timeout', '300']);
        $this->assertSame(75, $status, "the CLI acquired a lock PHP holds: $stderr");
        $lock->release();
        [$status, $token, $stderr] = self::redlockCli(['acquire', 'interop:orders', '--ttl', '10000', '--retry', '0', '--node-timeout', '300']);
        $this->assertSame(0, $status, $stderr);
        $this->assertMatchesRegularExpression('/^[0-9a-f]{40}$/', $token);

        // The CLI holds it: PHP is refused, then releases it with the CLI's token.
        $this->assertNull($redlock->tryAcquire('interop:orders'));
        $redlock->flush();
        $this->assertSame(array_fill(0, 5, $token), Nodes::values(self::BASE_PORT, 'interop:orders'));
        $theirs = $redlock->lockFromToken('interop:orders', $token);
        $theirs->extend(20_000);
        $this->assertGreaterThan(19_000, Nodes::redis(self::BASE_PORT, 0)->pTTL('interop:orders'));
        $this->assertGreaterThanOrEqual(3, $theirs->release());
        $redlock->flush();
        $this->assertSame(array_fill(0, 5, false), Nodes::values(self::BASE_PORT, 'interop:orders'));

        // And the CLI releases a token PHP acquired.
        $mine = $redlock->acquire('interop:orders', 10_000);
        $redlock->flush();
        [$status, , $stderr] = self::redlockCli(['release', 'interop:orders', $mine->token()]);
        $this->assertSame(0, $status, $stderr);
        $this->assertSame(array_fill(0, 5, false), Nodes::values(self::BASE_PORT, 'interop:orders'));
    }
}
