<?php

declare(strict_types=1);

namespace Redlock\Ffi;

use FFI;
use FFI\CData;
use Redlock\Exception\InvalidArgumentException;

/**
 * A core client (`redlock_client*`): starts acquisitions, extensions and releases.
 */
final class Client
{
    public readonly Native $native;
    /** @var array{int, int}|null ttlRange(), once computed */
    private ?array $ttlRange = null;

    private function __construct(public readonly Config $config, public readonly CData $handle)
    {
        $this->native = $config->native;
    }

    /** Tokens from the OS's CSPRNG, or from a ChaCha20 stream seeded with 32 secret bytes. */
    public static function create(Config $config, ?string $seed = null): self
    {
        $native = $config->native;
        $handle = $native->ffi->new('redlock_client*');
        if ($seed === null) {
            $native->check($native->ffi->redlock_client_new($config->handle, FFI::addr($handle)), 'client');
        } else {
            $native->check(
                $native->ffi->redlock_client_new_seeded($config->handle, $seed, strlen($seed), FFI::addr($handle)),
                'client'
            );
        }
        return new self($config, $handle);
    }

    /**
     * @param list<string> $resources
     */
    public function acquire(array $resources, ?int $ttlMs, int $nowUs): Operation
    {
        [$pointers, $lengths, $keep] = $this->native->resourceArrays($resources);
        $ffi = $this->native->ffi;
        $out = $this->newOperationOut();
        if ($ttlMs === null) {
            $rc = $ffi->redlock_client_acquire($this->handle, $pointers, $lengths, count($resources), $nowUs, FFI::addr($out));
        } else {
            $this->checkedTtl($ttlMs, 'acquire');
            $rc = $ffi->redlock_client_acquire_for($this->handle, $pointers, $lengths, count($resources), $ttlMs, $nowUs, FFI::addr($out));
        }
        unset($keep);
        $this->checkResult($rc, $ttlMs, 'acquire');
        return new Operation($this->native, $out);
    }

    /**
     * An acquisition with a wait limit: it keeps trying until `$nowUs + $waitUs` (the
     * configured attempts do not apply), never starting an attempt that could not end
     * by then, and tries again early on release notices (Operation::handleNotice()).
     * `$ttlMs` null: the configured TTL.
     *
     * @param list<string> $resources
     */
    public function acquireWaiting(array $resources, ?int $ttlMs, int $waitUs, int $nowUs): Operation
    {
        self::nonNegative($waitUs, 'wait limit');
        if ($ttlMs !== null) {
            // 0 means "the configured TTL" to the C ABI; here it is a TTL of zero,
            // refused as acquire() refuses it (invalid_ttl).
            $this->checkedTtl($ttlMs, 'acquire');
        }
        [$pointers, $lengths, $keep] = $this->native->resourceArrays($resources);
        $out = $this->newOperationOut();
        $rc = $this->native->ffi->redlock_client_acquire_with(
            $this->handle,
            $pointers,
            $lengths,
            count($resources),
            $ttlMs ?? 0,
            true,
            $waitUs,
            $nowUs,
            FFI::addr($out),
        );
        unset($keep);
        $this->checkResult($rc, $ttlMs, 'acquire');
        return new Operation($this->native, $out);
    }

    /**
     * acquireWithRandom() with a wait limit of `$waitUs` (the conformance vectors).
     *
     * @param list<string> $resources
     */
    public function acquireWaitingWithRandom(array $resources, int $waitUs, string $random, int $nowUs): Operation
    {
        self::nonNegative($waitUs, 'wait limit');
        [$pointers, $lengths, $keep] = $this->native->resourceArrays($resources);
        $out = $this->newOperationOut();
        $rc = $this->native->ffi->redlock_client_acquire_with_random_options(
            $this->handle,
            $pointers,
            $lengths,
            count($resources),
            0,
            true,
            $waitUs,
            $random,
            strlen($random),
            $nowUs,
            FFI::addr($out),
        );
        unset($keep);
        $this->native->check($rc, 'acquire');
        return new Operation($this->native, $out);
    }

    /**
     * An acquisition drawing its tokens and jitter from `$random` (the conformance
     * vectors; real locks use {@see acquire()}).
     *
     * @param list<string> $resources
     */
    public function acquireWithRandom(array $resources, string $random, int $nowUs): Operation
    {
        [$pointers, $lengths, $keep] = $this->native->resourceArrays($resources);
        $ffi = $this->native->ffi;
        $out = $this->newOperationOut();
        $rc = $ffi->redlock_client_acquire_with_random(
            $this->handle,
            $pointers,
            $lengths,
            count($resources),
            $random,
            strlen($random),
            $nowUs,
            FFI::addr($out),
        );
        unset($keep);
        $this->native->check($rc, 'acquire');
        return new Operation($this->native, $out);
    }

    /**
     * Reads who holds the lock on `$resources` (`GET`, or `MGET` for several, on every
     * node), decided at the quorum; never changes a key. The outcome is
     * OUTCOME_INSPECTED (Outcome::holder(), isLocked(), isHeldBy()) or
     * OUTCOME_NOT_INSPECTED (too many nodes failed to say).
     *
     * @param list<string> $resources
     */
    public function inspect(array $resources, int $nowUs): Operation
    {
        [$pointers, $lengths, $keep] = $this->native->resourceArrays($resources);
        $out = $this->newOperationOut();
        $rc = $this->native->ffi->redlock_client_inspect($this->handle, $pointers, $lengths, count($resources), $nowUs, FFI::addr($out));
        unset($keep);
        $this->native->check($rc, 'inspect');
        return new Operation($this->native, $out);
    }

    public function extend(Lease $lease, ?int $ttlMs, int $nowUs): Operation
    {
        $ffi = $this->native->ffi;
        $out = $this->newOperationOut();
        if ($ttlMs === null) {
            $rc = $ffi->redlock_client_extend($this->handle, $lease->handle, $nowUs, FFI::addr($out));
        } else {
            $this->checkedTtl($ttlMs, 'extend');
            $rc = $ffi->redlock_client_extend_for($this->handle, $lease->handle, $ttlMs, $nowUs, FFI::addr($out));
        }
        $this->checkResult($rc, $ttlMs, 'extend');
        return new Operation($this->native, $out);
    }

    public function release(Lease $lease, int $nowUs): Operation
    {
        $out = $this->newOperationOut();
        $rc = $this->native->ffi->redlock_client_release($this->handle, $lease->handle, $nowUs, FFI::addr($out));
        $this->native->check($rc, 'release');
        return new Operation($this->native, $out);
    }

    /**
     * A lease rebuilt from its parts (a token kept by another process).
     *
     * @param list<string> $resources
     */
    public function lease(array $resources, string $token, int $validUntilUs = 0): Lease
    {
        [$pointers, $lengths, $keep] = $this->native->resourceArrays($resources);
        $ffi = $this->native->ffi;
        $out = $ffi->new('redlock_lease*');
        $rc = $ffi->redlock_client_lease(
            $this->handle,
            $pointers,
            $lengths,
            count($resources),
            $token,
            strlen($token),
            max(0, $validUntilUs),
            FFI::addr($out),
        );
        unset($keep);
        $this->native->check($rc, 'lease');
        return new Lease($this->native, $out);
    }

    /** Null when `$ttlMs` fits the configuration, else the core's name of the rule it breaks. */
    public function checkTtl(int $ttlMs): ?string
    {
        if ($ttlMs < 0) {
            throw $this->ttlError($ttlMs, 'TTL');
        }
        $rc = $this->native->ffi->redlock_client_check_ttl($this->handle, $ttlMs);
        return $rc === Constants::OK ? null : $this->native->resultName($rc);
    }

    /**
     * The TTLs this client's settings allow, in ms: [smallest, largest]. Every rule
     * is the core's (`redlock_client_check_ttl`); the TTLs they allow form one range
     * (each rule bounds the TTL from one side), found here by bisection and kept.
     *
     * @return array{int, int}
     */
    public function ttlRange(): array
    {
        if ($this->ttlRange !== null) {
            return $this->ttlRange;
        }
        $ffi = $this->native->ffi;
        $fits = fn (int $ttl): bool => $ffi->redlock_client_check_ttl($this->handle, $ttl) === Constants::OK;
        $valid = $this->config->ttlMs();
        // Smallest: the first that fits in [1, valid].
        [$low, $high] = [1, $valid];
        while ($low < $high) {
            $mid = intdiv($low + $high, 2);
            $fits($mid) ? $high = $mid : $low = $mid + 1;
        }
        $smallest = $low;
        // Largest: the last that fits in [valid, PHP_INT_MAX].
        [$low, $high] = [$valid, PHP_INT_MAX];
        while ($low < $high) {
            $mid = $low + intdiv($high - $low + 1, 2);
            $fits($mid) ? $low = $mid : $high = $mid - 1;
        }
        return $this->ttlRange = [$smallest, $low];
    }

    /**
     * The error for a TTL these settings refuse: the range they allow and the core's
     * rule that `$ttlMs` breaks (`invalid_ttl`).
     */
    public function ttlError(int $ttlMs, string $context): InvalidArgumentException
    {
        [$smallest, $largest] = $this->ttlRange();
        if ($ttlMs <= 0) {
            $rule = 'ttl_zero: the TTL must be positive';
        } else {
            $rc = $this->native->ffi->redlock_client_check_ttl($this->handle, $ttlMs);
            $rule = $rc === Constants::OK ? null : "{$this->native->resultName($rc)}: {$this->native->resultMessage($rc)}";
        }
        return new InvalidArgumentException(
            "$context: ttlMs must be between $smallest and $largest ms with this client's settings, got $ttlMs"
                . ($rule === null ? '' : " ($rule)"),
            'invalid_ttl',
            Constants::INVALID_TTL,
        );
    }

    private function checkedTtl(int $ttlMs, string $context): void
    {
        if ($ttlMs <= 0) {
            throw $this->ttlError($ttlMs, $context);
        }
    }

    /** Like Native::check(), with the range and the rule for a refused TTL. */
    private function checkResult(int $rc, ?int $ttlMs, string $context): void
    {
        if ($rc === Constants::INVALID_TTL) {
            throw $this->ttlError($ttlMs ?? $this->config->ttlMs(), $context);
        }
        $this->native->check($rc, $context);
    }

    /**
     * When a holder that keeps `$lease` alive should start its next extension (an
     * instant in microseconds), or null when it should not. Decided by the core.
     */
    public function nextExtension(Lease $lease, int $nowUs): ?int
    {
        $native = $this->native;
        $native->check(
            $native->ffi->redlock_client_next_extension($this->handle, $lease->handle, $nowUs, FFI::addr($native->flag), FFI::addr($native->u64)),
            'next extension'
        );
        return $native->flag->cdata ? $native->u64->cdata : null;
    }

    private function newOperationOut(): CData
    {
        return $this->native->ffi->new('redlock_operation*');
    }

    private static function nonNegative(int $value, string $what): void
    {
        if ($value < 0) {
            throw new InvalidArgumentException("$what cannot be negative, got $value");
        }
    }

    public function __destruct()
    {
        $this->native->free('redlock_client_free', $this->handle);
    }
}
