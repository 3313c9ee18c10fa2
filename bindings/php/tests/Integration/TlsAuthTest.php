<?php

declare(strict_types=1);

namespace Redlock\Tests\Integration;

use PHPUnit\Framework\TestCase;
use Redlock\Clock;
use Redlock\Driver\NodeAddress;
use Redlock\Driver\StreamCommand;
use Redlock\Exception\NodesFailedException;
use Redlock\Ffi\Native;
use Redlock\NodeResult;
use Redlock\Options;
use Redlock\Redlock;

/**
 * The stream driver over TLS with a password (ports 7520-7524): rediss:// URLs, a
 * private CA, AUTH on every new connection; and what a wrong password or an
 * unverifiable certificate look like.
 */
final class TlsAuthTest extends TestCase
{
    private const BASE_PORT = 7520;
    /** @var list<string> */
    private static array $urls = [];
    private static string $ca = '';

    public static function setUpBeforeClass(): void
    {
        self::$urls = Nodes::start(self::BASE_PORT, 5, ['--tls', '--requirepass', 's3cret']);
        self::$ca = Nodes::ca(self::BASE_PORT);
    }

    public static function tearDownAfterClass(): void
    {
        Nodes::stop(self::BASE_PORT);
    }

    private static function options(): Options
    {
        // TLS handshakes on a loaded machine: outcomes here, not timing.
        return new Options(nodeTimeoutMs: 1_000, attempts: 1);
    }

    public function testLocksOverTlsWithAuth(): void
    {
        $this->assertStringStartsWith('rediss://:s3cret@127.0.0.1:', self::$urls[0]);
        $redlock = Redlock::create(self::$urls, self::options(), ['cafile' => self::$ca]);
        $this->assertSame('rediss://127.0.0.1:' . self::BASE_PORT, $redlock->nodes()[0], 'no password in labels');
        $lock = $redlock->acquire('php-tls:a', 5_000);
        $rival = Redlock::create(self::$urls, self::options(), ['cafile' => self::$ca]);
        $this->assertNull($rival->tryAcquire('php-tls:a'));
        $this->assertGreaterThanOrEqual(3, $lock->release());
        $this->assertNotNull($again = $rival->tryAcquire('php-tls:a'));
        $again->release();
    }

    public function testAWaitingAcquisitionSubscribesOverTlsWithAuth(): void
    {
        $holder = Redlock::create(self::$urls, self::options(), ['cafile' => self::$ca]);
        $lock = $holder->acquire('php-tls:wait', 5_000);
        $waiter = Redlock::create(self::$urls, new Options(nodeTimeoutMs: 1_000, retryDelayMs: 100, retryJitterMs: 0), ['cafile' => self::$ca]);
        $this->assertNull($waiter->tryAcquire('php-tls:wait', waitMs: 1_500));
        $waiter->flush();
        // The waiter's subscriber connection came through TLS and AUTH and subscribed to
        // its two channels (the resource's notice channel and the client's waiter channel);
        // they linger after the wait, and the waiter's first call after the linger
        // unsubscribes and closes it.
        $admin = new StreamCommand(Native::get(), NodeAddress::fromUrl(self::$urls[0], ['cafile' => self::$ca]));
        $clients = $admin->call(['CLIENT', 'LIST'], 2_000_000)->bytes();
        $this->assertMatchesRegularExpression('/ sub=2 .* cmd=subscribe /', $clients);
        usleep(1000 * Native::get()->ffi->redlock_notice_channel_linger_ms() + 50_000);
        $waiter->flush();
        $deadline = Clock::nowUs() + 1_000_000;
        while (true) {
            $clients = $admin->call(['CLIENT', 'LIST'], 2_000_000)->bytes();
            if (preg_match('/ sub=[1-9]/', $clients) !== 1 || Clock::nowUs() >= $deadline) {
                break;
            }
            usleep(10_000);
        }
        $admin->close();
        $this->assertDoesNotMatchRegularExpression('/ sub=[1-9]/', $clients);
        $lock->release();
    }

    public function testAWrongPasswordIsAnAuthFailureOnEveryNode(): void
    {
        $urls = array_map(static fn (string $u): string => str_replace(':s3cret@', ':wrong@', $u), self::$urls);
        $redlock = Redlock::create($urls, self::options(), ['cafile' => self::$ca]);
        try {
            $redlock->acquire('php-tls:b');
            $this->fail('acquired with a wrong password');
        } catch (NodesFailedException $e) {
            $this->assertSame('nodes_failed', $e->reason);
            $this->assertCausedBy('auth: WRONGPASS', 'auth', $e);
        }
    }

    public function testACertificateFromAnUnknownCaIsATlsFailure(): void
    {
        $redlock = Redlock::create(self::$urls, self::options());
        try {
            $redlock->acquire('php-tls:c');
            $this->fail('acquired over TLS without trusting the CA');
        } catch (NodesFailedException $e) {
            $this->assertCausedBy('tls:', 'tls', $e);
        }
    }

    /** At least a quorum's worth of nodes failed with `$cause`; the rest had not answered yet. */
    private function assertCausedBy(string $cause, string $causeName, NodesFailedException $e): void
    {
        $failed = 0;
        foreach ($e->nodes as $node) {
            if ($node->status === NodeResult::PENDING) {
                continue;
            }
            $this->assertSame(NodeResult::ERROR, $node->status, (string) $node);
            $this->assertStringContainsString($cause, (string) $node->error);
            $this->assertSame($causeName, $node->cause, (string) $node);
            $failed++;
        }
        $this->assertGreaterThanOrEqual(3, $failed, $e->getMessage());
    }
}
