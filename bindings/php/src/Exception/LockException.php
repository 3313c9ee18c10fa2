<?php

declare(strict_types=1);

namespace Redlock\Exception;

use Redlock\NodeResult;

/**
 * A lock operation did not succeed. `$reason` is the core's reason (`conflict`,
 * `nodes_failed`, `mixed`, `validity_too_short`), or `expired` / `released` for a
 * lock used after it ran out; `$nodes` holds how every node answered.
 */
abstract class LockException extends \RuntimeException implements RedlockException
{
    /**
     * @param list<string> $resources
     * @param list<NodeResult> $nodes
     */
    public function __construct(
        string $summary,
        public readonly array $resources,
        public readonly string $reason,
        public readonly array $nodes = [],
        public readonly ?int $attempts = null,
    ) {
        $parts = [$summary];
        if ($attempts !== null) {
            $parts[] = "attempts: $attempts";
        }
        if ($nodes !== []) {
            $parts[] = implode('; ', array_map(static fn (NodeResult $n): string => (string) $n, $nodes));
        }
        parent::__construct(implode(' | ', $parts));
    }

    /**
     * The nodes whose answer was an error or a timeout.
     *
     * @return list<NodeResult>
     */
    public function failedNodes(): array
    {
        return array_values(array_filter($this->nodes, static fn (NodeResult $n): bool => $n->isFailure()));
    }
}
