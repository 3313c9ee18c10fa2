<?php

declare(strict_types=1);

namespace Redlock;

use Redlock\Driver\NodeAddress;
use Redlock\Exception\InvalidArgumentException;
use Redlock\Ffi\Link;
use Redlock\Ffi\Native;

/**
 * A single Redis node found through Redis Sentinel: the master the Sentinels name for
 * `$service`. A Redlock over it has one node (N = 1) whose every connection attempt asks
 * the Sentinels again (`SENTINEL get-master-addr-by-name`, each Sentinel in turn until
 * one names a master), so after a failover the next reconnection reaches the new master.
 *
 * Sentinel URLs are `redis://[[user]:password@]host:port` (a Sentinel's own AUTH) or
 * `rediss://…`. `$username`, `$password`, `$database`, `$tls` and `$tlsOptions` are the
 * master's. Each Sentinel gets `$queryTimeoutMs` to connect and answer before the next
 * one is asked; by default the core's (`Native::sentinelQueryTimeoutDefaultMs()`, 500
 * ms), the same in every binding.
 *
 * Failover caveat (docs/safety.md, failover-before-replication): replication is
 * asynchronous, so a failover before the lock's key reached the replica loses the lock,
 * and a second client can acquire it while the first still believes it holds it.
 */
final class Sentinel
{
    /** @var list<NodeAddress> */
    public readonly array $sentinels;

    /** How long one Sentinel may take to connect and answer (ms). */
    public readonly int $queryTimeoutMs;

    /**
     * @param list<string> $sentinels the Sentinels' URLs
     * @param array<string, mixed> $tlsOptions PHP `ssl` context options (master and rediss:// Sentinels)
     * @param int|null $queryTimeoutMs null: the core's default
     */
    public function __construct(
        array $sentinels,
        public readonly string $service,
        public readonly ?string $password = null,
        public readonly ?string $username = null,
        public readonly int $database = 0,
        public readonly bool $tls = false,
        public readonly array $tlsOptions = [],
        ?int $queryTimeoutMs = null,
    ) {
        $queryTimeoutMs ??= Native::get()->sentinelQueryTimeoutDefaultMs();
        if ($sentinels === []) {
            throw new InvalidArgumentException('no Sentinels: give at least one Sentinel URL', 'no_nodes');
        }
        if ($service === '') {
            throw new InvalidArgumentException('the Sentinel service (master name) must not be empty');
        }
        if ($database < 0 || $queryTimeoutMs < 1) {
            throw new InvalidArgumentException("not a valid database ($database) or query timeout ($queryTimeoutMs ms)");
        }
        $addresses = [];
        foreach (array_values($sentinels) as $url) {
            if (!is_string($url)) {
                throw new InvalidArgumentException('Sentinel URLs must be strings, got ' . get_debug_type($url));
            }
            $addresses[] = NodeAddress::fromUrl($url, $tlsOptions);
        }
        $this->sentinels = $addresses;
        $this->queryTimeoutMs = $queryTimeoutMs;
    }

    /**
     * How long one connection attempt to the master may take (ms), for the node's link:
     * the core's composition (`Native::sentinelConnectTimeoutMs()`, the same in every
     * binding): every Sentinel's `$queryTimeoutMs` (they are asked in turn), then
     * `$connectMs` (the core's connect timeout) for the master's own connection; at most
     * Link::CONNECT_TIMEOUT_MAX_MS (what a PHP integer of microseconds can hold).
     */
    public function attemptTimeoutMs(int $connectMs): int
    {
        $ms = Native::get()->sentinelConnectTimeoutMs(count($this->sentinels), $this->queryTimeoutMs, $connectMs);
        return min($ms, Link::CONNECT_TIMEOUT_MAX_MS);
    }

    /** The node's label: what per-node results and messages show for it. */
    public function label(): string
    {
        return "sentinel master {$this->service}";
    }

    /** The `SENTINEL` query, as arguments. @return list<string> */
    public function query(): array
    {
        return ['SENTINEL', 'get-master-addr-by-name', $this->service];
    }

    /**
     * The master a Sentinel named in its reply to query() (`[host, port]`, as a list of
     * strings), with the master's credentials and TLS; null when the Sentinel knows no
     * master of that name (a nil reply).
     *
     * @param list<string>|null $reply
     * @throws InvalidArgumentException a reply that is not a host and a port
     */
    public function master(?array $reply): ?NodeAddress
    {
        if ($reply === null) {
            return null;
        }
        if (count($reply) !== 2 || !ctype_digit($reply[1])) {
            throw new InvalidArgumentException('not a master address: ' . json_encode($reply));
        }
        return new NodeAddress(
            $reply[0],
            (int) $reply[1],
            $this->tls,
            $this->username,
            $this->password,
            $this->database,
            $this->tlsOptions,
        );
    }

    /** Why no master came from Sentinel `$sentinel`'s nil reply. */
    public function unknown(NodeAddress $sentinel): string
    {
        return "{$sentinel->label()}: no master named '{$this->service}'";
    }

    /**
     * The text of a node failure after every Sentinel was asked in vain.
     *
     * @param list<string> $failures one per Sentinel
     */
    public function failure(array $failures): string
    {
        return "no Sentinel named the master of '{$this->service}': " . implode('; ', $failures);
    }
}
