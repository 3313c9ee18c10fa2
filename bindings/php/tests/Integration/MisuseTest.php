<?php

declare(strict_types=1);

namespace Redlock\Tests\Integration;

use PHPUnit\Framework\TestCase;
use Redlock\Exception\LockHeldException;
use Redlock\Exception\NodesFailedException;
use Redlock\Exception\UsedAfterCloseException;
use Redlock\Options;
use Redlock\Redlock;

/**
 * Misuse and failed releases against five local nodes (ports 7575-7579), both drivers:
 * a lock used after its client closed, a release that failed (the lock stays not
 * released, its keys still on the nodes that did not confirm), and a huge resource
 * name in an exception's message.
 */
final class MisuseTest extends TestCase
{
    private const BASE_PORT = 7575;

    /** @var list<string> */
    private static array $urls = [];

    public static function setUpBeforeClass(): void
    {
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

    /** @return iterable<string, array{string}> */
    public static function drivers(): iterable
    {
        yield 'stream' => ['stream'];
        yield 'phpredis' => ['phpredis'];
    }

    private static function client(string $driver, Options $options = new Options(nodeTimeoutMs: 200)): Redlock
    {
        if ($driver === 'stream') {
            return Redlock::create(self::$urls, $options);
        }
        $nodes = [];
        for ($i = 0; $i < 5; $i++) {
            $redis = new \Redis();
            $redis->connect('127.0.0.1', self::BASE_PORT + $i, 1.0);
            $nodes[] = $redis;
        }
        return Redlock::withPhpRedis($nodes, $options);
    }

    /** @return list<int> each node's PTTL of `$key` (-2: no key) */
    private static function ttls(string $key): array
    {
        $ttls = [];
        for ($i = 0; $i < 5; $i++) {
            $ttls[] = (int) Nodes::redis(self::BASE_PORT, $i)->pTTL($key);
        }
        return $ttls;
    }

    private static function assertUsedAfterClose(callable $call, string $what): void
    {
        try {
            $call();
            self::fail("$what after close() did not throw");
        } catch (UsedAfterCloseException $e) {
            self::assertSame('used_after_close', $e->codeName, $what);
        }
    }

    /**
     * After close(): extend, release, extend again, release again each throw
     * UsedAfterCloseException (never anything outside the hierarchy, never a silent
     * success), for a lock close() released and for one rebuilt from a token.
     *
     * @dataProvider drivers
     */
    public function testEveryUseOfALockAfterCloseIsUsedAfterClose(string $driver): void
    {
        $key = "php-test:misuse-close:$driver";
        $redlock = self::client($driver);
        $lock = $redlock->acquire($key, 10_000);
        $rebuilt = $redlock->lockFromToken("$key:other", 'some-token');
        $redlock->close();
        $this->assertSame([-2, -2, -2, -2, -2], self::ttls($key), 'close() released the lock');
        foreach ([$lock, $rebuilt] as $which) {
            self::assertUsedAfterClose(fn () => $which->extend(), 'extend');
            self::assertUsedAfterClose(fn () => $which->release(), 'release');
            self::assertUsedAfterClose(fn () => $which->extend(5_000), 'extend again');
            self::assertUsedAfterClose(fn () => $which->release(), 'release again');
            self::assertUsedAfterClose(fn () => $which->isOwned(), 'isOwned');
            self::assertUsedAfterClose(fn () => $which->keepAlive(), 'keepAlive');
        }
        self::assertUsedAfterClose(fn () => $redlock->acquire($key), 'acquire');
        self::assertUsedAfterClose(fn () => $redlock->isLocked($key), 'isLocked');
    }

    /**
     * A release three of five nodes do not confirm (their writes paused with CLIENT
     * PAUSE WRITE) throws NodesFailedException and leaves the lock not released: the
     * keys still hold on those nodes with their TTL, and the next release() runs again
     * and clears them, where it used to return 0 and do nothing.
     *
     * @dataProvider drivers
     */
    public function testAFailedReleaseLeavesTheLockToReleaseAgain(string $driver): void
    {
        $key = "php-test:misuse-release:$driver";
        $redlock = self::client($driver, new Options(nodeTimeoutMs: 100));
        $lock = $redlock->acquire($key, 10_000);
        foreach ([0, 1, 2] as $i) {
            Nodes::redis(self::BASE_PORT, $i)->rawCommand('CLIENT', 'PAUSE', '1500', 'WRITE');
        }
        try {
            $lock->release();
            $this->fail('released with three nodes of five paused');
        } catch (NodesFailedException $e) {
            $this->assertStringContainsString('could not release', $e->getMessage());
        }
        $this->assertFalse($lock->isReleased(), 'a release no quorum confirmed is not a release');
        $ttls = self::ttls($key);
        foreach ([0, 1, 2] as $i) {
            $this->assertGreaterThan(0, $ttls[$i], "node $i still holds the key with its TTL: " . implode(', ', $ttls));
        }
        foreach ([0, 1, 2] as $i) {
            Nodes::redis(self::BASE_PORT, $i)->rawCommand('CLIENT', 'UNPAUSE');
        }
        $lock->release();
        $this->assertTrue($lock->isReleased());
        $redlock->flush();
        $this->assertSame([-2, -2, -2, -2, -2], self::ttls($key), 'the second release cleared every node');
        $this->assertSame(0, $lock->release(), 'a released lock is released once');
        $redlock->close();
    }

    /**
     * A 1 MB resource name works as a key, and the exceptions that name it show its
     * first 64 bytes and "…", not the megabyte.
     *
     * @dataProvider drivers
     */
    public function testAHugeResourceNameIsCutInMessages(string $driver): void
    {
        $name = str_repeat('n', 1 << 20);
        $holder = self::client($driver);
        $lock = $holder->acquire($name, 10_000);
        $rival = self::client($driver, new Options(nodeTimeoutMs: 200, attempts: 1));
        try {
            $rival->acquire($name);
            $this->fail('acquired a held lock');
        } catch (LockHeldException $e) {
            $this->assertSame([$name], $e->resources, 'the exception keeps the whole name');
            $this->assertLessThan(2_000, strlen($e->getMessage()), 'message length');
            $this->assertStringContainsString(str_repeat('n', 64) . '…', $e->getMessage());
        }
        $lock->release();
        $holder->close();
        $rival->close();
    }
}
