<?php

declare(strict_types=1);

namespace Redlock\Driver;

use Redlock\Ffi\Constants;
use Redlock\Ffi\Native;
use Redlock\Ffi\Operation;
use Redlock\Ffi\Reply;

/**
 * What happens to commands on one node, over a StreamConnection. The rules are those
 * every driver of this project follows today (core/src/lib.rs, "What a driver must get
 * right"); they are meant to move into the core's per-node link:
 *
 * - one connection per node, commands written in the order the core emitted them and
 *   matched to replies in that order; a command whose deadline passed stays on the
 *   connection until its late reply comes (reopening would let a stuck `SET` land
 *   after a later release);
 * - the three SCRIPT LOADs are the first writes on every new connection;
 * - a connection still not ready when every command waiting on it is past its
 *   deadline is closed (nothing was written, so nothing can be reordered), and the
 *   next command opens a new one;
 * - at most MAX_IN_FLIGHT commands wait on one node: beyond that a node has stopped
 *   answering, and new commands fail at once instead of piling up;
 * - when a connection closes, every command on it fails with the cause.
 */
final class StreamLink implements ConnectionListener
{
    public const MAX_IN_FLIGHT = 256;

    public readonly StreamConnection $connection;

    /**
     * Commands written (or to be written once connected), oldest first: the operation
     * (null for a SCRIPT LOAD), its request id, its deadline.
     *
     * @var list<array{?Operation, int, int}>
     */
    private array $inFlight = [];
    /** Bytes held until the connection is ready (after the SCRIPT LOADs). */
    private string $held = '';
    private string $lastFailure = '';

    /** @param \Closure(Operation, int, Reply|null, int, string): void $deliver */
    public function __construct(
        Native $native,
        NodeAddress $address,
        private readonly \Closure $deliver,
        private readonly string $scriptLoads,
    ) {
        $this->connection = new StreamConnection($native, $address, $this);
    }

    public function submit(Operation $op, int $requestId, int $deadlineUs, string $resp): void
    {
        if (count($this->inFlight) >= self::MAX_IN_FLIGHT) {
            ($this->deliver)(
                $op,
                $requestId,
                null,
                Constants::REPLY_CONNECTION_FAILED,
                'stalled: ' . count($this->inFlight) . ' commands without a reply',
            );
            return;
        }
        if (!$this->connection->isOpen()) {
            $this->connection->connect();
            if (!$this->connection->isOpen()) {
                ($this->deliver)($op, $requestId, null, Constants::REPLY_CONNECTION_FAILED, $this->lastFailure);
                return;
            }
        }
        $this->inFlight[] = [$op, $requestId, $deadlineUs];
        if ($this->connection->isReady()) {
            $this->connection->write($resp);
        } else {
            $this->held .= $resp;
        }
    }

    /** Closes a connection that could not open before every waiting deadline passed. */
    public function expire(int $nowUs): void
    {
        if (!$this->connection->isOpen() || $this->connection->isReady() || $this->inFlight === []) {
            return;
        }
        foreach ($this->inFlight as [$op, , $deadline]) {
            if ($op !== null && $deadline > $nowUs) {
                return;
            }
        }
        $this->connection->close('timeout', 'not connected before the deadline');
    }

    /** The latest deadline of a command still waiting for its reply, 0 if none. */
    public function latestDeadline(): int
    {
        $latest = 0;
        foreach ($this->inFlight as [$op, , $deadline]) {
            if ($op !== null && $deadline > $latest) {
                $latest = $deadline;
            }
        }
        return $latest;
    }

    public function inFlight(): int
    {
        return count($this->inFlight);
    }

    public function connected(): void
    {
        // The scripts first, then what waited for the connection.
        array_unshift($this->inFlight, [null, 0, 0], [null, 0, 0], [null, 0, 0]);
        $bytes = $this->scriptLoads . $this->held;
        $this->held = '';
        $this->connection->write($bytes);
    }

    public function closed(string $cause, string $text): void
    {
        $this->lastFailure = "$cause: $text";
        $failed = $this->inFlight;
        $this->inFlight = [];
        $this->held = '';
        foreach ($failed as [$op, $requestId]) {
            if ($op !== null) {
                ($this->deliver)($op, $requestId, null, Constants::REPLY_CONNECTION_FAILED, $this->lastFailure);
            }
        }
    }

    public function reply(Reply $reply): void
    {
        $entry = array_shift($this->inFlight);
        if ($entry === null) {
            $this->connection->close('other', 'a reply nothing was waiting for');
            return;
        }
        [$op, $requestId] = $entry;
        if ($op !== null) {
            ($this->deliver)($op, $requestId, $reply, 0, '');
        }
    }

    public function close(): void
    {
        $this->connection->close('other', 'closed by the client');
    }

    public static function scriptLoads(Native $native): string
    {
        $out = '';
        foreach ([Constants::SCRIPT_ACQUIRE, Constants::SCRIPT_RELEASE, Constants::SCRIPT_EXTEND] as $script) {
            $out .= StreamConnection::encode(['SCRIPT', 'LOAD', (string) $native->ffi->redlock_script_text($script)]);
        }
        return $out;
    }
}
