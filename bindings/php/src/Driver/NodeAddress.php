<?php

declare(strict_types=1);

namespace Redlock\Driver;

use Redlock\Exception\InvalidArgumentException;
use Redlock\Text;

/**
 * Where one node is and how to talk to it, parsed from a URL:
 * `redis://[[user]:password@]host[:port][/db]` or `rediss://…` (TLS). TLS options
 * (`cafile`, `verify_peer`, ...) are PHP's `ssl` stream context options.
 */
final class NodeAddress
{
    /**
     * @param array<string, mixed> $tls PHP `ssl` context options for rediss://
     */
    public function __construct(
        public readonly string $host,
        public readonly int $port = 6379,
        public readonly bool $tls = false,
        public readonly ?string $username = null,
        public readonly ?string $password = null,
        public readonly int $database = 0,
        public readonly array $tlsOptions = [],
    ) {
        if ($host === '') {
            throw new InvalidArgumentException('a node address needs a host, got an empty one');
        }
        if ($port < 1 || $port > 65535) {
            throw new InvalidArgumentException("a node's port must be between 1 and 65535, got $port", 'invalid_port');
        }
        if ($database < 0) {
            throw new InvalidArgumentException("a node's database number must be 0 or more, got $database");
        }
    }

    /**
     * @param array<string, mixed> $tlsOptions
     */
    public static function fromUrl(string $url, array $tlsOptions = []): self
    {
        $shown = Text::url($url);
        // parse_url() refuses a port past 65535 with no reason given: name the rule.
        if (preg_match('#^[a-z][a-z0-9+.-]*://(?:[^@/]*@)?(?:\[[^\]]*\]|[^:/\[]*):(\d+)(?:/|$)#i', $url, $m) === 1) {
            $port = ltrim($m[1], '0');
            if ($port === '' || strlen($port) > 5 || (int) $port > 65535) {
                throw new InvalidArgumentException(
                    "a node's port must be between 1 and 65535, got " . Text::name($m[1]) . " in '$shown'",
                    'invalid_port',
                );
            }
        }
        $parts = parse_url($url);
        if ($parts === false || !isset($parts['scheme'], $parts['host'])) {
            throw new InvalidArgumentException("not a Redis URL: '$shown' (expected redis://host:port or rediss://host:port)");
        }
        $scheme = strtolower($parts['scheme']);
        if ($scheme !== 'redis' && $scheme !== 'rediss') {
            throw new InvalidArgumentException("unsupported URL scheme '" . Text::name($scheme) . "' in '$shown' (redis:// or rediss://)");
        }
        $path = trim($parts['path'] ?? '', '/');
        if ($path !== '' && !ctype_digit($path)) {
            throw new InvalidArgumentException("the path of '$shown' must be a database number");
        }
        $user = isset($parts['user']) && $parts['user'] !== '' ? rawurldecode($parts['user']) : null;
        $password = isset($parts['pass']) ? rawurldecode($parts['pass']) : null;
        if ($password === null && $user !== null) {
            // redis://password@host is the common shorthand for a password alone.
            [$user, $password] = [null, $user];
        }
        return new self(
            trim($parts['host'], '[]'),
            $parts['port'] ?? 6379,
            $scheme === 'rediss',
            $user,
            $password,
            $path === '' ? 0 : (int) $path,
            $tlsOptions,
        );
    }

    /** The address without credentials, for messages and per-node results. */
    /** `host:port`, for the core's duplicate-node check. */
    public function hostPort(): string
    {
        return str_contains($this->host, ':') ? "[{$this->host}]:{$this->port}" : "{$this->host}:{$this->port}";
    }

    public function label(): string
    {
        $host = str_contains($this->host, ':') ? "[{$this->host}]" : $this->host;
        $db = $this->database !== 0 ? "/{$this->database}" : '';
        return ($this->tls ? 'rediss' : 'redis') . "://$host:{$this->port}$db";
    }
}
