<?php

declare(strict_types=1);

namespace Redlock;

use Redlock\Driver\Driver;
use Redlock\Driver\Events;
use Redlock\Exception\CancelledException;
use Redlock\Exception\CoreException;
use Redlock\Ffi\Constants;
use Redlock\Ffi\Link;
use Redlock\Ffi\Native;
use Redlock\Ffi\Operation;
use Redlock\Ffi\Outcome;

/**
 * The loop over the core's links (docs/bindings.md, "The loop"): one core Link per
 * node, living as long as the client. Every command an operation emits goes to its
 * node's link, tagged with the operation; the engine does what the links output
 * (Connect / Write / Close through the Driver, Deliver to the tagged operation) and
 * wakes up only at the operation's Wait and the links' poll_timeout. It decides
 * nothing itself.
 *
 * PHP runs nothing between its client's calls, so the engine is driven only inside
 * them: a release a link owes to a node that stopped answering (the node may hold our
 * SET) is written when the link emits it. Today the core's Link holds it until the node
 * answers again, which here is seen at the client's next call, flush() or close(); the
 * design chosen (README, "Nodes that stop answering") is for the Link to emit it on
 * the stalled connection at once, behind the SET, where the stream driver's
 * non-blocking write puts it in the node's socket buffer before the call returns.
 *
 * @internal used by Redlock
 */
final class Engine
{
    /** How long flush() waits at most for commands still in flight. */
    private const FLUSH_LIMIT_US = 2_000_000;

    /** @var list<Link> */
    public readonly array $links;
    private readonly Events $events;
    private int $nextTag = 1;
    /** The operation being run and its tag; deliveries for other tags are dropped. */
    private ?Operation $op = null;
    private int $tag = 0;
    /** The running operation's state after its last poll: a wake-up instant or its outcome. */
    private int|Outcome|null $state = null;
    /** The running operation's resources, for its events. @var list<string> */
    private array $names = [];
    /** Called with each operation and its resources after every input (Redlock's listeners). */
    private ?\Closure $onEvents = null;
    /** An operation is being run (listeners run inside it and must not start another). */
    private bool $running = false;
    /** The driver listens for the running operation's release notices (see listenWhenDue()). */
    private bool $listening = false;

    /**
     * @param int $settleUs how long one step of settle() may block (the client's node
     *     timeout): after the outcome nothing is waited for longer than an operation
     *     would wait for one node
     */
    public function __construct(
        Native $native,
        private readonly Driver $driver,
        int $nodes,
        private readonly int $settleUs = 50_000,
    ) {
        $links = [];
        for ($i = 0; $i < $nodes; $i++) {
            $link = Link::create($native);
            // The user's client's connect timeout, else the core's: the link gives a
            // connection attempt up at that time with a Close (rule 4).
            $timeoutMs = $driver->connectTimeoutMs($i);
            if ($timeoutMs !== null) {
                $link->setConnectTimeout($timeoutMs);
            }
            $links[] = $link;
        }
        $this->links = $links;
        $this->events = new Events();
    }

    /**
     * `$onEvents($op, $resources)` runs after every input the running operation got
     * (and after an abandon), to drain its events; null: events are not read (the core
     * keeps the newest 64 and drops the rest).
     */
    public function onEvents(?\Closure $onEvents): void
    {
        $this->onEvents = $onEvents;
    }

    /**
     * Drives `$op` to its outcome. If anything throws meanwhile (a driver error, an
     * interrupt), or `$limitUs` passes first (CancelledException), the operation is
     * abandoned: what the core then emits (the release of an acquisition's token) goes
     * to the links before the exception goes on.
     *
     * When the core says the operation listens for release notices (Operation::listens():
     * an acquisition with a wait limit from the first refusal by a held key, or from its
     * start after a recent wait for the resource; one without once an attempt failed and
     * another may follow), the driver subscribes to its notice channels until it
     * ends, and each release notice goes to the core with its message
     * (Operation::handleNoticeMessage), which may start the next attempt at once.
     *
     * @param list<string> $names the resources, for CancelledException and events
     */
    public function run(Operation $op, ?int $limitUs = null, array $names = []): Outcome
    {
        if ($this->running) {
            // Only an event listener can get here (PHP runs one thing at a time).
            throw new \LogicException('an event listener cannot use its client while the client runs an operation');
        }
        $this->running = true;
        try {
            return $this->runOperation($op, $limitUs, $names);
        } finally {
            $this->running = false;
        }
    }

    /** @param list<string> $names */
    private function runOperation(Operation $op, ?int $limitUs, array $names): Outcome
    {
        $this->op = $op;
        $this->names = $names;
        $this->tag = $this->nextTag++;
        $this->listening = false;
        try {
            // Replies that arrived since the last operation first: a node that answers
            // again is no longer stalled.
            $this->driver->poll($this->events);
            $this->pump();
            $this->linkTimeouts(Clock::nowUs());
            // A release notice heard meanwhile has already been handed in and polled.
            if ($this->state === null) {
                $this->state = $this->drain();
            }
            while (!$this->state instanceof Outcome) {
                if ($limitUs !== null && Clock::nowUs() >= $limitUs) {
                    throw new CancelledException('gave up at the time limit: ' . Text::names($names), $names);
                }
                $this->step($limitUs);
            }
            $outcome = $this->state;
            $this->op = null;
            $this->settle();
            return $outcome;
        } catch (\Throwable $e) {
            if ($this->op !== null) {
                $this->abandon($op);
            }
            throw $e;
        } finally {
            $this->op = null;
            $this->state = null;
            if ($this->listening) {
                $this->listening = false;
                $this->driver->unlisten();
            }
        }
    }

    /**
     * Lets commands still in flight finish: until every link is idle, or only stalled
     * ones are left (their nodes stopped answering), at most FLUSH_LIMIT_US.
     */
    public function flush(): void
    {
        $limit = Clock::nowUs() + self::FLUSH_LIMIT_US;
        while (true) {
            $this->driver->poll($this->events);
            $this->pump();
            $now = Clock::nowUs();
            $busy = $this->driver->hasPendingIo();
            foreach ($this->links as $link) {
                if (!$link->isIdle() && !$link->isStalled($now)) {
                    $busy = true;
                }
            }
            if (!$busy || $now >= $limit) {
                return;
            }
            $due = $this->linkDue() ?? $limit;
            if ($due <= $now) {
                $this->linkTimeouts($now);
                continue;
            }
            $this->driver->wait(min($due, $limit), $this->events);
        }
    }

    /**
     * Per node: writes awaiting replies (script loads included), commands queued,
     * releases owed, and how long a connection attempt may take (diagnostics and tests).
     *
     * @return list<array{in_flight: int, queued: int, owed: int, connect_timeout_ms: int}>
     */
    public function linkState(): array
    {
        return array_map(
            static fn (Link $l): array => [
                'in_flight' => $l->inFlight(),
                'queued' => $l->queued(),
                'owed' => $l->owed(),
                'connect_timeout_ms' => $l->connectTimeoutMs(),
            ],
            $this->links,
        );
    }

    /** One round: the links' outputs, then the next wake-up or I/O event. */
    private function step(?int $limitUs): void
    {
        if ($this->pump() || $this->state instanceof Outcome) {
            return;
        }
        $now = Clock::nowUs();
        $wake = (int) $this->state;
        if ($now >= $wake && $this->op !== null) {
            $this->op->handleTimeout($now);
            $this->state = $this->drain();
            return;
        }
        $due = $this->linkDue();
        if ($due !== null && $due <= $now) {
            $this->linkTimeouts($now);
            return;
        }
        $until = $due === null ? $wake : min($wake, $due);
        $this->driver->wait($limitUs === null ? $until : min($until, $limitUs), $this->events);
    }

    /**
     * The running operation's outputs until Wait or the outcome: each send to its
     * node's link. Every input the operation gets is followed by this, so this is where
     * the engine asks the core whether it listens for release notices now.
     */
    private function drain(): int|Outcome
    {
        $op = $this->op ?? throw new CoreException('no operation is running', 'no_value', Constants::OK);
        while (true) {
            $kind = $op->poll();
            if ($kind === Constants::OUTPUT_SEND) {
                $node = $op->command()[0];
                $link = $this->links[$node] ?? throw new CoreException("the core named node $node of " . count($this->links), 'out_of_range', 9005);
                $link->submit($this->tag, $op, Clock::nowUs());
            } elseif ($kind === Constants::OUTPUT_WAIT) {
                $this->listenWhenDue($op);
                $this->emit($op);
                return $op->waitUntil();
            } elseif ($kind === Constants::OUTPUT_OUTCOME) {
                $outcome = $op->takeOutcome();
                $this->emit($op);
                return $outcome;
            } else {
                throw new CoreException("the operation produced output $kind where a wait or an outcome was due", 'unexpected_output', 0);
            }
        }
    }

    /**
     * Starts listening for `$op`'s release notices once the core says it listens
     * (Operation::listens(): it decides when, for every binding); runOperation() stops
     * at the end. An operation with its outcome never listens, so asking at each Wait is
     * enough.
     */
    private function listenWhenDue(Operation $op): void
    {
        if (!$this->listening && $op->listens()) {
            $this->listening = true;
            $this->driver->listen($op->noticeChannels(), $this->events);
        }
    }

    /** The operation's events, to the listeners (which never throw: Redlock catches). */
    private function emit(Operation $op): void
    {
        if ($this->onEvents !== null) {
            ($this->onEvents)($op, $this->names);
        }
    }

    /**
     * Hands the transports' events to the links and does what the links output, until
     * nothing is left. True if the running operation got a reply.
     */
    private function pump(): bool
    {
        $delivered = false;
        do {
            $progress = false;
            while (($event = $this->events->shift()) !== null) {
                $progress = true;
                if ($event[0] === Events::NOTICE || $event[0] === Events::SUBSCRIBED) {
                    $delivered = $this->notice($event[1], $event[3], $event[0] === Events::SUBSCRIBED) || $delivered;
                    continue;
                }
                $this->apply($event);
            }
            foreach ($this->links as $node => $link) {
                while (($kind = $link->poll()) !== Constants::LINK_OUTPUT_NONE) {
                    $progress = true;
                    if ($kind === Constants::LINK_OUTPUT_CONNECT) {
                        $this->driver->connect($node, $this->events);
                    } elseif ($kind === Constants::LINK_OUTPUT_WRITE) {
                        [$id, $argc] = $link->write();
                        $this->driver->write($node, $id, $argc, $link);
                    } elseif ($kind === Constants::LINK_OUTPUT_CLOSE) {
                        // The connection, or the attempt to open one that took longer
                        // than the link's connect timeout: the driver closes it and
                        // reports nothing more for it.
                        $this->driver->close($node);
                    } elseif ($kind === Constants::LINK_OUTPUT_DELIVER) {
                        $delivered = $this->deliver($link) || $delivered;
                    }
                }
            }
        } while ($progress);
        return $delivered;
    }

    /** @param array{int, int, int, mixed, string} $event */
    private function apply(array $event): void
    {
        [$kind, $node, $id, $value, $text] = $event;
        $link = $this->links[$node];
        $now = Clock::nowUs();
        if ($kind === Events::CONNECTED) {
            $link->handleConnected($now);
        } elseif ($kind === Events::CLOSED) {
            $link->handleClosed(Constants::LINK_CAUSES[$value] ?? Constants::LINK_CAUSE_CLOSED, $text, $now);
        } elseif (is_array($value)) {
            $link->handleSimpleReply($id, $value[0], $value[1], $value[2], $now);
        } else {
            $link->handleReply($id, $value, $now);
        }
    }

    /**
     * A release notice from node `$node`, with its message (the waiter it names), or
     * with `$subscribed` the confirmation of a subscription there: to the running
     * operation (the core decides whether it starts an attempt now). Notices heard after
     * it ended are dropped.
     */
    private function notice(int $node, ?string $message, bool $subscribed = false): bool
    {
        if ($this->op === null || $this->state instanceof Outcome) {
            return false;
        }
        if ($subscribed) {
            $this->op->handleSubscribed($node, Clock::nowUs());
        } elseif ($message === null) {
            $this->op->handleNotice($node, Clock::nowUs());
        } else {
            $this->op->handleNoticeMessage($node, $message, Clock::nowUs());
        }
        $this->state = $this->drain();
        return true;
    }

    /** A Deliver: to the running operation if it is the one tagged, else dropped. */
    private function deliver(Link $link): bool
    {
        $tag = $link->deliveryTag();
        if ($this->op === null || $tag !== $this->tag || $this->state instanceof Outcome) {
            return false;
        }
        $rc = $this->op->handleDelivery($link, Clock::nowUs());
        if ($rc !== Constants::OK) {
            throw $this->op->native->error($rc, 'delivery');
        }
        $this->state = $this->drain();
        return true;
    }

    /** Cancels the running operation and submits what it emits (its release). */
    private function abandon(Operation $op): void
    {
        try {
            $this->state = null;
            $op->abandon(Clock::nowUs());
            while ($op->poll() === Constants::OUTPUT_SEND) {
                $node = $op->command()[0];
                $this->links[$node]->submit($this->tag, $op, Clock::nowUs());
            }
            $this->emit($op);
            $this->op = null;
            $this->pump();
        } catch (\Throwable) {
            // Abandoning is best effort while another exception is on its way out.
        }
        $this->op = null;
    }

    /**
     * After an outcome: a sequential driver finishes the writes it accepted, each step
     * bounded by the client's node timeout. A connection attempt accepted for a node is
     * bounded by its link's connect timeout (2 s without the client's own), which is
     * how long the link waits for it, not how long the caller may be kept: the caller
     * already has its outcome. A node that is frozen accepts the TCP connection and
     * never answers the connection's first command, so without this bound the call
     * that decided without it would block the whole connect timeout. An attempt cut
     * short is reported as failed, and the link tries again after its backoff.
     */
    private function settle(): void
    {
        // In all, too: a node that opens and then stalls again (writes paused) would
        // otherwise be re-opened one step after another.
        $limit = Clock::nowUs() + $this->settleUs;
        while ($this->driver->hasPendingIo() && Clock::nowUs() < $limit) {
            $this->pump();
            $now = Clock::nowUs();
            $due = $this->linkDue();
            if ($due !== null && $due <= $now) {
                $this->linkTimeouts($now);
                continue;
            }
            // A write has its deadline as the link's due time (within the node timeout), a
            // connection its connect timeout: at most one node timeout either way.
            $this->driver->wait(min($due ?? PHP_INT_MAX, $limit), $this->events);
            if (!$this->driver->hasPendingIo()) {
                $this->pump();
            }
        }
    }

    private function linkDue(): ?int
    {
        $due = null;
        foreach ($this->links as $link) {
            $at = $link->pollTimeout();
            if ($at !== null && ($due === null || $at < $due)) {
                $due = $at;
            }
        }
        return $due;
    }

    private function linkTimeouts(int $now): void
    {
        foreach ($this->links as $link) {
            $at = $link->pollTimeout();
            if ($at !== null && $at <= $now) {
                $link->handleTimeout($now);
            }
        }
        $this->pump();
    }
}
