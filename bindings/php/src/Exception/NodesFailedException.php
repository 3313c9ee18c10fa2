<?php

declare(strict_types=1);

namespace Redlock\Exception;

use Redlock\NodeResult;

/**
 * Nodes are failing: errors and timeouts, alone or together with conflicts, made the
 * quorum impossible, or a quorum came too late (`$reason` says which). After a failed
 * extension the lock is still held until `$validUntilUs` (on {@see \Redlock\Clock}),
 * and `$retryAtUs` is when the core would try again (null: no time left).
 */
final class NodesFailedException extends LockException
{
    /**
     * @param list<string> $resources
     * @param list<NodeResult> $nodes
     */
    public function __construct(
        string $summary,
        array $resources,
        string $reason,
        array $nodes = [],
        ?int $attempts = null,
        public readonly ?int $validUntilUs = null,
        public readonly ?int $retryAtUs = null,
    ) {
        parent::__construct($summary, $resources, $reason, $nodes, $attempts);
    }
}
