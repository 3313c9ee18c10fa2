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
 * A driver over your own connected phpredis `Redis` objects, one per node.
 *
 * phpredis has no non-blocking API, so this driver is sequential: it sends one
 * command, reads its reply, hands it to the core, and moves on; the core still
 * decides at the quorum, so an acquisition stops asking once the answer is known.
 * Each command's read timeout is set to what is left until the core's deadline for it
 * (a command whose deadline already passed is not sent and counts as a timeout), so a
 * frozen node costs one node timeout per round, never more. A node that timed out is
 * asked after the others until it answers again (order across nodes is free; order
 * on one node is kept).
 *
 * phpredis cannot drop a reply that arrives after its timeout (the next command would
 * read it), so after a timeout or a connection error the connection is reopened: by
 * `$reconnect($node, $redis)` if given, else with close() and connect() to the same
 * host, port and timeout, then AUTH and SELECT as before. A command still queued in a
 * frozen node may then run after later commands sent on the new connection; the keys
 * it could set expire with their TTL. The three SCRIPT LOADs go first on every
 * connection this driver uses or reopens.
 *
 * phpredis reports every status reply as `true`, so any status counts as `OK`. The
 * driver changes each object's read timeout while it runs a command and restores it.
 */
final class PhpRedisDriver implements Driver
{
    /**
     * Commands not yet sent, per node, oldest first: operation, request id, deadline,
     * arguments.
     *
     * @var array<int, list<array{Operation, int, int, list<string>}>>
     */
    private array $queues = [];
    /** @var array<int, bool> nodes whose scripts are loaded on the current connection */
    private array $scriptsLoaded = [];
    /** @var array<int, bool> nodes whose last command timed out or failed */
    private array $suspect = [];
    /** @var list<\Redis> */
    private array $nodes;
    /** @var list<string> */
    private array $labels;
    /** @var list<string> */
    private readonly array $scripts;
    private readonly Native $native;
    private readonly ?\Closure $reconnect;

    /**
     * @param list<\Redis> $nodes connected phpredis objects, one per node
     * @param (callable(int, \Redis): \Redis)|null $reconnect a fresh connection for node N
     */
    public function __construct(array $nodes, ?callable $reconnect = null, ?Native $native = null)
    {
        if (!extension_loaded('redis')) {
            throw new InvalidArgumentException('PhpRedisDriver needs the phpredis extension (Debian package php-redis)', 'missing_extension');
        }
        if ($nodes === []) {
            throw new InvalidArgumentException('no nodes: give at least one Redis object', 'no_nodes');
        }
        $this->nodes = [];
        $this->labels = [];
        foreach (array_values($nodes) as $i => $redis) {
            if (!$redis instanceof \Redis) {
                throw new InvalidArgumentException("node $i is not a \\Redis object but " . get_debug_type($redis));
            }
            $this->nodes[] = $redis;
            $host = $redis->isConnected() ? (string) $redis->getHost() : '?';
            $port = $redis->isConnected() ? (int) $redis->getPort() : 0;
            $this->labels[] = str_contains($host, '/') ? $host : "redis://$host:$port";
            $this->queues[$i] = [];
        }
        $this->native = $native ?? Native::get();
        $this->reconnect = $reconnect === null ? null : \Closure::fromCallable($reconnect);
        $scripts = [];
        foreach ([Constants::SCRIPT_ACQUIRE, Constants::SCRIPT_RELEASE, Constants::SCRIPT_EXTEND] as $script) {
            $scripts[] = (string) $this->native->ffi->redlock_script_text($script);
        }
        $this->scripts = $scripts;
    }

    public function labels(): array
    {
        return $this->labels;
    }

    public function submit(Operation $op, int $node, int $requestId, int $deadlineUs, int $argc): void
    {
        if (!isset($this->queues[$node])) {
            throw new CoreException("the core named node $node of " . count($this->nodes), 'out_of_range', 9005);
        }
        $this->queues[$node][] = [$op, $requestId, $deadlineUs, $op->commandArgs($argc)];
    }

    public function wait(Operation $op, int $untilUs): void
    {
        // One command per call: the loop polls the core after every reply.
        while (($node = $this->nextNode()) !== null) {
            $entry = array_shift($this->queues[$node]);
            if ($this->run($node, $entry) && $entry[0] === $op) {
                return;
            }
            if (Clock::nowUs() >= $untilUs) {
                return;
            }
        }
        $now = Clock::nowUs();
        if ($now < $untilUs) {
            // Nothing left to send: the core waits for a retry delay.
            usleep($untilUs - $now);
        }
    }

    public function settle(): void
    {
        // What the core emitted still goes out, up to each command's deadline: an
        // acquisition is then held on every node that answers, not only on the first
        // quorum, and a release cleans every node.
        $this->flush();
    }

    public function flush(): void
    {
        while (($node = $this->nextNode()) !== null) {
            $this->run($node, array_shift($this->queues[$node]));
        }
    }

    public function close(): void
    {
        $this->flush();
    }

    /** The next node to serve: one with work that did not time out last, else any with work. */
    private function nextNode(): ?int
    {
        $fallback = null;
        foreach ($this->queues as $node => $queue) {
            if ($queue === []) {
                continue;
            }
            if (empty($this->suspect[$node])) {
                return $node;
            }
            $fallback ??= $node;
        }
        return $fallback;
    }

    /**
     * Sends one command and hands its reply (or timeout, or failure) to its operation.
     *
     * @param array{Operation, int, int, list<string>} $entry
     * @return bool whether a reply was handed in
     */
    private function run(int $node, array $entry): bool
    {
        [$op, $requestId, $deadline, $args] = $entry;
        $redis = $this->nodes[$node];
        $remaining = $deadline - Clock::nowUs();
        if ($remaining <= 0) {
            return $this->hand($op, $requestId, Constants::REPLY_TIMEOUT, 0, '');
        }
        $previous = null;
        try {
            $previous = $redis->getOption(\Redis::OPT_READ_TIMEOUT);
            if (empty($this->scriptsLoaded[$node])) {
                $redis->setOption(\Redis::OPT_READ_TIMEOUT, $remaining / 1e6);
                foreach ($this->scripts as $script) {
                    $redis->rawCommand('SCRIPT', 'LOAD', $script);
                }
                $this->scriptsLoaded[$node] = true;
                $remaining = $deadline - Clock::nowUs();
                if ($remaining <= 0) {
                    return $this->hand($op, $requestId, Constants::REPLY_TIMEOUT, 0, '');
                }
            }
            $redis->setOption(\Redis::OPT_READ_TIMEOUT, $remaining / 1e6);
            $redis->clearLastError();
            $result = $redis->rawCommand(...$args);
            $error = $result === false ? $redis->getLastError() : null;
        } catch (\RedisException $e) {
            $timedOut = Clock::nowUs() >= $deadline;
            $this->reopen($node);
            return $this->hand(
                $op,
                $requestId,
                $timedOut ? Constants::REPLY_TIMEOUT : Constants::REPLY_CONNECTION_FAILED,
                0,
                $timedOut ? '' : $e->getMessage(),
            );
        } finally {
            if ($previous !== null && $this->nodes[$node] === $redis) {
                try {
                    $redis->setOption(\Redis::OPT_READ_TIMEOUT, is_numeric($previous) ? (float) $previous : 0.0);
                } catch (\RedisException) {
                    // Disconnected: the option goes with the connection.
                }
            }
        }
        $this->suspect[$node] = false;
        if ($error !== null) {
            return $this->hand($op, $requestId, Constants::REPLY_ERROR, 0, $error);
        }
        return $this->handValue($op, $requestId, $result);
    }

    private function handValue(Operation $op, int $requestId, mixed $result): bool
    {
        if (is_array($result)) {
            $reply = $this->toReply($result);
            return $this->check($op, $requestId, $op->handleReply($requestId, $reply, Clock::nowUs()));
        }
        [$kind, $integer, $text] = self::simple($result);
        return $this->hand($op, $requestId, $kind, $integer, $text);
    }

    /** @return array{int, int, string} */
    private static function simple(mixed $value): array
    {
        return match (true) {
            $value === true => [Constants::REPLY_OK, 0, ''],
            $value === false, $value === null => [Constants::REPLY_NIL, 0, ''],
            is_int($value) => [Constants::REPLY_INTEGER, $value, ''],
            // With OPT_REPLY_LITERAL, statuses come back as their text.
            $value === 'OK' => [Constants::REPLY_OK, 0, ''],
            is_string($value) => [Constants::REPLY_BULK, 0, $value],
            default => [Constants::REPLY_BULK, 0, (string) json_encode($value)],
        };
    }

    /** @param array<mixed> $items */
    private function toReply(array $items): Reply
    {
        $built = [];
        foreach ($items as $item) {
            if (is_array($item)) {
                $built[] = $this->toReply($item);
            } else {
                [$kind, $integer, $text] = self::simple($item);
                $built[] = Reply::create($this->native, $kind, $integer, $text);
            }
        }
        return Reply::array($this->native, $built);
    }

    private function hand(Operation $op, int $requestId, int $kind, int $integer, string $text): bool
    {
        return $this->check($op, $requestId, $op->handleSimpleReply($requestId, $kind, $integer, $text, Clock::nowUs()));
    }

    private function check(Operation $op, int $requestId, int $rc): bool
    {
        if ($rc !== Constants::OK) {
            throw $op->native->error($rc, "reply to request $requestId");
        }
        return true;
    }

    /** A fresh connection after a timeout or an error: a late reply must never be read as another's. */
    private function reopen(int $node): void
    {
        $this->suspect[$node] = true;
        $this->scriptsLoaded[$node] = false;
        $redis = $this->nodes[$node];
        try {
            if ($this->reconnect !== null) {
                $this->nodes[$node] = ($this->reconnect)($node, $redis);
                return;
            }
            $host = $redis->getHost();
            $port = $redis->getPort();
            $timeout = $redis->getTimeout();
            $auth = $redis->getAuth();
            $db = $redis->getDBNum();
            $redis->close();
            if (!is_string($host) || $host === '') {
                return;
            }
            // A short connect timeout: a dead node must not hold up the others.
            $redis->connect($host, (int) $port, is_numeric($timeout) && $timeout > 0 ? min((float) $timeout, 0.05) : 0.05);
            if ($auth !== null && $auth !== false) {
                $redis->auth($auth);
            }
            if (is_int($db) && $db !== 0) {
                $redis->select($db);
            }
        } catch (\RedisException) {
            // Still down: the next command tries again (phpredis reconnects lazily).
        }
    }
}
