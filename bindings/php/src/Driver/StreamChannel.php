<?php

declare(strict_types=1);

namespace Redlock\Driver;

use Redlock\Ffi\Native;
use Redlock\Ffi\Reply;

/**
 * @internal One node's StreamConnection, reporting its events for the node's link:
 * pure transport. Replies come back in the order of the writes on one connection
 * (RESP), so each is matched to the oldest write id still unanswered on it.
 */
final class StreamChannel implements ConnectionListener
{
    public readonly StreamConnection $connection;
    /** @var list<int> write ids on the current connection, oldest first */
    private array $written = [];
    private ?Events $events = null;
    /** True while closing on the link's order: nothing is reported for it. */
    private bool $closing = false;

    public function __construct(Native $native, NodeAddress $address, private readonly int $node)
    {
        $this->connection = new StreamConnection($native, $address, $this);
    }

    public function open(Events $events): void
    {
        $this->events = $events;
        $this->written = [];
        $this->connection->connect();
    }

    public function write(int $writeId, string $resp): void
    {
        $this->written[] = $writeId;
        $this->connection->write($resp);
    }

    public function close(): void
    {
        $this->closing = true;
        try {
            $this->connection->close();
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
            $this->connection->close('other', 'a reply nothing was waiting for');
            return;
        }
        $this->events?->reply($this->node, $id, $reply);
    }
}
