<?php

declare(strict_types=1);

namespace Redlock\Tests\Integration;

use PHPUnit\Framework\TestCase;
use Redlock\Clock;
use Redlock\Exception\NodesFailedException;
use Redlock\Options;
use Redlock\Redlock;

/**
 * Nodes frozen with SIGSTOP while a PHP client that makes no further call is idle:
 * what the client leaves on them, and how long its calls block. Five local nodes on
 * ports 7565-7569, both drivers.
 */
final class FrozenNodesTest extends TestCase
{
    private const BASE_PORT = 7565;
    /** How long a key left by a failed acquisition may survive the nodes' thaw. */
    private const CLEAN_WITHIN_US = 3_000_000;

    /** @var list<string> */
    private static array $urls = [];
    /** @var list<int> nodes this test froze, resumed in tearDown() whatever happens */
    private array $frozen = [];

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
                Nodes::redis(self::BASE_PORT, $i)->flushAll();
            } catch (\Throwable) {
                Nodes::restart(self::BASE_PORT, $i);
            }
        }
    }

    protected function tearDown(): void
    {
        $this->thaw();
    }

    /** @param list<int> $nodes */
    private function freeze(array $nodes): void
    {
        foreach ($nodes as $i) {
            Nodes::pause(self::BASE_PORT, $i);
            $this->frozen[] = $i;
        }
    }

    private function thaw(): void
    {
        foreach ($this->frozen as $i) {
            Nodes::resume(self::BASE_PORT, $i);
        }
        $this->frozen = [];
    }

    /** phpredis objects with no connect timeout of their own (the link's is then the core's 2 s). */
    private static function phpRedis(Options $options): Redlock
    {
        $nodes = [];
        for ($i = 0; $i < 5; $i++) {
            $redis = new \Redis();
            $redis->connect('127.0.0.1', self::BASE_PORT + $i);
            $nodes[] = $redis;
        }
        return Redlock::withPhpRedis($nodes, $options);
    }

    private static function client(string $driver, Options $options): Redlock
    {
        return $driver === 'stream' ? Redlock::create(self::$urls, $options) : self::phpRedis($options);
    }

    /** @return iterable<string, array{string}> */
    public static function drivers(): iterable
    {
        yield 'stream' => ['stream'];
        yield 'phpredis' => ['phpredis'];
    }

    /**
     * Polls EXISTS on every node (from this test's own connections, never through the
     * client under test) until none has `$key`, at most CLEAN_WITHIN_US; returns the
     * nodes that still have it.
     *
     * @return list<int>
     */
    private static function nodesKeeping(string $key): array
    {
        $until = Clock::nowUs() + self::CLEAN_WITHIN_US;
        do {
            $keeping = [];
            for ($i = 0; $i < 5; $i++) {
                if (Nodes::redis(self::BASE_PORT, $i)->exists($key)) {
                    $keeping[] = $i;
                }
            }
            if ($keeping === []) {
                return [];
            }
            usleep(20_000);
        } while (Clock::nowUs() < $until);
        return $keeping;
    }

    /**
     * The owed releases reach nodes that were frozen when the client decided, without
     * another call of the client: three of five frozen, the acquisition fails, the nodes
     * thaw, and no node keeps the key (each frozen node ran the SET on thaw). The stream
     * driver only: phpredis closes a connection whose read timed out (README, "Nodes
     * that stop answering").
     */
    public function testAFailedAcquisitionLeavesNoKeyOnNodesThatWereFrozen(): void
    {
        $key = 'php-test:frozen-failed';
        $redlock = self::client('stream', new Options(ttlMs: 10_000, nodeTimeoutMs: 100, attempts: 1));
        $redlock->acquire('php-test:warm')->release();
        $this->freeze([0, 1, 2]);
        try {
            $redlock->acquire($key);
            $this->fail('acquired with three nodes of five frozen');
        } catch (NodesFailedException) {
            // As it must: no quorum.
        }
        $this->thaw();
        $this->assertSame([], self::nodesKeeping($key), 'nodes keeping the key of a failed acquisition');
        $redlock->close();
    }

    /**
     * The same with one node frozen during a healthy acquire + release (stream driver):
     * the frozen node does not keep the released key.
     */
    public function testAReleasedLockLeavesNoKeyOnTheNodeThatWasFrozen(): void
    {
        $key = 'php-test:frozen-released';
        $redlock = self::client('stream', new Options(ttlMs: 10_000, nodeTimeoutMs: 100, attempts: 1));
        $redlock->acquire('php-test:warm')->release();
        $this->freeze([0]);
        // Acquired at the quorum while the SET to node 0 is within its deadline, then
        // held past it: node 0 is stalled when the release comes, which is owed there.
        $lock = $redlock->acquire($key);
        usleep(150_000);
        $lock->release();
        $this->thaw();
        $this->assertSame([], self::nodesKeeping($key), 'nodes keeping a released key');
        $redlock->close();
    }

    /**
     * What both drivers do today: the releases owed to nodes that were frozen go out at
     * the client's next call (here flush()) once they answer again, and no node keeps
     * the key of the failed acquisition after it.
     *
     * @dataProvider drivers
     */
    public function testOwedReleasesGoOutAtTheNextCall(string $driver): void
    {
        $key = "php-test:frozen-next-call:$driver";
        $redlock = self::client($driver, new Options(ttlMs: 10_000, nodeTimeoutMs: 100, attempts: 1));
        $redlock->acquire('php-test:warm')->release();
        $this->freeze([0, 1, 2]);
        try {
            $redlock->acquire($key);
            $this->fail('acquired with three nodes of five frozen');
        } catch (NodesFailedException) {
            // As it must: no quorum.
        }
        $this->thaw();
        // Reconnections wait out the links' backoff: call until it is done, boundedly.
        $until = Clock::nowUs() + self::CLEAN_WITHIN_US;
        do {
            usleep(50_000);
            $redlock->flush();
            $idle = array_sum(array_map(static fn (array $l): int => $l['queued'] + $l['in_flight'], $redlock->linkState())) === 0;
        } while (!$idle && Clock::nowUs() < $until);
        $this->assertSame([], self::nodesKeeping($key), 'nodes keeping the key after the next calls');
        $redlock->close();
    }

    /**
     * phpredis, objects without a connect timeout: the calls right after a node froze
     * block about one node timeout, never the link's 2 s connect timeout (a connection
     * attempt to the frozen node carried out after the outcome used to wait for its
     * first reply that long). Here a release, then acquire + release cycles; 1 s is far
     * above a loaded machine's time for them (100 ms node timeout) and half the bug's.
     */
    public function testPhpRedisCallsAfterANodeFreezesDoNotBlockForTheConnectTimeout(): void
    {
        $redlock = self::phpRedis(new Options(ttlMs: 10_000, nodeTimeoutMs: 100, attempts: 1));
        $lock = $redlock->acquire('php-test:frozen-block');
        $this->freeze([0]);
        $took = [];
        $started = Clock::nowUs();
        try {
            $lock->release();
        } catch (NodesFailedException) {
            // The frozen node may cost the release its quorum: the sequential driver waited for it first.
        }
        $took[] = (Clock::nowUs() - $started) / 1000;
        for ($round = 0; $round < 5; $round++) {
            $started = Clock::nowUs();
            try {
                $redlock->acquire("php-test:frozen-block:$round")->release();
            } catch (NodesFailedException) {
                // Timing is what is measured here.
            }
            $took[] = (Clock::nowUs() - $started) / 1000;
        }
        $this->assertLessThan(1_000.0, max($took), 'ms per call after the freeze: ' . implode(', ', array_map(
            static fn (float $ms): string => sprintf('%.1f', $ms),
            $took,
        )));
        $this->thaw();
        $redlock->close();
    }
}
