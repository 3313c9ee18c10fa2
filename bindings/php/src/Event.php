<?php

declare(strict_types=1);

namespace Redlock;

/**
 * One thing that happened to a lock, as the core reports it (docs/observability.md):
 * the same kinds and fields in every package of the project. Immutable; instants are
 * microseconds on Clock::nowUs(), durations microseconds.
 *
 * Register a listener with Redlock::addEventListener(). Events only report: nothing
 * about the lock depends on whether anyone listens.
 */
final class Event
{
    public const ACQUIRED = 'acquired';
    public const NOT_ACQUIRED = 'not_acquired';
    public const RETRY = 'retry';
    public const EXTENDED = 'extended';
    public const NOT_EXTENDED = 'not_extended';
    public const LOST = 'lost';
    public const RELEASED = 'released';
    public const NOT_RELEASED = 'not_released';
    public const INSPECTED = 'inspected';
    public const NOT_INSPECTED = 'not_inspected';
    public const NODE_FAILED = 'node_failed';

    /**
     * @param string $kind one of the constants above (the core's name)
     * @param list<string> $resources the lock's resources
     * @param ?string $operation `acquire`, `extend`, `release`, `inspect`; null for `lost`
     * @param ?int $attempt the attempt it concerns, from 1 (null for `lost`)
     * @param ?int $elapsedUs how long after the operation started; for `lost`, how long
     *     after the lock was acquired (for a lockFromToken() lock: after that call)
     * @param int $atUs when it happened
     * @param ?string $reason why an attempt or operation failed: `conflict`, `nodes_failed`,
     *     `mixed`, `validity_too_short`, `not_held`
     * @param ?int $retryAtUs when the next attempt starts (`retry`)
     * @param ?int $node the failed node's index (`node_failed`)
     * @param ?string $cause the failed node's cause (`node_failed`): `refused`, `auth`,
     *     `tls`, `timeout`, `stalled`, `connection`, `error`
     * @param list<NodeResult> $nodes per-node results (every node for outcomes and
     *     retries, the failed one for `node_failed`)
     * @param ?string $lostReason how the lock was lost (`lost`): `taken`, `not_held`,
     *     `expired`, `extension_limit`
     */
    public function __construct(
        public readonly string $kind,
        public readonly array $resources,
        public readonly ?string $operation,
        public readonly ?int $attempt,
        public readonly ?int $elapsedUs,
        public readonly int $atUs,
        public readonly ?string $reason = null,
        public readonly ?int $retryAtUs = null,
        public readonly ?int $node = null,
        public readonly ?string $cause = null,
        public readonly array $nodes = [],
        public readonly ?string $lostReason = null,
    ) {
    }

    /** How long after the operation started (`lost`: the acquisition), in milliseconds. */
    public function elapsedMs(): ?float
    {
        return $this->elapsedUs === null ? null : $this->elapsedUs / 1000;
    }

    public function __toString(): string
    {
        $parts = [$this->kind, implode(',', $this->resources)];
        if ($this->attempt !== null) {
            $parts[] = "attempt {$this->attempt}";
        }
        if ($this->elapsedUs !== null) {
            $parts[] = sprintf('%.3f ms', $this->elapsedUs / 1000);
        }
        foreach (['reason' => $this->reason, 'node' => $this->node, 'cause' => $this->cause, 'lost' => $this->lostReason] as $name => $value) {
            if ($value !== null) {
                $parts[] = "$name $value";
            }
        }
        return implode(' ', $parts);
    }
}
