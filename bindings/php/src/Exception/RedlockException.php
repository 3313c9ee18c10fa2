<?php

declare(strict_types=1);

namespace Redlock\Exception;

/**
 * Every exception this package throws implements this interface.
 */
interface RedlockException extends \Throwable
{
}
