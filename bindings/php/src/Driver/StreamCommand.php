<?php

declare(strict_types=1);

namespace Redlock\Driver;

use Redlock\Clock;
use Redlock\Ffi\Constants;
use Redlock\Ffi\Native;
use Redlock\Ffi\Reply;

/**
 * @internal One blocking request at a time over a StreamConnection (TLS, AUTH and
 * SELECT included), for commands outside the lock's loop (the fenced write). A request
 * that gets no reply by its deadline closes the connection, so a late reply can never
 * be read as the answer to the next one.
 */
final class StreamCommand implements ConnectionListener
{
    private readonly StreamConnection $connection;
    private ?Reply $reply = null;
    /** The cause and text of a closed connection, until the next request. */
    private ?string $failure = null;

    public function __construct(private readonly Native $native, NodeAddress $address)
    {
        $this->connection = new StreamConnection($native, $address, $this);
    }

    public function label(): string
    {
        return $this->connection->address->label();
    }

    /**
     * Sends `$args` and returns the reply, a `timeout` reply when none came within
     * `$timeoutUs`, or a `connection_failed` reply.
     *
     * @param list<string> $args
     */
    public function call(array $args, int $timeoutUs): Reply
    {
        $deadline = Clock::nowUs() + $timeoutUs;
        $this->reply = null;
        $this->failure = null;
        if (!$this->connection->isOpen()) {
            $this->connection->connect();
        }
        if ($this->failure === null) {
            $this->connection->write(StreamConnection::encode($args));
        }
        while ($this->reply === null && $this->failure === null) {
            $now = Clock::nowUs();
            if ($now >= $deadline) {
                $this->connection->close('timeout', 'no reply in time');
                return Reply::create($this->native, Constants::REPLY_TIMEOUT);
            }
            $this->select($deadline - $now);
        }
        if ($this->reply !== null) {
            return $this->reply;
        }
        return Reply::create($this->native, Constants::REPLY_CONNECTION_FAILED, 0, (string) $this->failure);
    }

    public function close(): void
    {
        $this->connection->close();
    }

    public function connected(): void
    {
        // Requests queued meanwhile are written by the connection itself.
    }

    public function closed(string $cause, string $text): void
    {
        $this->failure = "$cause: $text";
    }

    public function reply(Reply $reply): void
    {
        $this->reply = $reply;
    }

    private function select(int $timeoutUs): void
    {
        $stream = $this->connection->readStream();
        if ($stream === null) {
            return;
        }
        $read = [$stream];
        $writeStream = $this->connection->writeStream();
        $write = $writeStream === null ? [] : [$writeStream];
        $except = null;
        $ready = @stream_select($read, $write, $except, intdiv($timeoutUs, 1_000_000), $timeoutUs % 1_000_000);
        if ($ready === false || $ready === 0) {
            return;
        }
        if ($write !== []) {
            $this->connection->onWritable();
        }
        if ($read !== [] && $this->connection->isOpen()) {
            $this->connection->onReadable();
        }
    }
}
