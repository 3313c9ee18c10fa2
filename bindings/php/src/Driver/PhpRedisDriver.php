<?php

declare(strict_types=1);

namespace Redlock\Driver;

use Redlock\Clock;
use Redlock\Exception\InvalidArgumentException;
use Redlock\Ffi\Constants;
use Redlock\Ffi\Link;
use Redlock\Ffi\Native;
use Redlock\Ffi\Reply;
use Redlock\Sentinel;

/**
 * A driver over your own connected phpredis `Redis` objects, one per node.
 *
 * phpredis has no non-blocking API, so this driver is sequential: it accepts what the
 * links emit (connect, write) and carries it out one at a time in wait(), each read
 * bounded by the instant the loop is waiting for (the operation's deadline or a link's
 * wake-up), and reports the result as an event. It decides nothing about commands:
 * the core's links decide what is written, when a node is stalled and what is written
 * again.
 *
 * Transport only, kept here because phpredis needs it:
 * - phpredis cannot drop a reply that arrives after its timeout (the next command
 *   would read it), so a read that times out closes the connection and is reported as
 *   a closed connection; the link re-opens it when it has something to write. The
 *   first command on a re-opened connection is `CLIENT KILL ID` of the old one, so a
 *   command still unread there cannot run after the new connection's.
 * - Across nodes the I/O order is free (the links keep each node's own order): a node
 *   whose last read timed out is served after the others, so one frozen node does not
 *   hold the others' commands behind its timeout; and while other nodes' commands wait,
 *   a read may use only half of the time left, so a node that froze since its last
 *   reply (served first, not yet known slow) leaves the others time to answer.
 *
 * Release notices (waiting acquisitions): phpredis can subscribe only inside its
 * blocking `subscribe()` loop, which returns when a callback unsubscribes and fails the
 * connection on a read timeout, so it cannot be polled while the driver waits. The
 * driver therefore opens its own subscriber socket per node (NoticeListener) to the
 * host, port, AUTH and database each `Redis` object reports, and reads it whenever it
 * would otherwise sleep or between commands; the core's Subscriptions decide when each
 * opens, subscribes and closes, within the objects' connect timeout (the largest, or
 * the core's connect timeout if none is set). Nodes reached over TLS or a Unix
 * socket get no subscriber (their settings are not readable back from phpredis): a
 * waiting acquisition then hears no notices from them and follows the core's retry
 * schedule.
 *
 * Reconnecting uses `$reconnect($node, $redis, $timeoutSeconds)` if given, else
 * connect() to the same host, port and timeout, then AUTH and SELECT as before. Each
 * node's link gets its object's connect timeout (the core's 2 s for an object without
 * one) and gives up at that time an attempt not carried out yet; the blocking connect
 * itself is bounded by the object's timeout and the instant the loop waits for.
 *
 * PhpRedisDriver::sentinel() makes the one node the master Redis Sentinels name,
 * resolved with phpredis' own `RedisSentinel` at every connection attempt. phpredis reports every status
 * reply as `true`, so any status counts as `OK`. The driver changes each object's read
 * timeout while it runs a command and restores it.
 */
final class PhpRedisDriver implements Driver
{
    /** @var list<array{int, int, list<string>|null}> node, write id, arguments (null: connect) */
    private array $pending = [];
    /** @var array<int, bool> nodes whose last read timed out */
    private array $slow = [];
    /** @var array<int, bool> nodes whose connection was closed */
    private array $broken = [];
    /** @var array<int, int> the server's id of each node's current connection (CLIENT ID) */
    private array $clientIds = [];
    /** @var array<int, int> the id of a closed connection, to kill first on the next */
    private array $closedIds = [];
    /** @var array<int, array{string, int, float, mixed, int}> host, port, timeout, auth, db */
    private array $endpoints = [];
    /** @var list<\Redis> */
    private array $nodes;
    /** @var list<string> */
    private array $labels;
    private readonly Native $native;
    private readonly ?\Closure $reconnect;
    private ?NoticeListener $notices = null;
    /** Whether the nodes keep their addresses (not so a Sentinel's master): notices need it. */
    private bool $fixedAddresses = true;
    /** Through Sentinels: how long one attempt (the Sentinels asked, the master connected) may take. */
    private ?int $sentinelAttemptMs = null;

    /**
     * @param list<\Redis> $nodes connected phpredis objects, one per node
     * @param (callable(int, \Redis, float): \Redis)|null $reconnect a fresh connection
     *     for node N, within the given number of seconds
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
        }
        $this->native = $native ?? Native::get();
        $this->reconnect = $reconnect === null ? null : \Closure::fromCallable($reconnect);
    }

    /**
     * One node: the master the Sentinels of `$sentinel` name for its service, asked
     * with phpredis' `RedisSentinel::getMasterAddrByName()` (each Sentinel in turn) at
     * every connection attempt, then connected with a fresh `\Redis` (AUTH and SELECT
     * from `$sentinel`). Release notices are not heard (the master moves): a waiting
     * acquisition follows the core's retry schedule.
     *
     * phpredis before 6.0 reaches Sentinels without AUTH; neither this transport nor
     * phpredis' Sentinel client does TLS here: use the stream transport for those.
     */
    public static function sentinel(Sentinel $sentinel, ?Native $native = null): self
    {
        if ($sentinel->tls) {
            throw new InvalidArgumentException('the phpredis transport reaches a Sentinel master without TLS (use Redlock::sentinel())');
        }
        $modern = version_compare((string) phpversion('redis'), '6.0', '>=');
        foreach ($sentinel->sentinels as $address) {
            if ($address->tls || (!$modern && $address->password !== null)) {
                throw new InvalidArgumentException(
                    "phpredis' RedisSentinel cannot reach {$address->label()} with TLS or AUTH (use Redlock::sentinel())",
                );
            }
        }
        $resolve = static function (int $node, \Redis $old, float $timeout) use ($sentinel, $modern): \Redis {
            unset($node, $old);
            $failures = [];
            foreach ($sentinel->sentinels as $address) {
                $limit = min($timeout, $sentinel->queryTimeoutMs / 1000);
                try {
                    $client = $modern
                        ? new \RedisSentinel(self::sentinelOptions($address, $limit))
                        : new \RedisSentinel($address->host, $address->port, $limit, null, 0, $limit);
                    $reply = $client->getMasterAddrByName($sentinel->service);
                } catch (\RedisException $e) {
                    $failures[] = "{$address->label()}: {$e->getMessage()}";
                    continue;
                }
                try {
                    // phpredis gives an empty array (5.x) or false for a service the Sentinel does not know.
                    $master = $sentinel->master(is_array($reply) && $reply !== [] ? array_map('strval', array_values($reply)) : null);
                } catch (InvalidArgumentException $e) {
                    $failures[] = "{$address->label()}: {$e->getMessage()}";
                    continue;
                }
                if ($master === null) {
                    $failures[] = $sentinel->unknown($address);
                    continue;
                }
                $redis = new \Redis();
                $redis->connect($master->host, $master->port, $timeout);
                if ($master->password !== null) {
                    $redis->auth($master->username !== null ? [$master->username, $master->password] : $master->password);
                }
                if ($master->database !== 0) {
                    $redis->select($master->database);
                }
                return $redis;
            }
            throw new \RedisException($sentinel->failure($failures));
        };
        $driver = new self([new \Redis()], $resolve, $native);
        $driver->labels = [$sentinel->label()];
        $driver->fixedAddresses = false;
        $driver->sentinelAttemptMs = $sentinel->attemptTimeoutMs($driver->native->connectTimeoutDefaultMs());
        return $driver;
    }

    /**
     * phpredis 6's RedisSentinel options for one Sentinel.
     *
     * @return array<string, mixed>
     */
    private static function sentinelOptions(NodeAddress $address, float $timeout): array
    {
        $options = ['host' => $address->host, 'port' => $address->port, 'connectTimeout' => $timeout, 'readTimeout' => $timeout];
        if ($address->password !== null) {
            $options['auth'] = $address->username !== null ? [$address->username, $address->password] : $address->password;
        }
        return $options;
    }

    public function labels(): array
    {
        return $this->labels;
    }

    public function addresses(): array
    {
        $out = [];
        foreach ($this->labels as $i => $label) {
            $endpoint = $this->endpoints[$i] ?? null;
            // A node not connected at construction has no address to compare: its label
            // names it uniquely.
            $out[] = $endpoint === null ? "unknown-$i" : "{$endpoint[0]}:{$endpoint[1]}";
            unset($label);
        }
        return $out;
    }

    /**
     * The `Redis` object's own connect timeout (what its owner chose, `getTimeout()`), if
     * it has one; null (the core's) for an object without one or not connected when the
     * driver was made. Through Sentinels: every Sentinel's query timeout, then the core's.
     */
    public function connectTimeoutMs(int $node): ?int
    {
        if (!$this->fixedAddresses) {
            return $this->sentinelAttemptMs;
        }
        $timeout = $this->endpoints[$node][2] ?? 0.0;
        return $timeout > 0 ? (int) min(ceil($timeout * 1000), Link::CONNECT_TIMEOUT_MAX_MS) : null;
    }

    /**
     * Accepts the link's Connect: carried out in wait(). The link gives it up (close())
     * if it is not done within its connect timeout; the object's own connect timeout
     * bounds the blocking connect meanwhile.
     */
    public function connect(int $node, Events $events): void
    {
        $this->pending[] = [$node, 0, null];
    }

    public function write(int $node, int $writeId, int $argc, Link $link): void
    {
        $this->pending[] = [$node, $writeId, $link->writeArgs($argc)];
    }

    /**
     * The link's Close: what was accepted for the node and not carried out (a Connect
     * included) is dropped, and its connection closed; nothing more is reported for it.
     */
    public function close(int $node): void
    {
        $this->drop($node);
        $this->closeConnection($node);
    }

    public function poll(Events $events): void
    {
        // phpredis only reads when asked, in wait(); the subscriber sockets can be polled.
        $this->notices?->select(0);
    }

    public function listen(array $channels, Events $events): void
    {
        $this->notices ??= new NoticeListener($this->native, $this->noticeAddresses(), $this->noticeTimeoutMs());
        $this->notices->listen($channels, $events);
    }

    public function unlisten(): void
    {
        $this->notices?->unlisten();
    }

    public function hasPendingIo(): bool
    {
        return $this->pending !== [];
    }

    public function wait(int $untilUs, Events $events): void
    {
        $pick = null;
        foreach ($this->pending as $i => [$node]) {
            if (empty($this->slow[$node])) {
                $pick = $i;
                break;
            }
        }
        $pick ??= array_key_first($this->pending);
        $now = Clock::nowUs();
        if ($pick === null) {
            if ($untilUs > $now) {
                if ($this->notices !== null) {
                    // Nothing to run: wait for a notice (or the subscribers' next instant)
                    // instead of sleeping blind.
                    $this->notices->select($untilUs - $now);
                } else {
                    usleep($untilUs - $now);
                }
            }
            return;
        }
        $this->notices?->select(0);
        [$node, $writeId, $args] = $this->pending[$pick];
        array_splice($this->pending, $pick, 1);
        $budgetUs = max(1_000, $untilUs - $now);
        foreach ($this->pending as [$other]) {
            if ($other !== $node) {
                // Other nodes wait behind this one: it may use half of the time left, so
                // a node that has just frozen (not yet known slow) cannot take the whole
                // deadline from the nodes that would answer (a release then failed on
                // every node, one frozen). Past it, the read counts as timed out.
                $budgetUs = max(1_000, intdiv($budgetUs, 2));
                break;
            }
        }
        if ($args === null) {
            $this->open($node, $budgetUs, $events);
        } else {
            $this->run($node, $writeId, $args, $budgetUs, $events);
        }
    }

    public function shutdown(): void
    {
        $this->pending = [];
        $this->notices?->shutdown();
        $this->notices = null;
    }

    /**
     * How long a subscriber connection may take to open or to confirm a subscription
     * (ms): the objects' connect timeout, the largest if they differ.
     */
    private function noticeTimeoutMs(): int
    {
        $seconds = 0.0;
        foreach ($this->endpoints as [, , $timeout]) {
            $seconds = max($seconds, $timeout);
        }
        return $seconds > 0 ? (int) ceil($seconds * 1000) : $this->native->connectTimeoutDefaultMs();
    }

    /**
     * Where each node's subscriber connects: the object's plain TCP endpoint and
     * credentials, or null (TLS, a Unix socket, an unknown address).
     *
     * @return array<int, ?NodeAddress>
     */
    private function noticeAddresses(): array
    {
        $out = [];
        foreach (array_keys($this->nodes) as $node) {
            $endpoint = $this->endpoints[$node] ?? null;
            $out[$node] = null;
            if ($endpoint === null || !$this->fixedAddresses) {
                continue;
            }
            [$host, $port, , $auth, $db] = $endpoint;
            if (str_starts_with($host, 'tcp://')) {
                $host = substr($host, 6);
            }
            if ($host === '' || str_contains($host, '://') || str_starts_with($host, '/') || $port < 1) {
                continue;
            }
            [$user, $password] = match (true) {
                is_array($auth) && count($auth) >= 2 => [(string) array_values($auth)[0], (string) array_values($auth)[1]],
                is_array($auth) && count($auth) === 1 => [null, (string) array_values($auth)[0]],
                is_string($auth) => [null, $auth],
                default => [null, null],
            };
            $out[$node] = new NodeAddress($host, $port, false, $user, $password, $db);
        }
        return $out;
    }

    /** Opens (or checks) node `$node`'s connection within `$budgetUs`. */
    private function open(int $node, int $budgetUs, Events $events): void
    {
        // Opening takes at most the object's own connect timeout (what its owner chose
        // for connecting), whatever the loop waits for.
        $timeout = $this->fixedAddresses ? $this->endpoints[$node][2] ?? 0.0 : 0.0;
        if ($timeout > 0) {
            $budgetUs = min($budgetUs, (int) ($timeout * 1e6));
        }
        $deadline = Clock::nowUs() + $budgetUs;
        if (!empty($this->broken[$node]) || !$this->nodes[$node]->isConnected()) {
            $failure = $this->reopen($node, $budgetUs);
            if ($failure !== null) {
                $this->broken[$node] = true;
                $events->closed($node, $failure[0], $failure[1]);
                return;
            }
        }
        $redis = $this->nodes[$node];
        try {
            $previous = $redis->getOption(\Redis::OPT_READ_TIMEOUT);
            $redis->setOption(\Redis::OPT_READ_TIMEOUT, max(1_000, $deadline - Clock::nowUs()) / 1e6);
            if (isset($this->closedIds[$node])) {
                // An error reply (already gone, or CLIENT not allowed) changes nothing here.
                $redis->rawCommand('CLIENT', 'KILL', 'ID', (string) $this->closedIds[$node]);
                unset($this->closedIds[$node]);
            }
            $id = $redis->rawCommand('CLIENT', 'ID');
            if (is_int($id)) {
                $this->clientIds[$node] = $id;
            }
            $redis->setOption(\Redis::OPT_READ_TIMEOUT, is_numeric($previous) ? (float) $previous : 0.0);
        } catch (\RedisException $e) {
            $this->failed($node, $e, $deadline, $events);
            return;
        }
        $events->connected($node);
    }

    /**
     * Runs one command within `$budgetUs` and reports its reply, or the connection's
     * failure.
     *
     * @param list<string> $args
     */
    private function run(int $node, int $writeId, array $args, int $budgetUs, Events $events): void
    {
        $redis = $this->nodes[$node];
        $deadline = Clock::nowUs() + $budgetUs;
        try {
            $previous = $redis->getOption(\Redis::OPT_READ_TIMEOUT);
            $redis->setOption(\Redis::OPT_READ_TIMEOUT, $budgetUs / 1e6);
            $redis->clearLastError();
            $result = $redis->rawCommand(...$args);
            $error = $result === false ? $redis->getLastError() : null;
            $redis->setOption(\Redis::OPT_READ_TIMEOUT, is_numeric($previous) ? (float) $previous : 0.0);
        } catch (\RedisException $e) {
            $this->failed($node, $e, $deadline, $events);
            return;
        }
        $this->slow[$node] = false;
        if ($error !== null) {
            $events->reply($node, $writeId, [Constants::REPLY_ERROR, 0, $error]);
        } elseif (is_array($result)) {
            $events->reply($node, $writeId, $this->toReply($result));
        } else {
            $events->reply($node, $writeId, self::simple($result));
        }
    }

    /** A read or write failed: the connection is closed (a late reply must never be read). */
    private function failed(int $node, \RedisException $e, int $deadline, Events $events): void
    {
        // phpredis times out a read a little before the instant asked for.
        $timedOut = Clock::nowUs() + 1_000 >= $deadline;
        $this->slow[$node] = $timedOut;
        $this->drop($node);
        $this->closeConnection($node);
        $message = $e->getMessage();
        $events->closed($node, $timedOut ? 'other' : self::cause($message), $timedOut ? "read timed out: $message" : $message);
    }

    /** Forgets what was accepted for `$node` and not yet carried out. */
    private function drop(int $node): void
    {
        $this->pending = array_values(array_filter($this->pending, static fn (array $p): bool => $p[0] !== $node));
    }

    private function closeConnection(int $node): void
    {
        if (!empty($this->broken[$node])) {
            return;
        }
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

    private static function cause(string $message): string
    {
        return match (true) {
            stripos($message, 'refused') !== false => 'refused',
            stripos($message, 'NOAUTH') !== false, stripos($message, 'WRONGPASS') !== false, stripos($message, 'AUTH') !== false => 'auth',
            stripos($message, 'SSL') !== false, stripos($message, 'TLS') !== false => 'tls',
            stripos($message, 'timed out') !== false => 'timeout',
            default => 'other',
        };
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
        return self::arrayReply($this->native, $items);
    }

    /** @param array<mixed> $items */
    private static function arrayReply(Native $native, array $items): Reply
    {
        $built = [];
        foreach ($items as $item) {
            if (is_array($item)) {
                $built[] = self::arrayReply($native, $item);
            } else {
                [$kind, $integer, $text] = self::simple($item);
                $built[] = Reply::create($native, $kind, $integer, $text);
            }
        }
        return Reply::array($native, $built);
    }

    /**
     * @internal What a phpredis `rawCommand()` returned (and its last error, for
     * `false`), as a core reply: the same mapping the driver uses.
     */
    public static function replyOf(Native $native, mixed $result, ?string $error): Reply
    {
        if ($result === false && $error !== null) {
            return Reply::create($native, Constants::REPLY_ERROR, 0, $error);
        }
        if (is_array($result)) {
            return self::arrayReply($native, $result);
        }
        [$kind, $integer, $text] = self::simple($result);
        return Reply::create($native, $kind, $integer, $text);
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
     * Reopens node `$node`'s connection within `$budgetUs`; null on success, else the
     * cause and text of the failure.
     *
     * @return array{string, string}|null
     */
    private function reopen(int $node, int $budgetUs): ?array
    {
        try {
            if ($this->reconnect !== null) {
                $this->nodes[$node] = ($this->reconnect)($node, $this->nodes[$node], $budgetUs / 1e6);
            } else {
                $endpoint = $this->endpoints[$node] ?? null;
                if ($endpoint === null) {
                    return ['other', 'not connected, and the address is unknown (give PhpRedisDriver a $reconnect callable)'];
                }
                [$host, $port, $timeout, $auth, $db] = $endpoint;
                $limit = $budgetUs / 1e6;
                $this->nodes[$node]->connect($host, $port, $timeout > 0 ? min($timeout, $limit) : $limit);
                if ($auth !== null) {
                    $this->nodes[$node]->auth($auth);
                }
                if ($db !== 0) {
                    $this->nodes[$node]->select($db);
                }
            }
        } catch (\RedisException $e) {
            return [self::cause($e->getMessage()), 'reconnect failed: ' . $e->getMessage()];
        }
        $this->broken[$node] = false;
        return null;
    }
}
