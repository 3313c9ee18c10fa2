<?php

declare(strict_types=1);

namespace Redlock\Ffi;

use FFI;
use FFI\CData;

/**
 * The core's KeepAlive (`redlock_keepalive_*`): when to extend a held lock, when to
 * retry a failed extension, and when the lock counts as lost.
 */
final class KeepAlive
{
    private function __construct(public readonly Native $native, public readonly CData $handle)
    {
    }

    public static function create(Client $client, Lease $lease): self
    {
        $native = $client->config->native;
        $out = $native->ffi->new('redlock_keepalive*');
        $native->check($native->ffi->redlock_keepalive_new($client->handle, $lease->handle, FFI::addr($out)), 'keep-alive');
        return new self($native, $out);
    }

    /**
     * What to do at `$nowUs`: [a `Constants::KEEPALIVE_*` value, the instant to wait
     * until (WAIT), the `Constants::LOST_*` reason (LOST)].
     *
     * @return array{int, int, int}
     */
    public function poll(int $nowUs): array
    {
        $n = $this->native;
        $n->check(
            $n->ffi->redlock_keepalive_poll($this->handle, $nowUs, FFI::addr($n->u32), FFI::addr($n->u64), FFI::addr($n->u32b)),
            'keep-alive',
        );
        return [$n->u32->cdata, $n->u64->cdata, $n->u32b->cdata];
    }

    public function handleOutcome(Outcome $outcome, int $nowUs): void
    {
        $this->native->check($this->native->ffi->redlock_keepalive_handle_outcome($this->handle, $outcome->handle(), $nowUs), 'keep-alive');
    }

    public function handleFailure(int $nowUs): void
    {
        $this->native->check($this->native->ffi->redlock_keepalive_handle_failure($this->handle, $nowUs), 'keep-alive');
    }

    public function stop(): void
    {
        $this->native->check($this->native->ffi->redlock_keepalive_stop($this->handle), 'keep-alive');
    }

    public function lease(): Lease
    {
        $out = $this->native->ffi->new('redlock_lease*');
        $this->native->check($this->native->ffi->redlock_keepalive_lease($this->handle, FFI::addr($out)), 'keep-alive');
        return new Lease($this->native, $out);
    }

    public static function lostReasonName(Native $native, int $reason): string
    {
        $name = $native->ffi->redlock_lost_reason_name($reason);
        return is_string($name) ? $name : 'unknown';
    }

    public function __destruct()
    {
        $this->native->free('redlock_keepalive_free', $this->handle);
    }
}
