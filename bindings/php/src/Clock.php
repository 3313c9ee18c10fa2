<?php

declare(strict_types=1);

namespace Redlock;

/**
 * The monotonic clock every instant of this package is measured on: microseconds from
 * `hrtime()` (an arbitrary origin, never stepped by NTP or the user). The core reads
 * no clock; every input carries one of these instants.
 */
final class Clock
{
    /** Now, in microseconds. */
    public static function nowUs(): int
    {
        return intdiv(hrtime(true), 1000);
    }
}
