<?php

declare(strict_types=1);

namespace Redlock\Tests;

use PHPUnit\Framework\TestCase;
use Redlock\Clock;
use Redlock\Driver\Events;
use Redlock\Driver\NodeAddress;
use Redlock\Driver\NoticeListener;
use Redlock\Ffi\Native;

/**
 * The subscriber connections against a stand-in node on port 7559 (a plain socket:
 * what it is sent, and closed on cue). The listener does what the core's Subscriptions
 * output and dispatches: a message on the waiting acquisition's channel is a notice with
 * its payload, a confirmed subscription the core counts is reported for the core
 * (docs/bindings.md, rule 13), anything else is nobody's.
 */
final class NoticeListenerTest extends TestCase
{
    private const CHANNEL = 'redlock:released:r';
    private const OTHER = 'redlock:released:s';
    private const FAKE_PORT = 7559;
    private const SUBSCRIBED = '(subscribed)';
    /** The stand-in is node 2 of the driver (nodes 0 and 1 have no subscriber). */
    private const NODE = 2;

    /** @var resource|null */
    private $server = null;
    private ?NoticeListener $listener = null;

    protected function setUp(): void
    {
        $server = stream_socket_server('tcp://127.0.0.1:' . self::FAKE_PORT, $errno, $errstr);
        $this->assertNotFalse($server, "listen on " . self::FAKE_PORT . ": $errstr ($errno)");
        $this->server = $server;
    }

    protected function tearDown(): void
    {
        $this->listener?->shutdown();
        $this->listener = null;
        if ($this->server !== null) {
            fclose($this->server);
            $this->server = null;
        }
    }

    public function testMessagesAndCountedConfirmationsOfTheWaitedChannelsAreReported(): void
    {
        $listener = $this->listener();
        $events = new Events();
        $listener->listen([self::CHANNEL, self::OTHER], $events);
        $peer = $this->accept();
        $this->expectWritten($peer, self::resp(['SUBSCRIBE', self::CHANNEL]) . self::resp(['SUBSCRIBE', self::OTHER]));
        $named = "\x00id \xff\r\n";
        fwrite($peer, self::resp(['subscribe', self::CHANNEL, 1])
            . self::resp(['subscribe', self::OTHER, 2])
            . self::resp(['message', self::CHANNEL, $named])
            . self::resp(['message', self::CHANNEL, ''])
            // A confirmation the core does not count (asked for once, confirmed twice), a
            // channel nobody waits on, and a confirmation of unsubscribing: nothing.
            . self::resp(['subscribe', self::CHANNEL, 2])
            . self::resp(['subscribe', 'redlock:released:other', 3])
            . self::resp(['message', 'redlock:released:other', 'x'])
            . self::resp(['unsubscribe', self::CHANNEL, 1]));
        $this->selectUntil(fn (): bool => count(self::peek($events)) >= 4);
        $listener->select(20_000);
        $this->assertSame(
            [[self::NODE, self::SUBSCRIBED], [self::NODE, self::SUBSCRIBED], [self::NODE, $named], [self::NODE, '']],
            self::notices($events),
        );

        // Once the acquisition ended, a message on its (lingering) channel is nobody's.
        $listener->unlisten();
        fwrite($peer, self::resp(['message', self::CHANNEL, 'late']));
        $listener->select(20_000);
        $this->assertSame([], self::notices($events));
    }

    public function testALostConnectionIsOpenedAgainAfterThePauseAndARefusalDoublesIt(): void
    {
        $firstUs = 1000 * Native::get()->ffi->redlock_subscriber_reopen_first_ms();
        $listener = $this->listener();
        $events = new Events();
        $listener->listen([self::CHANNEL], $events);
        $peer = $this->accept();
        $this->expectWritten($peer, self::resp(['SUBSCRIBE', self::CHANNEL]));
        fwrite($peer, self::resp(['subscribe', self::CHANNEL, 1]));
        $this->assertSame([[self::NODE, self::SUBSCRIBED]], $this->noticesWithin($events), 'the confirmation');

        // Killed: opened again (and subscribed again) after the first pause.
        fclose($peer);
        $lostAt = Clock::nowUs();
        $this->selectUntil(static fn (): bool => $listener->nextDue() !== null);
        $this->assertWithin($lostAt + $firstUs, Clock::nowUs() + $firstUs, $listener->nextDue(), 'reopened after the first pause');
        $peer = $this->accept();
        $this->assertGreaterThanOrEqual($firstUs - 10_000, Clock::nowUs() - $lostAt, 'after the pause');
        $this->expectWritten($peer, self::resp(['SUBSCRIBE', self::CHANNEL]));

        // Refused (NOPERM): closed, and lost as well, this time for twice as long; a
        // new wait meanwhile does not open it sooner.
        fwrite($peer, "-NOPERM User default has no permissions to run the 'subscribe' command\r\n");
        $refusedAt = Clock::nowUs();
        $this->expectClosed($peer);
        $this->assertSame([], self::notices($events), 'a refusal is no notice');
        $due = $listener->nextDue();
        $this->assertWithin($refusedAt + 2 * $firstUs, Clock::nowUs() + 2 * $firstUs, $due, 'reopened after twice the pause');
        $listener->unlisten();
        $listener->listen([self::CHANNEL], $events);
        $this->assertSame($due, $listener->nextDue(), 'a new wait does not cut the pause short');
        $peer = $this->accept();
        $this->assertGreaterThanOrEqual(2 * $firstUs - 10_000, Clock::nowUs() - $refusedAt, 'after the doubled pause');
        $this->expectWritten($peer, self::resp(['SUBSCRIBE', self::CHANNEL]));
        fwrite($peer, self::resp(['subscribe', self::CHANNEL, 1]));
        $this->assertSame([[self::NODE, self::SUBSCRIBED]], $this->noticesWithin($events), 'the confirmation once back');

        // Confirmed: the next loss pauses for the first pause again.
        fclose($peer);
        $lostAt = Clock::nowUs();
        $this->selectUntil(static fn (): bool => $listener->nextDue() !== null);
        $this->assertWithin($lostAt + $firstUs, Clock::nowUs() + $firstUs, $listener->nextDue(), 'the pause went back to the first');
        fclose($this->accept());

        // Once the acquisition ended, a lost connection is not opened again.
        $listener->unlisten();
        $listener->select(2 * $firstUs);
        $this->assertFalse($this->acceptWithin(0), 'opened again with nobody waiting');
    }

    public function testAConnectionThatConfirmsNothingInTimeCountsAsLost(): void
    {
        $firstUs = 1000 * Native::get()->ffi->redlock_subscriber_reopen_first_ms();
        $listener = $this->listener(150);
        $listener->listen([self::CHANNEL], new Events());
        $peer = $this->accept();
        $asked = Clock::nowUs();
        $this->expectWritten($peer, self::resp(['SUBSCRIBE', self::CHANNEL]));
        // The stand-in never answers: closed at the timeout, opened again after the pause.
        $this->expectClosed($peer);
        $this->assertGreaterThanOrEqual(140_000, Clock::nowUs() - $asked, 'closed at the timeout');
        $this->accept();
        $this->assertGreaterThanOrEqual(150_000 + $firstUs - 20_000, Clock::nowUs() - $asked, 'opened again after the pause');
    }

    /**
     * A node whose subscriber connection never opens (its accept queue is full): the
     * core's Subscriptions give it up at their timeout with their own Close, and the
     * listener closes the socket under way and reports nothing for it; it is opened
     * again after the pause. No timer of the binding's.
     */
    public function testASubscriberConnectionThatNeverOpensIsGivenUpAtTheTimeoutAndItsSocketClosed(): void
    {
        // Never skipped: the project runs on Linux, and a test without its prerequisite fails.
        $this->assertTrue(FullAcceptQueue::canCount(), 'counts opening sockets in /proc/net/tcp (Linux)');
        $firstUs = 1000 * Native::get()->ffi->redlock_subscriber_reopen_first_ms();
        $node = new FullAcceptQueue();
        try {
            $listener = $this->listener = new NoticeListener(Native::get(), [0 => NodeAddress::fromUrl($node->url())], 150);
            $events = new Events();
            $asked = Clock::nowUs();
            $listener->listen([self::CHANNEL], $events);
            $opened = Clock::nowUs();
            $this->assertSame(1, $node->synSent(), 'opening');
            $this->assertWithin($asked + 150_000, $opened + 150_000, $listener->nextDue(), 'due at the timeout');

            // Given up at the timeout, not never: the bound is liveness only.
            while ($node->synSent() > 0 && Clock::nowUs() < $opened + 5_000_000) {
                $listener->select(5_000);
            }
            $gaveUp = Clock::nowUs();
            $this->assertSame(0, $node->synSent(), 'its socket is closed');
            $this->assertGreaterThanOrEqual(145_000, $gaveUp - $opened, 'at the timeout');
            $this->assertLessThan(4_000_000, $gaveUp - $opened, 'at the timeout (room for a loaded machine)');
            $this->assertSame([], $listener->streams(), 'nothing left to select');
            $this->assertSame([], self::notices($events), 'nothing reported');

            while ($node->synSent() === 0 && Clock::nowUs() < $gaveUp + 1_000_000) {
                $listener->select(5_000);
            }
            $this->assertSame(1, $node->synSent(), 'opened again');
            $this->assertGreaterThanOrEqual($firstUs - 10_000, Clock::nowUs() - $gaveUp, 'after the pause');
            $listener->shutdown();
            $this->listener = null;
            $this->assertSame(0, $node->synSent(), 'closed with the client');
        } finally {
            $node->close();
        }
    }

    public function testAChannelLingersAfterTheWaitThenIsUnsubscribedAndTheConnectionClosed(): void
    {
        $lingerUs = 1000 * Native::get()->ffi->redlock_notice_channel_linger_ms();
        $listener = $this->listener();
        $events = new Events();
        $listener->listen([self::CHANNEL], $events);
        $peer = $this->accept();
        $this->expectWritten($peer, self::resp(['SUBSCRIBE', self::CHANNEL]));
        fwrite($peer, self::resp(['subscribe', self::CHANNEL, 1]));
        $this->assertSame([[self::NODE, self::SUBSCRIBED]], $this->noticesWithin($events));

        // The wait ended; a message on the lingering channel before the next wait starts
        // is nobody's, and the next wait on it needs no new SUBSCRIBE.
        $listener->unlisten();
        fwrite($peer, self::resp(['message', self::CHANNEL, 'before']));
        usleep(20_000);
        $listener->listen([self::CHANNEL], $events);
        fwrite($peer, self::resp(['message', self::CHANNEL, 'during']));
        $this->assertSame([[self::NODE, 'during']], $this->noticesWithin($events));

        // Nobody waits: after the linger, UNSUBSCRIBE, then the connection closes.
        $leaving = Clock::nowUs();
        $listener->unlisten();
        $leftAt = Clock::nowUs();
        $this->assertWithin($leaving + $lingerUs, $leftAt + $lingerUs, $listener->nextDue(), 'due at the linger\'s end');
        $this->expectWritten($peer, self::resp(['UNSUBSCRIBE', self::CHANNEL]), 2 * $lingerUs);
        $this->assertGreaterThanOrEqual($lingerUs - 10_000, Clock::nowUs() - $leftAt, 'after the linger');
        $this->expectClosed($peer);
        $this->assertNull($listener->nextDue(), 'nothing left to do');
        $this->assertSame([], $listener->streams());
    }

    public function testWithoutAnAddressNothingIsOpened(): void
    {
        $listener = new NoticeListener(Native::get(), [0 => null, 1 => null]);
        $listener->listen([self::CHANNEL], new Events());
        $this->assertSame([], $listener->streams());
        $this->assertNull($listener->nextDue());
        $listener->unlisten();
        $listener->shutdown();
    }

    private function listener(?int $timeoutMs = null): NoticeListener
    {
        return $this->listener = new NoticeListener(
            Native::get(),
            [0 => null, 1 => null, self::NODE => NodeAddress::fromUrl('redis://127.0.0.1:' . self::FAKE_PORT)],
            $timeoutMs,
        );
    }

    /** @return resource the listener's next connection, accepted while the listener runs (within 2 s) */
    private function accept()
    {
        $deadline = Clock::nowUs() + 2_000_000;
        while (Clock::nowUs() < $deadline) {
            $peer = $this->acceptWithin(5_000);
            if ($peer !== false) {
                return $peer;
            }
        }
        $this->fail('the listener did not connect');
    }

    /** @return resource|false a connection accepted after one round of the listener */
    private function acceptWithin(int $timeoutUs)
    {
        $this->listener?->select($timeoutUs);
        $read = [$this->server];
        $none = null;
        if (stream_select($read, $none, $none, 0, 0) > 0) {
            $peer = stream_socket_accept($this->server, 0);
            $this->assertNotFalse($peer);
            return $peer;
        }
        return false;
    }

    /** @param resource $peer the listener writes exactly `$expected` on `$peer` (within `$withinUs`) */
    private function expectWritten($peer, string $expected, int $withinUs = 2_000_000): void
    {
        $deadline = Clock::nowUs() + $withinUs;
        $got = '';
        while (strlen($got) < strlen($expected) && Clock::nowUs() < $deadline) {
            $this->listener?->select(5_000);
            $read = [$peer];
            $none = null;
            if (stream_select($read, $none, $none, 0, 0) > 0) {
                $chunk = (string) fread($peer, 65536);
                if ($chunk === '' && feof($peer)) {
                    break;
                }
                $got .= $chunk;
            }
        }
        $this->assertSame($expected, $got);
    }

    /** @param resource $peer the listener closes its end of `$peer` (within 2 s), writing nothing more */
    private function expectClosed($peer): void
    {
        $deadline = Clock::nowUs() + 2_000_000;
        while (Clock::nowUs() < $deadline) {
            $this->listener?->select(5_000);
            $read = [$peer];
            $none = null;
            if (stream_select($read, $none, $none, 0, 0) > 0) {
                $chunk = (string) fread($peer, 65536);
                $this->assertSame('', $chunk, 'written before closing');
                if (feof($peer)) {
                    fclose($peer);
                    return;
                }
            }
        }
        $this->fail('the listener did not close the connection');
    }

    /** @return list<array{int, ?string}> the notices heard within 2 s (at least one) */
    private function noticesWithin(Events $events): array
    {
        $this->selectUntil(static fn (): bool => !$events->isEmpty());
        return self::notices($events);
    }

    private function selectUntil(\Closure $done): void
    {
        $deadline = Clock::nowUs() + 2_000_000;
        while (!$done()) {
            $this->assertLessThan($deadline, Clock::nowUs(), 'in time');
            $this->listener?->select(5_000);
        }
    }

    /** @param list<string|int> $items */
    private static function resp(array $items): string
    {
        $out = '*' . count($items) . "\r\n";
        foreach ($items as $item) {
            $out .= is_int($item) ? ":$item\r\n" : '$' . strlen($item) . "\r\n$item\r\n";
        }
        return $out;
    }

    /** @return list<array{int, ?string}> the notices queued, left in place */
    private static function peek(Events $events): array
    {
        $copy = clone $events;
        return self::notices($copy);
    }

    /**
     * @return list<array{int, ?string}> the notices queued, node and message, taken out;
     *     a confirmed subscription as node and self::SUBSCRIBED
     */
    private static function notices(Events $events): array
    {
        $out = [];
        while (($event = $events->shift()) !== null) {
            if ($event[0] === Events::NOTICE) {
                $out[] = [$event[1], $event[3]];
            } elseif ($event[0] === Events::SUBSCRIBED) {
                $out[] = [$event[1], self::SUBSCRIBED];
            }
        }
        return $out;
    }

    /**
     * `$value` (an instant) lies between `$earliest` and `$latest`, instants the test
     * measured around the event that set it: a loaded machine can only move both ends
     * apart, never break the assertion (1 ms either side for rounding).
     */
    private function assertWithin(int $earliest, int $latest, ?int $value, string $what): void
    {
        $this->assertNotNull($value, $what);
        $this->assertGreaterThanOrEqual($earliest - 1_000, $value, $what);
        $this->assertLessThanOrEqual($latest + 1_000, $value, $what);
    }
}
