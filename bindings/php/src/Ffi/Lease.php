<?php

declare(strict_types=1);

namespace Redlock\Ffi;

use FFI;
use FFI\CData;

/**
 * A held lock as the core knows it (`redlock_lease*`): keys, token, `valid_until`, TTL.
 */
final class Lease
{
    public function __construct(public readonly Native $native, public readonly CData $handle)
    {
    }

    public function token(): string
    {
        $native = $this->native;
        $native->check($native->ffi->redlock_lease_token($this->handle, FFI::addr($native->bytes), FFI::addr($native->bytesLen)), 'lease token');
        return $native->takeBytes();
    }

    /** @return list<string> */
    public function keys(): array
    {
        $native = $this->native;
        $keys = [];
        $count = $native->ffi->redlock_lease_key_count($this->handle);
        for ($i = 0; $i < $count; $i++) {
            $native->check($native->ffi->redlock_lease_key($this->handle, $i, FFI::addr($native->bytes), FFI::addr($native->bytesLen)), 'lease key');
            $keys[] = $native->takeBytes();
        }
        return $keys;
    }

    public function validUntilUs(): int
    {
        return $this->native->ffi->redlock_lease_valid_until($this->handle);
    }

    public function validityUs(int $nowUs): int
    {
        return $this->native->ffi->redlock_lease_validity($this->handle, $nowUs);
    }

    public function isValid(int $nowUs): bool
    {
        return $this->native->ffi->redlock_lease_is_valid($this->handle, $nowUs);
    }

    public function ttlMs(): int
    {
        return $this->native->ffi->redlock_lease_ttl_ms($this->handle);
    }

    /**
     * The fencing token (docs/fencing.md): strictly greater than every token handed out
     * before it for the same resource. Null without fencing and for a lease rebuilt from
     * its parts.
     */
    public function fencingToken(): ?int
    {
        $native = $this->native;
        $rc = $native->ffi->redlock_lease_fencing_token($this->handle, FFI::addr($native->u64));
        return $rc === Constants::OK ? $native->u64->cdata : null;
    }

    public function extensions(): int
    {
        return $this->native->ffi->redlock_lease_extensions($this->handle);
    }

    public function __destruct()
    {
        $this->native->free('redlock_lease_free', $this->handle);
    }
}
