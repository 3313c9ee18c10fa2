<?php

declare(strict_types=1);

namespace Redlock\Driver;

use Redlock\Ffi\Native;
use Redlock\Ffi\Reply;
use Redlock\Sentinel;

/**
 * @internal One node's StreamConnection, reporting its events for the node's link:
 * pure transport. Replies come back in the order of the writes on one connection
 * (RESP), so each is matched to the oldest write id still unanswered on it.
 *
 * A node found through Redis Sentinel has no fixed address: every open() first asks
 * the Sentinels in turn (SentinelQuery, on the same select loop) and connects to the
 * master the first one names; when none does, the connection is reported closed with
 * each Sentinel's failure.
 *
 * How long an attempt may take is the node's link's decision (its connect timeout): at
 * that time it says Close, and close() gives the attempt up (the Sentinel query or the
 * socket under way) and reports nothing more for it.
 */
final class StreamChannel implements ConnectionListener
{
    private ?StreamConnection $connection = null;
    /** @var list<int> write ids on the current connection, oldest first */
    private array $written = [];
    private ?Events $events = null;
    /** True while closing on the link's order: nothing is reported for it. */
    private bool $closing = false;
    private ?Sentinel $sentinel = null;
    private ?SentinelQuery $query = null;
    /** The index of the Sentinel being asked (-1: none); a late answer of another is ignored. */
    private int $asking = -1;
    /** @var list<string> why each Sentinel asked so far named no master */
    private array $failures = [];
    private string $lastCause = 'other';

    public function __construct(private readonly Native $native, NodeAddress|Sentinel $target, private readonly int $node)
    {
        if ($target instanceof Sentinel) {
            $this->sentinel = $target;
        } else {
            $this->connection = new StreamConnection($native, $target, $this);
        }
    }

    /** What results and messages call this node (no credentials). */
    public function label(): string
    {
        return $this->sentinel?->label() ?? $this->fixedAddress()->label();
    }

    /** `host:port` for the core's duplicate-node check. */
    public function hostPort(): string
    {
        return $this->sentinel !== null ? "sentinel:{$this->sentinel->service}" : $this->fixedAddress()->hostPort();
    }

    /**
     * Where release notices are heard: the node's fixed address; none for a Sentinel's
     * master, which moves (its waiting acquisitions follow the core's retry schedule).
     */
    public function noticeAddress(): ?NodeAddress
    {
        return $this->sentinel !== null ? null : $this->fixedAddress();
    }

    /** The connection doing I/O now (the Sentinel query while resolving), for select. */
    public function active(): ?StreamConnection
    {
        return $this->query?->connection ?? $this->connection;
    }

    /**
     * How long an attempt may take (ms), for the node's link: null (the core's connect
     * timeout) for a fixed address; through Sentinels, every Sentinel's query timeout
     * (they are asked in turn) and then the core's connect timeout for the master.
     */
    public function connectTimeoutMs(): ?int
    {
        return $this->sentinel?->attemptTimeoutMs($this->native->connectTimeoutDefaultMs());
    }

    /** When the Sentinel being asked must have answered by, for select; null: nothing due. */
    public function deadlineUs(): ?int
    {
        return $this->query?->deadlineUs;
    }

    /** Gives the Sentinel being asked up at its query timeout (the next one is asked). */
    public function checkTimeout(int $nowUs): void
    {
        $this->query?->checkTimeout($nowUs);
    }

    public function open(Events $events): void
    {
        $this->events = $events;
        $this->written = [];
        if ($this->sentinel === null) {
            $this->connection?->connect();
            return;
        }
        if ($this->connection?->isOpen() || $this->query !== null) {
            return;
        }
        // Asked again at every connection attempt, so a failover is followed.
        $this->failures = [];
        $this->ask(0);
    }

    public function write(int $writeId, string $resp): void
    {
        if ($this->connection === null) {
            // Not connected (the link writes only after `connected`): nothing to carry it.
            return;
        }
        $this->written[] = $writeId;
        $this->connection->write($resp);
    }

    /**
     * The link's Close: closes the connection, or gives up the attempt under way (the
     * Sentinel query, the socket opening); nothing more is reported for it.
     */
    public function close(): void
    {
        $this->closing = true;
        try {
            $this->asking = -1;
            $this->query?->abort();
            $this->query = null;
            $this->connection?->close();
        } finally {
            $this->closing = false;
            $this->written = [];
        }
    }

    public function connected(): void
    {
        $this->events?->connected($this->node);
    }

    public function closed(string $cause, string $text): void
    {
        $this->written = [];
        if (!$this->closing) {
            $this->events?->closed($this->node, $cause, $text);
        }
    }

    public function reply(Reply $reply): void
    {
        $id = array_shift($this->written);
        if ($id === null) {
            $this->connection?->close('other', 'a reply nothing was waiting for');
            return;
        }
        $this->events?->reply($this->node, $id, $reply);
    }

    /** Asks Sentinel `$index`, or reports the node's connection failed after the last. */
    private function ask(int $index): void
    {
        $sentinel = $this->sentinel;
        if ($sentinel === null) {
            return;
        }
        if ($index >= count($sentinel->sentinels)) {
            $this->asking = -1;
            $this->closed($this->lastCause, $sentinel->failure($this->failures));
            return;
        }
        $this->asking = $index;
        $query = new SentinelQuery(
            $this->native,
            $sentinel,
            $sentinel->sentinels[$index],
            function (?NodeAddress $master, string $cause, string $failure) use ($index): void {
                $this->answered($index, $master, $cause, $failure);
            },
        );
        // A query that failed at once has answered already (and the next one may run).
        if ($this->asking === $index) {
            $this->query = $query;
        }
    }

    private function answered(int $index, ?NodeAddress $master, string $cause, string $failure): void
    {
        if ($this->asking !== $index) {
            return;
        }
        $this->asking = -1;
        $this->query = null;
        if ($master === null) {
            $this->failures[] = $failure;
            $this->lastCause = $cause;
            $this->ask($index + 1);
            return;
        }
        $this->connection = new StreamConnection($this->native, $master, $this);
        $this->connection->connect();
    }

    private function fixedAddress(): NodeAddress
    {
        // Without a Sentinel the connection is made in the constructor and kept.
        assert($this->connection !== null);
        return $this->connection->address;
    }
}
