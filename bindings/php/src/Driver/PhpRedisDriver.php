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
 * (a command with less than a quarter of its time left is not sent and counts as a
 * timeout; a release always gets at least half of its time, as it cleans what an
 * attempt may have set), so a frozen node costs about one node timeout per round. Nodes that keep failing
 * are asked after the others (order across nodes is free; order on one node is kept).
 *
 * phpredis cannot drop a reply that arrives after its timeout (the next command would
 * read it), so after a timeout or a connection error the connection is closed at once
 * and the next command to that node reopens it, within that command's time: by
 * `$reconnect($node, $redis)` if given, else with connect() to the same host, port and
 * timeout, then AUTH and SELECT as before. The first command on the new connection is
 * `CLIENT KILL ID` of the old one, so a command still unread there cannot run after
 * the new connection's (where the server refuses CLIENT KILL, such a late SET can
 * outlive its release until its TTL). The three SCRIPT LOADs go first on every
 * connection this driver uses or reopens.
 *
 * phpredis reports every status reply as `true`, so any status counts as `OK`. The
 * driver changes each object's read timeout while it runs a command and restores it.
 */
final class PhpRedisDriver implements Driver
{
    /**
     * Commands not yet sent, per node, oldest first: operation, request id, deadline,
     * arguments, whether it is a release, the time the core gave it.
     *
     * @var array<int, list<array{Operation, int, int, list<string>, bool, int}>>
     */
    private array $queues = [];
    /** @var array<int, bool> nodes whose scripts are loaded on the current connection */
    private array $scriptsLoaded = [];
    /** @var array<int, int> per node, commands that timed out or failed since its last answer */
    private array $failures = [];
    /** @var array<int, bool> nodes whose connection was closed after a failure */
    private array $broken = [];
    /** @var array<int, int> the server's id of each node's current connection (CLIENT ID) */
    private array $clientIds = [];
    /** @var array<int, int> the id of the connection a failure closed, to kill first on the next */
    private array $closedIds = [];
    /** @var array<int, array{string, int, float, mixed, int}> host, port, timeout, auth, db */
    private array $endpoints = [];
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
            $this->remember($i, $redis);
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
        [$kind] = $op->commandKind();
        $budget = max(1, $deadlineUs - Clock::nowUs());
        $this->queues[$node][] = [$op, $requestId, $deadlineUs, $op->commandArgs($argc), $kind === Constants::COMMAND_RELEASE, $budget];
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

    /**
     * The next node to serve: of those with work, the one with the fewest failures
     * since it last answered (a frozen node keeps failing and drifts to the end, a
     * node that merely ran out of time once comes back at once), then the lowest index.
     */
    private function nextNode(): ?int
    {
        $best = null;
        foreach ($this->queues as $node => $queue) {
            if ($queue !== [] && ($best === null || ($this->failures[$node] ?? 0) < ($this->failures[$best] ?? 0))) {
                $best = $node;
            }
        }
        return $best;
    }

    /**
     * Sends one command and hands its reply (or timeout, or failure) to its operation.
     *
     * @param array{Operation, int, int, list<string>, bool, int} $entry
     * @return bool whether a reply was handed in
     */
    private function run(int $node, array $entry): bool
    {
        [$op, $requestId, $deadline, $args, $isRelease, $budget] = $entry;
        $now = Clock::nowUs();
        $remaining = $deadline - $now;
        if ($isRelease && $remaining < intdiv($budget, 2)) {
            // A release cleans what an attempt may have set here, whatever its deadline:
            // it gets at least half the time the core gave it (its reply is then late).
            $remaining = intdiv($budget, 2);
            $deadline = $now + $remaining;
        } elseif (!$isRelease && $remaining < intdiv($budget, 4)) {
            // Too little time left to be answered: a command never sent cannot leave a
            // key behind, one sent and abandoned can. It counts as a timeout.
            return $this->hand($op, $requestId, Constants::REPLY_TIMEOUT, 0, '');
        }
        if (!empty($this->broken[$node])) {
            $failure = $this->reopen($node, $remaining);
            if ($failure !== null) {
                $this->failures[$node] = ($this->failures[$node] ?? 0) + 1;
                return $this->hand($op, $requestId, Constants::REPLY_CONNECTION_FAILED, 0, $failure);
            }
            $remaining = $deadline - Clock::nowUs();
            if ($remaining <= 0) {
                return $this->hand($op, $requestId, Constants::REPLY_TIMEOUT, 0, '');
            }
        }
        $redis = $this->nodes[$node];
        $previous = null;
        try {
            $previous = $redis->getOption(\Redis::OPT_READ_TIMEOUT);
            if (empty($this->scriptsLoaded[$node])) {
                $redis->setOption(\Redis::OPT_READ_TIMEOUT, $remaining / 1e6);
                $this->prepareConnection($node, $redis);
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
            $redis->setOption(\Redis::OPT_READ_TIMEOUT, is_numeric($previous) ? (float) $previous : 0.0);
        } catch (\RedisException $e) {
            // phpredis times out a read a little before the instant asked for.
            $timedOut = Clock::nowUs() + 1_000 >= $deadline;
            $this->markBroken($node);
            return $this->hand(
                $op,
                $requestId,
                $timedOut ? Constants::REPLY_TIMEOUT : Constants::REPLY_CONNECTION_FAILED,
                0,
                $timedOut ? '' : $e->getMessage(),
            );
        }
        $this->failures[$node] = 0;
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

    /**
     * The first commands on every connection: if a failure closed the previous one,
     * CLIENT KILL it, so a command still unread in it can no longer run after what
     * this connection sends (it ran before, or never); then the connection's own id
     * (kept for the same purpose) and the three SCRIPT LOADs.
     */
    private function prepareConnection(int $node, \Redis $redis): void
    {
        if (isset($this->closedIds[$node])) {
            // An error reply (already gone, or CLIENT not allowed) changes nothing here.
            $redis->rawCommand('CLIENT', 'KILL', 'ID', (string) $this->closedIds[$node]);
            unset($this->closedIds[$node]);
        }
        $id = $redis->rawCommand('CLIENT', 'ID');
        if (is_int($id)) {
            $this->clientIds[$node] = $id;
        }
        foreach ($this->scripts as $script) {
            $redis->rawCommand('SCRIPT', 'LOAD', $script);
        }
    }

    /**
     * After a timeout or an error the connection is closed at once: a late reply
     * must never be read as another command's. The node is asked last until it
     * answers again; the next command to it reopens the connection.
     */
    private function markBroken(int $node): void
    {
        $this->failures[$node] = ($this->failures[$node] ?? 0) + 1;
        $this->scriptsLoaded[$node] = false;
        $this->broken[$node] = true;
        if (isset($this->clientIds[$node])) {
            $this->closedIds[$node] = $this->clientIds[$node];
            unset($this->clientIds[$node]);
        }
        $redis = $this->nodes[$node];
        $this->remember($node, $redis);
        try {
            $redis->close();
        } catch (\RedisException) {
            // Already closed.
        }
    }

    /** Where node `$node` is, while its object still knows (it forgets once closed). */
    private function remember(int $node, \Redis $redis): void
    {
        try {
            if (!$redis->isConnected()) {
                return;
            }
            $host = $redis->getHost();
            if (!is_string($host) || $host === '') {
                return;
            }
            $auth = $redis->getAuth();
            $this->endpoints[$node] = [
                $host,
                (int) $redis->getPort(),
                (float) $redis->getTimeout(),
                $auth === false ? null : $auth,
                (int) $redis->getDBNum(),
            ];
        } catch (\RedisException) {
            // Nothing to learn from a broken object.
        }
    }

    /**
     * Reopens node `$node`'s connection within `$remainingUs`; null on success, else
     * why it failed.
     */
    private function reopen(int $node, int $remainingUs): ?string
    {
        try {
            if ($this->reconnect !== null) {
                $this->nodes[$node] = ($this->reconnect)($node, $this->nodes[$node]);
            } else {
                $endpoint = $this->endpoints[$node] ?? null;
                if ($endpoint === null) {
                    return 'not connected, and the address is unknown (give PhpRedisDriver a $reconnect callable)';
                }
                [$host, $port, $timeout, $auth, $db] = $endpoint;
                $limit = $remainingUs / 1e6;
                $this->nodes[$node]->connect($host, $port, $timeout > 0 ? min($timeout, $limit) : $limit);
                if ($auth !== null) {
                    $this->nodes[$node]->auth($auth);
                }
                if ($db !== 0) {
                    $this->nodes[$node]->select($db);
                }
            }
        } catch (\RedisException $e) {
            return 'reconnect failed: ' . $e->getMessage();
        }
        $this->broken[$node] = false;
        return null;
    }
}
