<?php

declare(strict_types=1);

namespace Redlock\Exception;

/**
 * An argument the package or the core refuses: an empty or duplicate resource, a bad
 * node URL, a TTL the configuration does not allow, a token that is not printable.
 * `$codeName` is the core's name for the rule when the core refused it.
 */
class InvalidArgumentException extends \InvalidArgumentException implements RedlockException
{
    public function __construct(
        string $message,
        public readonly string $codeName = 'invalid_argument',
        int $result = 0,
    ) {
        parent::__construct($message, $result);
    }
}
