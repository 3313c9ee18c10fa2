<?php

declare(strict_types=1);

namespace Redlock\Symfony;

use Redlock\Exception\InvalidArgumentException as RedlockInvalidArgument;
use Redlock\Exception\LockHeldException;
use Redlock\Exception\LockLostException;
use Redlock\Exception\NodesFailedException;
use Redlock\Exception\NotHeldException;
use Redlock\Exception\RedlockException;
use Redlock\Lock;
use Redlock\Redlock;
use Redlock\Text;
use Symfony\Component\Lock\BlockingStoreInterface;
use Symfony\Component\Lock\Exception\InvalidArgumentException;
use Symfony\Component\Lock\Exception\InvalidTtlException;
use Symfony\Component\Lock\Exception\LockAcquiringException;
use Symfony\Component\Lock\Exception\LockConflictedException;
use Symfony\Component\Lock\Exception\LockExpiredException;
use Symfony\Component\Lock\Exception\LockReleasingException;
use Symfony\Component\Lock\Exception\LockStorageException;
use Symfony\Component\Lock\Key;

/**
 * A Symfony Lock store (symfony/lock 5.4 and later) over a Redlock client, so that
 * `LockFactory`, `Lock::acquire()`, `refresh()`, `isAcquired()` and `release()` run on
 * the project's core:
 *
 *     $factory = new LockFactory(new RedlockStore(Redlock::create($urls)));
 *     $lock = $factory->createLock('orders:42', 30.0);
 *
 * The Symfony key's resource is the lock's resource name; the Redlock Lock is kept in
 * the key's state (the key becomes unserializable: a lock held through FFI cannot move
 * to another process). The key's lifetime is the core's validity, not the TTL (the
 * validity is the TTL less the time the acquisition took and the clock drift).
 * `exists()` is an inspection: whether a quorum of nodes hold our token now and our
 * validity has not run out (Lock::isOwned()). The keys are plain Redlock keys, not
 * Symfony RedisStore's sorted sets: the two stores do not exclude each other.
 *
 * Exceptions: only Symfony Lock's own (`Symfony\Component\Lock\Exception\*`), each
 * with the package's exception as `previous`:
 *
 * - save(), waitAndSave(): LockConflictedException (held elsewhere),
 *   LockAcquiringException (nodes failing, a closed client, anything else),
 *   LockExpiredException (the key's lifetime ran out before the lock was stored, as
 *   with Symfony's own expiring stores);
 * - putOffExpiration(): LockConflictedException (not held through this store, taken,
 *   or gone), LockExpiredException (the key's lifetime ran out, or a TTL shorter than
 *   this client's settings allow, 0 and below included: the lock cannot be kept that
 *   long, so it is released), InvalidTtlException (NaN, infinite, or longer than the
 *   core allows: nothing changes), LockStorageException (nodes failing, a closed
 *   client);
 * - delete(): LockReleasingException (fewer than a quorum confirmed: the key keeps
 *   the lock, so delete() may be called again; a closed client);
 * - exists(): LockStorageException (too many nodes failed to say, a closed client).
 *
 * LockExpiredException, LockStorageException and InvalidTtlException go beyond the
 * interfaces' `@throws` the way Symfony's own stores do (ExpiringStoreTrait,
 * RedisStore), and Symfony's `Lock` turns each into the exception of its own call.
 * Shared (read) locks are not offered (no SharedLockStoreInterface): Symfony's
 * `Lock::acquireRead()` then takes the exclusive lock.
 */
final class RedlockStore implements BlockingStoreInterface
{
    /**
     * @param float $initialTtl seconds, for save() (Symfony's RedisStore default: 300);
     *     it must fit the client's settings (Redlock's TTL range)
     * @param int $waitStepMs how long one waiting acquisition of waitAndSave() lasts
     *     before it starts the next (it waits for release notices meanwhile)
     * @throws InvalidTtlException an initial TTL the client's settings refuse
     * @throws InvalidArgumentException a wait step that is not positive
     */
    public function __construct(
        private readonly Redlock $redlock,
        private readonly float $initialTtl = 300.0,
        private readonly int $waitStepMs = 60_000,
    ) {
        if ($waitStepMs <= 0) {
            throw new InvalidArgumentException("the wait step must be positive, got $waitStepMs ms");
        }
        $refused = $this->refusedTtl($initialTtl);
        if ($refused !== null) {
            throw new InvalidTtlException("the initial TTL: {$refused->getMessage()}", 0, $refused);
        }
    }

    /**
     * @throws LockConflictedException held elsewhere
     * @throws LockAcquiringException nodes failing, a closed client
     * @throws LockExpiredException the key's lifetime ran out first
     */
    public function save(Key $key): void
    {
        $this->acquire($key, null);
    }

    /**
     * Waits (with the core's wait limit, `$waitStepMs` at a time, again and again) until
     * the key is free, then stores it.
     *
     * @throws LockAcquiringException nodes failing, a closed client
     * @throws LockExpiredException the key's lifetime ran out first
     */
    public function waitAndSave(Key $key): void
    {
        while (!$this->acquire($key, $this->waitStepMs)) {
            // Still held at the end of this wait: wait again.
        }
    }

    /**
     * Extends the lock by `$ttl` seconds from now (see the class's list of exceptions).
     *
     * @throws LockConflictedException not held through this store, taken, or gone
     * @throws LockExpiredException the lifetime ran out, or a TTL too short for the settings
     * @throws InvalidTtlException NaN, infinite, or longer than the core allows
     * @throws LockStorageException nodes failing, a closed client
     */
    public function putOffExpiration(Key $key, float $ttl): void
    {
        $shown = self::shown($key);
        $lock = self::lock($key) ?? throw new LockConflictedException("$shown is not held through this store");
        try {
            $refused = $this->refusedTtl($ttl);
            $shortest = $this->shortestTtlSeconds();
        } catch (RedlockException $e) {
            throw new LockStorageException("could not extend $shown: {$e->getMessage()}", 0, $e);
        }
        if ($refused !== null) {
            if (!is_nan($ttl) && $ttl < $shortest) {
                // Kept for less than the settings can hold a lock: expired now.
                $this->forgetQuietly($key);
                throw new LockExpiredException(
                    "$shown expired: a TTL of $ttl s is shorter than this client's settings allow (at least $shortest s; "
                        . "{$refused->getMessage()})",
                    0,
                    $refused,
                );
            }
            throw new InvalidTtlException("could not extend $shown by $ttl s: {$refused->getMessage()}", 0, $refused);
        }
        try {
            $lock->extend(self::milliseconds($ttl));
        } catch (LockLostException | NotHeldException $e) {
            $key->removeState(self::class);
            throw new LockConflictedException("could not extend $shown: {$e->getMessage()}", 0, $e);
        } catch (RedlockException $e) {
            throw new LockStorageException("could not extend $shown: {$e->getMessage()}", 0, $e);
        }
        $this->keepValidity($key, $lock);
    }

    /**
     * Releases the key. A release fewer than a quorum confirmed leaves the key holding
     * the lock (its keys may still be on those nodes), so delete() can be called again.
     *
     * @throws LockReleasingException fewer than a quorum confirmed, a closed client
     */
    public function delete(Key $key): void
    {
        $lock = self::lock($key);
        if ($lock === null) {
            return;
        }
        try {
            $lock->release();
        } catch (RedlockException $e) {
            throw new LockReleasingException('could not release ' . self::shown($key) . ": {$e->getMessage()}", 0, $e);
        }
        $key->removeState(self::class);
    }

    /**
     * Whether we hold the key now, as the core decides from every node (an inspection:
     * a quorum hold our token and our validity has not run out).
     *
     * @throws LockStorageException too many nodes failed to say, a closed client
     */
    public function exists(Key $key): bool
    {
        $lock = self::lock($key);
        if ($lock === null) {
            return false;
        }
        try {
            return $lock->isOwned();
        } catch (RedlockException $e) {
            throw new LockStorageException('could not tell whether ' . self::shown($key) . " is held: {$e->getMessage()}", 0, $e);
        }
    }

    /**
     * Acquires `$key` (or extends it if this store already holds it); false when still
     * held elsewhere at the end of a wait of `$waitMs`.
     */
    private function acquire(Key $key, ?int $waitMs): bool
    {
        $shown = self::shown($key);
        if ($key->isExpired()) {
            $this->forgetQuietly($key);
            throw new LockExpiredException("$shown expired before it was stored");
        }
        $held = self::lock($key);
        if ($held !== null && $held->isValid()) {
            // Symfony saves again a key it holds (Lock::acquire() after acquire()).
            try {
                $this->putOffExpiration($key, $this->initialTtl);
            } catch (LockConflictedException | LockExpiredException $e) {
                throw $e;
            } catch (\Throwable $e) {
                throw new LockAcquiringException("could not acquire $shown again: {$e->getMessage()}", 0, $e);
            }
            return true;
        }
        try {
            $lock = $this->redlock->acquire((string) $key, self::milliseconds($this->initialTtl), waitMs: $waitMs);
        } catch (LockHeldException $e) {
            if ($waitMs !== null) {
                return false;
            }
            throw new LockConflictedException("$shown is held by someone else", 0, $e);
        } catch (RedlockException $e) {
            throw new LockAcquiringException("could not acquire $shown: {$e->getMessage()}", 0, $e);
        }
        $key->setState(self::class, $lock);
        $key->markUnserializable();
        $this->keepValidity($key, $lock);
        return true;
    }

    /** The key lives as long as the core's validity; past it the lock is not ours. */
    private function keepValidity(Key $key, Lock $lock): void
    {
        $key->reduceLifetime($lock->validityMs() / 1000);
        if ($key->isExpired()) {
            $this->forgetQuietly($key);
            throw new LockExpiredException(self::shown($key) . ' expired before it was stored');
        }
    }

    /** Releases what the key holds, if anything, and forgets it; failures are left to the TTL. */
    private function forgetQuietly(Key $key): void
    {
        self::lock($key)?->releaseQuietly();
        $key->removeState(self::class);
    }

    /**
     * Null when `$seconds` is a TTL this client's settings allow, else the package's
     * exception naming the rule and the range (in ms, as the settings are).
     */
    private function refusedTtl(float $seconds): ?RedlockInvalidArgument
    {
        $client = $this->redlock->client();
        if (!is_finite($seconds)) {
            [$smallest, $largest] = $client->ttlRange();
            return new RedlockInvalidArgument(
                "the TTL must be a finite number of seconds between " . ($smallest / 1000) . ' and ' . ($largest / 1000)
                    . " with this client's settings, got $seconds",
                'invalid_ttl',
            );
        }
        if ($seconds * 1000 > PHP_INT_MAX) {
            return $client->ttlError(PHP_INT_MAX, 'the TTL');
        }
        $ms = self::milliseconds($seconds);
        return $ms > 0 && $client->checkTtl($ms) === null ? null : $client->ttlError($ms, 'the TTL');
    }

    private function shortestTtlSeconds(): float
    {
        return $this->redlock->client()->ttlRange()[0] / 1000;
    }

    private static function lock(Key $key): ?Lock
    {
        if (!$key->hasState(self::class)) {
            return null;
        }
        $lock = $key->getState(self::class);
        return $lock instanceof Lock ? $lock : null;
    }

    private static function shown(Key $key): string
    {
        return '"' . Text::name((string) $key) . '"';
    }

    /**
     * Whole milliseconds, rounded up (Redis's PX unit); 0 and below stay 0 and below
     * (bounded, for the message). Finite seconds within PHP's integers only.
     */
    private static function milliseconds(float $seconds): int
    {
        if ($seconds <= 0) {
            return (int) max(-PHP_INT_MAX, floor($seconds * 1000));
        }
        return max(1, (int) ceil($seconds * 1000));
    }
}
