<?php

declare(strict_types=1);

namespace Redlock\Ffi;

use FFI;
use FFI\CData;

/**
 * One fenced write (`redlock_fenced_set*`): the core's resource-side check of a fencing
 * token, a script that sets an item only if the token is greater than the highest one
 * the item accepted. The core builds the command (EVALSHA, or EVAL after NOSCRIPT) and
 * reads the reply; this class carries them.
 */
final class FencedSet
{
    private function __construct(private readonly Native $native, private readonly CData $handle)
    {
    }

    /**
     * @throws \Redlock\Exception\InvalidArgumentException an empty item
     *   (`empty_resource`), a token of 0 or above 2^53 - 1 (`invalid_fencing_token`)
     */
    public static function create(Native $native, string $item, string $value, int $token): self
    {
        if ($token < 0) {
            $token = 0; // refused by the core as invalid_fencing_token, like 0
        }
        $out = $native->ffi->new('redlock_fenced_set*');
        $native->check(
            $native->ffi->redlock_fenced_set_new($item, strlen($item), $value, strlen($value), $token, FFI::addr($out)),
            'fenced write',
        );
        return new self($native, $out);
    }

    /**
     * The command: `EVALSHA <sha> 2 <item> <guard key> <token> <value>`, or with
     * `$eval` the `EVAL <script> ...` form.
     *
     * @return list<string>
     */
    public function args(bool $eval): array
    {
        $ffi = $this->native->ffi;
        $args = $ffi->new('const char*[8]');
        $lengths = $ffi->new('size_t[8]');
        $this->native->check(
            $ffi->redlock_fenced_set_args($this->handle, $eval, $args, $lengths, 8, FFI::addr($this->native->size)),
            'fenced write',
        );
        $out = [];
        $count = $this->native->size->cdata;
        for ($i = 0; $i < $count; $i++) {
            $out[] = $lengths[$i] === 0 ? '' : FFI::string($args[$i], $lengths[$i]);
        }
        return $out;
    }

    /** Hands in the server's reply; returns a `Constants::FENCED_*` value. */
    public function handleReply(Reply $reply): int
    {
        $n = $this->native;
        $n->check($n->ffi->redlock_fenced_set_handle_reply($this->handle, $reply->handle, FFI::addr($n->u32)), 'fenced write');
        return $n->u32->cdata;
    }

    /** The token the item had accepted, after a FENCED_STALE result. */
    public function seen(): ?int
    {
        $n = $this->native;
        $rc = $n->ffi->redlock_fenced_set_seen($this->handle, FFI::addr($n->u64));
        return $rc === Constants::OK ? $n->u64->cdata : null;
    }

    /** What went wrong, after a FENCED_FAILED result. */
    public function failure(): ?string
    {
        $n = $this->native;
        $rc = $n->ffi->redlock_fenced_set_failure($this->handle, FFI::addr($n->bytes), FFI::addr($n->bytesLen));
        return $rc === Constants::OK ? $n->takeBytes() : null;
    }

    public function __destruct()
    {
        $this->native->free('redlock_fenced_set_free', $this->handle);
    }
}
