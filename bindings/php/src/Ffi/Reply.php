<?php

declare(strict_types=1);

namespace Redlock\Ffi;

use FFI;
use FFI\CData;

/**
 * One reply as a core value (`redlock_reply*`): decoded from a socket's bytes, or built
 * from what a Redis client returned. Freed with the object.
 */
final class Reply
{
    public function __construct(public readonly Native $native, public readonly CData $handle)
    {
    }

    /**
     * A reply of `$kind` (a `Constants::REPLY_*` value), with `$integer` for integers
     * and `$text` for status, bulk, error and connection-failed replies.
     */
    public static function create(Native $native, int $kind, int $integer = 0, string $text = ''): self
    {
        $out = $native->ffi->new('redlock_reply*');
        $native->check($native->ffi->redlock_reply_new($kind, $integer, $text, strlen($text), FFI::addr($out)), 'reply');
        return new self($native, $out);
    }

    /** @param list<Reply> $items */
    public static function array(Native $native, array $items): self
    {
        $array = self::create($native, Constants::REPLY_ARRAY);
        foreach ($items as $item) {
            $native->check($native->ffi->redlock_reply_array_push($array->handle, $item->handle), 'reply array');
        }
        return $array;
    }

    public function kind(): int
    {
        return $this->native->ffi->redlock_reply_kind($this->handle);
    }

    public function integer(): int
    {
        $native = $this->native;
        $native->check($native->ffi->redlock_reply_integer($this->handle, FFI::addr($native->i64)), 'reply integer');
        return $native->i64->cdata;
    }

    public function bytes(): string
    {
        $native = $this->native;
        $native->check($native->ffi->redlock_reply_bytes($this->handle, FFI::addr($native->bytes), FFI::addr($native->bytesLen)), 'reply bytes');
        return $native->takeBytes();
    }

    /** @return list<Reply> */
    public function items(): array
    {
        $native = $this->native;
        $items = [];
        $count = $native->ffi->redlock_reply_array_len($this->handle);
        for ($i = 0; $i < $count; $i++) {
            $out = $native->ffi->new('redlock_reply*');
            $native->check($native->ffi->redlock_reply_array_get($this->handle, $i, FFI::addr($out)), 'reply item');
            $items[] = new self($native, $out);
        }
        return $items;
    }

    public function __destruct()
    {
        $this->native->free('redlock_reply_free', $this->handle);
    }
}
