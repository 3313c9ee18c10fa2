<?php

declare(strict_types=1);

namespace Redlock\Exception;

/**
 * PHP's FFI cannot be used here: the extension is not loaded, `ffi.enable` forbids it,
 * or (under PHP-FPM with `ffi.enable=preload`) the library was not preloaded.
 */
final class FfiUnavailableException extends \RuntimeException implements RedlockException
{
}
