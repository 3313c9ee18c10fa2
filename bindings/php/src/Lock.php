<?php

declare(strict_types=1);

namespace Redlock;

use Redlock\Exception\LockLostException;
use Redlock\Exception\NodesFailedException;
use Redlock\Ffi\Constants;
use Redlock\Ffi\Lease;

/**
 * A held lock. Its validity, its extensions and what releasing it does are the core's;
 * instants are microseconds on Clock::nowUs().
 *
 * Release it with release() (or let Redlock::synchronized() do it). As a last resort
 * the destructor releases a lock that was neither released nor lost, so a forgotten
 * lock does not stay until its TTL; do not rely on it for timing (PHP runs
 * destructors when the last reference goes, which a cycle or a global can delay).
 */
final class Lock
{
    private bool $released = false;
    private int $attempts = 0;

    /**
     * @param list<string> $resources
     * @internal created by Redlock
     */
    public function __construct(
        private readonly Redlock $redlock,
        private readonly array $resources,
        private Lease $lease,
        int $attempts = 0,
    ) {
        $this->attempts = $attempts;
    }

    /** @return list<string> */
    public function resources(): array
    {
        return $this->resources;
    }

    /** The random token stored under every key (what another process needs to release it). */
    public function token(): string
    {
        return $this->lease->token();
    }

    /** @return list<string> the keys (resources with the key prefix) */
    public function keys(): array
    {
        return $this->lease->keys();
    }

    /** The instant until which the lock is held; do not rely on it at or after that instant. */
    public function validUntilUs(): int
    {
        return $this->lease->validUntilUs();
    }

    /** Validity left now, in milliseconds (0 once expired). */
    public function validityMs(): float
    {
        return $this->lease->validityUs(Clock::nowUs()) / 1000;
    }

    /** True while the lock is held: not released and its validity not over. */
    public function isValid(): bool
    {
        return !$this->released && $this->lease->isValid(Clock::nowUs());
    }

    public function isReleased(): bool
    {
        return $this->released;
    }

    /** Attempts the acquisition took (0 for a lock rebuilt from a token). */
    public function attempts(): int
    {
        return $this->attempts;
    }

    /** Successful extensions since the lock was acquired. */
    public function extensions(): int
    {
        return $this->lease->extensions();
    }

    /** The TTL the lock was acquired or last extended with. */
    public function ttlMs(): int
    {
        return $this->lease->ttlMs();
    }

    /**
     * Extends the lock by `$ttlMs` (default: its TTL) from now, on a quorum.
     *
     * @throws LockLostException the lock is lost (another token holds a key) or was released
     * @throws NodesFailedException nodes failed; the lock is still held until `validUntilUs`
     */
    public function extend(?int $ttlMs = null): void
    {
        if ($this->released) {
            throw new LockLostException('the lock was released', $this->resources, 'released');
        }
        $redlock = $this->redlock;
        $outcome = $redlock->run($redlock->client()->extend($this->lease, $ttlMs, Clock::nowUs()));
        if ($outcome->kind === Constants::OUTCOME_EXTENDED && $outcome->lease() !== null) {
            $this->lease = $outcome->lease();
            return;
        }
        if ($outcome->lease() !== null) {
            $this->lease = $outcome->lease();
        }
        $nodes = $redlock->nodeResults($outcome);
        $reason = $outcome->reasonName() ?? 'unknown';
        $shown = implode(', ', $this->resources);
        if ($outcome->lost() === true) {
            $why = $outcome->reason() === Constants::REASON_CONFLICT ? 'another token holds it' : 'it expired';
            throw new LockLostException("the lock on '$shown' is lost: $why", $this->resources, $reason, $nodes);
        }
        throw new NodesFailedException(
            "could not extend the lock on '$shown' ($reason); it is held until its old validity ends",
            $this->resources,
            $reason,
            $nodes,
            null,
            $outcome->validUntilUs(),
            $outcome->retryAtUs(),
        );
    }

    /**
     * Releases the lock on every node (never deleting a key that holds another token).
     * Returns how many nodes deleted a key of ours when the release was decided.
     * Releasing twice returns 0 the second time.
     */
    public function release(): int
    {
        if ($this->released) {
            return 0;
        }
        $this->released = true;
        return $this->redlock->releaseLease($this->lease)->released() ?? 0;
    }

    /** release(), swallowing errors: for cleanup paths that must not throw. */
    public function releaseQuietly(): void
    {
        try {
            $this->release();
        } catch (\Throwable) {
            // The keys expire with their TTL.
        }
    }

    public function __destruct()
    {
        if (!$this->released && $this->lease->isValid(Clock::nowUs())) {
            $this->releaseQuietly();
        }
    }
}
