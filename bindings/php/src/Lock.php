<?php

declare(strict_types=1);

namespace Redlock;

use Redlock\Exception\LockLostException;
use Redlock\Exception\NodesFailedException;
use Redlock\Exception\NotHeldException;
use Redlock\Ffi\Constants;
use Redlock\Ffi\KeepAlive;
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
    /** The `lost` event was reported (once per lock). */
    private bool $lostReported = false;
    private int $attempts = 0;
    /** When the lock was acquired (Clock::nowUs()), for the `lost` event's elapsed time. */
    private readonly int $heldSinceUs;

    /**
     * @param list<string> $resources
     * @param ?int $heldSinceUs when the acquisition succeeded (default: now)
     * @internal created by Redlock
     */
    public function __construct(
        private readonly Redlock $redlock,
        private readonly array $resources,
        private Lease $lease,
        int $attempts = 0,
        private ?KeepAlive $keepAlive = null,
        ?int $heldSinceUs = null,
    ) {
        $this->attempts = $attempts;
        $this->heldSinceUs = $heldSinceUs ?? Clock::nowUs();
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

    /**
     * The fencing token (with `Options(fencing: true)`): strictly greater than every
     * token handed out before this lock for the same resource, whatever the clocks do.
     * Send it with every write to the protected resource and let the resource refuse
     * writes with a lower token than one it accepted (FencedStore, or SQL:
     * `UPDATE ... SET ..., fence = :token WHERE id = :id AND fence < :token`). Null
     * without fencing and for a lock rebuilt from a token (lockFromToken()).
     */
    public function fencingToken(): ?int
    {
        return $this->lease->fencingToken();
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
     * Whether we hold the lock now, as the core decides it from every node's `GET`:
     * a quorum of nodes hold our token on every key, and our validity has not run out
     * on our clock (keys can outlive it by the clock drift, and a holder must not count
     * on them then). False after release(). It never changes a key.
     *
     * @throws NodesFailedException too many nodes failed to say (nodes_failing)
     */
    public function isOwned(): bool
    {
        $outcome = $this->redlock->inspect($this->resources);
        return $outcome->isHeldBy($this->lease, Clock::nowUs());
    }

    /**
     * Extends the lock by `$ttlMs` (default: its TTL) from now. On NodesFailedException
     * the lock is still held until its old validity ends (`validUntilUs`).
     *
     * @throws LockLostException another token holds a key, or no validity was left (lock_lost)
     * @throws NotHeldException the keys are gone: expired, or the lock was released (not_held)
     * @throws NodesFailedException nodes failed (nodes_failing)
     */
    public function extend(?int $ttlMs = null): void
    {
        $redlock = $this->redlock;
        $client = $redlock->client();
        $outcome = $redlock->run($client->extend($this->lease, $ttlMs, Clock::nowUs()), $this->resources);
        $this->keepAlive?->handleOutcome($outcome, Clock::nowUs());
        $lease = $outcome->lease();
        if ($lease !== null) {
            $this->lease = $lease;
        }
        if ($outcome->kind === Constants::OUTCOME_EXTENDED) {
            return;
        }
        throw $redlock->error($this->resources, $outcome, 'could not extend the lock on');
    }

    /**
     * Keep-alive, where PHP can run it: asks the core's KeepAlive what to do now and
     * does it (extends when due, retries a failed extension while a round fits). Call
     * it from your work as often as you can (at least every third of the TTL); it
     * returns at once when nothing is due. Returns the instant (Clock::nowUs()) it
     * wants to be called again by.
     *
     * @throws LockLostException the core counts the lock lost (taken, expired, extension limit)
     * @throws NotHeldException an extension found the keys gone
     */
    public function keepAlive(): int
    {
        $keepAlive = $this->keepAlive ??= KeepAlive::create($this->redlock->client(), $this->lease);
        while (true) {
            [$action, $until, $lost] = $keepAlive->poll(Clock::nowUs());
            if ($action === Constants::KEEPALIVE_WAIT) {
                return $until;
            }
            if ($action === Constants::KEEPALIVE_LOST) {
                throw $this->lostError($lost);
            }
            if ($action === Constants::KEEPALIVE_STOPPED) {
                return PHP_INT_MAX;
            }
            $redlock = $this->redlock;
            try {
                $outcome = $redlock->run($redlock->client()->extend($this->lease, null, Clock::nowUs()), $this->resources);
            } catch (\Redlock\Exception\UsedAfterCloseException $e) {
                throw $e;
            } catch (\Throwable) {
                $keepAlive->handleFailure(Clock::nowUs());
                continue;
            }
            $keepAlive->handleOutcome($outcome, Clock::nowUs());
            $this->lease = $keepAlive->lease();
        }
    }

    /**
     * Throws if the core counts the lock lost now (its KeepAlive's verdict; without
     * one, whether its validity ran out).
     *
     * @internal used by Redlock::synchronized()
     */
    public function checkNotLost(): void
    {
        if ($this->keepAlive === null) {
            if (!$this->lease->isValid(Clock::nowUs())) {
                throw $this->lostError(Constants::LOST_EXPIRED);
            }
            return;
        }
        [$action, , $lost] = $this->keepAlive->poll(Clock::nowUs());
        if ($action === Constants::KEEPALIVE_LOST) {
            throw $this->lostError($lost);
        }
    }

    /**
     * Releases the lock on every node; returns how many nodes deleted a key of ours.
     * Releasing twice does nothing the second time.
     *
     * A release that fewer than a quorum confirmed (NodesFailedException), or that did
     * not run (an exception from the loop), leaves the lock not released: its keys may
     * still hold on the nodes that did not confirm, so release() may be called again,
     * and close() and the destructor try again.
     *
     * @throws NodesFailedException fewer than a quorum confirmed (nodes_failing)
     * @throws \Redlock\Exception\UsedAfterCloseException the client was closed
     */
    public function release(): int
    {
        $redlock = $this->redlock;
        $client = $redlock->client();
        if ($this->released) {
            return 0;
        }
        $this->keepAlive?->stop();
        $outcome = $redlock->run($client->release($this->lease, Clock::nowUs()), $this->resources);
        if ($outcome->kind === Constants::OUTCOME_RELEASED) {
            $this->released = true;
            $redlock->forget($this);
            return $outcome->released() ?? 0;
        }
        throw $redlock->error($this->resources, $outcome, 'could not release the lock on');
    }

    /** release(), ignoring failures (the keys then expire with their TTL). */
    public function releaseQuietly(): void
    {
        try {
            $this->release();
        } catch (\Throwable) {
            // The keys expire with their TTL.
        }
    }

    private function lostError(int $reason): \Throwable
    {
        $name = KeepAlive::lostReasonName($this->redlock->native, $reason);
        if (!$this->lostReported) {
            $this->lostReported = true;
            $this->redlock->reportLost($this->resources, $name, $this->heldSinceUs);
        }
        $shown = Text::names($this->resources);
        if ($reason === Constants::LOST_NOT_HELD) {
            return new NotHeldException("the lock on '$shown' is lost: its keys are gone", $this->resources, $name);
        }
        return new LockLostException("the lock on '$shown' is lost ($name)", $this->resources, $name);
    }

    public function __destruct()
    {
        if (!$this->released && !$this->redlock->isClosed() && $this->lease->isValid(Clock::nowUs())) {
            $this->releaseQuietly();
        }
    }
}
