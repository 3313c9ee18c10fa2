<?php

declare(strict_types=1);

namespace Redlock\Exception;

/**
 * The lock is no longer ours: another token holds a key (`conflict`), its validity ran
 * out (`expired`), or it was released (`released`).
 */
final class LockLostException extends LockException
{
}
