<?php

declare(strict_types=1);

namespace Redlock\Exception;

/**
 * A call into the core failed in a way that is not the caller's argument: a RESP
 * protocol error, a request the operation never issued, a bug caught at the boundary.
 * `$codeName` is the core's stable snake_case name (`bad_terminator`, `panic`, ...).
 */
final class CoreException extends \RuntimeException implements RedlockException
{
    public function __construct(
        string $message,
        public readonly string $codeName,
        public readonly int $result,
    ) {
        parent::__construct($message, $result);
    }
}
