<?php

declare(strict_types=1);

namespace Redlock\Driver;

use Redlock\Clock;
use Redlock\Exception\InvalidArgumentException;
use Redlock\Ffi\Link;
use Redlock\Ffi\Native;
use Redlock\Sentinel;

/**
 * The default driver: one non-blocking `stream_socket_client` connection per node
 * (StreamConnection), all served by one `stream_select` loop, writing the link's RESP
 * bytes and reading replies with the core's decoder. Every node is written at once and
 * the loop returns to the core after every event, so an acquisition ends at the
 * quorum, never waiting for the slowest node.
 *
 * Supports `rediss://` (TLS, PHP's `ssl` context options via `$tlsOptions`) and AUTH
 * (`redis://:password@host` or `redis://user:password@host`).
 *
 * Release notices for waiting acquisitions come over a second connection per node in
 * `SUBSCRIBE` mode (NoticeListener), opened, subscribed and closed as the core's
 * Subscriptions decide and served by the same select loop. Every connection, the
 * nodes' and the subscribers', gets the core's connect timeout (2 s, as in every
 * binding) to open, and a subscriber as long to confirm a subscription: the core gives
 * an attempt up at that time (the node's link, or the Subscriptions, output Close) and
 * the driver then closes the socket under way; it keeps no timer of its own.
 *
 * With a Sentinel (see Redlock\Sentinel) the one node is the master the Sentinels name,
 * asked on its own sockets at every connection attempt (StreamChannel).
 */
final class StreamDriver implements Driver
{
    /** @var list<StreamChannel> */
    private array $channels = [];
    private ?NoticeListener $notices = null;
    private readonly Native $native;

    /**
     * @param list<string|NodeAddress>|Sentinel $nodes URLs (redis://, rediss://) or
     *     addresses; or the master a Sentinel names (one node)
     * @param array<string, mixed> $tlsOptions PHP `ssl` context options for rediss:// URLs
     */
    public function __construct(array|Sentinel $nodes, array $tlsOptions = [], ?Native $native = null)
    {
        if ($nodes instanceof Sentinel) {
            $this->native = $native ?? Native::get();
            $this->channels[] = new StreamChannel($this->native, $nodes, 0);
            return;
        }
        if ($nodes === []) {
            throw new InvalidArgumentException('no nodes: give at least one Redis URL', 'no_nodes');
        }
        $native ??= Native::get();
        $this->native = $native;
        foreach (array_values($nodes) as $i => $node) {
            $address = $node instanceof NodeAddress ? $node : NodeAddress::fromUrl($node, $tlsOptions);
            $this->channels[] = new StreamChannel($native, $address, $i);
        }
    }

    public function labels(): array
    {
        return array_map(static fn (StreamChannel $c): string => $c->label(), $this->channels);
    }

    public function addresses(): array
    {
        return array_map(static fn (StreamChannel $c): string => $c->hostPort(), $this->channels);
    }

    public function connectTimeoutMs(int $node): ?int
    {
        return $this->channels[$node]->connectTimeoutMs();
    }

    public function connect(int $node, Events $events): void
    {
        $this->channels[$node]->open($events);
    }

    public function write(int $node, int $writeId, int $argc, Link $link): void
    {
        $this->channels[$node]->write($writeId, $link->writeResp());
    }

    public function close(int $node): void
    {
        $this->channels[$node]->close();
    }

    public function wait(int $untilUs, Events $events): void
    {
        while ($events->isEmpty()) {
            $now = Clock::nowUs();
            if ($now >= $untilUs) {
                return;
            }
            $this->select($untilUs - $now);
        }
    }

    public function poll(Events $events): void
    {
        $this->select(0);
    }

    public function hasPendingIo(): bool
    {
        return false;
    }

    public function listen(array $channels, Events $events): void
    {
        $this->notices ??= new NoticeListener(
            $this->native,
            array_map(static fn (StreamChannel $c): ?NodeAddress => $c->noticeAddress(), $this->channels),
        );
        $this->notices->listen($channels, $events);
    }

    public function unlisten(): void
    {
        $this->notices?->unlisten();
    }

    public function shutdown(): void
    {
        foreach ($this->channels as $channel) {
            $channel->close();
        }
        $this->notices?->shutdown();
        $this->notices = null;
    }

    /** One stream_select round of at most `$timeoutUs`, then the events it found. */
    private function select(int $timeoutUs): void
    {
        $read = [];
        $write = [];
        /** @var array<int, StreamConnection> $byId */
        $byId = [];
        $deadline = null;
        foreach ($this->channels as $channel) {
            $due = $channel->deadlineUs();
            if ($due !== null) {
                $deadline = min($deadline ?? $due, $due);
            }
            $connection = $channel->active();
            $stream = $connection?->readStream();
            if ($connection === null || $stream === null) {
                continue;
            }
            $id = (int) $stream;
            $byId[$id] = $connection;
            $read[$id] = $stream;
            $w = $connection->writeStream();
            if ($w !== null) {
                $write[$id] = $w;
            }
        }
        // The subscriber connections' next instant (a linger, a pause, a timeout) bounds the wait.
        $noticesDue = $this->notices?->nextDue();
        foreach ($this->notices?->streams() ?? [] as $id => [$r, $w, $subscriber]) {
            $byId[$id] = $subscriber->connection;
            $read[$id] = $r;
            if ($w !== null) {
                $write[$id] = $w;
            }
        }
        if ($deadline !== null) {
            // A Sentinel query gives up at its own deadline (a node's connection opening
            // is given up by its link, whose deadline bounds the engine's wait).
            $timeoutUs = max(0, min($timeoutUs, $deadline - Clock::nowUs()));
        }
        if ($noticesDue !== null) {
            $timeoutUs = max(0, min($timeoutUs, $noticesDue - Clock::nowUs()));
        }
        if ($read === []) {
            if ($timeoutUs > 0) {
                usleep(min($timeoutUs, 1_000_000));
            }
        } else {
            $except = null;
            $ready = @stream_select($read, $write, $except, intdiv($timeoutUs, 1_000_000), $timeoutUs % 1_000_000);
            if ($ready !== false && $ready > 0) {
                foreach ($write as $stream) {
                    $byId[(int) $stream]->onWritable();
                }
                foreach ($read as $stream) {
                    $byId[(int) $stream]->onReadable();
                }
            }
        }
        if ($deadline !== null) {
            $now = Clock::nowUs();
            foreach ($this->channels as $channel) {
                $channel->checkTimeout($now);
            }
        }
        // After the reads: a confirmation that arrived in time is not overdue.
        $this->notices?->handleDue(Clock::nowUs());
    }
}
