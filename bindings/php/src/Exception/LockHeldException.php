<?php

declare(strict_types=1);

namespace Redlock\Exception;

/**
 * Error class `held_elsewhere`: the lock is held by someone else: conflicts alone made the quorum impossible.
 */
final class LockHeldException extends LockException
{
}
