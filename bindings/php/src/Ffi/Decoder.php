<?php

declare(strict_types=1);

namespace Redlock\Ffi;

use FFI;
use FFI\CData;

/**
 * The core's incremental RESP2/RESP3 decoder (`redlock_decoder*`): feed it the bytes
 * read from a socket, take replies as they complete. A protocol error is a
 * CoreException (`bad_terminator`, ...): the connection is out of step, close it.
 */
final class Decoder
{
    private readonly CData $handle;

    public function __construct(private readonly Native $native)
    {
        $this->handle = $native->ffi->new('redlock_decoder*');
        $native->check($native->ffi->redlock_decoder_new(FFI::addr($this->handle)), 'decoder');
    }

    public function feed(string $bytes): void
    {
        $this->native->check($this->native->ffi->redlock_decoder_feed($this->handle, $bytes, strlen($bytes)), 'decoder');
    }

    /** The next complete reply, or null when more bytes are needed. */
    public function next(): ?Reply
    {
        $native = $this->native;
        $reply = $native->ffi->new('redlock_reply*');
        $native->check($native->ffi->redlock_decoder_next_reply($this->handle, FFI::addr($reply)), 'RESP');
        if (FFI::isNull($reply)) {
            return null;
        }
        return new Reply($native, $reply);
    }

    public function buffered(): int
    {
        return $this->native->ffi->redlock_decoder_buffered($this->handle);
    }

    public function __destruct()
    {
        $this->native->free('redlock_decoder_free', $this->handle);
    }
}
