<?php

declare(strict_types=1);

namespace Redlock\Exception;

/**
 * Error class `lock_lost`: the lock is no longer ours: another token holds a key
 * (`conflict`), or its validity ran out (`expired`, `extension_limit`).
 */
final class LockLostException extends LockException
{
}
