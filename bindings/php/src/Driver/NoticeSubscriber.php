<?php

declare(strict_types=1);

namespace Redlock\Driver;

use Redlock\Ffi\Native;
use Redlock\Ffi\Reply;

/**
 * @internal One node's subscriber connection for NoticeListener: transport only.
 */
final class NoticeSubscriber implements ConnectionListener
{
    public readonly StreamConnection $connection;

    public function __construct(Native $native, NodeAddress $address, private readonly int $node, private readonly NoticeListener $listener)
    {
        $this->connection = new StreamConnection($native, $address, $this);
    }

    /** Writes `$command`, opening the connection first if it is closed. */
    public function send(string $command): void
    {
        if (!$this->connection->isOpen()) {
            $this->connection->connect();
        }
        $this->sendIfOpen($command);
    }

    public function sendIfOpen(string $command): void
    {
        if ($this->connection->isOpen()) {
            $this->connection->write($command);
        }
    }

    public function connected(): void
    {
        // What was written meanwhile goes out now (the connection's own queue).
    }

    /**
     * @SuppressWarnings(PHPMD.UnusedFormalParameter) the listener's signature
     */
    public function closed(string $cause, string $text): void
    {
        // Notices from this node stop; the retry schedule covers them until the listener
        // opens the connection again (after a pause while an acquisition waits, else for
        // the next waiting acquisition).
        $this->listener->lost($this->node);
    }

    public function reply(Reply $reply): void
    {
        $this->listener->message($this->node, $reply);
    }
}
