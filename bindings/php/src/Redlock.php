<?php

declare(strict_types=1);

namespace Redlock;

use Redlock\Driver\Driver;
use Redlock\Driver\PhpRedisDriver;
use Redlock\Driver\StreamDriver;
use Redlock\Exception\CoreException;
use Redlock\Exception\InvalidArgumentException;
use Redlock\Exception\LockException;
use Redlock\Exception\LockHeldException;
use Redlock\Exception\LockLostException;
use Redlock\Exception\NodesFailedException;
use Redlock\Ffi\Client;
use Redlock\Ffi\Config;
use Redlock\Ffi\Constants;
use Redlock\Ffi\Lease;
use Redlock\Ffi\Native;
use Redlock\Ffi\Operation;
use Redlock\Ffi\Outcome;

/**
 * A Redlock client over N independent Redis nodes. Every decision (quorum, validity,
 * retries, what to release, whether an extension worked) is the core's; this class runs
 * the loop that carries the core's commands to a Driver and the replies back:
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
    /** @var list<string> */
    private readonly array $labels;
    private bool $closed = false;

    public function __construct(
        private readonly Driver $driver,
        private readonly Options $options = new Options(),
        ?Native $native = null,
    ) {
        $this->native = $native ?? Native::get();
        $this->labels = $driver->labels();
        $this->config = Config::build($this->native, count($this->labels), $options->ttlMs, $options->coreSettings());
        $this->client = Client::create($this->config);
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
     * (default: the configured TTL), with the configured attempts.
     *
     * @param string|list<string> $resources
     * @throws LockHeldException someone else holds it
     * @throws NodesFailedException nodes failed (errors, timeouts), or the quorum came too late
     */
    public function acquire(string|array $resources, ?int $ttlMs = null): Lock
    {
        $names = self::names($resources);
        $outcome = $this->run($this->usable()->acquire($names, $ttlMs, Clock::nowUs()));
        if ($outcome->kind === Constants::OUTCOME_ACQUIRED && $outcome->lease() !== null) {
            return new Lock($this, $names, $outcome->lease(), $outcome->attempts() ?? 1);
        }
        throw $this->acquireError($names, $outcome);
    }

    /**
     * Like acquire(), but a lock held by someone else gives null instead of an
     * exception. Failing nodes still throw NodesFailedException. The attempts are the
     * configured ones (a wait limit decided by the core is not part of this version).
     *
     * @param string|list<string> $resources
     * @throws NodesFailedException
     */
    public function tryAcquire(string|array $resources, ?int $ttlMs = null): ?Lock
    {
        try {
            return $this->acquire($resources, $ttlMs);
        } catch (LockHeldException) {
            return null;
        }
    }

    /**
     * Runs `$callback` holding the lock, and releases it afterwards whatever happens.
     * Returns what the callback returns. If the lock's validity ran out while the
     * callback ran, LockLostException is thrown after it (the work was not protected
     * to the end): extend() inside long callbacks.
     *
     * @template T
     * @param string|list<string> $resources
     * @param callable(Lock): T $callback
     * @return T
     */
    public function synchronized(string|array $resources, int $ttlMs, callable $callback): mixed
    {
        $lock = $this->acquire($resources, $ttlMs);
        try {
            $result = $callback($lock);
        } catch (\Throwable $e) {
            $lock->releaseQuietly();
            throw $e;
        }
        $valid = $lock->isValid();
        $lock->release();
        if (!$valid) {
            throw new LockLostException('the lock expired before the callback returned', $lock->resources(), 'expired');
        }
        return $result;
    }

    /**
     * Extends `$lock` by `$ttlMs` (default: its TTL) from now. On failure the lock is
     * still held until its old validity ends unless LockLostException says otherwise.
     *
     * @throws LockLostException another token holds a key, or the lock expired or was released
     * @throws NodesFailedException nodes failed; `validUntilUs` and `retryAtUs` say what is left
     */
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
        return new Lock($this, $names, $this->usable()->lease($names, $token, 0));
    }

    /** Lets commands still in flight finish, up to their deadlines. */
    public function flush(): void
    {
        if (!$this->closed) {
            $this->driver->flush();
        }
    }

    /** Flushes, then closes the driver's connections. Idempotent. */
    public function close(): void
    {
        if (!$this->closed) {
            $this->closed = true;
            $this->driver->close();
        }
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
     * Releases a lease even after close() (a Lock destroyed after its client, at the
     * end of a script): the driver reopens what it needs, and the release's commands
     * are let finish before returning, as no later call will.
     *
     * @internal
     */
    public function releaseLease(Lease $lease): Outcome
    {
        $outcome = $this->run($this->client->release($lease, Clock::nowUs()));
        if ($this->closed) {
            $this->driver->close();
        }
        return $outcome;
    }

    /**
     * Drives one operation to its outcome: send what the core emits, wait until the
     * instant it names or the next reply, hand in replies and timeouts, poll again.
     *
     * @internal
     */
    public function run(Operation $op): Outcome
    {
        $driver = $this->driver;
        while (true) {
            $kind = $op->poll();
            if ($kind === Constants::OUTPUT_SEND) {
                [$node, $requestId, $deadline, $argc] = $op->command();
                $driver->submit($op, $node, $requestId, $deadline, $argc);
            } elseif ($kind === Constants::OUTPUT_WAIT) {
                $until = $op->waitUntil();
                $driver->wait($op, $until);
                $now = Clock::nowUs();
                if ($now >= $until) {
                    $op->handleTimeout($now);
                }
            } elseif ($kind === Constants::OUTPUT_OUTCOME) {
                $outcome = $op->takeOutcome();
                $driver->settle();
                return $outcome;
            } else {
                throw new CoreException("the operation produced output $kind where a wait or an outcome was due", 'unexpected_output', 0);
            }
        }
    }

    /**
     * @internal
     * @return list<NodeResult>
     */
    public function nodeResults(Outcome $outcome): array
    {
        $results = [];
        foreach ($outcome->nodes() as $index => [$kind, $text]) {
            $status = Constants::NODE_STATUSES[$kind] ?? 'error';
            $results[] = new NodeResult($index, $this->labels[$index] ?? "node $index", $status, $status === NodeResult::ERROR ? $text : null);
        }
        return $results;
    }

    /** @param list<string> $names */
    private function acquireError(array $names, Outcome $outcome): LockException
    {
        $reason = $outcome->reasonName() ?? 'unknown';
        $nodes = $this->nodeResults($outcome);
        $shown = implode(', ', $names);
        if ($outcome->reason() === Constants::REASON_CONFLICT) {
            return new LockHeldException("'$shown' is held by someone else", $names, $reason, $nodes, $outcome->attempts());
        }
        $why = $outcome->reason() === Constants::REASON_VALIDITY_TOO_SHORT
            ? 'a quorum agreed too late to leave the least validity'
            : 'nodes are failing';
        return new NodesFailedException("could not lock '$shown': $why ($reason)", $names, $reason, $nodes, $outcome->attempts());
    }

    private function usable(): Client
    {
        if ($this->closed) {
            throw new InvalidArgumentException('this Redlock is closed', 'used_after_close');
        }
        return $this->client;
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
