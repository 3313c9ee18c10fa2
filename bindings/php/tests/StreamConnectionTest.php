<?php

declare(strict_types=1);

namespace Redlock\Tests;

use PHPUnit\Framework\TestCase;
use Redlock\Clock;
use Redlock\Driver\ConnectionListener;
use Redlock\Driver\NodeAddress;
use Redlock\Driver\StreamConnection;
use Redlock\Ffi\Native;
use Redlock\Ffi\Reply;

/**
 * How long a node's stream connection may take to open: the core's connect timeout, the
 * same in every binding.
 */
final class StreamConnectionTest extends TestCase
{
    /**
     * A node whose accept queue is full drops new connection requests, as an address that
     * never answers does: the connection is given up with `timeout` once the core's 2 s
     * have passed, instead of after the system's SYN retries (minutes).
     */
    public function testAConnectionNotReadyInTimeIsGivenUpAfterTheCoresConnectTimeout(): void
    {
        $native = Native::get();
        $this->assertSame(2000, $native->connectTimeoutDefaultMs());
        $context = stream_context_create(['socket' => ['backlog' => 1]]);
        $server = stream_socket_server('tcp://127.0.0.1:0', $errno, $errstr, STREAM_SERVER_BIND | STREAM_SERVER_LISTEN, $context);
        $this->assertNotFalse($server, $errstr);
        $port = (int) substr((string) stream_socket_get_name($server, false), strrpos((string) stream_socket_get_name($server, false), ':') + 1);
        // Nobody accepts: once the queue is full, the next connection requests are dropped.
        $queued = [];
        $hangs = false;
        for ($i = 0; $i < 16 && !$hangs; $i++) {
            $client = @stream_socket_client("tcp://127.0.0.1:$port", $errno, $errstr, 0.3);
            if ($client === false) {
                $hangs = true;
            } else {
                $queued[] = $client;
            }
        }
        $this->assertTrue($hangs, 'the accept queue never filled');

        $listener = new class implements ConnectionListener {
            /** @var list<string> */
            public array $events = [];

            public function connected(): void
            {
                $this->events[] = 'connected';
            }

            public function closed(string $cause, string $text): void
            {
                $this->events[] = "closed $cause: $text";
            }

            public function reply(Reply $reply): void
            {
                $this->events[] = 'reply ' . $reply->kind();
            }
        };
        $connection = new StreamConnection($native, NodeAddress::fromUrl("redis://127.0.0.1:$port"), $listener);
        $opened = Clock::nowUs();
        $connection->connect();
        $deadline = $connection->openDeadlineUs();
        $this->assertNotNull($deadline, 'an opening connection has a deadline');
        $this->assertEqualsWithDelta(2_000_000, $deadline - $opened, 50_000);
        while ($listener->events === [] && Clock::nowUs() < $opened + 6_000_000) {
            $read = [];
            $write = [];
            if (($stream = $connection->writeStream()) !== null) {
                $write[] = $stream;
            }
            $except = null;
            if ($write !== [] && @stream_select($read, $write, $except, 0, 20_000) > 0) {
                $connection->onWritable();
            } else {
                usleep(20_000);
            }
            $connection->checkOpenDeadline(Clock::nowUs());
        }
        $took = (Clock::nowUs() - $opened) / 1000;
        $this->assertCount(1, $listener->events, implode(', ', $listener->events));
        $this->assertStringStartsWith('closed timeout: ', $listener->events[0]);
        $this->assertGreaterThanOrEqual(1990, $took);
        $this->assertLessThan(3500, $took);
        $this->assertNull($connection->openDeadlineUs(), 'a closed connection has no deadline');
        foreach ($queued as $client) {
            fclose($client);
        }
        fclose($server);
    }
}
