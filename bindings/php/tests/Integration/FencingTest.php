<?php

declare(strict_types=1);

namespace Redlock\Tests\Integration;

use PHPUnit\Framework\TestCase;
use Redlock\Clock;
use Redlock\Exception\FencedWriteException;
use Redlock\Exception\InvalidArgumentException;
use Redlock\FencedStore;
use Redlock\Ffi\Constants;
use Redlock\Ffi\Native;
use Redlock\Options;
use Redlock\Redlock;

/**
 * Fencing tokens against real nodes (ports 7550-7555: five lock nodes, and a sixth
 * server that holds the protected resource): tokens from both drivers, the resource-side
 * check (FencedStore) over both transports, the SQL pattern on SQLite, and a holder
 * paused past its lease (SIGSTOP) whose late write is refused.
 */
final class FencingTest extends TestCase
{
    private const BASE_PORT = 7550;
    private const RESOURCE_NODE = 5;

    /** @var list<string> */
    private static array $urls = [];
    private static string $resourceUrl = '';

    public static function setUpBeforeClass(): void
    {
        $urls = Nodes::start(self::BASE_PORT, 6);
        self::$resourceUrl = $urls[self::RESOURCE_NODE];
        self::$urls = array_slice($urls, 0, 5);
    }

    public static function tearDownAfterClass(): void
    {
        Nodes::stop(self::BASE_PORT);
    }

    protected function setUp(): void
    {
        for ($i = 0; $i < 6; $i++) {
            Nodes::redis(self::BASE_PORT, $i)->flushAll();
        }
    }

    /** @return iterable<string, array{string}> */
    public static function drivers(): iterable
    {
        yield 'stream' => ['stream'];
        yield 'phpredis' => ['phpredis'];
    }

    private static function redlock(string $driver, Options $options): Redlock
    {
        if ($driver === 'stream') {
            return Redlock::create(self::$urls, $options);
        }
        $nodes = [];
        for ($i = 0; $i < 5; $i++) {
            $nodes[] = Nodes::redis(self::BASE_PORT, $i);
        }
        return Redlock::withPhpRedis($nodes, $options);
    }

    private static function store(string $driver): FencedStore
    {
        return $driver === 'stream'
            ? FencedStore::create(self::$resourceUrl)
            : FencedStore::withPhpRedis(Nodes::redis(self::BASE_PORT, self::RESOURCE_NODE));
    }

    private static function resource(): \Redis
    {
        return Nodes::redis(self::BASE_PORT, self::RESOURCE_NODE);
    }

    /** @dataProvider drivers */
    public function testEveryAcquisitionGetsAHigherTokenAndUnfencedLocksHaveNone(string $driver): void
    {
        $redlock = self::redlock($driver, new Options(ttlMs: 5_000, nodeTimeoutMs: 200, fencing: true));
        $tokens = [];
        for ($i = 0; $i < 4; $i++) {
            $lock = $redlock->acquire('php-fence:order');
            $tokens[] = $lock->fencingToken();
            $lock->extend();
            $this->assertSame($tokens[$i], $lock->fencingToken(), 'an extension keeps the token');
            $lock->release();
        }
        $this->assertSame([1, 2, 3, 4], $tokens, 'fresh counters: one more per acquisition');
        $redlock->flush();
        // The counter lives next to the key, with no TTL, on the nodes (a node that was
        // slow to answer may have missed rounds: the core decides at the quorum).
        $counters = Nodes::values(self::BASE_PORT, '{php-fence:order}:fence');
        $this->assertGreaterThanOrEqual(3, count(array_keys($counters, '4', true)), json_encode($counters));
        for ($i = 0; $i < 5; $i++) {
            $this->assertLessThanOrEqual(4, (int) $counters[$i]);
            if ($counters[$i] !== false) {
                $this->assertSame(-1, Nodes::redis(self::BASE_PORT, $i)->pTTL('{php-fence:order}:fence'));
            }
        }
        // Counters that drifted apart (100 to 104): the token is the largest among the
        // nodes that granted (at least three of them), and the write-back raises a
        // quorum to it.
        for ($i = 0; $i < 5; $i++) {
            Nodes::redis(self::BASE_PORT, $i)->set('{php-fence:order}:fence', (string) (100 + $i));
        }
        $lock = $redlock->acquire('php-fence:order');
        $token = (int) $lock->fencingToken();
        $this->assertGreaterThanOrEqual(103, $token);
        $this->assertLessThanOrEqual(105, $token);
        $lock->release();
        $redlock->flush();
        $raised = array_filter(Nodes::values(self::BASE_PORT, '{php-fence:order}:fence'), static fn ($v): bool => (int) $v >= $token);
        $this->assertGreaterThanOrEqual(3, count($raised));
        $next = $redlock->acquire('php-fence:order');
        $this->assertGreaterThan($token, $next->fencingToken());
        $last = (int) $next->fencingToken();
        $next->release();

        $plain = self::redlock($driver, new Options(ttlMs: 5_000, nodeTimeoutMs: 200));
        $lock = $plain->acquire('php-fence:plain');
        $this->assertNull($lock->fencingToken());
        $this->assertNull($plain->lockFromToken('php-fence:plain', $lock->token())->fencingToken());
        $lock->release();

        // Per lock: fencing on for one acquisition of an unfenced client, off for one of
        // a fenced client.
        $lock = $plain->acquire('php-fence:order', keepAlive: true, fencing: true);
        $token = (int) $lock->fencingToken();
        $this->assertGreaterThan($last, $token);
        $lock->extend();
        $this->assertSame($token, $lock->fencingToken(), 'extended by the unfenced client, the token stays');
        $lock->release();
        $other = $redlock->acquire('php-fence:other', fencing: false);
        $this->assertNull($other->fencingToken());
        $this->assertNull($plain->tryAcquire('php-fence:other', fencing: true), 'a fenced acquisition respects an unfenced lock');
        $other->release();
    }

    /** @dataProvider drivers */
    public function testTheStoreAcceptsHigherTokensAndRefusesStaleAndEqualOnes(string $driver): void
    {
        $store = self::store($driver);
        $first = $store->set('php-fence:item', 'v7', 7);
        $this->assertTrue($first->accepted);
        $this->assertSame(7, $first->seen);
        $this->assertSame('v7', self::resource()->get('php-fence:item'));
        $this->assertSame('7', self::resource()->get(FencedStore::guardKey('php-fence:item')));
        $this->assertSame('{php-fence:item}:fence:accepted', FencedStore::guardKey('php-fence:item'));

        $stale = $store->set('php-fence:item', 'v5', 5);
        $this->assertFalse($stale->accepted);
        $this->assertTrue($stale->isStale());
        $this->assertSame(5, $stale->token);
        $this->assertSame(7, $stale->seen, 'the stale writer learns which token it lost to');

        $equal = $store->set('php-fence:item', 'v7 again', 7);
        $this->assertFalse($equal->accepted, 'one token writes once');
        $this->assertSame(7, $equal->seen);
        $this->assertSame('v7', self::resource()->get('php-fence:item'), 'refused writes changed nothing');

        $newer = $store->set('php-fence:item', 'v8', 8);
        $this->assertTrue($newer->accepted);
        $this->assertSame('v8', self::resource()->get('php-fence:item'));
        $this->assertSame('8', self::resource()->get(FencedStore::guardKey('php-fence:item')));
        $store->close();
    }

    /** @dataProvider drivers */
    public function testAServerWithoutTheScriptGetsItAsEvalAfterNoscript(string $driver): void
    {
        $store = self::store($driver);
        $this->assertTrue($store->set('php-fence:noscript', 'a', 1)->accepted);
        $sha = (string) Native::get()->ffi->redlock_script_sha1(Constants::SCRIPT_FENCED_SET);
        $this->assertSame([1], self::resource()->rawCommand('SCRIPT', 'EXISTS', $sha));
        self::resource()->rawCommand('SCRIPT', 'FLUSH');
        $this->assertSame([0], self::resource()->rawCommand('SCRIPT', 'EXISTS', $sha));
        $evals = self::evalCalls();

        $this->assertTrue($store->set('php-fence:noscript', 'b', 2)->accepted);
        $this->assertSame('b', self::resource()->get('php-fence:noscript'));
        $this->assertSame($evals + 1, self::evalCalls(), 'one EVAL after the NOSCRIPT');
        $this->assertSame([1], self::resource()->rawCommand('SCRIPT', 'EXISTS', $sha), 'EVAL cached it again');
        $stale = $store->set('php-fence:noscript', 'c', 1);
        $this->assertSame(2, $stale->seen);
        $this->assertSame($evals + 1, self::evalCalls(), 'EVALSHA again once cached');
    }

    /** @dataProvider drivers */
    public function testBadTokensAndErrorRepliesAreErrors(string $driver): void
    {
        $store = self::store($driver);
        foreach ([0, -1, Constants::MAX_FENCING_TOKEN + 1] as $token) {
            try {
                $store->set('php-fence:bad', 'x', $token);
                $this->fail("token $token accepted");
            } catch (InvalidArgumentException $e) {
                $this->assertSame('invalid_fencing_token', $e->codeName, (string) $token);
            }
        }
        try {
            $store->set('', 'x', 1);
            $this->fail('an empty item accepted');
        } catch (InvalidArgumentException $e) {
            $this->assertSame('empty_resource', $e->codeName);
        }
        $plain = self::redlock($driver, new Options(ttlMs: 5_000, nodeTimeoutMs: 200))->acquire('php-fence:unfenced');
        try {
            $store->set('php-fence:bad', 'x', $plain);
            $this->fail('a lock without a token accepted');
        } catch (InvalidArgumentException $e) {
            $this->assertSame('no_fencing_token', $e->codeName);
        }
        $plain->release();
        $this->assertTrue($store->set('php-fence:big', 'x', Constants::MAX_FENCING_TOKEN)->accepted, 'the largest token works');

        // The guard key holds something that is not a string: the server's error is the failure.
        self::resource()->rPush(FencedStore::guardKey('php-fence:wrongtype'), 'x');
        try {
            $store->set('php-fence:wrongtype', 'x', 3);
            $this->fail('a WRONGTYPE error counted as a write');
        } catch (FencedWriteException $e) {
            $this->assertStringContainsString('WRONGTYPE', $e->getMessage());
            $this->assertFalse($e->unknown, 'an error reply says the write did not happen');
        }
        $this->assertFalse(self::resource()->get('php-fence:bad'), 'nothing was written');
    }

    public function testARefusedServerIsAFailureThatNeverWrote(): void
    {
        // Port 7556: nothing listens there.
        $store = FencedStore::create('redis://127.0.0.1:7556', [], 200);
        try {
            $store->set('php-fence:down', 'x', 1);
            $this->fail('wrote to a closed port');
        } catch (FencedWriteException $e) {
            $this->assertStringContainsString('refused', $e->getMessage());
            $this->assertFalse($e->unknown);
        }
    }

    /** @dataProvider drivers */
    public function testTheSqlPatternRefusesTheStaleHolderWithRealTokens(string $driver): void
    {
        $db = new \PDO('sqlite::memory:', null, null, [\PDO::ATTR_ERRMODE => \PDO::ERRMODE_EXCEPTION]);
        $db->exec('CREATE TABLE items (id INTEGER PRIMARY KEY, value TEXT NOT NULL, fence INTEGER NOT NULL DEFAULT 0)');
        $db->exec("INSERT INTO items (id, value) VALUES (42, 'initial')");
        $update = $db->prepare('UPDATE items SET value = :value, fence = :token WHERE id = :id AND fence < :token');
        $write = static function (string $value, int $token) use ($update): int {
            $update->execute(['value' => $value, 'token' => $token, 'id' => 42]);
            return $update->rowCount();
        };

        $redlock = self::redlock($driver, new Options(ttlMs: 300, nodeTimeoutMs: 50, fencing: true, attempts: 1));
        $a = $redlock->acquire('php-fence:sql');
        $tokenA = (int) $a->fencingToken();
        // A stalls past its lease; B takes the lock and writes.
        usleep(350_000);
        $this->assertFalse($a->isValid());
        $b = $redlock->acquire('php-fence:sql');
        $tokenB = (int) $b->fencingToken();
        $this->assertGreaterThan($tokenA, $tokenB);
        $this->assertSame(1, $write('from B', $tokenB));
        // A wakes up and writes with its old token: no row changes.
        $this->assertSame(0, $write('from A', $tokenA), 'the stale holder is refused');
        $this->assertSame(0, $write('from B twice', $tokenB), 'one token writes once');
        $row = $db->query('SELECT value, fence FROM items WHERE id = 42')->fetch(\PDO::FETCH_ASSOC);
        $this->assertSame(['value' => 'from B', 'fence' => $tokenB], $row);
        $b->release();
    }

    /** @dataProvider drivers */
    public function testAHolderPausedPastItsLeaseHasItsLateWriteRefused(string $driver): void
    {
        $child = self::spawnHolder($driver);
        [$process, $stdout, $stderr] = $child;
        $line = self::readLine($stdout, 10_000_000);
        $first = json_decode($line, true);
        // The holder checked its lock and is about to write: freeze it there (a GC pause,
        // a stopped VM).
        proc_terminate($process, defined('SIGSTOP') ? SIGSTOP : 19);
        if (!is_array($first)) {
            proc_terminate($process, defined('SIGCONT') ? SIGCONT : 18);
            $this->fail("the holder said: $line " . stream_get_contents($stderr));
        }
        $tokenA = $first['fencing_token'];
        $this->assertIsInt($tokenA);
        try {
            usleep(1_300_000); // past its 1 s lease
            $options = new Options(ttlMs: 5_000, nodeTimeoutMs: 200, fencing: true, attempts: 5, retryDelayMs: 50, retryJitterMs: 10);
            $redlock = self::redlock($driver, $options);
            $b = $redlock->acquire('php-fence:paused');
            $tokenB = (int) $b->fencingToken();
            $this->assertGreaterThan($tokenA, $tokenB);
            $this->assertTrue(self::store($driver)->set('php-fence:paused:item', 'from B', $b)->accepted);
        } finally {
            proc_terminate($process, defined('SIGCONT') ? SIGCONT : 18);
        }
        $late = json_decode(self::readLine($stdout, 5_000_000), true);
        $errors = stream_get_contents($stderr);
        fclose($stdout);
        fclose($stderr);
        $this->assertSame(0, proc_close($process), (string) $errors);
        $this->assertIsArray($late, (string) $errors);
        $this->assertTrue($late['checked_valid'], 'the holder believed it held the lock when it paused');
        $this->assertFalse($late['accepted'], 'the late write was refused');
        $this->assertSame($tokenB, $late['seen']);
        $this->assertSame('from B', self::resource()->get('php-fence:paused:item'));
        $b->release();
    }

    /** @return array{resource, resource, resource} the process, its stdout and its stderr */
    private static function spawnHolder(string $driver): array
    {
        $autoload = var_export(dirname(__DIR__, 2) . '/vendor/autoload.php', true);
        $redlock = $driver === 'stream'
            ? sprintf('Redlock\Redlock::create(%s, $options)', var_export(self::$urls, true))
            : sprintf(
                'Redlock\Redlock::withPhpRedis(array_map(function ($p) { $x = new Redis(); $x->connect("127.0.0.1", $p, 1.0); return $x; }, %s), '
                    . '$options)',
                var_export(range(self::BASE_PORT, self::BASE_PORT + 4), true),
            );
        $store = $driver === 'stream'
            ? sprintf('Redlock\FencedStore::create(%s)', var_export(self::$resourceUrl, true))
            : sprintf(
                'Redlock\FencedStore::withPhpRedis((function () { $x = new Redis(); $x->connect("127.0.0.1", %d, 1.0); return $x; })())',
                self::BASE_PORT + self::RESOURCE_NODE,
            );
        $script = <<<PHP
            <?php
            require $autoload;
            \$options = new Redlock\Options(ttlMs: 1000, nodeTimeoutMs: 100, fencing: true, attempts: 1);
            \$redlock = $redlock;
            \$store = $store;
            \$lock = \$redlock->acquire('php-fence:paused');
            \$valid = \$lock->isValid();
            echo json_encode(['fencing_token' => \$lock->fencingToken()]), "\\n";
            usleep(300_000); // paused here by the test, after checking the lock
            \$write = \$store->set('php-fence:paused:item', 'from A', \$lock);
            echo json_encode(['checked_valid' => \$valid, 'accepted' => \$write->accepted, 'seen' => \$write->seen]), "\\n";
            PHP;
        $process = proc_open([PHP_BINARY], [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
        if (!is_resource($process)) {
            throw new \RuntimeException('could not start the holder process');
        }
        fwrite($pipes[0], $script);
        fclose($pipes[0]);
        return [$process, $pipes[1], $pipes[2]];
    }

    /** @param resource $stream */
    private static function readLine($stream, int $timeoutUs): string
    {
        $deadline = Clock::nowUs() + $timeoutUs;
        $read = [$stream];
        $none = null;
        while (Clock::nowUs() < $deadline) {
            $read = [$stream];
            if (@stream_select($read, $none, $none, 0, 100_000) > 0) {
                return (string) fgets($stream);
            }
        }
        return '';
    }

    private static function evalCalls(): int
    {
        $stats = self::resource()->info('commandstats');
        $line = (string) ($stats['cmdstat_eval'] ?? 'calls=0');
        return preg_match('/calls=(\d+)/', $line, $m) === 1 ? (int) $m[1] : 0;
    }
}
