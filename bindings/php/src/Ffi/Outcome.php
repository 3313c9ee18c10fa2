<?php

declare(strict_types=1);

namespace Redlock\Ffi;

use FFI;
use FFI\CData;

/**
 * A finished operation's outcome (`redlock_outcome*`, freed with the object). Each
 * value is read from the library the first time it is asked for: a lock that was
 * acquired needs three of them, an error report all of them.
 */
final class Outcome
{
    public readonly int $kind;
    /** @var array<string, mixed> values read so far */
    private array $read = [];

    public function __construct(private readonly Native $native, private readonly CData $handle)
    {
        $this->kind = $native->ffi->redlock_outcome_kind($handle);
    }

    public function success(): bool
    {
        return $this->native->ffi->redlock_outcome_is_success($this->handle);
    }

    /** A `Constants::REASON_*` value for not acquired / not extended, else null. */
    public function reason(): ?int
    {
        return $this->memo('reason', function (Native $n): ?int {
            return $n->ffi->redlock_outcome_reason($this->handle, FFI::addr($n->u32)) === Constants::OK ? $n->u32->cdata : null;
        });
    }

    public function reasonName(): ?string
    {
        $reason = $this->reason();
        return $reason === null ? null : (Constants::REASONS[$reason] ?? 'unknown');
    }

    public function token(): ?string
    {
        return $this->memo('token', function (Native $n): ?string {
            $rc = $n->ffi->redlock_outcome_token($this->handle, FFI::addr($n->bytes), FFI::addr($n->bytesLen));
            return $rc === Constants::OK ? $n->takeBytes() : null;
        });
    }

    /** The fencing token of a fenced acquisition's lease; null otherwise. */
    public function fencingToken(): ?int
    {
        return $this->memo('fencing_token', function (Native $n): ?int {
            return $n->ffi->redlock_outcome_fencing_token($this->handle, FFI::addr($n->u64)) === Constants::OK ? $n->u64->cdata : null;
        });
    }

    public function validUntilUs(): ?int
    {
        return $this->memo('valid_until', function (Native $n): ?int {
            return $n->ffi->redlock_outcome_valid_until($this->handle, FFI::addr($n->u64)) === Constants::OK ? $n->u64->cdata : null;
        });
    }

    public function validityUs(): ?int
    {
        return $this->memo('validity', function (Native $n): ?int {
            return $n->ffi->redlock_outcome_validity($this->handle, FFI::addr($n->u64)) === Constants::OK ? $n->u64->cdata : null;
        });
    }

    public function attempts(): ?int
    {
        return $this->memo('attempts', function (Native $n): ?int {
            return $n->ffi->redlock_outcome_attempts($this->handle, FFI::addr($n->u32)) === Constants::OK ? $n->u32->cdata : null;
        });
    }

    public function extensions(): ?int
    {
        return $this->memo('extensions', function (Native $n): ?int {
            return $n->ffi->redlock_outcome_extensions($this->handle, FFI::addr($n->u32)) === Constants::OK ? $n->u32->cdata : null;
        });
    }

    /** For not extended: when to try again, or null (no time left, or lost). */
    public function retryAtUs(): ?int
    {
        return $this->memo('retry_at', function (Native $n): ?int {
            $rc = $n->ffi->redlock_outcome_retry_at($this->handle, FFI::addr($n->flag), FFI::addr($n->u64));
            return $rc === Constants::OK && $n->flag->cdata ? $n->u64->cdata : null;
        });
    }

    /** For not extended: whether the lock is already lost; null for other outcomes. */
    public function lost(): ?bool
    {
        return $this->memo('lost', function (Native $n): ?bool {
            return $n->ffi->redlock_outcome_is_lost($this->handle, FFI::addr($n->flag)) === Constants::OK ? $n->flag->cdata : null;
        });
    }

    /** For released: the nodes that deleted a key of ours; null for other outcomes. */
    public function released(): ?int
    {
        return $this->memo('released', function (Native $n): ?int {
            return $n->ffi->redlock_outcome_released($this->handle, FFI::addr($n->size)) === Constants::OK ? $n->size->cdata : null;
        });
    }

    /**
     * Per node: a `Constants::NODE_*` value and the error text.
     *
     * @return list<array{int, string}>
     */
    public function nodes(): array
    {
        return $this->memo('nodes', function (Native $n): array {
            $nodes = [];
            $count = $n->ffi->redlock_outcome_node_count($this->handle);
            for ($i = 0; $i < $count; $i++) {
                $n->check(
                    $n->ffi->redlock_outcome_node($this->handle, $i, FFI::addr($n->u32), FFI::addr($n->bytes), FFI::addr($n->bytesLen)),
                    'outcome node',
                );
                $nodes[] = [$n->u32->cdata, $n->takeBytes()];
            }
            return $nodes;
        });
    }

    /** The error class: a `Constants::ERROR_CLASS_*` value, 0 for a success. */
    public function errorClass(): int
    {
        return $this->native->ffi->redlock_outcome_error_class($this->handle);
    }

    /**
     * Per node, why it failed: a `REDLOCK_NODE_CAUSE_*` name (`refused`, `auth`, `tls`,
     * `timeout`, `stalled`, `connection`, `error`), or null when it did not fail.
     *
     * @return list<?string>
     */
    public function nodeCauses(): array
    {
        return $this->memo('causes', function (Native $n): array {
            $causes = [];
            $count = $n->ffi->redlock_outcome_node_count($this->handle);
            for ($i = 0; $i < $count; $i++) {
                $n->check($n->ffi->redlock_outcome_node_cause($this->handle, $i, FFI::addr($n->u32)), 'outcome node');
                $cause = $n->u32->cdata;
                $name = $cause === 0 ? null : $n->ffi->redlock_node_cause_name($cause);
                $causes[] = is_string($name) ? $name : null;
            }
            return $causes;
        });
    }

    /**
     * For inspected: the token a quorum of nodes hold on every key, or null when nobody
     * holds the lock (and for other outcomes).
     */
    public function holder(): ?string
    {
        return $this->memo('holder', function (Native $n): ?string {
            $rc = $n->ffi->redlock_outcome_holder($this->handle, FFI::addr($n->bytes), FFI::addr($n->bytesLen));
            return $rc === Constants::OK ? $n->takeBytes() : null;
        });
    }

    /** For inspected: whether anyone holds the lock (false for other outcomes). */
    public function isLocked(): bool
    {
        return $this->native->ffi->redlock_outcome_is_locked($this->handle);
    }

    /**
     * For inspected: whether `$lease` holds the lock at `$nowUs` (a quorum hold its token
     * and its validity has not run out); false for other outcomes.
     */
    public function isHeldBy(Lease $lease, int $nowUs): bool
    {
        return $this->native->ffi->redlock_outcome_is_held_by($this->handle, $lease->handle, $nowUs);
    }

    /** @internal the handle, for KeepAlive::handleOutcome */
    public function handle(): CData
    {
        return $this->handle;
    }

    /** The lease (acquired, extended, not extended) as a handle of its own, else null. */
    public function lease(): ?Lease
    {
        return $this->memo('lease', function (Native $n): ?Lease {
            $lease = $n->ffi->new('redlock_lease*');
            return $n->ffi->redlock_outcome_lease($this->handle, FFI::addr($lease)) === Constants::OK ? new Lease($n, $lease) : null;
        });
    }

    /**
     * @template T
     * @param \Closure(Native): T $read
     * @return T
     */
    private function memo(string $name, \Closure $read): mixed
    {
        if (!array_key_exists($name, $this->read)) {
            $this->read[$name] = $read($this->native);
        }
        return $this->read[$name];
    }

    public function __destruct()
    {
        $this->native->free('redlock_outcome_free', $this->handle);
    }
}
