<?php

declare(strict_types=1);

namespace Redlock\Tests\Integration;

use PHPUnit\Framework\TestCase;
use Redlock\Exception\InvalidArgumentException;
use Redlock\Exception\LockHeldException;
use Redlock\Exception\NodesFailedException;
use Redlock\Ffi\Native;
use Redlock\Options;
use Redlock\Redlock;
use Redlock\Sentinel;
use Redlock\Symfony\RedlockStore;
use Symfony\Component\Lock\LockFactory;

/**
 * Single-instance mode through Redis Sentinel, on both transports: a master and its
 * replica from scripts/redis-nodes.sh (ports 7535-7536), a real `redis-server
 * --sentinel` monitoring the master (port 7537, started here); nothing listens on 7538.
 * 7540 and 7541 are hanging Sentinels: listening sockets of this test that never accept
 * (the kernel completes the handshake) and never answer.
 */
final class SentinelTest extends TestCase
{
    private const BASE_PORT = 7535;
    private const SENTINEL_PORT = 7537;
    private const NOBODY = 'redis://127.0.0.1:7538';
    private const SENTINEL = 'redis://127.0.0.1:7537';
    private const HANGING = ['redis://127.0.0.1:7540', 'redis://127.0.0.1:7541'];

    /** @var list<resource> the hanging Sentinels' listening sockets */
    private static array $hanging = [];

    /** @var resource|null the Sentinel's process */
    private static $process = null;

    public static function setUpBeforeClass(): void
    {
        Nodes::start(self::BASE_PORT, 2);
        // Node 1 replicates node 0, so the Sentinel has a replica to fail over to.
        $replica = Nodes::redis(self::BASE_PORT, 1);
        $replica->slaveof('127.0.0.1', self::BASE_PORT);
        self::eventually(10.0, static fn (): bool => self::replication($replica, 'master_link_status:up'), 'the replica did not sync');
        self::startSentinel();
        foreach (self::HANGING as $url) {
            $server = stream_socket_server(str_replace('redis://', 'tcp://', $url), $errno, $errstr);
            self::assertNotFalse($server, "listen on $url: $errstr ($errno)");
            self::$hanging[] = $server;
        }
    }

    public static function tearDownAfterClass(): void
    {
        foreach (self::$hanging as $server) {
            fclose($server);
        }
        self::$hanging = [];
        if (self::$process !== null) {
            proc_terminate(self::$process, 9);
            proc_close(self::$process);
            self::$process = null;
        }
        Nodes::stop(self::BASE_PORT);
    }

    /** @return array<string, array{string}> */
    public static function transports(): array
    {
        return ['stream' => ['stream'], 'phpredis' => ['phpredis']];
    }

    /** @dataProvider transports */
    public function testLocksOnTheMasterTheSentinelNames(string $transport): void
    {
        $redlock = self::redlock($transport, new Sentinel([self::SENTINEL], 'mymaster'));
        $this->assertSame(['sentinel master mymaster'], $redlock->nodes());
        $master = self::master();
        $lock = $redlock->acquire("sentinel:$transport");
        $this->assertSame($lock->token(), self::valueOn($master, "sentinel:$transport"), 'written on the master the Sentinel named');
        $this->assertTrue($redlock->isLocked("sentinel:$transport"));

        $other = self::redlock($transport, new Sentinel([self::SENTINEL], 'mymaster'));
        try {
            $other->acquire("sentinel:$transport");
            $this->fail('a second client acquired a held lock');
        } catch (LockHeldException $e) {
            $this->assertSame('conflict', $e->reason);
        }
        $this->assertSame(1, $lock->release());
        $this->assertFalse(self::valueOn($master, "sentinel:$transport"));
        $other->close();
        $redlock->close();
    }

    /** @dataProvider transports */
    public function testTheSentinelsAreAskedInTurn(string $transport): void
    {
        // The first Sentinel is not reachable; the second names the master.
        $redlock = self::redlock($transport, new Sentinel([self::NOBODY, self::SENTINEL], 'mymaster', queryTimeoutMs: 200));
        $lock = $redlock->acquire("sentinel:turn:$transport");
        $this->assertSame($lock->token(), self::valueOn(self::master(), "sentinel:turn:$transport"));
        $lock->release();
        $redlock->close();
    }

    /** @return array<string, array{string, int}> */
    public static function hangingCases(): array
    {
        $cases = [];
        foreach (['stream', 'phpredis'] as $transport) {
            foreach ([1, 2] as $count) {
                $cases["$transport, $count hanging"] = [$transport, $count];
            }
        }
        return $cases;
    }

    /**
     * Hanging Sentinels in front of the working one: each is given the core's default
     * bound (500 ms) and skipped, and the link's connect timeout (the core's composition)
     * leaves time for all of them: the lock is taken on the first connection, in time.
     *
     * @dataProvider hangingCases
     */
    public function testHangingSentinelsAreSkippedAtTheCoresBound(string $transport, int $count): void
    {
        $native = Native::get();
        $started = microtime(true);
        $sentinel = new Sentinel([...array_slice(self::HANGING, 0, $count), self::SENTINEL], 'mymaster');
        $this->assertSame($native->sentinelQueryTimeoutDefaultMs(), $sentinel->queryTimeoutMs);
        // One attempt, and a node timeout longer than the lookup: the first connection
        // takes the lock or nothing does.
        $options = new Options(ttlMs: 30_000, nodeTimeoutMs: 5_000, attempts: 1);
        $redlock = $transport === 'stream' ? Redlock::sentinel($sentinel, $options) : Redlock::withPhpRedisSentinel($sentinel, $options);
        $this->assertSame(
            $native->sentinelConnectTimeoutMs($count + 1, 500, $native->connectTimeoutDefaultMs()),
            $redlock->linkState()[0]['connect_timeout_ms'],
        );
        $key = "sentinel:hanging:$transport:$count";
        $lock = $redlock->acquire($key);
        $elapsed = microtime(true) - $started;
        $this->assertSame($lock->token(), self::valueOn(self::master(), $key));
        $lock->release();
        $redlock->close();
        // Each hanging Sentinel was waited for (its whole bound), and no longer: under
        // 2 s for one, 2.5 s for two.
        $this->assertGreaterThanOrEqual($count * 0.5 - 0.05, $elapsed);
        $this->assertLessThan($count === 1 ? 2.0 : 2.5, $elapsed);
    }

    /** @dataProvider transports */
    public function testNoReachableSentinelIsANodeFailure(string $transport): void
    {
        $error = $this->failure(self::redlock($transport, new Sentinel([self::NOBODY], 'mymaster', queryTimeoutMs: 200)));
        $text = (string) $error->nodes[0]->error;
        $this->assertStringContainsString("no Sentinel named the master of 'mymaster'", $text);
        $this->assertStringContainsString('127.0.0.1:7538', $text);
        if ($transport === 'stream') {
            // phpredis' RedisSentinel says "went away" for a refused connection too.
            $this->assertSame('refused', $error->nodes[0]->cause, (string) $error->nodes[0]);
        }
    }

    /** @dataProvider transports */
    public function testAnUnknownServiceIsANodeFailure(string $transport): void
    {
        $error = $this->failure(self::redlock($transport, new Sentinel([self::SENTINEL], 'nosuchmaster')));
        $this->assertStringContainsString(
            "redis://127.0.0.1:7537: no master named 'nosuchmaster'",
            (string) $error->nodes[0]->error,
        );
    }

    public function testBadSettingsAreRefused(): void
    {
        $cases = [
            'no Sentinels' => static fn () => new Sentinel([], 'mymaster'),
            'an empty service' => static fn () => new Sentinel([self::SENTINEL], ''),
            'not a URL' => static fn () => new Sentinel(['127.0.0.1:7537'], 'mymaster'),
            'a query timeout of 0' => static fn () => new Sentinel([self::SENTINEL], 'mymaster', queryTimeoutMs: 0),
            'TLS over phpredis' => static fn () => Redlock::withPhpRedisSentinel(new Sentinel([self::SENTINEL], 'mymaster', tls: true)),
        ];
        foreach ($cases as $case => $make) {
            try {
                $make();
                $this->fail("accepted $case");
            } catch (InvalidArgumentException $e) {
                $this->assertNotSame('', $e->getMessage(), $case);
            }
        }
    }

    public function testSymfonyLockThroughTheSentinel(): void
    {
        $autoload = '/usr/share/php/Symfony/Component/Lock/autoload.php';
        $this->assertFileExists($autoload, 'php-symfony-lock is not installed');
        require_once $autoload;
        $factory = new LockFactory(new RedlockStore(Redlock::sentinel(new Sentinel([self::SENTINEL], 'mymaster'))));
        $lock = $factory->createLock('sentinel:symfony', 30.0);
        $this->assertTrue($lock->acquire());
        $this->assertIsString(self::valueOn(self::master(), 'sentinel:symfony'));
        $lock->release();
        $this->assertFalse(self::valueOn(self::master(), 'sentinel:symfony'));
    }

    public function testTheReadmeSample(): void
    {
        $readme = (string) file_get_contents(dirname(__DIR__, 2) . '/README.md');
        $example = dirname(__DIR__, 2) . '/examples/sentinel.php';
        $marker = '/<!-- sample: bindings\/php\/examples\/sentinel.php -->\n```php\n(.*?)\n```/s';
        $this->assertSame(1, preg_match($marker, $readme, $match), 'the README has no Sentinel sample');
        $code = (string) file_get_contents($example);
        $this->assertStringContainsString($match[1] . "\n", $code, 'the README sample is not in examples/sentinel.php');
        $command = 'REDLOCK_SENTINELS=' . escapeshellarg(self::NOBODY . ',' . self::SENTINEL) . ' '
            . escapeshellarg(PHP_BINARY) . ' ' . escapeshellarg($example) . ' mymaster 2>&1';
        exec($command, $output, $status);
        $this->assertSame(0, $status, implode("\n", $output));
        $this->assertSame(['locked orders:42 on the master'], $output);
    }

    /**
     * Last (it moves the master): after `SENTINEL FAILOVER` and the old master's end, the
     * next lock of a client made before it goes to the new master.
     *
     * @depends testLocksOnTheMasterTheSentinelNames
     */
    public function testAFailoverIsFollowedAtTheNextConnection(): void
    {
        $clients = [
            'stream' => self::redlock('stream', new Sentinel([self::SENTINEL], 'mymaster'), 3),
            'phpredis' => self::redlock('phpredis', new Sentinel([self::SENTINEL], 'mymaster'), 3),
        ];
        foreach ($clients as $transport => $redlock) {
            $redlock->acquire("sentinel:before:$transport")->release();
        }
        $sentinel = new \Redis();
        $sentinel->connect('127.0.0.1', self::SENTINEL_PORT, 2.0);
        $newPort = (string) (self::BASE_PORT + 1);
        self::eventually(20.0, static function () use ($sentinel): bool {
            // Refused (NOGOODSLAVE) until the Sentinel has seen the replica.
            return $sentinel->rawCommand('SENTINEL', 'FAILOVER', 'mymaster') === true;
        }, 'the Sentinel did not start a failover');
        self::eventually(20.0, static function () use ($sentinel, $newPort): bool {
            $address = $sentinel->rawCommand('SENTINEL', 'get-master-addr-by-name', 'mymaster');
            return is_array($address) && $address[1] === $newPort;
        }, 'the Sentinel did not name the replica');
        $promoted = Nodes::redis(self::BASE_PORT, 1);
        self::eventually(20.0, static fn (): bool => self::replication($promoted, 'role:master'), 'the replica was not promoted');
        // The old master goes away (Sentinel would demote it at its next INFO, ten seconds
        // on, closing its clients' connections then): the clients' connections close.
        Nodes::kill(self::BASE_PORT, 0);
        foreach ($clients as $transport => $redlock) {
            // The reconnection asks the Sentinel again.
            $lock = $redlock->acquire("sentinel:after:$transport");
            $this->assertSame($lock->token(), $promoted->get("sentinel:after:$transport"), "$transport: the lock is on the new master");
            $lock->release();
            $redlock->close();
        }
    }

    private static function redlock(string $transport, Sentinel $sentinel, int $attempts = 1): Redlock
    {
        $options = new Options(attempts: $attempts, nodeTimeoutMs: 300, retryDelayMs: 200);
        return $transport === 'stream'
            ? Redlock::sentinel($sentinel, $options)
            : Redlock::withPhpRedisSentinel($sentinel, $options);
    }

    private function failure(Redlock $redlock): NodesFailedException
    {
        try {
            $redlock->acquire('sentinel:none');
        } catch (NodesFailedException $e) {
            $this->assertCount(1, $e->nodes);
            $this->assertStringStartsWith('sentinel master ', $e->nodes[0]->label);
            return $e;
        } finally {
            $redlock->close();
        }
        $this->fail('acquired without a master');
    }

    /** The master the Sentinel names now. */
    private static function master(): \Redis
    {
        $sentinel = new \Redis();
        $sentinel->connect('127.0.0.1', self::SENTINEL_PORT, 2.0);
        $address = $sentinel->rawCommand('SENTINEL', 'get-master-addr-by-name', 'mymaster');
        self::assertIsArray($address);
        $master = new \Redis();
        $master->connect($address[0], (int) $address[1], 2.0);
        return $master;
    }

    private static function valueOn(\Redis $redis, string $key): string|false
    {
        return $redis->get($key);
    }

    private static function startSentinel(): void
    {
        $dir = Nodes::repo() . '/.runtime/sentinel-' . self::SENTINEL_PORT;
        if (!is_dir($dir)) {
            mkdir($dir, 0o777, true);
        }
        $conf = "$dir/sentinel.conf";
        file_put_contents($conf, sprintf(
            "port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor mymaster 127.0.0.1 %d 1\n",
            self::SENTINEL_PORT,
            $dir,
            self::BASE_PORT,
        ));
        $output = ['file', "$dir/log", 'a'];
        $process = proc_open(['redis-server', $conf, '--sentinel'], [['file', '/dev/null', 'r'], $output, $output], $unused);
        unset($unused);
        self::assertIsResource($process, 'redis-server --sentinel did not start');
        self::$process = $process;
        $expected = ['127.0.0.1', (string) self::BASE_PORT];
        self::eventually(10.0, static function () use ($expected): bool {
            try {
                $sentinel = new \Redis();
                $sentinel->connect('127.0.0.1', self::SENTINEL_PORT, 0.2);
                return $sentinel->rawCommand('SENTINEL', 'get-master-addr-by-name', 'mymaster') === $expected;
            } catch (\RedisException) {
                return false;
            }
        }, 'the Sentinel did not name the master');
    }

    private static function replication(\Redis $redis, string $line): bool
    {
        return str_contains((string) $redis->rawCommand('INFO', 'replication'), $line);
    }

    private static function eventually(float $seconds, callable $check, string $message): void
    {
        $until = microtime(true) + $seconds;
        while (!$check()) {
            self::assertLessThan($until, microtime(true), $message);
            usleep(50_000);
        }
    }
}
