<?php

declare(strict_types=1);

namespace Redlock\Exception;

/**
 * Error class `not_held`: an extension found the keys gone (expired, deleted, or the
 * lock was released) and nobody else holding them.
 */
final class NotHeldException extends LockException
{
}
