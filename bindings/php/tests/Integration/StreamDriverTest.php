<?php

declare(strict_types=1);

namespace Redlock\Tests\Integration;

use Redlock\Clock;
use Redlock\Driver\StreamDriver;
use Redlock\Exception\CancelledException;
use Redlock\Exception\InvalidArgumentException;
use Redlock\Exception\NodesFailedException;
use Redlock\NodeResult;
use Redlock\Options;
use Redlock\Redlock;

/**
 * The default driver (non-blocking streams) against five local nodes (ports 7500-7504).
 */
final class StreamDriverTest extends DriverScenarios
{
    protected static function basePort(): int
    {
        return 7500;
    }

    protected static function workerDriver(): string
    {
        return 'stream';
    }

    protected function redlock(Options $options = new Options()): Redlock
    {
        return Redlock::create(static::$urls, self::patient($options));
    }

    protected function frozenAcquireBoundMs(): float
    {
        // Decided at the quorum: the frozen node's 50 ms timeout is never waited for.
        return 40.0;
    }

    protected function assertLeftBehindAfterFrozenNode(string $key): void
    {
        $this->assertSame(array_fill(0, 4, false), array_slice(Nodes::values(static::basePort(), $key), 1));
    }

    public function testCommandsToAFrozenNodeStayOnItsConnectionAndFinishAfterIt(): void
    {
        $driver = new StreamDriver(static::$urls);
        $redlock = new Redlock($driver, new Options(nodeTimeoutMs: 50));
        $redlock->acquire('php-test:frozen-order')->release();
        Nodes::pause(static::basePort(), 2);
        try {
            $lock = $redlock->acquire('php-test:frozen-order');
            $lock->release();
            $state = $redlock->linkState()[2];
            $this->assertSame(2, $state['in_flight'] + $state['queued'], 'the SET and the release wait on node 2, in order');
            $redlock->flush();
        } finally {
            Nodes::resume(static::basePort(), 2);
        }
        // Once resumed, node 2 runs the SET and then the release: nothing is left.
        usleep(50_000);
        $redlock->acquire('php-test:probe')->release();
        $redlock->flush();
        $this->assertSame(0, $redlock->linkState()[2]['in_flight']);
        $this->assertFalse(Nodes::redis(static::basePort(), 2)->get('php-test:frozen-order'));
    }

    public function testTheSameNodeTwiceIsRefused(): void
    {
        $urls = static::$urls;
        $urls[3] = str_replace('127.0.0.1', 'localhost', $urls[1]);
        try {
            Redlock::create($urls);
            $this->fail('accepted the same node twice');
        } catch (InvalidArgumentException $e) {
            $this->assertSame('duplicate_node', $e->codeName);
            $this->assertStringContainsString('nodes 1 and 3', $e->getMessage());
        }
    }

    public function testARefusedPortNamesItsCauseWithoutWaiting(): void
    {
        // Ports 7505-7509: nothing listens there (this class's nodes are 7500-7504).
        $urls = array_map(static fn (int $p): string => "redis://127.0.0.1:$p", range(7505, 7509));
        $redlock = Redlock::create($urls, new Options(nodeTimeoutMs: 2_000, attempts: 1));
        $started = Clock::nowUs();
        try {
            $redlock->acquire('php-test:refused');
            $this->fail('acquired with every node refusing');
        } catch (NodesFailedException $e) {
            // Waiting would cost the 2 s node timeout; refusals take a few ms.
            $this->assertLessThan(1_000_000, Clock::nowUs() - $started, 'a refused port costs no timeout');
            $refused = 0;
            foreach ($e->nodes as $node) {
                if ($node->status !== NodeResult::PENDING) {
                    $this->assertSame('refused', $node->cause, (string) $node);
                    $refused++;
                }
            }
            $this->assertGreaterThanOrEqual(3, $refused, $e->getMessage());
        }
    }

    public function testAnAcquisitionGivenUpAtItsTimeLimitLeavesNoKey(): void
    {
        $redlock = Redlock::create(static::$urls, new Options(ttlMs: 10_000, nodeTimeoutMs: 300, attempts: 1));
        $redlock->acquire('php-test:warm')->release();
        foreach ([0, 1, 2] as $i) {
            Nodes::pause(static::basePort(), $i);
        }
        try {
            try {
                $redlock->acquire('php-test:cancel', null, false, 30);
                $this->fail('acquired with three nodes frozen');
            } catch (CancelledException $e) {
                $this->assertSame(['php-test:cancel'], $e->resources);
            }
            $redlock->flush();
            // The two live nodes had set the key: the abandoned acquisition's release cleaned them.
            foreach ([3, 4] as $i) {
                $this->assertFalse(Nodes::redis(static::basePort(), $i)->get('php-test:cancel'), "node $i");
            }
        } finally {
            foreach ([0, 1, 2] as $i) {
                Nodes::resume(static::basePort(), $i);
            }
        }
        // Once resumed, the frozen nodes run the SET, then the release the links owed them.
        usleep(100_000);
        $redlock->acquire('php-test:probe')->release();
        $redlock->flush();
        $this->assertSame(array_fill(0, 5, false), Nodes::values(static::basePort(), 'php-test:cancel'));
    }
}
