<?php

declare(strict_types=1);

namespace Redlock\Symfony;

use Redlock\Exception\LockHeldException;
use Redlock\Exception\LockLostException;
use Redlock\Exception\NodesFailedException;
use Redlock\Exception\NotHeldException;
use Redlock\Lock;
use Redlock\Redlock;
use Symfony\Component\Lock\BlockingStoreInterface;
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
 */
final class RedlockStore implements BlockingStoreInterface
{
    /**
     * @param float $initialTtl seconds, for save() (Symfony's RedisStore default: 300)
     * @param int $waitStepMs how long one waiting acquisition of waitAndSave() lasts
     *     before it starts the next (it waits for release notices meanwhile)
     */
    public function __construct(
        private readonly Redlock $redlock,
        private readonly float $initialTtl = 300.0,
        private readonly int $waitStepMs = 60_000,
    ) {
        if ($initialTtl <= 0) {
            throw new \Redlock\Exception\InvalidArgumentException("the initial TTL must be positive, got $initialTtl");
        }
        if ($waitStepMs <= 0) {
            throw new \Redlock\Exception\InvalidArgumentException("the wait step must be positive, got $waitStepMs");
        }
    }

    public function save(Key $key): void
    {
        $this->acquire($key, null);
    }

    public function waitAndSave(Key $key): void
    {
        while (!$this->acquire($key, $this->waitStepMs)) {
            // Still held at the end of this wait: wait again.
        }
    }

    public function putOffExpiration(Key $key, float $ttl): void
    {
        $lock = self::lock($key) ?? throw new LockConflictedException("\"$key\" is not held through this store");
        try {
            $lock->extend(self::milliseconds($ttl));
        } catch (LockLostException | NotHeldException $e) {
            $key->removeState(self::class);
            throw new LockConflictedException("could not extend \"$key\": {$e->getMessage()}", 0, $e);
        } catch (NodesFailedException $e) {
            throw new LockStorageException("could not extend \"$key\": {$e->getMessage()}", 0, $e);
        }
        $this->keepValidity($key, $lock);
    }

    public function delete(Key $key): void
    {
        $lock = self::lock($key);
        if ($lock === null) {
            return;
        }
        try {
            $lock->release();
        } catch (NodesFailedException $e) {
            throw new LockReleasingException("could not release \"$key\": {$e->getMessage()}", 0, $e);
        } finally {
            $key->removeState(self::class);
        }
    }

    /**
     * Whether we hold the key now, as the core decides from every node (an inspection:
     * a quorum hold our token and our validity has not run out).
     *
     * @throws LockStorageException too many nodes failed to say
     */
    public function exists(Key $key): bool
    {
        $lock = self::lock($key);
        if ($lock === null) {
            return false;
        }
        try {
            return $lock->isOwned();
        } catch (NodesFailedException $e) {
            throw new LockStorageException("could not tell whether \"$key\" is held: {$e->getMessage()}", 0, $e);
        }
    }

    /**
     * Acquires `$key` (or extends it if this store already holds it); false when still
     * held elsewhere at the end of a wait of `$waitMs`.
     */
    private function acquire(Key $key, ?int $waitMs): bool
    {
        $held = self::lock($key);
        if ($held !== null && $held->isValid()) {
            // Symfony saves again a key it holds (Lock::acquire() after acquire()).
            $this->putOffExpiration($key, $this->initialTtl);
            return true;
        }
        try {
            $lock = $this->redlock->acquire((string) $key, self::milliseconds($this->initialTtl), waitMs: $waitMs);
        } catch (LockHeldException $e) {
            if ($waitMs !== null) {
                return false;
            }
            throw new LockConflictedException("\"$key\" is held by someone else", 0, $e);
        } catch (NodesFailedException $e) {
            throw new LockAcquiringException("could not acquire \"$key\": {$e->getMessage()}", 0, $e);
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
            try {
                $this->delete($key);
            } catch (\Throwable) {
                // The keys expire with their TTL.
            }
            throw new LockExpiredException("\"$key\" expired before it was stored");
        }
    }

    private static function lock(Key $key): ?Lock
    {
        if (!$key->hasState(self::class)) {
            return null;
        }
        $lock = $key->getState(self::class);
        return $lock instanceof Lock ? $lock : null;
    }

    private static function milliseconds(float $seconds): int
    {
        if (!is_finite($seconds) || $seconds <= 0) {
            throw new \Redlock\Exception\InvalidArgumentException("a TTL must be positive, got $seconds s");
        }
        return max(1, (int) ceil($seconds * 1000));
    }
}
