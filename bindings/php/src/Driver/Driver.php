<?php

declare(strict_types=1);

namespace Redlock\Driver;

use Redlock\Ffi\Link;

/**
 * Per-node I/O for the loop (Redlock\Engine), which owns one core Link per node and
 * does what the links output: open a node's connection (connect), write a command
 * (write), close a connection (close). A driver reports what happened through Events
 * (connected, closed with a cause, the reply to a write id) and decides nothing about
 * commands, order, deadlines or nodes: that is the links' and the operations'.
 */
interface Driver
{
    /**
     * One label per node (URL without credentials), in the core's node order.
     *
     * @return list<string>
     */
    public function labels(): array;

    /**
     * Each node's address as `host:port`, for the core's duplicate-node check.
     *
     * @return list<string>
     */
    public function addresses(): array;

    /**
     * How long opening node `$node`'s connection may take (ms): the connect timeout of
     * the client the driver works through, if it has one; null: the core's
     * (CONNECT_TIMEOUT_DEFAULT_MS). The engine gives it to the node's link, which gives
     * an attempt up at that time (close() is then called while it opens).
     */
    public function connectTimeoutMs(int $node): ?int;

    /**
     * Opens node `$node`'s connection (TLS, AUTH, SELECT included); events follow. How
     * long it may take is the link's decision: close() gives an attempt up.
     */
    public function connect(int $node, Events $events): void;

    /** Writes the link's current write (`$writeId`, `$argc` arguments) on `$node`. */
    public function write(int $node, int $writeId, int $argc, Link $link): void;

    /**
     * Closes node `$node`'s connection, or gives up the one being opened; nothing more
     * is reported for it.
     */
    public function close(int $node): void;

    /**
     * Does I/O until at least one event was reported or `$untilUs` (Clock::nowUs())
     * is reached.
     */
    public function wait(int $untilUs, Events $events): void;

    /** Reports what already arrived, without waiting (nothing for a blocking client). */
    public function poll(Events $events): void;

    /**
     * Whether writes or connections were accepted but not yet carried out (a
     * sequential driver does its I/O in wait()).
     */
    public function hasPendingIo(): bool;

    /**
     * Starts hearing release notices on `$channels` (the running acquisition listens, as
     * the core decides: Operation::listens()): each message
     * on one of them is reported as Events::notice() by wait() and poll(). A driver
     * that cannot subscribe on some node reports nothing for it: the core's retry
     * schedule covers what is not heard.
     *
     * @param list<string> $channels
     */
    public function listen(array $channels, Events $events): void;

    /**
     * Stops hearing notices (the waiting acquisition ended). When its subscriptions end
     * is not the driver's to decide: the built-in drivers keep them as the core's
     * Subscriptions say (a channel lingers a while, see NoticeListener).
     */
    public function unlisten(): void;

    /** Closes every connection (the client is closing). */
    public function shutdown(): void;
}
