<?php

declare(strict_types=1);

namespace Redlock\Driver;

use Redlock\Ffi\Reply;

/**
 * What the transports saw, in order, for the loop (Redlock\Engine) to hand to each
 * node's link: a connection ready, a connection closed or not opened (with its cause),
 * the reply to a write; and release notices and confirmed subscriptions, for the waiting
 * acquisition. A queue, so a
 * transport that learns something at once (a refused port) never calls back into the
 * loop.
 */
final class Events
{
    public const CONNECTED = 1;
    public const CLOSED = 2;
    public const REPLY = 3;
    public const NOTICE = 4;
    public const SUBSCRIBED = 5;

    /** @var list<array{int, int, int, mixed, string}> kind, node, write id or cause, value, text */
    private array $queue = [];

    public function connected(int $node): void
    {
        $this->queue[] = [self::CONNECTED, $node, 0, null, ''];
    }

    /** `$cause`: refused, auth, tls, timeout, other (mapped to the core's LinkCause). */
    public function closed(int $node, string $cause, string $text): void
    {
        $this->queue[] = [self::CLOSED, $node, 0, $cause, $text];
    }

    /**
     * The reply to write `$writeId`: a Reply, or a simple [kind, integer, text].
     *
     * @param Reply|array{int, int, string} $reply
     */
    public function reply(int $node, int $writeId, Reply|array $reply): void
    {
        $this->queue[] = [self::REPLY, $node, $writeId, $reply, ''];
    }

    /**
     * A release notice for the waiting acquisition, from node `$node`'s subscriber
     * connection, with its message as received (null: a message that was not a bulk
     * string, handed in as a notice without one).
     */
    public function notice(int $node, ?string $message): void
    {
        $this->queue[] = [self::NOTICE, $node, 0, $message, ''];
    }

    /**
     * Node `$node`'s subscriber connection confirmed the subscription to one of the
     * waiting acquisition's channels (docs/bindings.md, rule 13).
     */
    public function subscribed(int $node): void
    {
        $this->queue[] = [self::SUBSCRIBED, $node, 0, null, ''];
    }

    public function isEmpty(): bool
    {
        return $this->queue === [];
    }

    /** @return array{int, int, int, mixed, string}|null the oldest event, removed */
    public function shift(): ?array
    {
        return array_shift($this->queue);
    }
}
