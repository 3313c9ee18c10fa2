<?php

declare(strict_types=1);

namespace Redlock\Driver;

use Redlock\Clock;
use Redlock\Exception\InvalidArgumentException;
use Redlock\Ffi\Constants;
use Redlock\Ffi\Native;
use Redlock\Ffi\Reply;
use Redlock\Sentinel;

/**
 * @internal One `SENTINEL get-master-addr-by-name` on its own non-blocking connection to
 * one Sentinel, served by the driver's select loop like a node's connection. It answers
 * once through `$answer(?NodeAddress $master, string $cause, string $failure)`: the
 * master, or null with why not (connection failed, no master of that name, an error
 * reply, no answer within the Sentinel's query timeout), and closes its connection.
 */
final class SentinelQuery implements ConnectionListener
{
    public readonly StreamConnection $connection;
    public readonly int $deadlineUs;
    private bool $answered = false;

    /** @param \Closure(?NodeAddress, string, string): void $answer */
    public function __construct(
        Native $native,
        private readonly Sentinel $sentinel,
        private readonly NodeAddress $address,
        private readonly \Closure $answer,
    ) {
        $this->deadlineUs = Clock::nowUs() + $sentinel->queryTimeoutMs * 1000;
        $this->connection = new StreamConnection($native, $address, $this);
        $this->connection->connect();
        if ($this->connection->isOpen()) {
            $this->connection->write(StreamConnection::encode($sentinel->query()));
        }
    }

    /** Gives up when the Sentinel did not answer in time. */
    public function checkTimeout(int $nowUs): void
    {
        if (!$this->answered && $nowUs >= $this->deadlineUs) {
            $this->finish(null, 'timeout', "{$this->address->label()}: no answer within {$this->sentinel->queryTimeoutMs} ms");
        }
    }

    /** Stops without answering (the node's connection is being closed). */
    public function abort(): void
    {
        $this->answered = true;
        $this->connection->close();
    }

    public function connected(): void
    {
        // The query was queued before the connection was ready and goes out now.
    }

    public function closed(string $cause, string $text): void
    {
        if (!$this->answered) {
            $this->finish(null, $cause, "{$this->address->label()}: $text");
        }
    }

    public function reply(Reply $reply): void
    {
        $kind = $reply->kind();
        if ($kind === Constants::REPLY_NIL) {
            $this->finish(null, 'other', $this->sentinel->unknown($this->address));
            return;
        }
        if ($kind === Constants::REPLY_ERROR) {
            $this->finish(null, 'other', "{$this->address->label()}: {$reply->bytes()}");
            return;
        }
        $fields = [];
        foreach ($kind === Constants::REPLY_ARRAY ? $reply->items() : [] as $item) {
            $fields[] = $item->kind() === Constants::REPLY_BULK ? $item->bytes() : '';
        }
        try {
            $master = $this->sentinel->master($fields);
        } catch (InvalidArgumentException $e) {
            $this->finish(null, 'other', "{$this->address->label()}: {$e->getMessage()}");
            return;
        }
        $this->finish($master, '', '');
    }

    private function finish(?NodeAddress $master, string $cause, string $failure): void
    {
        $this->answered = true;
        $this->connection->close();
        ($this->answer)($master, $cause, $failure);
    }
}
