<?php

declare(strict_types=1);

namespace Redlock\Tests\Integration;

use Redlock\Driver\StreamDriver;
use Redlock\Exception\NodesFailedException;
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
            $this->assertSame(2, $driver->inFlight()[2], 'the SET and the release wait on node 2, in order');
            $redlock->flush();
        } finally {
            Nodes::resume(static::basePort(), 2);
        }
        // Once resumed, node 2 runs the SET and then the release: nothing is left.
        usleep(50_000);
        $redlock->acquire('php-test:probe')->release();
        $redlock->flush();
        $this->assertSame(0, $driver->inFlight()[2]);
        $this->assertFalse(Nodes::redis(static::basePort(), 2)->get('php-test:frozen-order'));
    }
}
