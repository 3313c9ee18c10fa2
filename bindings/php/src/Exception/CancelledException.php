<?php

declare(strict_types=1);

namespace Redlock\Exception;

/**
 * Error class `cancelled`: the operation was given up before its outcome (its time
 * limit passed); what it may have set was released.
 */
final class CancelledException extends \RuntimeException implements RedlockException
{
    /** @param list<string> $resources */
    public function __construct(string $message, public readonly array $resources)
    {
        parent::__construct($message);
    }
}
