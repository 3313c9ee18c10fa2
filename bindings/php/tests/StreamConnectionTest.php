<?php

declare(strict_types=1);

namespace Redlock\Tests;

use PHPUnit\Framework\TestCase;
use Redlock\Clock;
use Redlock\Driver\ConnectionListener;
use Redlock\Driver\Events;
use Redlock\Driver\NodeAddress;
use Redlock\Driver\StreamChannel;
use Redlock\Driver\StreamConnection;
use Redlock\Ffi\Native;
use Redlock\Ffi\Reply;

/**
 * What a node's stream connection still does about opening: it keeps no deadline of its
 * own (the node's link gives an attempt up at its connect timeout, see
 * ConnectTimeoutTest), and a close while it opens closes the socket under way; the
 * node's channel then reports nothing for it.
 */
final class StreamConnectionTest extends TestCase
{
    private ?FullAcceptQueue $node = null;

    protected function setUp(): void
    {
        // Never skipped: the project runs on Linux, and a test without its prerequisite fails.
        $this->assertTrue(FullAcceptQueue::canCount(), 'counts opening sockets in /proc/net/tcp (Linux)');
        $this->node = new FullAcceptQueue();
    }

    protected function tearDown(): void
    {
        $this->node?->close();
        $this->node = null;
    }

    public function testAConnectionThatNeverOpensKeepsOpeningUntilClosedThenItsSocketIsGone(): void
    {
        $node = $this->node();
        $listener = new class implements ConnectionListener {
            /** @var list<string> */
            public array $events = [];

            public function connected(): void
            {
                $this->events[] = 'connected';
            }

            public function closed(string $cause, string $text): void
            {
                $this->events[] = "closed $cause: $text";
            }

            public function reply(Reply $reply): void
            {
                $this->events[] = 'reply ' . $reply->kind();
            }
        };
        $connection = new StreamConnection(Native::get(), NodeAddress::fromUrl($node->url()), $listener);
        $connection->connect();
        // Past the time the connection takes to open on loopback: still opening, nothing
        // reported, no timer of its own.
        self::serve($connection, 300_000);
        $this->assertSame([], $listener->events);
        $this->assertTrue($connection->isOpen());
        $this->assertFalse($connection->isReady());
        $this->assertNotNull($connection->writeStream(), 'waits to become writable');
        $this->assertSame(1, $node->synSent(), 'its socket is opening');

        $connection->close();
        $this->assertSame(['closed other: closed by the client'], $listener->events);
        $this->assertFalse($connection->isOpen());
        $this->assertNull($connection->readStream());
        $this->assertSame(0, $node->synSent(), 'its socket is closed');
        $connection->close();
        $this->assertCount(1, $listener->events, 'closed once');
    }

    /**
     * The link's Close while the node's connection opens (what it says at its connect
     * timeout): the channel gives the attempt up, closing the socket, and reports nothing
     * more for it; the next open() is a new attempt.
     */
    public function testAChannelGivesUpAnAttemptOnTheLinksCloseAndReportsNothingForIt(): void
    {
        $node = $this->node();
        $channel = new StreamChannel(Native::get(), NodeAddress::fromUrl($node->url()), 3);
        $events = new Events();
        $channel->open($events);
        $connection = $channel->active();
        $this->assertNotNull($connection);
        self::serve($connection, 100_000);
        $this->assertTrue($events->isEmpty());
        $this->assertSame(1, $node->synSent());
        $this->assertNull($channel->deadlineUs(), 'no deadline of its own');

        $channel->close();
        $this->assertTrue($events->isEmpty(), 'nothing reported for the attempt given up');
        $this->assertSame(0, $node->synSent(), 'its socket is closed');
        $this->assertNull($channel->active()?->readStream(), 'nothing left to select');

        $channel->open($events);
        $this->assertSame(1, $node->synSent(), 'a new attempt');
        $channel->close();
        $this->assertTrue($events->isEmpty());
        $this->assertSame(0, $node->synSent());
    }

    /** Selects on `$connection` as the driver does, for `$forUs`. */
    private static function serve(StreamConnection $connection, int $forUs): void
    {
        $until = Clock::nowUs() + $forUs;
        while (Clock::nowUs() < $until) {
            $stream = $connection->writeStream();
            if ($stream === null) {
                return;
            }
            $read = [];
            $write = [$stream];
            $except = null;
            if (@stream_select($read, $write, $except, 0, 20_000) > 0) {
                $connection->onWritable();
            }
        }
    }

    private function node(): FullAcceptQueue
    {
        $this->assertNotNull($this->node);
        return $this->node;
    }
}
