<?php

declare(strict_types=1);

namespace Redlock\Ffi;

use FFI;
use FFI\CData;

/**
 * A finished operation's outcome, read out of `redlock_outcome*` at once (the handle
 * is freed here); only the lease stays a handle.
 */
final class Outcome
{
    public readonly int $kind;
    public readonly bool $success;
    /** A `Constants::REASON_*` value for not acquired / not extended, else null. */
    public readonly ?int $reason;
    public readonly ?string $token;
    public readonly ?int $validUntilUs;
    public readonly ?int $validityUs;
    public readonly ?int $attempts;
    public readonly ?int $extensions;
    /** For not extended: when to try again, or null (no time left, or lost). */
    public readonly ?int $retryAtUs;
    public readonly ?bool $lost;
    public readonly ?int $released;
    /** @var list<array{int, string}> per node: a `Constants::NODE_*` value and the error text */
    public readonly array $nodes;
    public readonly ?Lease $lease;

    public function __construct(Native $native, CData $handle)
    {
        $ffi = $native->ffi;
        try {
            $this->kind = $ffi->redlock_outcome_kind($handle);
            $this->success = $ffi->redlock_outcome_is_success($handle);
            $this->reason = $ffi->redlock_outcome_reason($handle, FFI::addr($native->u32)) === Constants::OK ? $native->u32->cdata : null;
            $rc = $ffi->redlock_outcome_token($handle, FFI::addr($native->bytes), FFI::addr($native->bytesLen));
            $this->token = $rc === Constants::OK ? $native->takeBytes() : null;
            $this->validUntilUs = $ffi->redlock_outcome_valid_until($handle, FFI::addr($native->u64)) === Constants::OK ? $native->u64->cdata : null;
            $this->validityUs = $ffi->redlock_outcome_validity($handle, FFI::addr($native->u64)) === Constants::OK ? $native->u64->cdata : null;
            $this->attempts = $ffi->redlock_outcome_attempts($handle, FFI::addr($native->u32)) === Constants::OK ? $native->u32->cdata : null;
            $this->extensions = $ffi->redlock_outcome_extensions($handle, FFI::addr($native->u32)) === Constants::OK ? $native->u32->cdata : null;
            if ($ffi->redlock_outcome_retry_at($handle, FFI::addr($native->flag), FFI::addr($native->u64)) === Constants::OK) {
                $this->retryAtUs = $native->flag->cdata ? $native->u64->cdata : null;
            } else {
                $this->retryAtUs = null;
            }
            $this->lost = $ffi->redlock_outcome_is_lost($handle, FFI::addr($native->flag)) === Constants::OK ? $native->flag->cdata : null;
            $this->released = $ffi->redlock_outcome_released($handle, FFI::addr($native->size)) === Constants::OK ? $native->size->cdata : null;
            $nodes = [];
            $count = $ffi->redlock_outcome_node_count($handle);
            for ($i = 0; $i < $count; $i++) {
                $native->check(
                    $ffi->redlock_outcome_node($handle, $i, FFI::addr($native->u32), FFI::addr($native->bytes), FFI::addr($native->bytesLen)),
                    'outcome node',
                );
                $nodes[] = [$native->u32->cdata, $native->takeBytes()];
            }
            $this->nodes = $nodes;
            $lease = $ffi->new('redlock_lease*');
            $this->lease = $ffi->redlock_outcome_lease($handle, FFI::addr($lease)) === Constants::OK ? new Lease($native, $lease) : null;
        } finally {
            $ffi->redlock_outcome_free($handle);
        }
    }

    public function reasonName(): ?string
    {
        return $this->reason === null ? null : (Constants::REASONS[$this->reason] ?? 'unknown');
    }
}
