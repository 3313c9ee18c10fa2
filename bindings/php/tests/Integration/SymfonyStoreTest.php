<?php

declare(strict_types=1);

namespace Redlock\Tests\Integration;

use PHPUnit\Framework\TestCase;
use Redlock\Clock;
use Redlock\Options;
use Redlock\Redlock;
use Redlock\Symfony\RedlockStore;
use Symfony\Component\Lock\Exception\LockStorageException;
use Symfony\Component\Lock\Exception\UnserializableKeyException;
use Symfony\Component\Lock\Key;
use Symfony\Component\Lock\LockFactory;

/**
 * RedlockStore under Symfony Lock 5.4 (Debian's php-symfony-lock), five local nodes on
 * ports 7560-7564, the stream driver.
 */
final class SymfonyStoreTest extends TestCase
{
    private const BASE_PORT = 7560;
    private const AUTOLOAD = '/usr/share/php/Symfony/Component/Lock/autoload.php';

    /** @var list<string> */
    private static array $urls = [];

    public static function setUpBeforeClass(): void
    {
        // A missing symfony/lock is a failure (build.sh installs php-symfony-lock).
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
                Nodes::redis(self::BASE_PORT, $i)->flushAll();
            } catch (\Throwable) {
                Nodes::restart(self::BASE_PORT, $i);
            }
        }
    }

    private function factory(Options $options = new Options(nodeTimeoutMs: 200)): LockFactory
    {
        return new LockFactory(new RedlockStore(Redlock::create(self::$urls, $options), 30.0));
    }

    private function resource(): string
    {
        return 'symfony-test:' . $this->getName(false);
    }

    public function testAcquireRefreshReleaseThroughLockFactory(): void
    {
        $lock = $this->factory()->createLock($this->resource(), 10.0, false);
        $this->assertTrue($lock->acquire());
        $this->assertTrue($lock->isAcquired(), 'exists(): the inspection finds our token on a quorum');
        $values = Nodes::values(self::BASE_PORT, $this->resource());
        $this->assertGreaterThanOrEqual(3, count(array_filter($values, 'is_string')));
        $this->assertCount(1, array_unique(array_filter($values, 'is_string')), 'one token');
        $remaining = $lock->getRemainingLifetime();
        $this->assertNotNull($remaining);
        $this->assertGreaterThan(9.0, $remaining);
        $this->assertLessThanOrEqual(10.0, $remaining, 'the core\'s validity, below the TTL');

        $rival = $this->factory(new Options(nodeTimeoutMs: 200, attempts: 1))->createLock($this->resource(), 10.0, false);
        $this->assertFalse($rival->acquire(), 'held by the first lock');
        $this->assertFalse($rival->isAcquired());

        $lock->refresh(20.0);
        $this->assertGreaterThan(19_000, Nodes::redis(self::BASE_PORT, 0)->pTTL($this->resource()));
        $this->assertGreaterThan(19.0, $lock->getRemainingLifetime());

        $this->assertTrue($lock->acquire(), 'acquiring a lock it holds again keeps it');
        $lock->release();
        $this->assertFalse($lock->isAcquired());
        $this->assertSame(array_fill(0, 5, false), Nodes::values(self::BASE_PORT, $this->resource()));
        $this->assertTrue($rival->acquire(), 'free after the release');
        $rival->release();
    }

    public function testExistsIsAnInspectionOfTheNodes(): void
    {
        $lock = $this->factory()->createLock($this->resource(), 10.0, false);
        $this->assertTrue($lock->acquire());
        // Our token deleted on three nodes by hand: no longer ours, though two keep it.
        foreach ([0, 1, 2] as $i) {
            Nodes::redis(self::BASE_PORT, $i)->del($this->resource());
        }
        $this->assertFalse($lock->isAcquired());

        $again = $this->factory()->createLock($this->resource(), 10.0, false);
        $this->assertTrue($again->acquire());
        foreach ([0, 1, 2, 3, 4] as $i) {
            Nodes::redis(self::BASE_PORT, $i)->set($this->resource(), 'someone-else');
        }
        $this->assertFalse($again->isAcquired(), 'another token holds it');
    }

    public function testExistsWithTooManyNodesDownIsAStorageError(): void
    {
        $store = new RedlockStore(Redlock::create(self::$urls, new Options(nodeTimeoutMs: 200)), 10.0);
        $key = new Key($this->resource());
        $store->save($key);
        $this->assertTrue($store->exists($key));
        foreach ([2, 3, 4] as $i) {
            Nodes::kill(self::BASE_PORT, $i);
        }
        $this->expectException(LockStorageException::class);
        $store->exists($key);
    }

    public function testBlockingAcquisitionWaitsForTheHolder(): void
    {
        $holder = Redlock::create(self::$urls);
        $held = $holder->acquire($this->resource(), 600);
        $store = new RedlockStore(Redlock::create(self::$urls, new Options(retryDelayMs: 100, retryJitterMs: 20)), 10.0, 300);
        $lock = (new LockFactory($store))->createLock($this->resource(), 10.0, false);
        $start = Clock::nowUs();
        $this->assertTrue($lock->acquire(true), 'acquired once the holder\'s key expired');
        $waitedMs = (Clock::nowUs() - $start) / 1000;
        $this->assertGreaterThan(300, $waitedMs, 'it did wait for the holder');
        $this->assertLessThan(3_000, $waitedMs);
        $this->assertFalse($held->isOwned());
        $this->assertTrue($lock->isAcquired());
        $lock->release();
    }

    public function testAKeyHeldThroughFfiCannotBeSerialized(): void
    {
        $store = new RedlockStore(Redlock::create(self::$urls), 10.0);
        $key = new Key($this->resource());
        $store->save($key);
        try {
            serialize($key);
            $this->fail('a key holding a Redlock Lock was serialized');
        } catch (UnserializableKeyException) {
            $this->assertTrue($store->exists($key));
        }
        $store->delete($key);
        $this->assertFalse($store->exists($key));
    }
}
