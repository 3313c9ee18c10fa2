<?php

declare(strict_types=1);

namespace Redlock\Driver;

use Redlock\Clock;
use Redlock\Ffi\Constants;
use Redlock\Ffi\Native;
use Redlock\Ffi\Reply;
use Redlock\Ffi\Subscriptions;

/**
 * @internal Release notices (docs/waiting.md): one subscriber connection per node, its
 * own non-blocking socket in RESP `SUBSCRIBE` mode (a subscribed connection can carry
 * nothing else), read by the driver's select loop.
 *
 * What the connections do is the core's Subscriptions' to decide (core/src/subscriptions.rs):
 * which channels each one subscribes, how long a channel lingers after its wait ended,
 * when a connection opens and closes, how long a failed one (dropped, refused
 * `SUBSCRIBE`, or neither opened nor confirmed in time) stays closed. This class tells
 * it when a wait starts and ends (want, unwant) and what the connections did (opened,
 * lost, refused, confirmed, time passing), and carries out what it outputs.
 *
 * What is left here is dispatch: while an acquisition waits, each message on one of its
 * channels is reported as Events::notice($node, $message) for the core's
 * Operation::handleNoticeMessage(), and each confirmed subscription to one that the
 * core says counts as Events::subscribed($node), for Operation::handleSubscribed()
 * (docs/bindings.md, rule 13). PHP runs one acquisition at a time, so the waiters of a
 * channel are that acquisition or nobody.
 *
 * A PHP process does I/O only inside a call: time passes for the connections (a
 * channel's linger, a reopening's pause) only while the client runs some operation or
 * flush(). A channel left lingering when the call returns stays subscribed until the
 * client's next call past the linger, or its close().
 */
final class NoticeListener
{
    /** The core's policy over the nodes that have a subscriber; null when none has. */
    private readonly ?Subscriptions $subscriptions;
    /** @var list<NoticeSubscriber> by their index in $subscriptions (nodes without an address have none) */
    private array $subscribers = [];
    /** @var array<string, true> the channels of the acquisition that waits now */
    private array $waiting = [];
    private ?Events $events = null;
    /** Outputs are being carried out (a transport that reports at once does not nest). */
    private bool $carrying = false;

    /**
     * @param array<int, ?NodeAddress> $addresses node => where to subscribe (null: nowhere)
     * @param ?int $timeoutMs how long a subscriber connection may take to open, or a
     *   subscription to be confirmed, before it counts as lost; null (a driver without a
     *   connect timeout of its own): the core's default, as in every binding
     */
    public function __construct(Native $native, array $addresses, ?int $timeoutMs = null)
    {
        $timeoutMs ??= $native->connectTimeoutDefaultMs();
        foreach ($addresses as $node => $address) {
            if ($address !== null) {
                $this->subscribers[] = new NoticeSubscriber($native, $address, $node, count($this->subscribers), $this);
            }
        }
        $this->subscriptions = $this->subscribers === []
            ? null
            : Subscriptions::create($native, count($this->subscribers), $timeoutMs);
    }

    /**
     * An acquisition starts waiting on `$channels`: each is wanted on every node (the
     * core opens and subscribes as its pauses allow), and their notices and counted
     * confirmations go to `$events` until unlisten().
     *
     * @param list<string> $channels
     */
    public function listen(array $channels, Events $events): void
    {
        $this->unlisten();
        if ($this->subscriptions === null || $this->subscriptions->isClosed()) {
            return;
        }
        // What arrived before this wait started (on a lingering channel) is nobody's.
        $this->select(0);
        $this->events = $events;
        $this->waiting = array_fill_keys($channels, true);
        $now = Clock::nowUs();
        foreach (array_keys($this->waiting) as $channel) {
            $this->subscriptions->want((string) $channel, $now);
        }
        $this->carryOut();
    }

    /** The waiting acquisition ended: its channels are no longer wanted (they linger). */
    public function unlisten(): void
    {
        $waiting = array_keys($this->waiting);
        $this->waiting = [];
        $this->events = null;
        if ($waiting === [] || $this->subscriptions === null || $this->subscriptions->isClosed()) {
            return;
        }
        $now = Clock::nowUs();
        foreach ($waiting as $channel) {
            $this->subscriptions->unwant((string) $channel, $now);
        }
        $this->carryOut();
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

    /** When handleDue() must next run (Clock::nowUs()), for the select's timeout; null: never. */
    public function nextDue(): ?int
    {
        $subscriptions = $this->subscriptions;
        if ($subscriptions === null || $subscriptions->isClosed()) {
            return null;
        }
        return $subscriptions->pollTimeout();
    }

    /**
     * Hands the core the time if it is due (lingering channels unsubscribed, connections
     * overdue closed, paused ones opened again) and carries out what follows. Call it
     * after reading what arrived: a confirmation waiting unread is not overdue.
     */
    public function handleDue(int $nowUs): void
    {
        $due = $this->nextDue();
        if ($due !== null && $due <= $nowUs) {
            $this->subscriptions?->handleTimeout($nowUs);
            $this->carryOut();
        }
    }

    /** One select over the subscriber connections alone, of at most `$timeoutUs`. */
    public function select(int $timeoutUs): void
    {
        $due = $this->nextDue();
        if ($due !== null) {
            $timeoutUs = max(0, min($timeoutUs, $due - Clock::nowUs()));
        }
        $streams = $this->streams();
        if ($streams === []) {
            if ($timeoutUs > 0) {
                usleep($timeoutUs);
            }
            $this->handleDue(Clock::nowUs());
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
        if ($ready !== false && $ready > 0) {
            foreach ($write as $stream) {
                $streams[(int) $stream][2]->connection->onWritable();
            }
            foreach ($read as $stream) {
                $streams[(int) $stream][2]->connection->onReadable();
            }
        }
        $this->handleDue(Clock::nowUs());
    }

    /** Closes every subscriber connection and frees the core's Subscriptions (the client is closing). */
    public function shutdown(): void
    {
        $this->waiting = [];
        $this->events = null;
        foreach ($this->subscribers as $subscriber) {
            $subscriber->close();
        }
        $this->subscriptions?->close();
    }

    /** @internal subscriber `$index`'s connection opened */
    public function opened(int $index): void
    {
        $this->report(static fn (Subscriptions $s, int $now) => $s->handleOpened($index, $now));
    }

    /** @internal subscriber `$index`'s connection closed or could not open */
    public function lost(int $index): void
    {
        $this->report(static fn (Subscriptions $s, int $now) => $s->handleLost($index, $now));
    }

    /** @internal a reply on subscriber `$index`'s connection */
    public function message(int $index, Reply $reply): void
    {
        $subscriptions = $this->subscriptions;
        if ($subscriptions === null || $subscriptions->isClosed()) {
            return;
        }
        if ($reply->kind() === Constants::REPLY_ERROR) {
            // SUBSCRIBE refused (NOPERM): the core closes the connection and paces its reopening.
            $this->report(static fn (Subscriptions $s, int $now) => $s->handleRefused($index, $now));
            return;
        }
        if ($reply->kind() !== Constants::REPLY_ARRAY) {
            return;
        }
        $items = $reply->items();
        if (count($items) !== 3 || $items[0]->kind() !== Constants::REPLY_BULK || $items[1]->kind() !== Constants::REPLY_BULK) {
            return;
        }
        $kind = strtolower($items[0]->bytes());
        $channel = $items[1]->bytes();
        $node = $this->subscribers[$index]->node;
        if ($kind === 'subscribe') {
            // Subscribed: a release published on this node before then reached nobody.
            // Only a confirmation the core counts goes to the waiter, which decides.
            if ($subscriptions->handleConfirmed($index, $channel, Clock::nowUs()) && isset($this->waiting[$channel])) {
                $this->events?->subscribed($node);
            }
        } elseif ($kind === 'message' && isset($this->waiting[$channel])) {
            // The payload names the waiter first in the node's queue (or is empty): the
            // core reads it, so it goes on byte for byte. Messages on channels nobody
            // waits on (lingering ones) and confirmations of unsubscribing are nobody's.
            $this->events?->notice($node, $items[2]->kind() === Constants::REPLY_BULK ? $items[2]->bytes() : null);
        }
    }

    /** @param \Closure(Subscriptions, int): void $input */
    private function report(\Closure $input): void
    {
        $subscriptions = $this->subscriptions;
        if ($subscriptions === null || $subscriptions->isClosed()) {
            return;
        }
        $input($subscriptions, Clock::nowUs());
        $this->carryOut();
    }

    /** Does what the core's Subscriptions output, until nothing is left. */
    private function carryOut(): void
    {
        $subscriptions = $this->subscriptions;
        if ($subscriptions === null || $this->carrying || $subscriptions->isClosed()) {
            // Carrying out already: the loop below polls what this input added.
            return;
        }
        $this->carrying = true;
        try {
            while (true) {
                [$kind, $index, $channel] = $subscriptions->poll();
                if ($kind === Constants::SUBSCRIBER_OUTPUT_NONE) {
                    return;
                }
                $subscriber = $this->subscribers[$index];
                if ($kind === Constants::SUBSCRIBER_OUTPUT_OPEN) {
                    $subscriber->open();
                } elseif ($kind === Constants::SUBSCRIBER_OUTPUT_SUBSCRIBE) {
                    $subscriber->write(StreamConnection::encode(['SUBSCRIBE', (string) $channel]));
                } elseif ($kind === Constants::SUBSCRIBER_OUTPUT_UNSUBSCRIBE) {
                    $subscriber->write(StreamConnection::encode(['UNSUBSCRIBE', (string) $channel]));
                } elseif ($kind === Constants::SUBSCRIBER_OUTPUT_CLOSE) {
                    $subscriber->close();
                }
            }
        } finally {
            $this->carrying = false;
        }
    }
}
