<?php

declare(strict_types=1);

namespace Redlock\Exception;

/**
 * A fenced write (Redlock\FencedStore::set()) got no usable answer: the server answered
 * an error, or the connection failed, or no reply came in time. `$unknown` is true when
 * the write may or may not have happened (a timeout or a connection lost after it was
 * sent); a stale token is not an error (FencedWrite::$accepted is false).
 */
final class FencedWriteException extends \RuntimeException implements RedlockException
{
    public function __construct(string $message, public readonly bool $unknown)
    {
        parent::__construct($message);
    }
}
