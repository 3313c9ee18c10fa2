<?php

declare(strict_types=1);

namespace Redlock\Exception;

/**
 * Error class `used_after_close`: the Redlock was closed (close() released what it
 * still held) and was used again, or a Lock of it was.
 */
final class UsedAfterCloseException extends \LogicException implements RedlockException
{
    public readonly string $codeName;

    public function __construct(string $message)
    {
        $this->codeName = 'used_after_close';
        parent::__construct($message);
    }
}
