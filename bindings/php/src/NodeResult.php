<?php

declare(strict_types=1);

namespace Redlock;

/**
 * How one node answered the round an outcome reports on, as the core recorded it.
 */
final class NodeResult
{
    public const SUCCESS = 'success';
    public const CONFLICT = 'conflict';
    /** An extension found the key gone on this node (held by nobody). */
    public const MISSING = 'missing';
    public const ERROR = 'error';
    public const TIMEOUT = 'timeout';
    public const PENDING = 'pending';
    public const NOT_ASKED = 'not_asked';

    /**
     * @param self::* $status
     */
    public function __construct(
        public readonly int $index,
        public readonly string $label,
        public readonly string $status,
        public readonly ?string $error = null,
        public readonly ?string $cause = null,
    ) {
    }

    /** An error reply, a connection failure or a timeout. */
    public function isFailure(): bool
    {
        return $this->status === self::ERROR || $this->status === self::TIMEOUT;
    }

    public function __toString(): string
    {
        $detail = $this->error !== null ? "{$this->status}: {$this->error}" : $this->status;
        if ($this->cause !== null) {
            $detail .= " [{$this->cause}]";
        }
        return "node {$this->index} ({$this->label}) $detail";
    }
}
