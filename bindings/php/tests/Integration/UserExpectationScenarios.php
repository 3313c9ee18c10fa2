<?php

declare(strict_types=1);

namespace Redlock\Tests\Integration;

use Redlock\Clock;
use Redlock\Event;
use Redlock\Exception\LockHeldException;
use Redlock\Exception\NodesFailedException;
use Redlock\Exception\NotHeldException;
use Redlock\NodeResult;
use Redlock\Options;
use Redlock\Redlock;

/**
 * Inspections (isLocked(), holder(), Lock::isOwned()) and event listeners against five
 * real local nodes, for every driver (used by DriverScenarios).
 */
trait UserExpectationScenarios
{
    private function inspected(): string
    {
        return 'php-test:' . $this->getName(false);
    }

    /** Writes `$value` under the resource on the given nodes by hand. @param list<int> $nodes */
    private function setOn(array $nodes, string $value): void
    {
        foreach ($nodes as $i) {
            Nodes::redis(static::basePort(), $i)->set($this->inspected(), $value, ['px' => 10_000]);
        }
    }

    public function testInspectionsOfALockWeHold(): void
    {
        $redlock = $this->redlock();
        $this->assertFalse($redlock->isLocked($this->inspected()), 'free before we take it');
        $this->assertNull($redlock->holder($this->inspected()));
        $lock = $redlock->acquire($this->inspected(), 5_000);
        $this->assertTrue($redlock->isLocked($this->inspected()));
        $this->assertSame($lock->token(), $redlock->holder($this->inspected()));
        $this->assertTrue($lock->isOwned());
        $lock->release();
        $this->assertFalse($lock->isOwned(), 'released: not ours any more');
        $this->assertFalse($redlock->isLocked($this->inspected()));
        $this->assertSame(array_fill(0, 5, false), Nodes::values(static::basePort(), $this->inspected()), 'inspections write nothing');
    }

    public function testInspectionsOfALockHeldByAnother(): void
    {
        $ours = $this->redlock();
        $lock = $ours->acquire($this->inspected(), 5_000);
        $other = $this->redlock();
        $this->assertTrue($other->isLocked($this->inspected()), 'another client sees it held');
        $this->assertSame($lock->token(), $other->holder($this->inspected()));

        // Someone else's token on every node: still locked, no longer ours.
        $this->setOn([0, 1, 2, 3, 4], 'someone-else');
        $this->assertTrue($ours->isLocked($this->inspected()));
        $this->assertSame('someone-else', $ours->holder($this->inspected()));
        $this->assertFalse($lock->isOwned());
    }

    public function testLeftoversOnFewerThanAQuorumDoNotMakeItLocked(): void
    {
        $redlock = $this->redlock();
        $this->setOn([0, 3], 'leftover');
        $this->assertFalse($redlock->isLocked($this->inspected()), 'two of five nodes are no quorum');
        $this->assertNull($redlock->holder($this->inspected()));
        // Two tokens, neither on a quorum.
        $this->setOn([1, 2], 'other-leftover');
        $this->assertFalse($redlock->isLocked($this->inspected()));
        // A third node for the first one makes a quorum.
        $this->setOn([4], 'leftover');
        $this->assertTrue($redlock->isLocked($this->inspected()));
        $this->assertSame('leftover', $redlock->holder($this->inspected()));
        $this->assertNull($redlock->tryAcquire($this->inspected()), 'and the core refuses to acquire it');
    }

    public function testOneNodeDownStillDecidesTooManyDownIsNodesFailed(): void
    {
        Nodes::kill(static::basePort(), 4);
        $redlock = $this->redlock(new Options(attempts: 1));
        $this->assertFalse($redlock->isLocked($this->inspected()));
        $lock = $redlock->acquire($this->inspected(), 5_000);
        $this->assertTrue($redlock->isLocked($this->inspected()));
        $this->assertTrue($lock->isOwned());

        Nodes::kill(static::basePort(), 3);
        Nodes::kill(static::basePort(), 2);
        foreach (['isLocked' => fn () => $redlock->isLocked($this->inspected()), 'isOwned' => fn () => $lock->isOwned()] as $what => $ask) {
            try {
                $ask();
                $this->fail("$what answered with three of five nodes down");
            } catch (NodesFailedException $e) {
                $this->assertGreaterThanOrEqual(3, count($e->failedNodes()), "$what: $e");
                foreach ([2, 3, 4] as $index) {
                    $this->assertSame(NodeResult::ERROR, $e->nodes[$index]->status, (string) $e->nodes[$index]);
                }
                $this->assertStringContainsString('could not tell who holds', $e->getMessage());
            }
        }
    }

    public function testListenersSeeAcquireAndReleaseWithTimings(): void
    {
        $redlock = $this->redlock();
        /** @var list<Event> $events */
        $events = [];
        $redlock->addEventListener(function (Event $e) use (&$events): void {
            $events[] = $e;
        });
        $before = Clock::nowUs();
        $lock = $redlock->acquire($this->inspected(), 5_000);
        $afterAcquire = Clock::nowUs();
        $lock->extend(6_000);
        $lock->release();
        $after = Clock::nowUs();

        $kinds = array_map(static fn (Event $e): string => $e->kind, $events);
        $this->assertSame([Event::ACQUIRED, Event::EXTENDED, Event::RELEASED], $kinds, implode('; ', array_map('strval', $events)));
        [$acquired, $extended, $released] = $events;
        $this->assertSame('acquire', $acquired->operation);
        $this->assertSame([$this->inspected()], $acquired->resources);
        $this->assertSame(1, $acquired->attempt);
        $this->assertGreaterThanOrEqual($before, $acquired->atUs);
        $this->assertLessThanOrEqual($afterAcquire, $acquired->atUs);
        $this->assertGreaterThan(0, $acquired->elapsedUs);
        $this->assertLessThanOrEqual($afterAcquire - $before, $acquired->elapsedUs);
        $this->assertCount(5, $acquired->nodes);
        $successes = array_filter($acquired->nodes, static fn (NodeResult $n): bool => $n->status === NodeResult::SUCCESS);
        $this->assertGreaterThanOrEqual(3, count($successes));
        $this->assertSame('extend', $extended->operation);
        $this->assertSame('release', $released->operation);
        $this->assertLessThanOrEqual($after, $released->atUs);
        $this->assertGreaterThanOrEqual($extended->atUs, $released->atUs);
        $this->assertNull($acquired->reason);

        $events = [];
        $redlock->isLocked($this->inspected());
        $this->assertSame([Event::INSPECTED], array_map(static fn (Event $e): string => $e->kind, $events));
        $this->assertSame('inspect', $events[0]->operation);

        // A removed listener hears nothing more.
        $other = $this->redlock();
        $seen = 0;
        $count = function () use (&$seen): void {
            $seen++;
        };
        $other->addEventListener($count);
        $other->acquire($this->inspected(), 5_000)->release();
        $this->assertSame(2, $seen);
        $other->removeEventListener($count);
        $other->acquire($this->inspected(), 5_000)->release();
        $this->assertSame(2, $seen);
    }

    public function testARetryIsAnEventWithItsReasonAndWhenTheNextAttemptStarts(): void
    {
        $holder = $this->redlock();
        $lock = $holder->acquire($this->inspected(), 5_000);
        $rival = $this->redlock(new Options(attempts: 2, retryDelayMs: 20, retryJitterMs: 5));
        $events = [];
        $rival->addEventListener(function (Event $e) use (&$events): void {
            $events[] = $e;
        });
        try {
            $rival->acquire($this->inspected());
            $this->fail('acquired a held lock');
        } catch (LockHeldException) {
            // expected: the events say how it went
        }
        $kinds = array_map(static fn (Event $e): string => $e->kind, $events);
        $this->assertSame([Event::RETRY, Event::NOT_ACQUIRED], $kinds, implode('; ', array_map('strval', $events)));
        [$retry, $failed] = $events;
        $this->assertSame(1, $retry->attempt);
        $this->assertSame('conflict', $retry->reason);
        $this->assertNotNull($retry->retryAtUs);
        $this->assertGreaterThanOrEqual($retry->atUs + 15_000, $retry->retryAtUs, 'about the retry delay later');
        $this->assertLessThanOrEqual($retry->atUs + 30_000, $retry->retryAtUs);
        $conflicts = array_filter($retry->nodes, static fn (NodeResult $n): bool => $n->status === NodeResult::CONFLICT);
        $this->assertGreaterThanOrEqual(3, count($conflicts));
        $this->assertSame(2, $failed->attempt);
        $this->assertSame('conflict', $failed->reason);
        $this->assertGreaterThanOrEqual($retry->retryAtUs, $failed->atUs);
        $lock->release();
    }

    public function testAFailedNodeIsAnEventWithItsCause(): void
    {
        // Connected first, so that both drivers know the address: then the port closes.
        // Node 0, which the sequential driver serves first, so that it fails before the
        // quorum decides (a failure after the outcome belongs to no operation).
        $redlock = $this->redlock(new Options(attempts: 1));
        $redlock->acquire($this->inspected(), 5_000)->release();
        Nodes::kill(static::basePort(), 0);
        // The open connection breaks first (cause `connection`); from then on every
        // attempt to reconnect finds the port closed.
        $redlock->acquire($this->inspected(), 5_000)->release();
        usleep(100_000);
        $events = [];
        $redlock->addEventListener(function (Event $e) use (&$events): void {
            $events[] = $e;
        });
        $redlock->acquire($this->inspected(), 5_000)->release();
        $failures = array_values(array_filter($events, static fn (Event $e): bool => $e->kind === Event::NODE_FAILED));
        $this->assertNotEmpty($failures, implode('; ', array_map('strval', $events)));
        $first = $failures[0];
        $this->assertSame(0, $first->node);
        $this->assertSame('refused', $first->cause, (string) $first);
        $this->assertSame('acquire', $first->operation);
        $this->assertCount(1, $first->nodes);
        $this->assertSame(0, $first->nodes[0]->index);
        $this->assertSame(NodeResult::ERROR, $first->nodes[0]->status);
        $this->assertSame('refused', $first->nodes[0]->cause);
        $this->assertStringContainsString('connection failed', (string) $first->nodes[0]->error);
        foreach ($failures as $failure) {
            $this->assertSame(0, $failure->node, 'only the closed port failed');
        }
        $kinds = array_map(static fn (Event $e): string => $e->kind, $events);
        $this->assertContains(Event::ACQUIRED, $kinds);
        $this->assertContains(Event::RELEASED, $kinds);
    }

    public function testLostIsReportedWhenTheKeepAliveFindsTheKeysGone(): void
    {
        $redlock = $this->redlock(new Options(ttlMs: 600, nodeTimeoutMs: 50));
        $events = [];
        $redlock->addEventListener(function (Event $e) use (&$events): void {
            $events[] = $e;
        });
        $lock = $redlock->acquire($this->inspected(), 600, true);
        $acquiredUs = Clock::nowUs();
        // Held a while before the keys go, so an elapsed time counted from anything but
        // the acquisition (the extension that found them gone, or nothing) shows.
        usleep(100_000);
        for ($i = 0; $i < 5; $i++) {
            Nodes::redis(static::basePort(), $i)->del($this->inspected());
        }
        $until = Clock::nowUs() + 2_000_000;
        try {
            while (Clock::nowUs() < $until) {
                $next = $lock->keepAlive();
                usleep(max(1_000, min(50_000, $next - Clock::nowUs())));
            }
            $this->fail('the keep-alive did not notice the keys were deleted');
        } catch (NotHeldException) {
            // expected
        }
        try {
            $lock->keepAlive();
        } catch (NotHeldException) {
            // asked again: still lost, reported once
        }
        $lost = array_values(array_filter($events, static fn (Event $e): bool => $e->kind === Event::LOST));
        $this->assertCount(1, $lost, implode('; ', array_map('strval', $events)));
        $this->assertSame('not_held', $lost[0]->lostReason);
        $this->assertSame([$this->inspected()], $lost[0]->resources);
        $this->assertNull($lost[0]->operation);
        // elapsed counts from the acquisition: between the acquired event and acquire()'s
        // return, up to the lost event.
        $acquired = array_values(array_filter($events, static fn (Event $e): bool => $e->kind === Event::ACQUIRED))[0];
        $this->assertNotNull($lost[0]->elapsedUs);
        $this->assertGreaterThanOrEqual($lost[0]->atUs - $acquiredUs, $lost[0]->elapsedUs);
        $this->assertLessThanOrEqual($lost[0]->atUs - $acquired->atUs, $lost[0]->elapsedUs);
        $this->assertGreaterThanOrEqual(100_000, $lost[0]->elapsedUs);
        $kinds = array_map(static fn (Event $e): string => $e->kind, $events);
        $this->assertSame(Event::ACQUIRED, $kinds[0]);
        $this->assertContains(Event::NOT_EXTENDED, $kinds, 'the extension that found the keys gone');
    }

    public function testAListenerThatThrowsDoesNotBreakTheLock(): void
    {
        $redlock = $this->redlock();
        $errors = [];
        $redlock->addEventListener(
            static function (Event $e): void {
                throw new \RuntimeException("listener failed on {$e->kind}");
            },
            function (\Throwable $error, Event $event) use (&$errors): void {
                $errors[] = [$event->kind, $error->getMessage()];
                throw new \LogicException('the error handler fails too');
            },
        );
        $later = [];
        $redlock->addEventListener(function (Event $e) use (&$later): void {
            $later[] = $e->kind;
        });
        $lock = $redlock->acquire($this->inspected(), 5_000);
        $redlock->flush();
        $this->assertHeldBy($lock->token(), $this->inspected());
        $this->assertTrue($lock->isOwned());
        $this->assertGreaterThanOrEqual(3, $lock->release(), 'released on a quorum');
        $this->assertSame([
            ['acquired', 'listener failed on acquired'],
            ['inspected', 'listener failed on inspected'],
            ['released', 'listener failed on released'],
        ], $errors);
        $this->assertSame(['acquired', 'inspected', 'released'], $later, 'the next listener still hears everything');

        // A listener that uses its client from inside an operation is refused (the
        // running operation is not disturbed).
        $errors = [];
        $reentrant = $this->redlock();
        $reentrant->addEventListener(
            function (Event $e) use ($reentrant): void {
                if ($e->kind === Event::ACQUIRED) {
                    $reentrant->isLocked($this->inspected());
                }
            },
            function (\Throwable $error) use (&$errors): void {
                $errors[] = get_class($error) . ': ' . $error->getMessage();
            },
        );
        $lock = $reentrant->acquire($this->inspected(), 5_000);
        $this->assertSame(['LogicException: an event listener cannot use its client while the client runs an operation'], $errors);
        $this->assertTrue($reentrant->isLocked($this->inspected()), 'usable again afterwards');
        $this->assertTrue($lock->isOwned());
        $lock->release();

        // Without an error handler the exception goes to error_log().
        $log = (string) tempnam(sys_get_temp_dir(), 'redlock-log');
        $previous = ini_set('error_log', $log);
        try {
            $quiet = $this->redlock();
            $quiet->addEventListener(static function (Event $e): void {
                throw new \RuntimeException('nobody handles this');
            });
            $quiet->acquire($this->inspected(), 5_000)->release();
        } finally {
            ini_set('error_log', (string) $previous);
        }
        $written = (string) file_get_contents($log);
        unlink($log);
        $this->assertStringContainsString('an event listener threw on acquired: RuntimeException: nobody handles this', $written);
        $this->assertSame(array_fill(0, 5, false), Nodes::values(static::basePort(), $this->inspected()));
    }

    public function testAClientInAGarbageCycleIsCollectedWithoutACrash(): void
    {
        // A listener that uses its client makes a cycle (client -> listener -> client);
        // the collector then runs the destructors in any order, the client's after its
        // links' possibly. Run in a child process: a crash must not take PHPUnit down.
        $script = sprintf(
            '<?php require %s; function run() { $r = %s;'
            . ' $r->addEventListener(function ($e) use ($r) { $r->nodes(); });'
            . ' $holder = new stdClass(); $holder->self = $holder; $holder->client = $r;'
            . ' $holder->lock = $r->acquire(%s, 5000); $r->acquire(%s, 5000); }'
            . ' run(); echo gc_collect_cycles();',
            var_export(dirname(__DIR__, 2) . '/vendor/autoload.php', true),
            static::workerDriver() === 'stream'
                ? sprintf('Redlock\Redlock::create(%s)', var_export(static::$urls, true))
                : sprintf(
                    'Redlock\Redlock::withPhpRedis(array_map(function ($p) { $x = new Redis(); $x->connect("127.0.0.1", $p, 1.0); return $x; }, %s))',
                    var_export(range(static::basePort(), static::basePort() + 4), true),
                ),
            var_export($this->inspected(), true),
            var_export($this->inspected() . ':second', true),
        );
        $process = proc_open([PHP_BINARY], [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
        fwrite($pipes[0], $script);
        fclose($pipes[0]);
        $collected = (string) stream_get_contents($pipes[1]);
        $stderr = (string) stream_get_contents($pipes[2]);
        $this->assertSame(0, proc_close($process), "the child crashed: $stderr");
        $this->assertGreaterThan(10, (int) $collected, 'the cycle was collected');
        // The lock outside the cycle was released by its destructor when run() returned.
        $this->assertSame(array_fill(0, 5, false), Nodes::values(static::basePort(), $this->inspected() . ':second'));
    }
}
