<?php

declare(strict_types=1);

namespace Redlock;

/**
 * What the package's exception messages quote of the caller's input: resource names
 * and URLs cut to MAX_BYTES bytes (at a UTF-8 character boundary) with "…" after, so a
 * 1 MB resource name does not become a 1 MB message or log line, and URLs without
 * their password. The values themselves stay whole on the exceptions' fields.
 *
 * @internal
 */
final class Text
{
    public const MAX_BYTES = 64;

    public static function name(string $value): string
    {
        if (strlen($value) <= self::MAX_BYTES) {
            return $value;
        }
        $cut = function_exists('mb_strcut') ? mb_strcut($value, 0, self::MAX_BYTES, 'UTF-8') : substr($value, 0, self::MAX_BYTES);
        return $cut . '… (' . strlen($value) . ' bytes)';
    }

    /** @param list<string> $names */
    public static function names(array $names): string
    {
        return implode(', ', array_map(self::name(...), $names));
    }

    /** A URL as a message may show it: any password replaced by `***`, then cut like a name. */
    public static function url(string $url): string
    {
        $hidden = preg_replace('#^([a-z][a-z0-9+.-]*://)[^@/]*@#i', '$1***@', $url);
        return self::name(is_string($hidden) ? $hidden : $url);
    }
}
