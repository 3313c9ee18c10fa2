<?php

declare(strict_types=1);

namespace Redlock\Driver;

use Redlock\Clock;
use Redlock\Exception\CoreException;
use Redlock\Exception\InvalidArgumentException;
use Redlock\Ffi\Constants;
use Redlock\Ffi\Native;
use Redlock\Ffi\Operation;
use Redlock\Ffi\Reply;

/**
 * The default driver: one non-blocking `stream_socket_client` connection per node,
 * all of them served by one `stream_select` loop, writing the core's RESP bytes and
 * reading replies into the core's decoder. Every node is asked at once and the loop
 * returns to the core after every reply, so an acquisition ends at the quorum, never
 * waiting for the slowest node; a frozen node costs nothing but its own timeout.
 *
 * Supports `rediss://` (TLS, PHP's `ssl` context options via `$tlsOptions`) and AUTH
 * (`redis://:password@host` or `redis://user:password@host`).
 */
final class StreamDriver implements Driver
{
    /** @var list<StreamLink> */
    private array $links;
    private ?Operation $target = null;
    private bool $delivered = false;
    private bool $submitting = false;
    /** @var list<array{Operation, int, int, string}> failures found while submitting */
    private array $immediate = [];

    /**
     * @param list<string|NodeAddress> $nodes URLs (redis://, rediss://) or addresses
     * @param array<string, mixed> $tlsOptions PHP `ssl` context options for rediss:// URLs
     */
    public function __construct(array $nodes, array $tlsOptions = [], ?Native $native = null)
    {
        if ($nodes === []) {
            throw new InvalidArgumentException('no nodes: give at least one Redis URL', 'no_nodes');
        }
        $native ??= Native::get();
        $scripts = StreamLink::scriptLoads($native);
        $deliver = \Closure::fromCallable([$this, 'deliver']);
        $this->links = [];
        foreach (array_values($nodes) as $node) {
            $address = $node instanceof NodeAddress ? $node : NodeAddress::fromUrl($node, $tlsOptions);
            $this->links[] = new StreamLink($native, $address, $deliver, $scripts);
        }
    }

    public function labels(): array
    {
        return array_map(static fn (StreamLink $l): string => $l->connection->address->label(), $this->links);
    }

    public function submit(Operation $op, int $node, int $requestId, int $deadlineUs, int $argc): void
    {
        $link = $this->links[$node] ?? throw new CoreException("the core named node $node of " . count($this->links), 'out_of_range', 9005);
        $this->submitting = true;
        try {
            $link->submit($op, $requestId, $deadlineUs, $op->commandResp());
        } finally {
            $this->submitting = false;
        }
    }

    public function wait(Operation $op, int $untilUs): void
    {
        $this->target = $op;
        $this->delivered = false;
        try {
            $this->deliverImmediate();
            while (!$this->delivered) {
                $now = Clock::nowUs();
                foreach ($this->links as $link) {
                    $link->expire($now);
                }
                if ($this->delivered || $now >= $untilUs) {
                    return;
                }
                $this->select($untilUs - $now);
            }
        } finally {
            $this->target = null;
        }
    }

    public function settle(): void
    {
        // Commands still in flight keep going; their replies are read on the next call.
    }

    public function flush(): void
    {
        $this->deliverImmediate();
        while (true) {
            $latest = 0;
            foreach ($this->links as $link) {
                $latest = max($latest, $link->latestDeadline());
            }
            $now = Clock::nowUs();
            foreach ($this->links as $link) {
                $link->expire($now);
            }
            if ($latest <= $now) {
                return;
            }
            $this->select($latest - $now);
        }
    }

    public function close(): void
    {
        $this->flush();
        foreach ($this->links as $link) {
            $link->close();
        }
    }

    /**
     * Commands waiting for a reply on each node (diagnostics and tests).
     *
     * @return list<int>
     */
    public function inFlight(): array
    {
        return array_map(static fn (StreamLink $l): int => $l->inFlight(), $this->links);
    }

    /** One stream_select round of at most `$timeoutUs`, then the events it found. */
    private function select(int $timeoutUs): void
    {
        $read = [];
        $write = [];
        $byId = [];
        foreach ($this->links as $link) {
            $stream = $link->connection->readStream();
            if ($stream === null) {
                continue;
            }
            $id = (int) $stream;
            $byId[$id] = $link;
            $read[$id] = $stream;
            $w = $link->connection->writeStream();
            if ($w !== null) {
                $write[$id] = $w;
            }
        }
        if ($read === []) {
            usleep(max(0, min($timeoutUs, 1_000_000)));
            return;
        }
        $except = null;
        $seconds = intdiv($timeoutUs, 1_000_000);
        $micros = $timeoutUs % 1_000_000;
        $ready = @stream_select($read, $write, $except, $seconds, $micros);
        if ($ready === false || $ready === 0) {
            return;
        }
        foreach ($write as $stream) {
            $byId[(int) $stream]->connection->onWritable();
        }
        foreach ($read as $stream) {
            $byId[(int) $stream]->connection->onReadable();
        }
    }

    private function deliverImmediate(): void
    {
        $pending = $this->immediate;
        $this->immediate = [];
        foreach ($pending as [$op, $requestId, $kind, $text]) {
            $this->deliver($op, $requestId, null, $kind, $text);
        }
    }

    /** Hands one reply to its operation (called by the links). */
    private function deliver(Operation $op, int $requestId, ?Reply $reply, int $kind, string $text): void
    {
        if ($this->submitting && $reply === null) {
            // Not while the loop is between polls: handed in at the next wait.
            $this->immediate[] = [$op, $requestId, $kind, $text];
            return;
        }
        $now = Clock::nowUs();
        $rc = $reply !== null
            ? $op->handleReply($requestId, $reply, $now)
            : $op->handleSimpleReply($requestId, $kind, 0, $text, $now);
        if ($rc !== Constants::OK) {
            throw $op->native->error($rc, "reply to request $requestId");
        }
        if ($op === $this->target) {
            $this->delivered = true;
        }
    }
}
