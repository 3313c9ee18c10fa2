<?php

declare(strict_types=1);

namespace Redlock\Tests\Integration;

use PHPUnit\Framework\TestCase;
use Redlock\Clock;
use Redlock\Exception\InvalidArgumentException as OurInvalidArgument;
use Redlock\Exception\LockHeldException;
use Redlock\Exception\NodesFailedException;
use Redlock\Exception\RedlockException;
use Redlock\Exception\UsedAfterCloseException;
use Redlock\Options;
use Redlock\Redlock;
use Redlock\Symfony\RedlockStore;
use Symfony\Component\Lock\Exception\ExceptionInterface;
use Symfony\Component\Lock\Exception\InvalidArgumentException;
use Symfony\Component\Lock\Exception\InvalidTtlException;
use Symfony\Component\Lock\Exception\LockAcquiringException;
use Symfony\Component\Lock\Exception\LockConflictedException;
use Symfony\Component\Lock\Exception\LockExpiredException;
use Symfony\Component\Lock\Exception\LockReleasingException;
use Symfony\Component\Lock\Exception\LockStorageException;
use Symfony\Component\Lock\Key;
use Symfony\Component\Lock\LockFactory;
use Symfony\Component\Lock\SharedLockStoreInterface;

/**
 * RedlockStore against the contract of Symfony Lock 5.4's store interfaces
 * (PersistingStoreInterface, BlockingStoreInterface; SharedLockStoreInterface is not
 * implemented), case by case: save, waitAndSave, putOffExpiration, delete, exists, with
 * free, held, conflicting, expired and gone keys, bad TTLs, failing nodes and a closed
 * client. Every failure must be one of Symfony's exceptions with ours as `previous`,
 * and no message may name a function of the library. Five local nodes on ports
 * 7580-7584, default options unless a case needs others.
 */
final class SymfonyContractTest extends TestCase
{
    private const BASE_PORT = 7580;
    private const AUTOLOAD = '/usr/share/php/Symfony/Component/Lock/autoload.php';

    /** @var list<string> */
    private static array $urls = [];

    public static function setUpBeforeClass(): void
    {
        self::assertFileExists(self::AUTOLOAD, 'php-symfony-lock is not installed');
        require_once self::AUTOLOAD;
        self::$urls = Nodes::start(self::BASE_PORT);
    }

    public static function tearDownAfterClass(): void
    {
        Nodes::stop(self::BASE_PORT);
    }

    protected function setUp(): void
    {
        for ($i = 0; $i < 5; $i++) {
            try {
                $redis = Nodes::redis(self::BASE_PORT, $i);
                $redis->rawCommand('CLIENT', 'UNPAUSE');
                $redis->flushAll();
            } catch (\Throwable) {
                Nodes::restart(self::BASE_PORT, $i);
            }
        }
    }

    private static function store(Options $options = new Options(), float $initialTtl = 10.0): RedlockStore
    {
        return new RedlockStore(Redlock::create(self::$urls, $options), $initialTtl, 2_000);
    }

    private function key(string $suffix = ''): Key
    {
        return new Key('symfony-contract:' . $this->getName(false) . $suffix);
    }

    /** @return list<int> each node's PTTL of `$key` (-2: no key) */
    private static function ttls(Key $key): array
    {
        $ttls = [];
        for ($i = 0; $i < 5; $i++) {
            $ttls[] = (int) Nodes::redis(self::BASE_PORT, $i)->pTTL((string) $key);
        }
        return $ttls;
    }

    /**
     * `$call` throws `$class` (one of Symfony's), with our `$previous` behind it, and
     * a message that names no function of the library.
     *
     * @param class-string $class
     * @param class-string|null $previous
     */
    private static function assertThrows(string $class, ?string $previous, callable $call): \Throwable
    {
        try {
            $call();
        } catch (\Throwable $e) {
            self::assertInstanceOf($class, $e, get_class($e) . ': ' . $e->getMessage());
            self::assertInstanceOf(ExceptionInterface::class, $e, 'outside Symfony Lock\'s exceptions');
            self::assertDoesNotMatchRegularExpression('/redlock_[a-z_]+/', $e->getMessage(), 'names a function of the library');
            if ($previous !== null) {
                self::assertInstanceOf($previous, $e->getPrevious(), 'the original exception');
                self::assertInstanceOf(RedlockException::class, $e->getPrevious());
            }
            return $e;
        }
        self::fail("nothing thrown, expected $class");
    }

    // ---- save ---------------------------------------------------------------------

    public function testSaveStoresAFreeKeyAndSavingAgainKeepsIt(): void
    {
        $store = self::store();
        $key = $this->key();
        $store->save($key);
        $this->assertTrue($store->exists($key));
        $this->assertGreaterThanOrEqual(3, count(array_filter(self::ttls($key), static fn (int $t): bool => $t > 9_000)));
        $this->assertGreaterThan(9.0, $key->getRemainingLifetime());
        $store->save($key);
        $this->assertTrue($store->exists($key), 'saved twice by its holder: still held');
        $store->delete($key);
    }

    public function testSaveOfAKeyHeldElsewhereIsAConflict(): void
    {
        $holder = self::store();
        $mine = $this->key();
        $holder->save($mine);
        $theirs = $this->key();
        $rival = self::store(new Options(attempts: 1));
        self::assertThrows(LockConflictedException::class, LockHeldException::class, fn () => $rival->save($theirs));
        $this->assertTrue($holder->exists($mine), 'the holder keeps it');
        $holder->delete($mine);
    }

    public function testSaveOfAnExpiredKeyStoresNothing(): void
    {
        $store = self::store();
        $key = $this->key();
        $key->reduceLifetime(0);
        self::assertThrows(LockExpiredException::class, null, fn () => $store->save($key));
        $this->assertSame([-2, -2, -2, -2, -2], self::ttls($key));
        $this->assertFalse($store->exists($key));
    }

    public function testSaveWithTooManyNodesDownIsAnAcquiringError(): void
    {
        $store = self::store(new Options(attempts: 1));
        foreach ([2, 3, 4] as $i) {
            Nodes::kill(self::BASE_PORT, $i);
        }
        self::assertThrows(LockAcquiringException::class, NodesFailedException::class, fn () => $store->save($this->key()));
    }

    public function testSaveOnAClosedClientIsAnAcquiringError(): void
    {
        $redlock = Redlock::create(self::$urls);
        $store = new RedlockStore($redlock, 10.0);
        $redlock->close();
        self::assertThrows(LockAcquiringException::class, UsedAfterCloseException::class, fn () => $store->save($this->key()));
    }

    // ---- waitAndSave (BlockingStoreInterface) ----------------------------------------

    public function testWaitAndSaveWaitsForTheHolderThenStores(): void
    {
        $holder = Redlock::create(self::$urls);
        $held = $holder->acquire((string) $this->key(), 700);
        $store = self::store(new Options(retryDelayMs: 100, retryJitterMs: 20));
        $key = $this->key();
        $started = Clock::nowUs();
        $store->waitAndSave($key);
        $this->assertGreaterThan(300_000, Clock::nowUs() - $started, 'it waited for the holder');
        $this->assertFalse($held->isOwned());
        $this->assertTrue($store->exists($key));
        $store->delete($key);
    }

    public function testWaitAndSaveWithTooManyNodesDownIsAnAcquiringError(): void
    {
        $store = self::store();
        foreach ([0, 1, 2] as $i) {
            Nodes::kill(self::BASE_PORT, $i);
        }
        self::assertThrows(LockAcquiringException::class, NodesFailedException::class, fn () => $store->waitAndSave($this->key()));
    }

    // ---- putOffExpiration ------------------------------------------------------------

    public function testPutOffExpirationExtendsTheKeyOnTheNodes(): void
    {
        $store = self::store();
        $key = $this->key();
        $store->save($key);
        $key->resetLifetime();
        $store->putOffExpiration($key, 30.0);
        $this->assertGreaterThanOrEqual(3, count(array_filter(self::ttls($key), static fn (int $t): bool => $t > 29_000)));
        $this->assertGreaterThan(29.0, $key->getRemainingLifetime());
        $this->assertLessThanOrEqual(30.0, $key->getRemainingLifetime());
        $store->delete($key);
    }

    public function testPutOffExpirationOfAKeyNotHeldHereIsAConflict(): void
    {
        self::assertThrows(LockConflictedException::class, null, fn () => self::store()->putOffExpiration($this->key(), 10.0));
    }

    public function testPutOffExpirationOfAKeyTakenOrGoneIsAConflict(): void
    {
        $store = self::store();
        $taken = $this->key(':taken');
        $store->save($taken);
        for ($i = 0; $i < 5; $i++) {
            Nodes::redis(self::BASE_PORT, $i)->set((string) $taken, 'someone-else');
        }
        self::assertThrows(LockConflictedException::class, RedlockException::class, fn () => $store->putOffExpiration($taken, 10.0));
        $this->assertFalse($store->exists($taken));

        $gone = $this->key(':gone');
        $store->save($gone);
        for ($i = 0; $i < 5; $i++) {
            Nodes::redis(self::BASE_PORT, $i)->del((string) $gone);
        }
        self::assertThrows(LockConflictedException::class, RedlockException::class, fn () => $store->putOffExpiration($gone, 10.0));
        $this->assertSame([-2, -2, -2, -2, -2], self::ttls($gone), 'an extension never re-creates a key');
    }

    /** @return iterable<string, array{float, Options}> */
    public static function tooShortTtls(): iterable
    {
        yield 'a microsecond' => [1e-6, new Options()];
        yield 'zero' => [0.0, new Options()];
        yield 'negative' => [-1.0, new Options()];
        // A 200 ms node timeout is at most a third of the TTL: 600 ms at least.
        yield 'half a second with a 200 ms node timeout' => [0.5, new Options(nodeTimeoutMs: 200)];
    }

    /**
     * A TTL shorter than the client's settings can hold a lock for: the lock expires
     * now (LockExpiredException, as Symfony's own expiring stores), its keys released.
     *
     * @dataProvider tooShortTtls
     */
    public function testPutOffExpirationShorterThanTheSettingsAllowExpiresTheLock(float $ttl, Options $options): void
    {
        $store = self::store($options);
        $key = $this->key();
        $store->save($key);
        $e = self::assertThrows(LockExpiredException::class, OurInvalidArgument::class, fn () => $store->putOffExpiration($key, $ttl));
        $this->assertStringContainsString('shorter than this client\'s settings allow', $e->getMessage());
        $this->assertStringContainsString('ttlMs must be between', $e->getMessage(), 'the rule and the range');
        $this->assertFalse($store->exists($key));
        $this->assertSame([-2, -2, -2, -2, -2], self::ttls($key), 'released');
    }

    /** @return iterable<string, array{float}> */
    public static function invalidTtls(): iterable
    {
        yield 'NaN' => [NAN];
        yield 'infinite' => [INF];
        yield 'beyond the core\'s largest' => [1e13];
    }

    /**
     * NaN, infinity and a TTL beyond the core's largest are Symfony's InvalidTtlException,
     * and the lock stays as it was.
     *
     * @dataProvider invalidTtls
     */
    public function testPutOffExpirationWithAnInvalidTtlChangesNothing(float $ttl): void
    {
        $store = self::store();
        $key = $this->key();
        $store->save($key);
        self::assertThrows(InvalidTtlException::class, OurInvalidArgument::class, fn () => $store->putOffExpiration($key, $ttl));
        $this->assertTrue($store->exists($key), 'still held');
        $store->delete($key);
    }

    public function testPutOffExpirationWithNodesFailingIsAStorageError(): void
    {
        $store = self::store(new Options(nodeTimeoutMs: 100));
        $key = $this->key();
        $store->save($key);
        foreach ([0, 1, 2] as $i) {
            Nodes::redis(self::BASE_PORT, $i)->rawCommand('CLIENT', 'PAUSE', '1000', 'WRITE');
        }
        self::assertThrows(LockStorageException::class, NodesFailedException::class, fn () => $store->putOffExpiration($key, 10.0));
    }

    public function testPutOffExpirationOnAClosedClientIsAStorageError(): void
    {
        $redlock = Redlock::create(self::$urls);
        $store = new RedlockStore($redlock, 10.0);
        $key = $this->key();
        $store->save($key);
        $redlock->close();
        self::assertThrows(LockStorageException::class, UsedAfterCloseException::class, fn () => $store->putOffExpiration($key, 10.0));
    }

    // ---- delete ---------------------------------------------------------------------

    public function testDeleteRemovesTheKeyAndIgnoresAKeyNotHeld(): void
    {
        $store = self::store();
        $key = $this->key();
        $store->delete($key);
        $store->save($key);
        $store->delete($key);
        $this->assertFalse($store->exists($key));
        $this->assertSame([-2, -2, -2, -2, -2], self::ttls($key));
        $store->delete($key);
    }

    public function testDeleteOfAnotherHoldersKeyDeletesNothing(): void
    {
        $holder = self::store();
        $held = $this->key();
        $holder->save($held);
        self::store()->delete($this->key());
        $this->assertTrue($holder->exists($held));
        $holder->delete($held);
    }

    /**
     * A release three nodes of five do not confirm is a releasing error, and the key
     * keeps the lock: its TTL is still on those nodes, and delete() again clears it.
     */
    public function testDeleteThatNoQuorumConfirmedCanBeRetried(): void
    {
        $store = self::store(new Options(nodeTimeoutMs: 100));
        $key = $this->key();
        $store->save($key);
        foreach ([0, 1, 2] as $i) {
            Nodes::redis(self::BASE_PORT, $i)->rawCommand('CLIENT', 'PAUSE', '1500', 'WRITE');
        }
        self::assertThrows(LockReleasingException::class, NodesFailedException::class, fn () => $store->delete($key));
        $ttls = self::ttls($key);
        foreach ([0, 1, 2] as $i) {
            $this->assertGreaterThan(0, $ttls[$i], "node $i keeps the key: " . implode(', ', $ttls));
        }
        // (The client cannot inspect it now: those nodes' links are stalled.)
        $this->assertTrue($key->hasState(RedlockStore::class), 'the key still holds the lock');
        foreach ([0, 1, 2] as $i) {
            Nodes::redis(self::BASE_PORT, $i)->rawCommand('CLIENT', 'UNPAUSE');
        }
        $store->delete($key);
        $this->assertFalse($store->exists($key));
        $this->assertSame([-2, -2, -2, -2, -2], self::ttls($key));
    }

    public function testDeleteOnAClosedClientIsAReleasingError(): void
    {
        $redlock = Redlock::create(self::$urls);
        $store = new RedlockStore($redlock, 10.0);
        $key = $this->key();
        $store->save($key);
        $redlock->close();
        self::assertThrows(LockReleasingException::class, UsedAfterCloseException::class, fn () => $store->delete($key));
    }

    // ---- exists -----------------------------------------------------------------------

    public function testExistsOnlyForOurOwnTokenOnAQuorum(): void
    {
        $store = self::store();
        $key = $this->key();
        $this->assertFalse($store->exists($key), 'never saved');
        $store->save($key);
        $this->assertTrue($store->exists($key));
        $this->assertFalse(self::store()->exists($this->key()), 'another key on the same resource');
        foreach ([0, 1, 2] as $i) {
            Nodes::redis(self::BASE_PORT, $i)->del((string) $key);
        }
        $this->assertFalse($store->exists($key), 'our token left on two nodes only');
    }

    public function testExistsWithNodesFailingOrAClosedClientIsAStorageError(): void
    {
        $redlock = Redlock::create(self::$urls, new Options(nodeTimeoutMs: 100));
        $store = new RedlockStore($redlock, 10.0);
        $key = $this->key();
        $store->save($key);
        foreach ([2, 3, 4] as $i) {
            Nodes::kill(self::BASE_PORT, $i);
        }
        self::assertThrows(LockStorageException::class, NodesFailedException::class, fn () => $store->exists($key));
        $redlock->close();
        self::assertThrows(LockStorageException::class, UsedAfterCloseException::class, fn () => $store->exists($key));
    }

    // ---- construction and shared locks ---------------------------------------------

    public function testBadConstructorArgumentsAreSymfonysExceptions(): void
    {
        $redlock = Redlock::create(self::$urls, new Options(nodeTimeoutMs: 200));
        foreach ([NAN, INF, 0.0, -1.0, 0.5, 1e13] as $ttl) {
            self::assertThrows(InvalidTtlException::class, OurInvalidArgument::class, fn () => new RedlockStore($redlock, $ttl));
        }
        self::assertThrows(InvalidArgumentException::class, null, fn () => new RedlockStore($redlock, 10.0, 0));
    }

    /** Shared locks are not offered: Symfony's acquireRead() takes the exclusive lock. */
    public function testReadLocksFallBackToTheExclusiveLock(): void
    {
        $store = self::store();
        $this->assertNotInstanceOf(SharedLockStoreInterface::class, $store);
        $reader = (new LockFactory($store))->createLock((string) $this->key(), 10.0, false);
        $this->assertTrue($reader->acquireRead());
        $other = (new LockFactory(self::store(new Options(attempts: 1))))->createLock((string) $this->key(), 10.0, false);
        $this->assertFalse($other->acquireRead(), 'a second reader is refused: the lock is exclusive');
        $reader->release();
        $this->assertTrue($other->acquireRead());
        $other->release();
    }
}
