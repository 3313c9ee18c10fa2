<?php

declare(strict_types=1);

namespace Redlock\Exception;

/**
 * `libredlock` or its PHP header could not be found or loaded.
 */
final class LibraryNotFoundException extends \RuntimeException implements RedlockException
{
}
