<?php

declare(strict_types=1);

namespace Redlock;

/**
 * Settings of a Redlock client. Durations are milliseconds (fractions allowed where a
 * finer grain makes sense); null keeps the core's default. The core checks every
 * combination when the client is created (ConfigurationException names the rule).
 */
final class Options
{
    public function __construct(
        /** The lock's TTL (default for acquire()); every per-call TTL is checked against the rest. */
        public readonly int $ttlMs = 10_000,
        /** How long one node may take to answer one round (default: min(50 ms, TTL / 10)). */
        public readonly int|float|null $nodeTimeoutMs = null,
        /** Attempts of one acquisition, the first included (default 3). */
        public readonly ?int $attempts = null,
        /** Base delay between attempts (default 200 ms). */
        public readonly int|float|null $retryDelayMs = null,
        /** Jitter around the retry delay, at most the delay (default 100 ms). */
        public readonly int|float|null $retryJitterMs = null,
        /** Fraction of the TTL allowed for clock-rate differences (default 0.01). */
        public readonly ?float $driftFactor = null,
        /** Fixed drift added to the proportional one (default 2 ms). */
        public readonly int|float|null $driftFixedMs = null,
        /** The least validity an acquisition or extension must leave (default: any). */
        public readonly int|float|null $minValidityMs = null,
        /** Random bytes per token, 16 to 64 (default 20). */
        public readonly ?int $tokenBytes = null,
        /** Bytes put in front of every resource name to form its key (default none). */
        public readonly ?string $keyPrefix = null,
        /** A bound on extensions of one lock (default unbounded). */
        public readonly ?int $maxExtensions = null,
        /**
         * Fencing tokens (docs/fencing.md): every acquisition also raises a per-resource
         * counter on the nodes and writes it back to a quorum before handing out the
         * lock, whose Lock::fencingToken() then strictly increases across holders. One
         * more round trip per acquisition; one counter key per resource and node.
         */
        public readonly bool $fencing = false,
    ) {
    }

    /**
     * The settings in the core's terms (microseconds).
     *
     * @return array<string, int|float|string|bool|null>
     */
    public function coreSettings(): array
    {
        $us = static fn (int|float|null $ms): ?int => $ms === null ? null : (int) round($ms * 1000);
        return [
            'node_timeout_us' => $us($this->nodeTimeoutMs),
            'attempts' => $this->attempts,
            'retry_delay_us' => $us($this->retryDelayMs),
            'retry_jitter_us' => $us($this->retryJitterMs),
            'drift_factor' => $this->driftFactor,
            'drift_fixed_us' => $us($this->driftFixedMs),
            'min_validity_us' => $us($this->minValidityMs),
            'token_bytes' => $this->tokenBytes,
            'key_prefix' => $this->keyPrefix,
            'max_extensions' => $this->maxExtensions,
            'fencing' => $this->fencing,
        ];
    }
}
