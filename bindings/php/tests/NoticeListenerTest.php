<?php

declare(strict_types=1);

namespace Redlock\Tests;

use PHPUnit\Framework\TestCase;
use Redlock\Clock;
use Redlock\Driver\Events;
use Redlock\Driver\NodeAddress;
use Redlock\Driver\NoticeListener;
use Redlock\Ffi\Decoder;
use Redlock\Ffi\Native;

/**
 * What the subscriber connections' replies become for the core, without a network: a
 * message on the waiting acquisition's channel is a notice with its payload, and a
 * confirmed subscription to it is reported for the core (docs/bindings.md, rule 13).
 */
final class NoticeListenerTest extends TestCase
{
    private const CHANNEL = 'redlock:released:r';
    private const FAKE_PORT = 7559;
    private const SUBSCRIBED = '(subscribed)';

    public function testMessagesAndSubscribeConfirmationsOfTheWaitedChannelsAreReported(): void
    {
        $listener = new NoticeListener(Native::get(), []);
        $events = new Events();
        $listener->listen([self::CHANNEL, 'redlock:released:s'], $events);
        $named = "\x00id \xff\r\n";
        $this->feed($listener, 2, self::resp(['subscribe', self::CHANNEL, 1])
            . self::resp(['subscribe', 'redlock:released:s', 2])
            . self::resp(['message', self::CHANNEL, $named])
            . self::resp(['message', self::CHANNEL, ''])
            // Another acquisition's channel, and confirmations of unsubscribing: nothing.
            . self::resp(['subscribe', 'redlock:released:other', 3])
            . self::resp(['message', 'redlock:released:other', 'x'])
            . self::resp(['unsubscribe', self::CHANNEL, 1]));
        $this->assertSame([[2, self::SUBSCRIBED], [2, self::SUBSCRIBED], [2, $named], [2, '']], self::notices($events));

        // Once the acquisition ended, a late confirmation is nobody's.
        $listener->unlisten();
        $this->feed($listener, 2, self::resp(['subscribe', self::CHANNEL, 1]));
        $this->assertSame([], self::notices($events));
    }

    public function testALostConnectionIsOpenedAgainAfterAPauseAndItsConfirmationIsANotice(): void
    {
        // A stand-in node on port 7559 (a plain socket: what it is sent and closed on cue).
        $server = stream_socket_server('tcp://127.0.0.1:' . self::FAKE_PORT, $errno, $errstr);
        $this->assertNotFalse($server, "listen on " . self::FAKE_PORT . ": $errstr ($errno)");
        $listener = new NoticeListener(Native::get(), [0 => NodeAddress::fromUrl('redis://127.0.0.1:' . self::FAKE_PORT)]);
        $events = new Events();
        try {
            $listener->listen([self::CHANNEL], $events);
            $peer = $this->accept($server, $listener);
            $this->assertSame(self::resp(['SUBSCRIBE', self::CHANNEL]), $this->readFrom($peer, $listener));
            fwrite($peer, self::resp(['subscribe', self::CHANNEL, 1]));
            $this->assertSame([[0, self::SUBSCRIBED]], $this->noticesWithin($listener, $events), 'the confirmation');

            // Killed: opened again (and subscribed again) after the first pause.
            fclose($peer);
            $lostAt = Clock::nowUs();
            $this->selectUntil($listener, fn (): bool => $listener->reopenDue(Clock::nowUs()) !== null);
            $this->assertEqualsWithDelta($lostAt + $listener->reopenFirstUs, (int) $listener->reopenDue(Clock::nowUs()), 50_000);
            $peer = $this->accept($server, $listener);
            $this->assertGreaterThanOrEqual($listener->reopenFirstUs - 10_000, Clock::nowUs() - $lostAt, 'after the pause');
            $this->assertSame(self::resp(['SUBSCRIBE', self::CHANNEL]), $this->readFrom($peer, $listener));

            // Refused (NOPERM): lost as well, this time for twice as long.
            fwrite($peer, "-NOPERM User default has no permissions to run the 'subscribe' command\r\n");
            $refusedAt = Clock::nowUs();
            $this->selectUntil($listener, fn (): bool => $listener->reopenDue(Clock::nowUs()) !== null);
            $this->assertSame([], self::notices($events), 'a refusal is no notice');
            $this->assertEqualsWithDelta($refusedAt + 2 * $listener->reopenFirstUs, (int) $listener->reopenDue(Clock::nowUs()), 50_000);
            $peer = $this->accept($server, $listener);
            $this->assertSame(self::resp(['SUBSCRIBE', self::CHANNEL]), $this->readFrom($peer, $listener));
            fwrite($peer, self::resp(['subscribe', self::CHANNEL, 1]));
            $this->assertSame([[0, self::SUBSCRIBED]], $this->noticesWithin($listener, $events), 'the confirmation once back');

            // Once the acquisition ended, a lost connection waits for the next one.
            $listener->unlisten();
            fclose($peer);
            $listener->select(50_000);
            $this->assertNull($listener->reopenDue(PHP_INT_MAX));
        } finally {
            $listener->shutdown();
            fclose($server);
        }
    }

    public function testARefusedSubscriptionIsNoNotice(): void
    {
        $listener = new NoticeListener(Native::get(), []);
        $events = new Events();
        $listener->listen([self::CHANNEL], $events);
        $this->feed($listener, 1, "-NOPERM User default has no permissions to run the 'subscribe' command\r\n");
        $this->assertSame([], self::notices($events));
    }

    /**
     * @param resource $server
     * @return resource the listener's connection, accepted while the listener runs
     */
    private function accept($server, NoticeListener $listener)
    {
        $deadline = Clock::nowUs() + 2_000_000;
        while (Clock::nowUs() < $deadline) {
            $listener->select(5_000);
            $read = [$server];
            $none = null;
            if (stream_select($read, $none, $none, 0, 5_000) > 0) {
                $peer = stream_socket_accept($server, 0);
                $this->assertNotFalse($peer);
                return $peer;
            }
        }
        $this->fail('the listener did not connect');
    }

    /** @param resource $peer what the listener wrote on `$peer` (one write, within 2 s) */
    private function readFrom($peer, NoticeListener $listener): string
    {
        $deadline = Clock::nowUs() + 2_000_000;
        while (Clock::nowUs() < $deadline) {
            $listener->select(5_000);
            $read = [$peer];
            $none = null;
            if (stream_select($read, $none, $none, 0, 5_000) > 0) {
                return (string) fread($peer, 65536);
            }
        }
        $this->fail('the listener wrote nothing');
    }

    /** @return list<array{int, ?string}> the notices heard within 2 s (at least one) */
    private function noticesWithin(NoticeListener $listener, Events $events): array
    {
        $this->selectUntil($listener, static fn (): bool => !$events->isEmpty());
        return self::notices($events);
    }

    private function selectUntil(NoticeListener $listener, \Closure $done): void
    {
        $deadline = Clock::nowUs() + 2_000_000;
        while (!$done()) {
            $this->assertLessThan($deadline, Clock::nowUs(), 'in time');
            $listener->select(5_000);
        }
    }

    private function feed(NoticeListener $listener, int $node, string $bytes): void
    {
        $decoder = new Decoder(Native::get());
        $decoder->feed($bytes);
        while (($reply = $decoder->next()) !== null) {
            $listener->message($node, $reply);
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
}
