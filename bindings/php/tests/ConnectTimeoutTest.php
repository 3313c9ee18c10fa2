<?php

declare(strict_types=1);

namespace Redlock\Tests;

use PHPUnit\Framework\TestCase;
use Redlock\Clock;
use Redlock\Exception\InvalidArgumentException;
use Redlock\Exception\NodesFailedException;
use Redlock\Ffi\Link;
use Redlock\Ffi\Native;
use Redlock\Options;
use Redlock\Redlock;
use Redlock\Sentinel;

/**
 * How long a node's connection may take to open is the core's decision (rule 4 of
 * docs/bindings.md): each node's link gets the user's client's connect timeout, else
 * the core's 2 s, and gives an attempt up at that time with a Close, which the driver
 * carries out by closing the socket under way. No Redis here: a listener with a full
 * accept queue stands for a node that never answers, plain listeners for phpredis'.
 */
final class ConnectTimeoutTest extends TestCase
{
    /** @var list<FullAcceptQueue> */
    private array $nodes = [];
    /** @var list<resource> */
    private array $servers = [];

    protected function tearDown(): void
    {
        foreach ($this->nodes as $node) {
            $node->close();
        }
        foreach ($this->servers as $server) {
            fclose($server);
        }
        $this->nodes = [];
        $this->servers = [];
    }

    /**
     * A node that never accepts the connection: with a node timeout longer than the
     * core's connect timeout, the acquisition ends when the link gives the attempt up,
     * after 2 s (not after the system's SYN retries), the node's cause `timeout`; the
     * socket that was opening meanwhile is closed.
     */
    public function testAStreamNodeThatNeverAcceptsIsGivenUpAtTheCoresConnectTimeout(): void
    {
        // Never skipped: a test without its prerequisite fails (the project's scripts
        // install PHP with pcntl, on Linux).
        $this->assertTrue(FullAcceptQueue::canCount(), 'counts opening sockets in /proc/net/tcp (Linux)');
        $this->assertTrue(function_exists('pcntl_alarm'), 'looks at the sockets while the acquisition runs (pcntl)');
        $defaultMs = Native::get()->connectTimeoutDefaultMs();
        $this->assertSame(2000, $defaultMs);
        $node = $this->nodes[] = new FullAcceptQueue();
        $redlock = Redlock::create([$node->url()], new Options(ttlMs: 30_000, nodeTimeoutMs: 5_000, attempts: 1));
        $this->assertSame($defaultMs, $redlock->linkState()[0]['connect_timeout_ms'], "the core's, the driver has none");
        $this->assertSame(0, $node->synSent());

        // Halfway, while the acquisition waits: the socket is opening.
        $opening = null;
        $async = pcntl_async_signals(true);
        pcntl_signal(SIGALRM, static function () use (&$opening, $node): void {
            $opening = $node->synSent();
        });
        pcntl_alarm(1);
        $took = 0.0;
        $started = Clock::nowUs();
        try {
            $redlock->acquire('r');
            $this->fail('acquired on a node that never accepts');
        } catch (NodesFailedException $e) {
            $took = (Clock::nowUs() - $started) / 1000;
            $this->assertSame('timeout', $e->nodes[0]->cause, (string) $e->nodes[0]);
            $this->assertStringContainsString("timeout: no connection within $defaultMs ms; given up", (string) $e->nodes[0]->error);
        } finally {
            pcntl_alarm(0);
            pcntl_signal(SIGALRM, SIG_DFL);
            pcntl_async_signals($async);
        }
        $this->assertGreaterThanOrEqual(1990, $took);
        $this->assertLessThan(3500, $took);
        $this->assertSame(1, $opening, 'the socket was opening at 1 s');
        $this->assertSame(0, $node->synSent(), 'the socket given up is closed');
        $this->assertSame(['in_flight' => 0, 'queued' => 0, 'owed' => 0], array_slice($redlock->linkState()[0], 0, 3));
        $redlock->close();
    }

    /**
     * phpredis objects: each node's link gets its object's own connect timeout, the
     * core's for an object without one.
     */
    public function testEachPhpRedisNodesLinkGetsItsObjectsConnectTimeout(): void
    {
        $this->assertTrue(extension_loaded('redis'), 'needs phpredis (scripts/setup.sh installs it)');
        $objects = [];
        foreach ([0.75, 0.0, 1.2345] as $timeout) {
            $port = $this->listen();
            $redis = new \Redis();
            $this->assertTrue($redis->connect('127.0.0.1', $port, $timeout));
            $objects[] = $redis;
        }
        $redlock = Redlock::withPhpRedis($objects);
        $this->assertSame(
            [750, Native::get()->connectTimeoutDefaultMs(), 1235],
            array_column($redlock->linkState(), 'connect_timeout_ms'),
        );
        $redlock->close();
    }

    /**
     * Through Sentinels an attempt asks each Sentinel in turn (its query timeout each),
     * then opens the master: its link allows for all of it.
     */
    public function testASentinelMastersLinkAllowsForEverySentinelsQuery(): void
    {
        $sentinel = new Sentinel(['redis://127.0.0.1:1', 'redis://127.0.0.1:2', 'redis://127.0.0.1:3'], 'mymaster', queryTimeoutMs: 300);
        $expected = 3 * 300 + Native::get()->connectTimeoutDefaultMs();
        $this->assertSame($expected, $sentinel->attemptTimeoutMs(Native::get()->connectTimeoutDefaultMs()));
        $this->assertSame($expected, Redlock::sentinel($sentinel)->linkState()[0]['connect_timeout_ms']);
        if (extension_loaded('redis')) {
            $this->assertSame($expected, Redlock::withPhpRedisSentinel($sentinel)->linkState()[0]['connect_timeout_ms']);
        }
    }

    /**
     * One Sentinel's default bound and the composition are the core's (the same in every
     * binding): N * query + connect, saturating, and capped at what the link takes here.
     */
    public function testTheSentinelBoundsAreTheCores(): void
    {
        $native = Native::get();
        $this->assertSame(500, $native->sentinelQueryTimeoutDefaultMs());
        $this->assertSame(3000, $native->sentinelConnectTimeoutMs(2, 500, 2000));
        $this->assertSame(1000, $native->sentinelConnectTimeoutMs(1, 250, 750));
        $this->assertSame(2000, $native->sentinelConnectTimeoutMs(0, 500, 2000));
        $this->assertSame(PHP_INT_MAX, $native->sentinelConnectTimeoutMs(3, PHP_INT_MAX, 5), 'saturated past PHP_INT_MAX');
        try {
            $native->sentinelConnectTimeoutMs(1, -1, 0);
            $this->fail('a negative query timeout was accepted');
        } catch (InvalidArgumentException $e) {
            $this->assertStringContainsString('negative', $e->getMessage());
        }

        $sentinel = new Sentinel(['redis://127.0.0.1:1', 'redis://127.0.0.1:2'], 'mymaster');
        $this->assertSame($native->sentinelQueryTimeoutDefaultMs(), $sentinel->queryTimeoutMs, "the core's default");
        $this->assertSame(2 * 500 + 2000, $sentinel->attemptTimeoutMs($native->connectTimeoutDefaultMs()));
        $huge = new Sentinel(['redis://127.0.0.1:1', 'redis://127.0.0.1:2'], 'mymaster', queryTimeoutMs: PHP_INT_MAX);
        $this->assertSame(Link::CONNECT_TIMEOUT_MAX_MS, $huge->attemptTimeoutMs(2000), 'capped at the link\'s largest');
    }

    /** A plain listener (phpredis connects to it without a word): its port. */
    private function listen(): int
    {
        $server = stream_socket_server('tcp://127.0.0.1:0', $errno, $errstr);
        $this->assertNotFalse($server, "listen: $errstr ($errno)");
        $this->servers[] = $server;
        $name = (string) stream_socket_get_name($server, false);
        return (int) substr($name, strrpos($name, ':') + 1);
    }
}
