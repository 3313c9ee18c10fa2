<?php

declare(strict_types=1);

namespace Redlock\Driver;

use Redlock\Ffi\Native;
use Redlock\Ffi\Reply;

/**
 * @internal One node's subscriber connection for NoticeListener: transport only. It
 * opens, writes, and closes when told, and reports what its connection did.
 */
final class NoticeSubscriber implements ConnectionListener
{
    public readonly StreamConnection $connection;
    /** A close the listener asked for is not reported back as a loss. */
    private bool $closing = false;

    /**
     * @param int $node the driver's (and the core operations') index of the node
     * @param int $index this subscriber's index in the listener's core Subscriptions
     */
    public function __construct(
        Native $native,
        NodeAddress $address,
        public readonly int $node,
        private readonly int $index,
        private readonly NoticeListener $listener,
    ) {
        $this->connection = new StreamConnection($native, $address, $this);
    }

    /** Opens the connection; `connected` or `closed` is reported (possibly at once). */
    public function open(): void
    {
        if ($this->connection->isOpen()) {
            $this->close();
        }
        $this->connection->connect();
    }

    /** Writes `$command` on the connection, if it is open. */
    public function write(string $command): void
    {
        if ($this->connection->isOpen()) {
            $this->connection->write($command);
        }
    }

    /**
     * Closes the connection without reporting it: the core's Close, also for one still
     * opening (the Subscriptions give up a connection that neither opens nor confirms a
     * subscription within their timeout), whose socket under way is closed.
     */
    public function close(): void
    {
        $this->closing = true;
        try {
            $this->connection->close();
        } finally {
            $this->closing = false;
        }
    }

    public function connected(): void
    {
        $this->listener->opened($this->index);
    }

    /**
     * @SuppressWarnings(PHPMD.UnusedFormalParameter) the listener's signature
     */
    public function closed(string $cause, string $text): void
    {
        if (!$this->closing) {
            $this->listener->lost($this->index);
        }
    }

    public function reply(Reply $reply): void
    {
        $this->listener->message($this->index, $reply);
    }
}
