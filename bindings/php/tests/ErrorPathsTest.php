<?php

declare(strict_types=1);

namespace Redlock\Tests;

use PHPUnit\Framework\TestCase;
use Redlock\Driver\PhpRedisDriver;
use Redlock\Driver\StreamDriver;
use Redlock\Exception\ConfigurationException;
use Redlock\Exception\CoreException;
use Redlock\Exception\InvalidArgumentException;
use Redlock\Exception\UsedAfterCloseException;
use Redlock\Exception\RedlockException;
use Redlock\Ffi\Client;
use Redlock\Ffi\Config;
use Redlock\Ffi\Constants;
use Redlock\Ffi\Native;
use Redlock\Options;
use Redlock\Redlock;

/**
 * Every refusal is a clear exception: bad settings and arguments (the core's rules,
 * named by the core), FFI disabled or missing, the library or header missing.
 */
final class ErrorPathsTest extends TestCase
{
    /** Nodes nobody listens on: nothing here reaches the network. */
    private const URLS = ['redis://127.0.0.1:1', 'redis://127.0.0.1:2', 'redis://127.0.0.1:3'];

    /** @return iterable<string, array{Options, string}> */
    public static function badOptions(): iterable
    {
        yield 'ttl zero' => [new Options(ttlMs: 0), 'ttl_zero'];
        yield 'attempts zero' => [new Options(attempts: 0), 'attempts_zero'];
        yield 'node timeout as long as the ttl' => [new Options(ttlMs: 100, nodeTimeoutMs: 100), 'node_timeout_too_large'];
        yield 'drift factor one' => [new Options(driftFactor: 1.0), 'drift_factor_invalid'];
        yield 'jitter above the delay' => [new Options(retryDelayMs: 10, retryJitterMs: 11), 'jitter_too_large'];
        yield 'short tokens' => [new Options(tokenBytes: 8), 'token_too_short'];
        yield 'ttl beyond redis' => [new Options(ttlMs: PHP_INT_MAX), 'ttl_too_large'];
    }

    /** @dataProvider badOptions */
    public function testTheCoreNamesTheRuleABadConfigurationBreaks(Options $options, string $code): void
    {
        try {
            Redlock::create(self::URLS, $options);
            $this->fail("accepted, expected $code");
        } catch (ConfigurationException $e) {
            $this->assertSame($code, $e->codeName);
            $this->assertMatchesRegularExpression('/\\(' . $code . '[):]/', $e->getMessage(), 'names the rule');
            $this->assertInstanceOf(RedlockException::class, $e);
            $this->assertInstanceOf(\InvalidArgumentException::class, $e);
        }
    }

    public function testNegativeDurationsAreRefusedBeforeTheCore(): void
    {
        $this->expectException(InvalidArgumentException::class);
        Redlock::create(self::URLS, new Options(nodeTimeoutMs: -1));
    }

    /** @return iterable<string, array{list<string>}> */
    public static function badUrls(): iterable
    {
        yield 'no nodes' => [[]];
        yield 'http' => [['http://127.0.0.1:6379']];
        yield 'no host' => [['redis://']];
        yield 'database not a number' => [['redis://127.0.0.1:6379/x']];
        yield 'not a url' => [['127.0.0.1']];
    }

    /**
     * @dataProvider badUrls
     * @param list<string> $urls
     */
    public function testBadNodeUrls(array $urls): void
    {
        $this->expectException(InvalidArgumentException::class);
        new StreamDriver($urls);
    }

    /** @return iterable<string, array{string|list<string>, ?int, string, 3?: ?int}> */
    public static function badAcquisitions(): iterable
    {
        yield 'empty resource' => ['', null, 'empty_resource'];
        yield 'no resources' => [[], null, 'no_resources'];
        yield 'duplicate resource' => [['a', 'a'], null, 'duplicate_resource'];
        yield 'too many resources' => [array_map('strval', range(1, 65)), null, 'too_many_resources'];
        yield 'ttl zero for one lock' => ['a', 0, 'invalid_ttl'];
        yield 'negative ttl' => ['a', -5, 'invalid_ttl'];
        yield 'negative wait' => ['a', null, 'invalid_argument', -1];
        yield 'ttl zero while waiting' => ['a', 0, 'invalid_ttl', 100];
        yield 'empty resource while waiting' => ['', null, 'empty_resource', 100];
        yield 'duplicate resource while waiting' => [['a', 'a'], null, 'duplicate_resource', 100];
    }

    /**
     * @dataProvider badAcquisitions
     * @param string|list<string> $resources
     */
    public function testBadAcquisitionsAreRefusedWithTheCoresName(string|array $resources, ?int $ttlMs, string $code, ?int $waitMs = null): void
    {
        $redlock = Redlock::create(self::URLS);
        try {
            $redlock->acquire($resources, $ttlMs, waitMs: $waitMs);
            $this->fail("accepted, expected $code");
        } catch (InvalidArgumentException $e) {
            $this->assertSame($code, $e->codeName, $e->getMessage());
        }
    }

    /** @return iterable<string, array{Options, int, string, string}> */
    public static function badTtls(): iterable
    {
        $defaults = new Options();
        yield 'zero' => [$defaults, 0, 'ttl_zero', 'ttlMs must be between 3 and 1000000000000 ms'];
        yield 'negative' => [$defaults, -1, 'ttl_zero', 'got -1'];
        yield 'huge' => [$defaults, PHP_INT_MAX, 'ttl_too_large', 'got ' . PHP_INT_MAX];
        yield 'beyond redis' => [$defaults, 10 ** 13, 'ttl_too_large', 'and 1000000000000 ms'];
        yield 'eaten by the drift' => [$defaults, 2, 'drift_too_large', 'got 2'];
        // At most a third of the TTL: with a 200 ms node timeout the smallest TTL is 600 ms.
        yield 'below the node timeout' => [new Options(nodeTimeoutMs: 200), 500, 'node_timeout_too_large', 'between 600 and'];
    }

    /**
     * A refused TTL (per lock, per extension, while waiting) names the range this
     * client's settings allow, what it got and the core's rule, never an internal
     * function of the library.
     *
     * @dataProvider badTtls
     */
    public function testABadTtlNamesTheRuleAndTheAllowedRange(Options $options, int $ttlMs, string $rule, string $detail): void
    {
        $redlock = Redlock::create(self::URLS, $options);
        $calls = [
            'acquire' => fn () => $redlock->acquire('a', $ttlMs),
            'acquire while waiting' => fn () => $redlock->acquire('a', $ttlMs, waitMs: 100),
            // A lock rebuilt from a token: extend() checks the TTL before any I/O.
            'extend' => fn () => $redlock->lockFromToken('a', 'token')->extend($ttlMs),
        ];
        foreach ($calls as $what => $call) {
            try {
                $call();
                $this->fail("$what accepted a TTL of $ttlMs ms");
            } catch (InvalidArgumentException $e) {
                $message = $e->getMessage();
                $this->assertSame('invalid_ttl', $e->codeName, "$what: $message");
                $this->assertStringContainsString('ttlMs must be between ', $message, $what);
                $this->assertStringContainsString("got $ttlMs", $message, $what);
                $this->assertStringContainsString($detail, $message, $what);
                $this->assertStringContainsString("($rule: ", $message, $what);
                $this->assertDoesNotMatchRegularExpression('/redlock_[a-z_]+/', $message, "$what names an internal function");
            }
        }
    }

    public function testANegativeConfiguredTtlNamesTheRule(): void
    {
        try {
            Redlock::create(self::URLS, new Options(ttlMs: -1));
            $this->fail('a negative TTL was accepted');
        } catch (ConfigurationException $e) {
            $this->assertSame('ttl_zero', $e->codeName);
            $this->assertStringContainsString('ttlMs must be between 1 and 1000000000000 ms, got -1', $e->getMessage());
        }
        foreach ([0 => 'ttl_zero', PHP_INT_MAX => 'ttl_too_large'] as $ttl => $rule) {
            try {
                Redlock::create(self::URLS, new Options(ttlMs: $ttl));
                $this->fail("a TTL of $ttl ms was accepted");
            } catch (ConfigurationException $e) {
                $this->assertSame($rule, $e->codeName);
                $this->assertStringContainsString("ttlMs must be between 1 and 1000000000000 ms, got $ttl ($rule: ", $e->getMessage());
            }
        }
    }

    /** @return iterable<string, array{string, string}> */
    public static function absurdPorts(): iterable
    {
        yield 'past 65535' => ['redis://127.0.0.1:99999', 'got 99999'];
        yield 'zero' => ['redis://127.0.0.1:0', 'got 0'];
        yield 'past 64 bits' => ['redis://127.0.0.1:' . str_repeat('9', 30), 'got 999'];
        yield 'with a password' => ['redis://user:secret@127.0.0.1:70000/0', 'got 70000'];
    }

    /** @dataProvider absurdPorts */
    public function testAnAbsurdPortNamesTheRange(string $url, string $got): void
    {
        try {
            new StreamDriver([$url]);
            $this->fail("accepted $url");
        } catch (InvalidArgumentException $e) {
            $this->assertSame('invalid_port', $e->codeName);
            $this->assertStringContainsString("a node's port must be between 1 and 65535, $got", $e->getMessage());
            $this->assertStringNotContainsString('secret', $e->getMessage(), 'a password in a message');
        }
    }

    /** NaN and infinities where a float is accepted are refused with the rule's range. */
    public function testNanAndInfiniteDriftFactorsNameTheRule(): void
    {
        foreach ([NAN, INF, -INF] as $factor) {
            try {
                Redlock::create(self::URLS, new Options(driftFactor: $factor));
                $this->fail("accepted a drift factor of $factor");
            } catch (ConfigurationException $e) {
                $this->assertSame('drift_factor_invalid', $e->codeName);
                $this->assertStringContainsString('[0, 1)', $e->getMessage());
            }
        }
    }

    /**
     * A 1 MB resource name in a message is cut to 64 bytes and "…" (the nodes refuse
     * connections here, so the acquisition fails with NodesFailedException naming it);
     * the exception keeps the whole name in `resources`.
     */
    public function testAHugeResourceNameIsCutInMessages(): void
    {
        $name = str_repeat('r', 1 << 20);
        $redlock = Redlock::create(self::URLS, new Options(attempts: 1));
        try {
            $redlock->acquire($name);
            $this->fail('acquired with no node listening');
        } catch (\Redlock\Exception\NodesFailedException $e) {
            $this->assertSame([$name], $e->resources);
            $this->assertLessThan(2_000, strlen($e->getMessage()));
            $this->assertStringContainsString(str_repeat('r', 64) . '… (1048576 bytes)', $e->getMessage());
        }
        try {
            $redlock->acquire([$name, $name]);
            $this->fail('accepted the same resource twice');
        } catch (InvalidArgumentException $e) {
            $this->assertSame('duplicate_resource', $e->codeName);
            $this->assertLessThan(2_000, strlen($e->getMessage()));
        }
    }

    public function testATokenThatIsNotPrintableIsRefused(): void
    {
        $redlock = Redlock::create(self::URLS);
        try {
            $redlock->lockFromToken('a', 'two words');
            $this->fail('a token with a space was accepted');
        } catch (InvalidArgumentException $e) {
            $this->assertSame('invalid_token', $e->codeName);
        }
    }

    public function testAClosedRedlockRefusesWork(): void
    {
        $redlock = Redlock::create(self::URLS);
        $redlock->close();
        $redlock->close();
        try {
            $redlock->acquire('a');
            $this->fail('a closed client acquired');
        } catch (UsedAfterCloseException $e) {
            $this->assertSame('used_after_close', $e->codeName);
        }
    }

    public function testPhpRedisDriverTakesOnlyRedisObjects(): void
    {
        $this->expectException(InvalidArgumentException::class);
        $this->expectExceptionMessage('node 1 is not a \Redis object but stdClass');
        new PhpRedisDriver([new \Redis(), new \stdClass()]);
    }

    /** @return iterable<string, array{list<string>, array<string, string>, string, string}> */
    public static function unusableEnvironments(): iterable
    {
        $package = dirname(__DIR__);
        yield 'ffi.enable=0' => [['-d', 'ffi.enable=0'], [], 'FfiUnavailableException', 'ffi.enable is off'];
        yield 'no FFI extension (php -n)' => [['-n'], [], 'FfiUnavailableException', 'the FFI extension is not loaded'];
        yield 'library missing' => [
            [],
            ['REDLOCK_LIBRARY' => '/nonexistent/libredlock.so'],
            'LibraryNotFoundException',
            'libredlock not found at /nonexistent/libredlock.so',
        ];
        yield 'not a library' => [[], ['REDLOCK_LIBRARY' => "$package/composer.json"], 'LibraryNotFoundException', 'could not load'];
        yield 'header missing' => [[], ['REDLOCK_HEADER' => '/nonexistent/redlock_php.h'], 'LibraryNotFoundException', 'redlock_php.h was not found'];
    }

    /**
     * @dataProvider unusableEnvironments
     * @param list<string> $phpArgs
     * @param array<string, string> $env
     */
    public function testUnusableEnvironmentsGiveClearExceptions(array $phpArgs, array $env, string $class, string $message): void
    {
        $probe = dirname(__DIR__) . '/tests/fixtures/probe.php';
        $process = proc_open(
            array_merge([PHP_BINARY], $phpArgs, [$probe]),
            [1 => ['pipe', 'w'], 2 => ['pipe', 'w']],
            $pipes,
            null,
            $env + ['PATH' => (string) getenv('PATH')],
        );
        $stdout = (string) stream_get_contents($pipes[1]);
        $stderr = (string) stream_get_contents($pipes[2]);
        $this->assertSame(0, proc_close($process), $stderr);
        $result = json_decode(trim($stdout), true, 512, JSON_THROW_ON_ERROR);
        $this->assertSame("Redlock\\Exception\\$class", $result['error'] ?? null, $stdout);
        $this->assertStringContainsString($message, $result['message']);
    }

    /**
     * A notice from a node the acquisition does not have is refused by name, with or
     * without a message; messages of any bytes (empty, binary, long) are accepted.
     */
    public function testNoticesFromUnknownNodesAreRefusedAndAnyMessageIsAccepted(): void
    {
        $native = Native::get();
        $config = Config::build($native, 3, 10_000, []);
        $client = Client::create($config, str_repeat("\0", 32));
        $op = $client->acquireWaitingWithRandom(['r'], 1_000_000, str_repeat("\1", 20), 0);
        foreach ([-1, 3, 255] as $node) {
            foreach ([null, 'someone'] as $message) {
                try {
                    $message === null ? $op->handleNotice($node, 0) : $op->handleNoticeMessage($node, $message, 0);
                    $this->fail("a notice from node $node was accepted");
                } catch (InvalidArgumentException | CoreException $e) {
                    $this->assertSame('unknown_node', $e->codeName);
                }
            }
        }
        foreach (['', "\0\xff\r\n", str_repeat('x', 100_000)] as $message) {
            $op->handleNoticeMessage(2, $message, 0);
        }
        $this->assertSame(Constants::OUTPUT_SEND, $op->poll(), 'the acquisition still runs');
    }
}
