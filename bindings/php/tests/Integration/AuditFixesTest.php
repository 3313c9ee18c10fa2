<?php

declare(strict_types=1);

namespace Redlock\Tests\Integration;

use PHPUnit\Framework\TestCase;
use Redlock\Exception\InvalidArgumentException;
use Redlock\Lock;
use Redlock\Options;
use Redlock\Redlock;

/**
 * The five audit fixes of the core (commits e7765d0 and b849529) on five local nodes
 * (ports 7930-7934), through the public API: a shortening extension ends the lease
 * sooner and the keep-alive follows it, reserved auxiliary key names are refused before
 * anything is sent, a wait cancelled by its time limit leaves the queue of waiters at
 * once, a queue entry lives at most 5 s whatever the retry delay, and the release of a
 * lock on several resources names each resource's own first waiter. Waiters that must
 * wait while this process acts run in PHP processes of their own.
 */
final class AuditFixesTest extends TestCase
{
    private const BASE_PORT = 7930;

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

    private static function redlock(int $retryDelayMs = 200, ?string $keyPrefix = null): Redlock
    {
        return Redlock::create(self::$urls, new Options(
            retryDelayMs: $retryDelayMs,
            retryJitterMs: 0,
            keyPrefix: $keyPrefix,
        ));
    }

    /** @return list<int> */
    private static function pttls(string $key): array
    {
        $out = [];
        for ($i = 0; $i < 5; $i++) {
            $out[] = (int) Nodes::redis(self::BASE_PORT, $i)->pttl($key);
        }
        return $out;
    }

    private static function existsNowhere(string $key): bool
    {
        for ($i = 0; $i < 5; $i++) {
            if ((int) Nodes::redis(self::BASE_PORT, $i)->exists($key) !== 0) {
                return false;
            }
        }
        return true;
    }

    /** Every node's sorted set `$key` has `$size` members. */
    private static function everyQueueHas(string $key, int $size): bool
    {
        for ($i = 0; $i < 5; $i++) {
            if ((int) Nodes::redis(self::BASE_PORT, $i)->zCard($key) !== $size) {
                return false;
            }
        }
        return true;
    }

    /**
     * Queued on 3 nodes or more: a node whose SET of the holder's acquisition was still on
     * its way (the acquisition decided at the quorum) may have granted the waiter's first
     * attempt instead of queuing it.
     */
    private static function queuedOnAQuorum(string $key): bool
    {
        $queued = 0;
        for ($i = 0; $i < 5; $i++) {
            $queued += (int) Nodes::redis(self::BASE_PORT, $i)->zCard($key) > 0 ? 1 : 0;
        }
        return $queued >= 3;
    }

    private static function queues(string $key): string
    {
        $out = [];
        for ($i = 0; $i < 5; $i++) {
            $out[] = json_encode(Nodes::redis(self::BASE_PORT, $i)->zRange($key, 0, -1));
        }
        return implode(' ', $out);
    }

    /**
     * Polls `$condition` every 10 ms for at most `$limitMs` (by default long enough for a
     * PHP process to start and be refused on a loaded machine).
     */
    private static function until(callable $condition, int $limitMs = 8000): bool
    {
        $end = microtime(true) + $limitMs / 1000;
        while (!$condition()) {
            if (microtime(true) >= $end) {
                return false;
            }
            usleep(10_000);
        }
        return true;
    }

    /**
     * A PHP process that waits for `$resource` (wait limit `$waitMs`, retry delay
     * `$retryDelayMs`, time limit `$timeLimitMs` if any) and prints `acquired <time>` or
     * `<exception class> <time>` (microtime(true)), releasing what it got.
     *
     * @return array{resource, resource, resource}
     */
    private static function waiter(string $resource, int $waitMs, int $retryDelayMs, ?int $timeLimitMs = null): array
    {
        $script = sprintf(
            '<?php require %s;'
                . ' $r = Redlock\Redlock::create(%s, new Redlock\Options(retryDelayMs: %d, retryJitterMs: 0));'
                . ' try { $l = $r->acquire(%s, 10000, false, %s, %d); echo "acquired ", microtime(true), "\n"; $l->release(); }'
                . ' catch (Throwable $e) { echo get_class($e), " ", microtime(true), "\n"; }'
                . ' $r->close();',
            var_export(dirname(__DIR__, 2) . '/vendor/autoload.php', true),
            var_export(self::$urls, true),
            $retryDelayMs,
            var_export($resource, true),
            var_export($timeLimitMs, true),
            $waitMs,
        );
        $process = proc_open([PHP_BINARY], [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
        if (!is_resource($process)) {
            throw new \RuntimeException('could not start a PHP process');
        }
        fwrite($pipes[0], $script);
        fclose($pipes[0]);
        return [$process, $pipes[1], $pipes[2]];
    }

    /**
     * Waits for the process to end: what it printed, split in two.
     *
     * @param array{resource, resource, resource} $waiter
     * @return array{string, float}
     */
    private static function finish(array $waiter): array
    {
        [$process, $out, $err] = $waiter;
        $printed = trim((string) stream_get_contents($out));
        $errors = trim((string) stream_get_contents($err));
        fclose($out);
        fclose($err);
        proc_close($process);
        $parts = explode(' ', $printed);
        if (count($parts) !== 2) {
            throw new \RuntimeException("the waiter printed '$printed' ($errors)");
        }
        return [$parts[0], (float) $parts[1]];
    }

    // ---- 1. A shortening extension ---------------------------------------------------

    public function testExtendingA10sLockTo1sLeavesAbout1s(): void
    {
        $key = 'audit:php:shorten';
        $redlock = self::redlock();
        $lock = $redlock->acquire($key, 10_000);
        $this->assertGreaterThan(9000, $lock->validityMs());
        $started = microtime(true);
        $lock->extend(1000);
        $validity = $lock->validityMs();
        $this->assertTrue($validity <= 1000 && $validity > 500, "validity $validity ms");
        $this->assertTrue($lock->isValid());
        // The quorum decided: the last nodes' PEXPIRE may still be on its way (a key may be
        // gone already if this process was kept waiting on a loaded machine).
        $this->assertTrue(self::until(static function () use ($key): bool {
            foreach (self::pttls($key) as $pttl) {
                if ($pttl !== -2 && ($pttl <= 0 || $pttl > 1000)) {
                    return false;
                }
            }
            return true;
        }, 1000), 'PTTL ' . implode(',', self::pttls($key)));
        // Not valid 1.2 s after the extension started (read from the clock).
        usleep((int) max(0, ($started + 1.2 - microtime(true)) * 1e6));
        $this->assertFalse($lock->isValid(), 'still valid 1.2 s after extending to 1 s');
        $this->assertSame(0.0, $lock->validityMs());
        $redlock->close();
    }

    public function testTheKeepAliveFollowsAShorteningExtension(): void
    {
        $key = 'audit:php:shorten:kept';
        $redlock = self::redlock();
        $lock = $redlock->acquire($key, 10_000, true);
        $lock->keepAlive();
        $started = microtime(true);
        $lock->extend(1000);
        $this->assertLessThanOrEqual(1000, $lock->validityMs());
        // For 2.5 s, calling keepAlive() as the README says, the lock stays held and every
        // key has at most 1 s left: the core's keep-alive asks for 1 s extensions on the
        // new lease's schedule (before, on the 10 s lease's, and the keys expired).
        while (microtime(true) - $started < 2.5) {
            $lock->keepAlive();
            $at = round(microtime(true) - $started, 3);
            $this->assertTrue($lock->isValid(), "not valid at $at s");
            $this->assertLessThanOrEqual(1000, $lock->validityMs());
            $pttls = self::pttls($key);
            foreach ($pttls as $pttl) {
                $this->assertLessThanOrEqual(1000, $pttl);
            }
            $held = count(array_filter($pttls, static fn (int $pttl): bool => $pttl > 0));
            $this->assertGreaterThanOrEqual(3, $held, "PTTL " . implode(',', $pttls) . " at $at s");
            usleep(50_000);
        }
        $this->assertGreaterThanOrEqual(2, $lock->extensions());
        $lock->release();
        $redlock->close();
    }

    // ---- 2. Reserved names -----------------------------------------------------------

    private function assertReserved(callable $call): void
    {
        try {
            $call();
            $this->fail('a reserved name was locked');
        } catch (InvalidArgumentException $e) {
            $this->assertSame('reserved_resource', $e->codeName, $e->getMessage());
        }
    }

    public function testAuxiliaryKeyNamesAreRefusedAndNothingIsSent(): void
    {
        $redlock = self::redlock();
        $prefixed = self::redlock(200, 'app:');
        foreach (['{r}:waiters:turn', '{r}:fence', 'lock:{order}:fence', '{r}:waiters'] as $resource) {
            $this->assertReserved(static fn (): Lock => $redlock->acquire($resource, 5000));
            $this->assertReserved(static fn (): Lock => $redlock->acquire($resource, 5000, false, null, 1000));
            $this->assertTrue(self::existsNowhere($resource), $resource);
        }
        $this->assertReserved(static fn (): Lock => $prefixed->acquire('{r}:fence', 5000));
        $this->assertTrue(self::existsNowhere('app:{r}:fence'));
        foreach (['r:fence', 'orders:fence'] as $resource) {
            $redlock->acquire($resource, 5000)->release();
        }
        $redlock->close();
        $prefixed->close();
    }

    public function testALockOnTheTurnKeyOfAWaitedForResourceIsRefused(): void
    {
        $resource = 'audit:php:r';
        $redlock = self::redlock();
        $held = $redlock->acquire($resource, 10_000);
        $waiter = self::waiter($resource, 10_000, 3000);
        $this->assertTrue(self::until(static fn (): bool => self::queuedOnAQuorum("{{$resource}}:waiters")), self::queues("{{$resource}}:waiters"));
        $this->assertReserved(static fn (): Lock => $redlock->acquire("{{$resource}}:waiters:turn", 10_000));
        $held->release();
        [$result] = self::finish($waiter);
        $this->assertSame('acquired', $result);
        $redlock->close();
    }

    // ---- 3. A wait cancelled by its time limit leaves the queue -----------------------

    public function testACancelledWaitLeavesTheQueue(): void
    {
        $resource = 'audit:php:abandon';
        $order = "{{$resource}}:waiters";
        $expiry = "{{$resource}}:waiters:expiry";
        $redlock = self::redlock();
        $held = $redlock->acquire($resource, 30_000);
        // A 4 s retry delay (its entry lives about 5 s after its refusal); the time limit
        // of 1.5 s cancels it while it waits for its second attempt.
        $waiter = self::waiter($resource, 20_000, 4000, 1500);
        $this->assertTrue(self::until(static fn (): bool => self::queuedOnAQuorum($order)), self::queues($order));
        $queued = microtime(true);
        [$result, $at] = self::finish($waiter);
        $this->assertSame('Redlock\Exception\CancelledException', $result);
        $this->assertTrue(
            self::until(static fn (): bool => self::everyQueueHas($order, 0) && self::everyQueueHas($expiry, 0), 1500),
            'still queued: ' . self::queues($order),
        );
        $this->assertLessThan(3.5, microtime(true) - $queued);
        $this->assertLessThan(1.5, microtime(true) - $at);
        $this->assertTrue($held->isValid());
        $held->release();
        $redlock->close();
    }

    // ---- 4. A queue entry lives at most 5 s ------------------------------------------

    public function testAQueueEntryLivesAtMost5sWhateverTheRetryDelay(): void
    {
        $resource = 'audit:php:lifetime';
        $expiry = "{{$resource}}:waiters:expiry";
        $redlock = self::redlock();
        $held = $redlock->acquire($resource, 30_000);
        $waiter = self::waiter($resource, 120_000, 60_000, 2000);
        $this->assertTrue(self::until(static fn (): bool => self::queuedOnAQuorum($expiry)));
        $checked = 0;
        for ($i = 0; $i < 5; $i++) {
            $node = Nodes::redis(self::BASE_PORT, $i);
            $members = $node->zRange($expiry, 0, 0);
            if ($members === []) {
                continue; // a node that granted the attempt, or never had it
            }
            $checked++;
            $member = $members[0];
            $score = (float) $node->zScore($expiry, $member);
            [$seconds, $micros] = $node->time();
            $left = (int) $score - ((int) $seconds * 1000 + intdiv((int) $micros, 1000));
            $this->assertTrue($left > 0 && $left <= 5000, "node $i: the entry lives $left ms more (retry delay 60 s)");
        }
        $this->assertGreaterThanOrEqual(3, $checked);
        self::finish($waiter);
        $held->release();
        $redlock->close();
    }

    // ---- 5. The release of {a, b} names b's own first waiter -------------------------

    public function testReleasingAAndBWakesTheWaiterOfB(): void
    {
        $redlock = self::redlock();
        $held = $redlock->acquire(['a', 'b'], 30_000);
        // Both waiters retry every 5 s: only a notice explains a quick acquisition. The
        // waiter of a is first in a's queue: before the fix the release named it for b too.
        $waitingA = self::waiter('a', 10_000, 5000);
        $this->assertTrue(self::until(static fn (): bool => self::queuedOnAQuorum('{a}:waiters')), self::queues('{a}:waiters'));
        $waitingB = self::waiter('b', 10_000, 5000);
        $this->assertTrue(self::until(static fn (): bool => self::queuedOnAQuorum('{b}:waiters')), self::queues('{b}:waiters'));
        usleep(300_000); // the waiters' subscriptions settle
        $released = microtime(true);
        $held->release();
        [$resultB, $atB] = self::finish($waitingB);
        [$resultA, $atA] = self::finish($waitingA);
        $this->assertSame('acquired', $resultB);
        $this->assertSame('acquired', $resultA);
        $this->assertLessThan(2.5, $atB - $released, 'the waiter of b acquired ' . ($atB - $released) . ' s after the release');
        $this->assertLessThan(2.5, $atA - $released, 'the waiter of a acquired ' . ($atA - $released) . ' s after the release');
        $redlock->close();
    }
}
