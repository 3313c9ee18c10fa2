<?php

declare(strict_types=1);

namespace Redlock\Tests\Integration;

use Redlock\Exception\InvalidArgumentException;
use Redlock\Options;
use Redlock\Redlock;

/**
 * The phpredis driver (sequential, over the caller's Redis objects) against five local
 * nodes (ports 7510-7514).
 */
final class PhpRedisDriverTest extends DriverScenarios
{
    protected static function basePort(): int
    {
        return 7510;
    }

    protected static function workerDriver(): string
    {
        return 'phpredis';
    }

    protected function redlock(Options $options = new Options()): Redlock
    {
        $nodes = [];
        for ($i = 0; $i < 5; $i++) {
            $redis = new \Redis();
            try {
                $redis->connect('127.0.0.1', static::basePort() + $i, 0.2);
            } catch (\RedisException) {
                // A node that is down: the driver reconnects when it comes back.
            }
            $nodes[] = $redis;
        }
        return Redlock::withPhpRedis($nodes, self::patient($options));
    }

    protected function frozenAcquireBoundMs(): float
    {
        // Sequential: the frozen node costs one node timeout (50 ms) per round at most.
        return 100.0;
    }

    protected function assertLeftBehindAfterFrozenNode(string $key): void
    {
        for ($i = 1; $i < 5; $i++) {
            $ttl = Nodes::redis(static::basePort(), $i)->pTTL($key);
            $this->assertTrue($ttl === -2 || ($ttl > 0 && $ttl <= 10_000), "node $i: a key without its TTL ($ttl)");
        }
    }

    public function testTheSameNodeTwiceIsRefused(): void
    {
        $nodes = [];
        foreach ([0, 1, 2, 0] as $i) {
            $redis = new \Redis();
            $redis->connect($i === 2 ? 'localhost' : '127.0.0.1', static::basePort() + $i, 0.5);
            $nodes[] = $redis;
        }
        try {
            Redlock::withPhpRedis($nodes);
            $this->fail('accepted the same node twice');
        } catch (InvalidArgumentException $e) {
            $this->assertSame('duplicate_node', $e->codeName);
            $this->assertStringContainsString('nodes 0 and 3', $e->getMessage());
        }
    }
}
