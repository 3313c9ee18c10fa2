<?php

declare(strict_types=1);

namespace Redlock\Tests;

/**
 * A loopback listener nobody accepts on, its accept queue full: the system drops new
 * connection requests, as an address that never answers does, so a connection to it
 * stays opening (SYN_SENT) until the client gives it up. synSent() counts the client
 * sockets still opening towards it (Linux's /proc/net/tcp), to see that one was given
 * up by closing its socket.
 */
final class FullAcceptQueue
{
    public readonly int $port;
    /** @var resource */
    private $server;
    /** @var list<resource> connections that filled the queue */
    private array $queued = [];

    public function __construct()
    {
        $context = stream_context_create(['socket' => ['backlog' => 1]]);
        $server = stream_socket_server('tcp://127.0.0.1:0', $errno, $errstr, STREAM_SERVER_BIND | STREAM_SERVER_LISTEN, $context);
        if ($server === false) {
            throw new \RuntimeException("listen: $errstr ($errno)");
        }
        $this->server = $server;
        $name = (string) stream_socket_get_name($server, false);
        $this->port = (int) substr($name, strrpos($name, ':') + 1);
        // Nobody accepts: once the queue is full, the next connection requests are dropped.
        for ($i = 0; $i < 16; $i++) {
            $client = @stream_socket_client("tcp://127.0.0.1:{$this->port}", $errno, $errstr, 0.3);
            if ($client === false) {
                return;
            }
            $this->queued[] = $client;
        }
        $this->close();
        throw new \RuntimeException('the accept queue never filled');
    }

    public function url(): string
    {
        return "redis://127.0.0.1:{$this->port}";
    }

    /** Whether synSent() can see the system's sockets (Linux). */
    public static function canCount(): bool
    {
        return is_readable('/proc/net/tcp');
    }

    /** Client sockets still opening (SYN_SENT) towards the listener. */
    public function synSent(): int
    {
        $port = sprintf(':%04X', $this->port);
        $count = 0;
        foreach (['/proc/net/tcp', '/proc/net/tcp6'] as $table) {
            $lines = is_readable($table) ? (array) file($table, FILE_IGNORE_NEW_LINES) : [];
            foreach (array_slice($lines, 1) as $line) {
                // sl local_address rem_address st ...; state 02 is SYN_SENT.
                $columns = preg_split('/\s+/', trim((string) $line));
                if (is_array($columns) && count($columns) > 3 && str_ends_with($columns[2], $port) && $columns[3] === '02') {
                    $count++;
                }
            }
        }
        return $count;
    }

    public function close(): void
    {
        foreach ($this->queued as $client) {
            fclose($client);
        }
        $this->queued = [];
        if (is_resource($this->server)) {
            fclose($this->server);
        }
    }
}
