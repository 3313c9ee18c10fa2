<?php

declare(strict_types=1);

namespace Redlock\Tests;

use PHPUnit\Framework\TestCase;
use Redlock\Ffi\Client;
use Redlock\Ffi\Config;
use Redlock\Ffi\Constants;
use Redlock\Ffi\Native;
use Redlock\Ffi\Operation;
use Redlock\Ffi\Outcome;
use Redlock\Ffi\Reply;

/**
 * Operation::listens() through FFI, driven by hand as the core's own tests do
 * (core/tests/operation.rs): when an acquisition listens for release notices is the
 * core's decision, the same for every binding; the engine only asks.
 */
final class OperationTest extends TestCase
{
    public function testAnAcquisitionWithAWaitLimitListensFromItsFirstConflictUntilItEnds(): void
    {
        $client = self::client(1);
        // Nobody holds it: taken without listening.
        $op = $client->acquireWaiting(['free'], null, 2_000_000, 0);
        $this->assertFalse($op->listens(), 'nothing refused it yet');
        [$sends] = self::drain($op);
        $this->assertCount(3, $sends);
        $this->assertFalse($op->listens(), 'its first attempt is out');
        [$caused, , $outcome] = self::answer($op, $sends, 100, Constants::REPLY_INTEGER, 1);
        $this->assertSame([], $caused);
        $this->assertSame(Constants::OUTCOME_ACQUIRED, $outcome?->kind);
        $this->assertFalse($op->listens(), 'finished');

        // Held: the first refusal makes it listen, until it ends.
        $op = $client->acquireWaiting(['held'], null, 2_000_000, 1_000);
        [$sends] = self::drain($op);
        self::answer($op, [$sends[0]], 1_100, Constants::REPLY_INTEGER, 0);
        $this->assertTrue($op->listens(), 'refused where the key is held');

        // A wait for the same resource a moment ago: from its start (its channels linger).
        $again = $client->acquireWaiting(['held'], null, 2_000_000, 1_200);
        $this->assertTrue($again->listens(), 'from its start');
    }

    public function testAnAcquisitionWithoutAWaitLimitListensOnceAnAttemptFailedAndAnotherMayFollow(): void
    {
        // Two attempts: the first fails on conflicts. From its cleanup on it listens,
        // through the delay and the second attempt, until the outcome.
        $op = self::client(2)->acquire(['r'], null, 0);
        $this->assertFalse($op->listens(), 'a first attempt may win: it subscribes to nothing');
        [$sends] = self::drain($op);
        $this->assertCount(3, $sends);
        $this->assertFalse($op->listens(), 'the first attempt is out');
        [$cleanup] = self::answer($op, $sends, 100, Constants::REPLY_NIL);
        $this->assertCount(3, $cleanup, "the failed attempt's cleanup");
        $this->assertTrue($op->listens(), "the failed attempt's cleanup is out");
        [$caused, $retryAt, $outcome] = self::answer($op, $cleanup, 200, Constants::REPLY_INTEGER, 0);
        $this->assertSame([], $caused);
        $this->assertNull($outcome);
        $this->assertNotNull($retryAt);
        $this->assertTrue($op->listens(), 'delaying');
        $op->handleTimeout($retryAt);
        [$sends] = self::drain($op);
        $this->assertCount(3, $sends);
        $this->assertSame(2, $op->attempt());
        $this->assertTrue($op->listens(), 'the second attempt');
        [$cleanup] = self::answer($op, $sends, $retryAt + 100, Constants::REPLY_NIL);
        $this->assertTrue($op->listens(), "the last attempt's cleanup: still until the outcome");
        [, , $outcome] = self::answer($op, $cleanup, $retryAt + 200, Constants::REPLY_INTEGER, 0);
        $this->assertSame(Constants::OUTCOME_NOT_ACQUIRED, $outcome?->kind);
        $this->assertFalse($op->listens(), 'finished');
    }

    public function testAnAcquisitionWithOneAttemptAndOtherOperationsNeverListen(): void
    {
        // One attempt: nothing may follow its failure.
        $client = self::client(1);
        $op = $client->acquire(['r'], null, 0);
        [$sends] = self::drain($op);
        [$cleanup] = self::answer($op, $sends, 100, Constants::REPLY_NIL);
        $this->assertFalse($op->listens());
        self::answer($op, $cleanup, 200, Constants::REPLY_INTEGER, 0);
        $this->assertFalse($op->listens());

        $op = $client->acquire(['r'], null, 1_000);
        [$sends] = self::drain($op);
        [, , $outcome] = self::answer($op, $sends, 1_100, Constants::REPLY_OK);
        $lease = $outcome?->lease();
        $this->assertNotNull($lease);
        $this->assertFalse($client->extend($lease, null, 1_200)->listens(), 'an extension');
        $this->assertFalse($client->release($lease, 1_200)->listens(), 'a release');
        $this->assertFalse($client->inspect(['r'], 1_200)->listens(), 'an inspection');
    }

    private static function client(int $attempts): Client
    {
        $config = Config::build(Native::get(), 3, 10_000, ['attempts' => $attempts]);
        return Client::create($config, str_repeat("\7", 32));
    }

    /**
     * Polls until nothing is left.
     *
     * @return array{list<int>, ?int, ?Outcome} the request ids sent, the last wait, the outcome
     */
    private static function drain(Operation $op): array
    {
        [$sends, $wait, $outcome] = [[], null, null];
        while (($kind = $op->poll()) !== Constants::OUTPUT_NONE) {
            if ($kind === Constants::OUTPUT_SEND) {
                $sends[] = $op->command()[1];
            } elseif ($kind === Constants::OUTPUT_WAIT) {
                $wait = $op->waitUntil();
            } elseif ($kind === Constants::OUTPUT_OUTCOME) {
                $outcome = $op->takeOutcome();
            } else {
                self::fail("unknown output $kind");
            }
        }
        return [$sends, $wait, $outcome];
    }

    /**
     * Answers each of `$requests` at `$nowUs` with a reply of `$kind`, draining after each.
     *
     * @param list<int> $requests
     * @return array{list<int>, ?int, ?Outcome} what the replies caused: the requests sent,
     *     the last wait, the outcome
     */
    private static function answer(Operation $op, array $requests, int $nowUs, int $kind, int $integer = 0): array
    {
        $native = Native::get();
        [$caused, $wait, $outcome] = [[], null, null];
        foreach ($requests as $request) {
            $native->check($op->handleReply($request, Reply::create($native, $kind, $integer), $nowUs), 'reply');
            [$more, $w, $o] = self::drain($op);
            $caused = [...$caused, ...$more];
            $wait = $w ?? $wait;
            $outcome ??= $o;
        }
        return [$caused, $wait, $outcome];
    }
}
