<?php

declare(strict_types=1);

namespace Redlock\Tests\Integration;

/**
 * Real local Redis nodes through the project's scripts/redis-nodes.sh, and direct
 * phpredis connections to look inside them.
 */
final class Nodes
{
    public static function repo(): string
    {
        return dirname(__DIR__, 4);
    }

    /**
     * Starts N nodes on base port P (extra flags: --tls, --requirepass X) and returns
     * their URLs.
     *
     * @param list<string> $flags
     * @return list<string>
     */
    public static function start(int $basePort, int $count = 5, array $flags = []): array
    {
        $out = self::script(array_merge(['start', '--nodes', (string) $count, '--base-port', (string) $basePort], $flags));
        $urls = array_values(array_filter(explode("\n", trim($out))));
        if (count($urls) !== $count) {
            throw new \RuntimeException("expected $count node URLs, got: $out");
        }
        return $urls;
    }

    public static function stop(int $basePort): void
    {
        self::script(['stop', '--base-port', (string) $basePort]);
    }

    public static function pause(int $basePort, int $index): void
    {
        self::script(['pause', (string) $index, '--base-port', (string) $basePort]);
    }

    public static function resume(int $basePort, int $index): void
    {
        self::script(['resume', (string) $index, '--base-port', (string) $basePort]);
    }

    public static function kill(int $basePort, int $index): void
    {
        self::script(['kill', (string) $index, '--base-port', (string) $basePort]);
    }

    public static function restart(int $basePort, int $index): void
    {
        self::script(['restart', (string) $index, '--base-port', (string) $basePort]);
    }

    public static function ca(int $basePort): string
    {
        return trim(self::script(['ca', '--base-port', (string) $basePort]));
    }

    /** A fresh phpredis connection to node `$index` (plain TCP, optional password). */
    public static function redis(int $basePort, int $index, ?string $password = null): \Redis
    {
        $redis = new \Redis();
        $redis->connect('127.0.0.1', $basePort + $index, 2.0);
        if ($password !== null) {
            $redis->auth($password);
        }
        return $redis;
    }

    /** The value of `$key` on every node (false where missing). @return list<string|false> */
    public static function values(int $basePort, string $key, int $count = 5, ?string $password = null): array
    {
        $values = [];
        for ($i = 0; $i < $count; $i++) {
            $values[] = self::redis($basePort, $i, $password)->get($key);
        }
        return $values;
    }

    /** @param list<string> $args */
    private static function script(array $args): string
    {
        $command = escapeshellarg(self::repo() . '/scripts/redis-nodes.sh') . ' '
            . implode(' ', array_map('escapeshellarg', $args)) . ' 2>&1';
        exec($command, $lines, $status);
        $out = implode("\n", $lines);
        if ($status !== 0) {
            throw new \RuntimeException("redis-nodes.sh " . implode(' ', $args) . " failed ($status): $out");
        }
        return $out;
    }
}
