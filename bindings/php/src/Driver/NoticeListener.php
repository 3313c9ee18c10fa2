<?php

declare(strict_types=1);

namespace Redlock\Driver;

use Redlock\Clock;
use Redlock\Ffi\Constants;
use Redlock\Ffi\Native;
use Redlock\Ffi\Reply;

/**
 * @internal Release notices (docs/waiting.md): one subscriber connection per node, its
 * own non-blocking socket in RESP `SUBSCRIBE` mode (a subscribed connection can carry
 * nothing else), read by the driver's select loop. While an acquisition waits, each
 * message on one of its channels is reported as Events::notice($node, $message) for the
 * core's Operation::handleNoticeMessage(), and each confirmed subscription to one as
 * Events::subscribed($node), for Operation::handleSubscribed() (docs/bindings.md, rule
 * 13: a release published before the subscription took effect reached nobody); nothing
 * else is decided here.
 *
 * A notice only ever makes an attempt start sooner: a subscriber connection that fails,
 * is killed or is refused SUBSCRIBE is not heard from meanwhile (the core's retry
 * schedule goes on). While an acquisition waits it is opened again after a pause
 * (the core's SUBSCRIBER_REOPEN_FIRST_MS, doubling up to _MAX_MS), and its confirmation then stands for
 * the notices lost; otherwise the next waiting acquisition opens it.
 */
final class NoticeListener
{
    /**
     * How long a lost subscriber connection stays closed, at first and at most (us): the
     * core's SUBSCRIBER_REOPEN_FIRST_MS and _MAX_MS.
     */
    public readonly int $reopenFirstUs;
    public readonly int $reopenMaxUs;

    /** @var array<int, NoticeSubscriber> node => its subscriber (nodes without an address have none) */
    private array $subscribers = [];
    /** @var array<string, true> the channels of the acquisition that waits now */
    private array $channels = [];
    private ?Events $events = null;
    /** @var array<int, int> node => when its lost connection is opened again (Clock::nowUs()) */
    private array $reopenAt = [];
    /** @var array<int, int> node => the pause after its next loss */
    private array $pauses = [];

    /** @param array<int, ?NodeAddress> $addresses node => where to subscribe (null: nowhere) */
    public function __construct(Native $native, array $addresses)
    {
        $this->reopenFirstUs = 1000 * $native->ffi->redlock_subscriber_reopen_first_ms();
        $this->reopenMaxUs = 1000 * $native->ffi->redlock_subscriber_reopen_max_ms();
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
        $this->reopenAt = [];
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

    /**
     * Opens again, and subscribes again, the connections lost while an acquisition
     * waits whose pause is over.
     *
     * @return int|null when the next one is due (Clock::nowUs()), for the select's timeout
     */
    public function reopenDue(int $nowUs): ?int
    {
        if ($this->channels === []) {
            return null;
        }
        $command = null;
        foreach ($this->reopenAt as $node => $at) {
            if ($at <= $nowUs) {
                unset($this->reopenAt[$node]);
                $command ??= StreamConnection::encode(array_merge(['SUBSCRIBE'], array_keys($this->channels)));
                // A connection refused at once is lost again here (a new pause).
                $this->subscribers[$node]->send($command);
            }
        }
        return $this->reopenAt === [] ? null : min($this->reopenAt);
    }

    /** One select over the subscriber connections alone, of at most `$timeoutUs`. */
    public function select(int $timeoutUs): void
    {
        $now = Clock::nowUs();
        $due = $this->reopenDue($now);
        if ($due !== null) {
            $timeoutUs = max(0, min($timeoutUs, $due - $now));
        }
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
        $this->reopenAt = [];
        foreach ($this->subscribers as $subscriber) {
            $subscriber->connection->close();
        }
    }

    /**
     * @internal node `$node`'s subscriber connection closed or could not open: while an
     * acquisition waits, it is opened again after a pause.
     */
    public function lost(int $node): void
    {
        if ($this->channels === [] || isset($this->reopenAt[$node])) {
            return;
        }
        $pause = $this->pauses[$node] ?? $this->reopenFirstUs;
        $this->reopenAt[$node] = Clock::nowUs() + $pause;
        $this->pauses[$node] = min(2 * $pause, $this->reopenMaxUs);
    }

    /** @internal a message from node `$node`'s subscriber connection */
    public function message(int $node, Reply $reply): void
    {
        if ($this->events === null) {
            return;
        }
        if ($reply->kind() === Constants::REPLY_ERROR) {
            // SUBSCRIBE refused (NOPERM): lost like a failed connection, tried again later.
            ($this->subscribers[$node] ?? null)?->connection->close('other', $reply->bytes());
            return;
        }
        if ($reply->kind() !== Constants::REPLY_ARRAY) {
            return;
        }
        $items = $reply->items();
        if (count($items) !== 3 || $items[0]->kind() !== Constants::REPLY_BULK || $items[1]->kind() !== Constants::REPLY_BULK) {
            return;
        }
        // Only the channels of the acquisition that waits now count; confirmations of
        // unsubscribing are not notices.
        $kind = strtolower($items[0]->bytes());
        if (!isset($this->channels[$items[1]->bytes()])) {
            return;
        }
        if ($kind === 'message') {
            // The payload names the waiter first in the node's queue (or is empty): the
            // core reads it, so it goes on byte for byte.
            $this->events->notice($node, $items[2]->kind() === Constants::REPLY_BULK ? $items[2]->bytes() : null);
        } elseif ($kind === 'subscribe') {
            // Subscribed: a release published on this node before then reached nobody;
            // the core decides whether one may have been missed.
            unset($this->pauses[$node]);
            $this->events->subscribed($node);
        }
    }
}
