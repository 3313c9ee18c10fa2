<?php

declare(strict_types=1);

namespace Redlock\Tests;

use Redlock\Ffi\Constants;
use Redlock\Ffi\Native;
use Redlock\Ffi\Reply;

/**
 * Conversions between the conformance vectors' JSON and the core's values.
 */
final class VectorSupport
{
    public static function vectorsDir(): string
    {
        return dirname(__DIR__, 3) . '/tests/vectors';
    }

    /** @param array<string, mixed> $value */
    public static function reply(Native $native, array $value): Reply
    {
        $text = static fn (): string => (string) ($value['value'] ?? '');
        return match ($value['type']) {
            'ok' => Reply::create($native, Constants::REPLY_OK),
            'status' => Reply::create($native, Constants::REPLY_STATUS, 0, $text()),
            'nil' => Reply::create($native, Constants::REPLY_NIL),
            'integer' => Reply::create($native, Constants::REPLY_INTEGER, (int) $value['value']),
            'bulk' => Reply::create($native, Constants::REPLY_BULK, 0, $text()),
            'error' => Reply::create($native, Constants::REPLY_ERROR, 0, $text()),
            'timeout' => Reply::create($native, Constants::REPLY_TIMEOUT),
            'connection_failed' => Reply::create($native, Constants::REPLY_CONNECTION_FAILED, 0, $text()),
            'array' => Reply::array($native, array_map(
                static fn (array $item): Reply => self::reply($native, $item),
                $value['value']
            )),
            default => throw new \UnexpectedValueException("unknown reply type {$value['type']}"),
        };
    }

    /** @return array<string, mixed> the reply in the vectors' JSON form */
    public static function replyToJson(Reply $reply): array
    {
        return match ($reply->kind()) {
            Constants::REPLY_OK => ['type' => 'ok'],
            Constants::REPLY_STATUS => ['type' => 'status', 'value' => $reply->bytes()],
            Constants::REPLY_NIL => ['type' => 'nil'],
            Constants::REPLY_INTEGER => ['type' => 'integer', 'value' => $reply->integer()],
            Constants::REPLY_BULK => ['type' => 'bulk', 'value' => $reply->bytes()],
            Constants::REPLY_ERROR => ['type' => 'error', 'value' => $reply->bytes()],
            Constants::REPLY_ARRAY => ['type' => 'array', 'value' => array_map(
                static fn (Reply $item): array => self::replyToJson($item),
                $reply->items()
            )],
            default => ['type' => 'kind ' . $reply->kind()],
        };
    }
}
