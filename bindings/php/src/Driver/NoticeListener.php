<?php

declare(strict_types=1);

namespace Redlock\Driver;

use Redlock\Ffi\Constants;
use Redlock\Ffi\Native;
use Redlock\Ffi\Reply;

/**
 * @internal Release notices (docs/waiting.md): one subscriber connection per node, its
 * own non-blocking socket in RESP `SUBSCRIBE` mode (a subscribed connection can carry
 * nothing else), read by the driver's select loop. While an acquisition waits, each
 * message on one of its channels is reported as Events::notice($node, $message) for the
 * core's Operation::handleNoticeMessage(); nothing else is decided here.
 *
 * A notice only ever makes an attempt start sooner: a subscriber connection that fails
 * or is killed is simply not heard from (the core's retry schedule goes on), and it is
 * opened again by the next waiting acquisition.
 */
final class NoticeListener
{
    /** @var array<int, NoticeSubscriber> node => its subscriber (nodes without an address have none) */
    private array $subscribers = [];
    /** @var array<string, true> the channels of the acquisition that waits now */
    private array $channels = [];
    private ?Events $events = null;

    /** @param array<int, ?NodeAddress> $addresses node => where to subscribe (null: nowhere) */
    public function __construct(Native $native, array $addresses)
    {
        foreach ($addresses as $node => $address) {
            if ($address !== null) {
                $this->subscribers[$node] = new NoticeSubscriber($native, $address, $node, $this);
            }
        }
    }

    /** Subscribes every node's connection to `$channels`, opening it if needed. */
    public function listen(array $channels, Events $events): void
    {
        $this->events = $events;
        $this->channels = array_fill_keys($channels, true);
        if ($channels === []) {
            return;
        }
        $command = StreamConnection::encode(array_merge(['SUBSCRIBE'], $channels));
        foreach ($this->subscribers as $subscriber) {
            $subscriber->send($command);
        }
    }

    /**
     * Stops listening: UNSUBSCRIBE on every open connection, so releasers stop counting
     * this client as a listener (and holding their outcome for it).
     */
    public function unlisten(): void
    {
        if ($this->channels === []) {
            return;
        }
        $this->channels = [];
        $this->events = null;
        $command = StreamConnection::encode(['UNSUBSCRIBE']);
        foreach ($this->subscribers as $subscriber) {
            $subscriber->sendIfOpen($command);
        }
    }

    /**
     * The open connections' streams, for a select loop: id => [read stream, write
     * stream or null, subscriber].
     *
     * @return array<int, array{resource, resource|null, NoticeSubscriber}>
     */
    public function streams(): array
    {
        $out = [];
        foreach ($this->subscribers as $subscriber) {
            $read = $subscriber->connection->readStream();
            if ($read !== null) {
                $out[(int) $read] = [$read, $subscriber->connection->writeStream(), $subscriber];
            }
        }
        return $out;
    }

    /** One select over the subscriber connections alone, of at most `$timeoutUs`. */
    public function select(int $timeoutUs): void
    {
        $streams = $this->streams();
        if ($streams === []) {
            if ($timeoutUs > 0) {
                usleep($timeoutUs);
            }
            return;
        }
        $read = [];
        $write = [];
        foreach ($streams as $id => [$r, $w]) {
            $read[$id] = $r;
            if ($w !== null) {
                $write[$id] = $w;
            }
        }
        $except = null;
        $ready = @stream_select($read, $write, $except, intdiv($timeoutUs, 1_000_000), $timeoutUs % 1_000_000);
        if ($ready === false || $ready === 0) {
            return;
        }
        foreach ($write as $stream) {
            $streams[(int) $stream][2]->connection->onWritable();
        }
        foreach ($read as $stream) {
            $streams[(int) $stream][2]->connection->onReadable();
        }
    }

    public function shutdown(): void
    {
        $this->channels = [];
        $this->events = null;
        foreach ($this->subscribers as $subscriber) {
            $subscriber->connection->close();
        }
    }

    /** @internal a message from node `$node`'s subscriber connection */
    public function message(int $node, Reply $reply): void
    {
        if ($this->events === null || $reply->kind() !== Constants::REPLY_ARRAY) {
            return;
        }
        $items = $reply->items();
        if (count($items) !== 3 || $items[0]->kind() !== Constants::REPLY_BULK || $items[1]->kind() !== Constants::REPLY_BULK) {
            return;
        }
        // Confirmations of (un)subscribing, and messages of channels no one waits on now,
        // are not notices.
        if (strtolower($items[0]->bytes()) === 'message' && isset($this->channels[$items[1]->bytes()])) {
            // The payload names the waiter first in the node's queue (or is empty): the
            // core reads it, so it goes on byte for byte.
            $this->events->notice($node, $items[2]->kind() === Constants::REPLY_BULK ? $items[2]->bytes() : null);
        }
    }
}
