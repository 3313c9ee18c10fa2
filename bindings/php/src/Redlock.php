<?php

declare(strict_types=1);

namespace Redlock;

use Redlock\Driver\Driver;
use Redlock\Driver\PhpRedisDriver;
use Redlock\Driver\StreamDriver;
use Redlock\Exception\CancelledException;
use Redlock\Exception\CoreException;
use Redlock\Exception\InvalidArgumentException;
use Redlock\Exception\LockHeldException;
use Redlock\Exception\LockLostException;
use Redlock\Exception\NodesFailedException;
use Redlock\Exception\NotHeldException;
use Redlock\Exception\UsedAfterCloseException;
use Redlock\Ffi\Client;
use Redlock\Ffi\Config;
use Redlock\Ffi\Constants;
use Redlock\Ffi\KeepAlive;
use Redlock\Ffi\Lease;
use Redlock\Ffi\Native;
use Redlock\Ffi\Operation;
use Redlock\Ffi\Outcome;

/**
 * A Redlock client over N independent Redis nodes. Every decision (quorum, validity,
 * retries, what to release, whether an extension worked, what each node's connection
 * carries, which error to raise) is the core's; this class starts operations, runs
 * them through the Engine (the loop over one core Link per node) and gives the outcome
 * its PHP shape:
 *
 *     $redlock = Redlock::create(['redis://10.0.0.1:6379', 'redis://10.0.0.2:6379', ...]);
 *     $redlock->synchronized('orders:42', 10_000, function (Lock $lock) { ... });
 *
 * One Redlock serves one thread of execution (PHP's usual model); create it once per
 * process or request and reuse it: its connections stay open.
 */
final class Redlock
{
    public readonly Native $native;
    private readonly Config $config;
    private readonly Client $client;
    /** The same settings with fencing the other way, for acquire(fencing: ...); built on first use. */
    private ?Client $otherFencing = null;
    private readonly Engine $engine;
    /** @var list<string> */
    private readonly array $labels;
    private bool $closed = false;
    /** @var \WeakMap<Lock, true> locks handed out and not yet released, for close() */
    private \WeakMap $held;
    /** @var array<int, array{callable(Event): void, ?callable(\Throwable, Event): void}> by spl_object_id of the listener */
    private array $listeners = [];
    /** @var array<int, array{callable, int}> what was given to addEventListener(), and its key in $listeners */
    private array $listenerIds = [];

    public function __construct(
        private readonly Driver $driver,
        private readonly Options $options = new Options(),
        ?Native $native = null,
    ) {
        $this->native = $native ?? Native::get();
        $this->labels = $driver->labels();
        self::refuseDuplicates($this->native, $driver->addresses(), $this->labels);
        $this->config = Config::build($this->native, count($this->labels), $options->ttlMs, $options->coreSettings());
        $this->client = Client::create($this->config);
        $this->engine = new Engine($this->native, $driver, count($this->labels), $this->config->nodeTimeoutUs());
        $this->held = new \WeakMap();
    }

    /**
     * A client with the default driver (non-blocking streams) over these node URLs
     * (`redis://[[user]:password@]host:port[/db]`, `rediss://…` for TLS).
     *
     * @param list<string> $urls
     * @param array<string, mixed> $tlsOptions PHP `ssl` context options (cafile, ...)
     */
    public static function create(array $urls, Options $options = new Options(), array $tlsOptions = []): self
    {
        return new self(new StreamDriver($urls, $tlsOptions), $options);
    }

    /**
     * A single-instance client (N = 1) on the master the Sentinels of `$sentinel` name
     * for its service, over the default driver's own sockets: every connection attempt
     * asks the Sentinels again, so a failover is followed at the next reconnection.
     * Mind the failover caveat (see Sentinel): one replicated master is not Redlock.
     */
    public static function sentinel(Sentinel $sentinel, Options $options = new Options()): self
    {
        return new self(new StreamDriver($sentinel), $options);
    }

    /**
     * Like sentinel(), over phpredis: the master is asked of the Sentinels with
     * phpredis' RedisSentinel and reached with a fresh `\Redis` (PhpRedisDriver::sentinel()).
     */
    public static function withPhpRedisSentinel(Sentinel $sentinel, Options $options = new Options()): self
    {
        return new self(PhpRedisDriver::sentinel($sentinel), $options);
    }

    /**
     * A client over your own connected phpredis objects, one per node (sequential:
     * see PhpRedisDriver).
     *
     * @param list<\Redis> $nodes
     */
    public static function withPhpRedis(array $nodes, Options $options = new Options()): self
    {
        return new self(new PhpRedisDriver($nodes), $options);
    }

    /** Nodes that must agree: N / 2 + 1. */
    public function quorum(): int
    {
        return $this->config->quorum();
    }

    /** @return list<string> the nodes, without credentials */
    public function nodes(): array
    {
        return $this->labels;
    }

    public function options(): Options
    {
        return $this->options;
    }

    public function driver(): Driver
    {
        return $this->driver;
    }

    /**
     * Acquires a lock on `$resources` (one name or several, all or nothing) for `$ttlMs`
     * (default: the configured TTL), with the configured attempts: once one failed and
     * another may follow, it listens for release notices on every node (as the core
     * decides, Operation::listens()), so a release elsewhere starts the next attempt
     * before its retry delay is out. With `$keepAlive`
     * the lock carries the core's KeepAlive: call Lock::keepAlive() from your work.
     * With `$timeLimitMs` the acquisition is given up at that time (CancelledException),
     * and what it may have set is released.
     *
     * With `$waitMs` it waits for the lock up to that long instead (the core's wait
     * limit: the configured attempts do not apply; 0 tries once): it keeps trying on the
     * core's retry schedule, never starting an attempt that could not end by the limit,
     * and listens for release notices on every node, so a release elsewhere starts the
     * next attempt at once. Gives up with LockHeldException about one node timeout after
     * the limit at most, every attempt released.
     *
     * `$fencing` overrides Options::$fencing for this lock: with it the lock carries a
     * fencing token (Lock::fencingToken()).
     *
     * @param string|list<string> $resources
     * @throws LockHeldException someone else holds it (held_elsewhere)
     * @throws NodesFailedException nodes failed (nodes_failing), each node's cause in `nodes`
     * @throws CancelledException the time limit passed first (cancelled)
     */
    public function acquire(
        string|array $resources,
        ?int $ttlMs = null,
        bool $keepAlive = false,
        ?int $timeLimitMs = null,
        ?int $waitMs = null,
        ?bool $fencing = null,
    ): Lock {
        $names = self::names($resources);
        $client = $this->usable();
        if ($fencing !== null && $fencing !== $this->options->fencing) {
            // Same settings, fencing the other way; extensions and releases of the lock
            // do not depend on it (its lease carries the token).
            $client = $this->otherFencing ??= Client::create(Config::build(
                $this->native,
                count($this->labels),
                $this->options->ttlMs,
                ['fencing' => $fencing] + $this->options->coreSettings(),
            ));
        }
        $limitUs = null;
        if ($timeLimitMs !== null) {
            if ($timeLimitMs < 0) {
                throw new InvalidArgumentException("the time limit must not be negative, got $timeLimitMs");
            }
            $limitUs = Clock::nowUs() + $timeLimitMs * 1000;
        }
        if ($waitMs !== null && $waitMs < 0) {
            throw new InvalidArgumentException("the wait limit must not be negative, got $waitMs");
        }
        $op = $waitMs === null
            ? $client->acquire($names, $ttlMs, Clock::nowUs())
            : $client->acquireWaiting($names, $ttlMs, $waitMs * 1000, Clock::nowUs());
        $outcome = $this->engine->run($op, $limitUs, $names);
        $acquiredAtUs = Clock::nowUs();
        $lease = $outcome->lease();
        if ($outcome->kind === Constants::OUTCOME_ACQUIRED && $lease !== null) {
            $keeper = $keepAlive ? KeepAlive::create($client, $lease) : null;
            $lock = new Lock($this, $names, $lease, $outcome->attempts() ?? 1, $keeper, $acquiredAtUs);
            $this->held[$lock] = true;
            return $lock;
        }
        throw $this->error($names, $outcome, 'could not lock');
    }

    /**
     * Whether anyone holds the lock on `$resources` now, as the core decides it from
     * every node's `GET` (`MGET` for several): held when one token holds every key on a
     * quorum of nodes; free as soon as no token can reach a quorum, even with keys left
     * on fewer nodes (a failed attempt, an expired holder). It never changes a key.
     *
     * The answer describes the moment the nodes answered: use it for monitoring and
     * decisions that tolerate a lock taken or expiring a moment later, never in place
     * of acquire().
     *
     * @param string|list<string> $resources
     * @throws NodesFailedException too many nodes failed to say (nodes_failing)
     */
    public function isLocked(string|array $resources): bool
    {
        $names = self::names($resources);
        return $this->inspect($names)->isLocked();
    }

    /**
     * The token that holds the lock on `$resources` now (see isLocked()), or null when
     * nobody does.
     *
     * @param string|list<string> $resources
     * @throws NodesFailedException too many nodes failed to say (nodes_failing)
     */
    public function holder(string|array $resources): ?string
    {
        $names = self::names($resources);
        return $this->inspect($names)->holder();
    }

    /**
     * Calls `$listener` with an Event for everything the core reports about this
     * client's locks (docs/observability.md): `acquired`, `not_acquired`, `retry`,
     * `extended`, `not_extended`, `released`, `not_released`, `inspected`,
     * `not_inspected`, `node_failed` with each node's cause, and `lost` when a lock's
     * keep-alive finds it lost. Listeners run in the order added, right after the input
     * that produced the event (inside acquire(), extend(), ...), so keep them short.
     *
     * A listener that throws does not affect the lock: the exception is caught, the
     * operation goes on and the listener stays registered. `$onError($exception, $event)`
     * gets it if given (what it throws is ignored); without it, the exception is written
     * with error_log().
     *
     * @param callable(Event): void $listener
     * @param null|callable(\Throwable, Event): void $onError
     */
    public function addEventListener(callable $listener, ?callable $onError = null): void
    {
        $closure = \Closure::fromCallable($listener);
        $this->listeners[spl_object_id($closure)] = [$closure, $onError];
        // Weakly: the engine must not keep its client alive (a cycle would delay close()
        // until the garbage collector runs).
        $self = \WeakReference::create($this);
        $this->engine->onEvents(static function (Operation $op, array $names) use ($self): void {
            $self->get()?->dispatch($op, $names);
        });
        $this->listenerIds[] = [$listener, spl_object_id($closure)];
    }

    /** Stops calling `$listener` (the same value given to addEventListener()). */
    public function removeEventListener(callable $listener): void
    {
        foreach ($this->listenerIds as $i => [$given, $id]) {
            if ($given === $listener) {
                unset($this->listeners[$id], $this->listenerIds[$i]);
            }
        }
        if ($this->listeners === []) {
            $this->engine->onEvents(null);
        }
    }

    /**
     * Like acquire(), but a lock held by someone else gives null instead of an
     * exception (with `$waitMs`: still held when the wait limit came). Failing nodes
     * still throw NodesFailedException.
     *
     * @param string|list<string> $resources
     * @throws NodesFailedException
     */
    public function tryAcquire(
        string|array $resources,
        ?int $ttlMs = null,
        bool $keepAlive = false,
        ?int $timeLimitMs = null,
        ?int $waitMs = null,
        ?bool $fencing = null,
    ): ?Lock {
        try {
            return $this->acquire($resources, $ttlMs, $keepAlive, $timeLimitMs, $waitMs, $fencing);
        } catch (LockHeldException) {
            return null;
        }
    }

    /**
     * Runs `$callback` holding the lock, and releases it afterwards whatever happens.
     * Returns what the callback returns. The lock carries the core's KeepAlive: call
     * `$lock->keepAlive()` from long callbacks (PHP cannot extend behind your back). If
     * the core counts the lock lost when the callback returns (expired, taken),
     * LockLostException (or NotHeldException) is thrown after it: the work was not
     * protected to the end. With `$waitMs`, waits for the lock up to that long (see
     * acquire()).
     *
     * @template T
     * @param string|list<string> $resources
     * @param callable(Lock): T $callback
     * @return T
     */
    public function synchronized(string|array $resources, int $ttlMs, callable $callback, ?int $waitMs = null): mixed
    {
        $lock = $this->acquire($resources, $ttlMs, true, null, $waitMs);
        try {
            $result = $callback($lock);
        } catch (\Throwable $e) {
            $lock->releaseQuietly();
            throw $e;
        }
        try {
            $lock->checkNotLost();
        } catch (\Throwable $e) {
            $lock->releaseQuietly();
            throw $e;
        }
        $lock->release();
        return $result;
    }

    /** Extends `$lock`: see Lock::extend(). */
    public function extend(Lock $lock, ?int $ttlMs = null): void
    {
        $lock->extend($ttlMs);
    }

    /** Releases `$lock` on every node; returns how many nodes deleted a key of ours. */
    public function release(Lock $lock): int
    {
        return $lock->release();
    }

    /**
     * A Lock for a token some other process or tool acquired (the Rust CLI, another
     * binding), so it can be extended or released from here. Its validity is unknown
     * to this process: extend() it to learn it.
     *
     * @param string|list<string> $resources
     */
    public function lockFromToken(string|array $resources, string $token): Lock
    {
        $names = self::names($resources);
        $lock = new Lock($this, $names, $this->usable()->lease($names, $token, 0));
        $this->held[$lock] = true;
        return $lock;
    }

    /** Lets commands still in flight finish, up to their deadlines. */
    public function flush(): void
    {
        if (!$this->closed) {
            $this->engine->flush();
        }
    }

    /**
     * Releases every lock of this client still held, lets commands in flight finish,
     * then closes the connections. Idempotent; the client and its locks are unusable
     * afterwards (UsedAfterCloseException).
     */
    public function close(): void
    {
        if ($this->closed) {
            return;
        }
        try {
            $locks = [];
            foreach ($this->held as $lock => $isHeld) {
                if ($isHeld && !$lock->isReleased()) {
                    $locks[] = $lock;
                }
            }
            foreach ($locks as $lock) {
                $lock->releaseQuietly();
            }
            $this->engine->flush();
        } finally {
            $this->closed = true;
            $this->driver->shutdown();
        }
    }

    public function isClosed(): bool
    {
        return $this->closed;
    }

    /**
     * Per node, what its link holds: writes awaiting replies (script loads included),
     * commands queued, releases owed, and the connect timeout it gives a connection
     * attempt (the driver's client's, else the core's 2 s) (diagnostics).
     *
     * @return list<array{in_flight: int, queued: int, owed: int, connect_timeout_ms: int}>
     */
    public function linkState(): array
    {
        return $this->engine->linkState();
    }

    public function __destruct()
    {
        try {
            $this->close();
        } catch (\Throwable) {
            // A destructor has no one to report to; the connections close with the process.
        }
    }

    // ---- used by Lock -------------------------------------------------------------

    /** @internal */
    public function client(): Client
    {
        return $this->usable();
    }

    /**
     * @internal
     * @param list<string> $names the lock's resources, for its events
     */
    public function run(Operation $op, array $names = []): Outcome
    {
        return $this->engine->run($op, null, $names);
    }

    /**
     * The inspection's outcome (inspected); NodesFailedException when it could not say.
     *
     * @internal used by isLocked(), holder() and Lock::isOwned()
     * @param list<string> $names
     */
    public function inspect(array $names): Outcome
    {
        $outcome = $this->engine->run($this->usable()->inspect($names, Clock::nowUs()), null, $names);
        if ($outcome->kind === Constants::OUTCOME_INSPECTED) {
            return $outcome;
        }
        throw $this->error($names, $outcome, 'could not tell who holds');
    }

    /**
     * A lock's keep-alive found it lost: the `lost` event, its elapsed time counted
     * from the lock's acquisition (`$heldSinceUs`), as in every package.
     *
     * @internal used by Lock
     * @param list<string> $names
     */
    public function reportLost(array $names, string $lostReason, int $heldSinceUs): void
    {
        if ($this->listeners !== []) {
            $now = Clock::nowUs();
            $this->deliver(new Event(Event::LOST, $names, null, null, max(0, $now - $heldSinceUs), $now, lostReason: $lostReason));
        }
    }

    /**
     * Drains `$op`'s events to the listeners.
     *
     * @param list<string> $names
     */
    private function dispatch(Operation $op, array $names): void
    {
        while (($raw = $op->pollEvent()) !== null) {
            if ($this->listeners === []) {
                continue;
            }
            $nodes = [];
            foreach ($raw['nodes'] as $i => [$kind, $text]) {
                $index = $raw['node'] ?? $i;
                $status = Constants::NODE_STATUSES[$kind] ?? 'error';
                $nodes[] = new NodeResult(
                    $index,
                    $this->labels[$index] ?? "node $index",
                    $status,
                    $status === NodeResult::ERROR ? $text : null,
                    $raw['node'] !== null ? $this->causeName($raw['cause']) : null,
                );
            }
            $kindName = $this->native->ffi->redlock_event_kind_name($raw['kind']);
            $this->deliver(new Event(
                is_string($kindName) ? $kindName : 'unknown',
                $names,
                Constants::OPERATION_KINDS[$raw['operation']] ?? null,
                $raw['attempt'],
                $raw['elapsed'],
                $raw['at'],
                $raw['reason'] === null ? null : (Constants::REASONS[$raw['reason']] ?? 'unknown'),
                $raw['retryAt'],
                $raw['node'],
                $raw['node'] !== null ? $this->causeName($raw['cause']) : null,
                $nodes,
            ));
        }
    }

    private function causeName(?int $cause): ?string
    {
        if ($cause === null || $cause === 0) {
            return null;
        }
        $name = $this->native->ffi->redlock_node_cause_name($cause);
        return is_string($name) ? $name : null;
    }

    /** One event to every listener; what a listener throws stays here. */
    private function deliver(Event $event): void
    {
        foreach ($this->listeners as [$listener, $onError]) {
            try {
                $listener($event);
            } catch (\Throwable $e) {
                try {
                    if ($onError !== null) {
                        $onError($e, $event);
                    } else {
                        error_log(sprintf(
                            'redlock: an event listener threw on %s: %s: %s',
                            $event->kind,
                            get_class($e),
                            $e->getMessage(),
                        ));
                    }
                } catch (\Throwable) {
                    // Nothing about the lock depends on its listeners.
                }
            }
        }
    }

    /** @internal a lock was released: close() no longer needs to */
    public function forget(Lock $lock): void
    {
        unset($this->held[$lock]);
    }

    /**
     * @internal
     * @return list<NodeResult>
     */
    public function nodeResults(Outcome $outcome): array
    {
        $results = [];
        $causes = $outcome->nodeCauses();
        foreach ($outcome->nodes() as $index => [$kind, $text]) {
            $status = Constants::NODE_STATUSES[$kind] ?? 'error';
            $results[] = new NodeResult(
                $index,
                $this->labels[$index] ?? "node $index",
                $status,
                $status === NodeResult::ERROR ? $text : null,
                $causes[$index] ?? null,
            );
        }
        return $results;
    }

    /**
     * The exception of a failed outcome: one per core error class.
     *
     * @internal
     * @param list<string> $names
     */
    public function error(array $names, Outcome $outcome, string $doing): \Throwable
    {
        $reason = $outcome->reasonName() ?? 'unknown';
        $nodes = $this->nodeResults($outcome);
        $shown = Text::names($names);
        $attempts = $outcome->kind === Constants::OUTCOME_NOT_ACQUIRED ? $outcome->attempts() : null;
        $class = $outcome->errorClass();
        return match ($class) {
            Constants::ERROR_CLASS_HELD_ELSEWHERE => new LockHeldException(
                "$doing '$shown': held by someone else",
                $names,
                $reason,
                $nodes,
                $attempts,
            ),
            Constants::ERROR_CLASS_LOCK_LOST => new LockLostException(
                "$doing '$shown': the lock is lost ("
                    . ($outcome->reason() === Constants::REASON_CONFLICT ? 'another token holds it' : 'no validity left') . ')',
                $names,
                $reason,
                $nodes,
            ),
            Constants::ERROR_CLASS_NOT_HELD => new NotHeldException(
                "$doing '$shown': the keys are gone (expired or released)",
                $names,
                $reason,
                $nodes,
            ),
            Constants::ERROR_CLASS_NODES_FAILING => new NodesFailedException(
                "$doing '$shown': nodes are failing ($reason)",
                $names,
                $reason,
                $nodes,
                $attempts,
                $outcome->kind === Constants::OUTCOME_NOT_EXTENDED ? $outcome->validUntilUs() : null,
                $outcome->kind === Constants::OUTCOME_NOT_EXTENDED ? $outcome->retryAtUs() : null,
            ),
            default => new CoreException("$doing '$shown': outcome of error class $class", 'unexpected_outcome', 0),
        };
    }

    private function usable(): Client
    {
        if ($this->closed) {
            throw new UsedAfterCloseException('this Redlock is closed');
        }
        return $this->client;
    }

    /**
     * Redlock's safety rests on independent nodes: the same server twice is refused
     * (the core's duplicate_node, on host and port).
     *
     * @param list<string> $addresses
     * @param list<string> $labels
     */
    private static function refuseDuplicates(Native $native, array $addresses, array $labels): void
    {
        if (count($addresses) < 2) {
            return;
        }
        [$pointers, $lengths, $keep] = $native->resourceArrays($addresses);
        $rc = $native->ffi->redlock_duplicate_node(
            $pointers,
            $lengths,
            count($addresses),
            \FFI::addr($native->flag),
            \FFI::addr($native->size),
            \FFI::addr($native->size2),
        );
        unset($keep);
        $native->check($rc, 'node addresses');
        if ($native->flag->cdata) {
            $i = $native->size->cdata;
            $j = $native->size2->cdata;
            throw new InvalidArgumentException(
                "nodes $i and $j are the same server ({$labels[$j]}): Redlock needs independent nodes",
                'duplicate_node',
            );
        }
    }

    /**
     * @param string|list<string> $resources
     * @return list<string>
     */
    private static function names(string|array $resources): array
    {
        $names = is_string($resources) ? [$resources] : $resources;
        foreach ($names as $name) {
            if (!is_string($name)) {
                throw new InvalidArgumentException('resources must be strings, got ' . get_debug_type($name));
            }
        }
        return array_values($names);
    }
}
