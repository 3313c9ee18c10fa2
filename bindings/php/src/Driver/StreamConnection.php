<?php

declare(strict_types=1);

namespace Redlock\Driver;

use Redlock\Exception\CoreException;
use Redlock\Ffi\Constants;
use Redlock\Ffi\Decoder;
use Redlock\Ffi\Native;
use Redlock\Ffi\Reply;

/**
 * Pure transport for one node: a non-blocking `stream_socket_client` connection. It
 * connects (TCP, then TLS, then AUTH and SELECT when the address asks for them),
 * writes bytes in the order given, decodes what it reads with the core's RESP decoder,
 * and reports three events to its listener: connected, closed(cause, text), reply.
 * It decides nothing about commands, deadlines or order: that is the link's.
 *
 * Causes of `closed`: `refused`, `auth`, `tls`, `timeout`, `other`. It keeps no
 * deadline of its own: a connection opens for as long as the system lets it, until its
 * owner closes it (a node's link gives an attempt up at its connect timeout, the core's
 * Subscriptions a subscriber connection at theirs, a Sentinel query at its own).
 */
final class StreamConnection
{
    private const DISCONNECTED = 0;
    private const CONNECTING = 1;
    private const TLS_HANDSHAKE = 2;
    private const HANDSHAKE = 3;
    private const READY = 4;

    /** @var resource|null */
    private $stream = null;
    private int $state = self::DISCONNECTED;
    private string $outgoing = '';
    private ?Decoder $decoder = null;
    /** Replies still owed to the AUTH / SELECT handshake. */
    private int $handshakeReplies = 0;

    public function __construct(
        private readonly Native $native,
        public readonly NodeAddress $address,
        private readonly ConnectionListener $listener,
    ) {
    }

    public function isOpen(): bool
    {
        return $this->state !== self::DISCONNECTED;
    }

    public function isReady(): bool
    {
        return $this->state === self::READY;
    }

    /** Opens the connection; `connected` or `closed` follows (possibly at once). */
    public function connect(): void
    {
        if ($this->state !== self::DISCONNECTED) {
            return;
        }
        $a = $this->address;
        $host = str_contains($a->host, ':') ? "[{$a->host}]" : $a->host;
        $context = stream_context_create([
            'socket' => ['tcp_nodelay' => true],
            'ssl' => $a->tlsOptions + ['peer_name' => $a->host, 'verify_peer' => true, 'verify_peer_name' => true],
        ]);
        $errno = 0;
        $errstr = '';
        $stream = @stream_socket_client(
            "tcp://$host:{$a->port}",
            $errno,
            $errstr,
            0.0,
            STREAM_CLIENT_CONNECT | STREAM_CLIENT_ASYNC_CONNECT,
            $context,
        );
        if ($stream === false) {
            $this->listener->closed(self::cause($errno, $errstr), $errstr !== '' ? $errstr : "connect failed (errno $errno)");
            return;
        }
        stream_set_blocking($stream, false);
        stream_set_read_buffer($stream, 0);
        stream_set_write_buffer($stream, 0);
        $this->stream = $stream;
        $this->state = self::CONNECTING;
        $this->decoder = new Decoder($this->native);
        $this->outgoing = '';
    }

    /** Queues bytes to write, in order; written as soon as the connection is ready. */
    public function write(string $bytes): void
    {
        $this->outgoing .= $bytes;
        if ($this->state === self::READY) {
            $this->flushOutgoing();
        }
    }

    /** @return resource|null the stream to select for reading */
    public function readStream()
    {
        return $this->stream;
    }

    /** @return resource|null the stream to select for writing, when something waits */
    public function writeStream()
    {
        if ($this->stream === null) {
            return null;
        }
        if ($this->state === self::CONNECTING || $this->state === self::TLS_HANDSHAKE) {
            return $this->stream;
        }
        return $this->outgoing !== '' && $this->state === self::READY ? $this->stream : null;
    }

    /** The stream is writable (connect finished, or room to write). */
    public function onWritable(): void
    {
        if ($this->state === self::CONNECTING) {
            $error = $this->socketError();
            if ($error !== null) {
                $this->fail($error[0], $error[1]);
                return;
            }
            $this->connectedTcp();
            return;
        }
        if ($this->state === self::TLS_HANDSHAKE) {
            $this->continueTls();
            return;
        }
        if ($this->state === self::READY) {
            $this->flushOutgoing();
        }
    }

    /** The stream is readable: read everything available and report the replies. */
    public function onReadable(): void
    {
        if ($this->state === self::CONNECTING) {
            $this->onWritable();
            return;
        }
        if ($this->state === self::TLS_HANDSHAKE) {
            $this->continueTls();
            return;
        }
        if ($this->stream === null || $this->decoder === null) {
            return;
        }
        while (true) {
            $chunk = @fread($this->stream, 65536);
            if ($chunk === false) {
                $this->fail('other', $this->lastError('read failed'));
                return;
            }
            if ($chunk === '') {
                if (feof($this->stream)) {
                    $this->fail('other', 'connection closed by the node');
                    return;
                }
                break;
            }
            try {
                $this->decoder->feed($chunk);
                while ($this->state !== self::DISCONNECTED && ($reply = $this->decoder->next()) !== null) {
                    $this->dispatch($reply);
                }
            } catch (CoreException $e) {
                $this->fail('other', 'protocol error: ' . $e->codeName);
                return;
            }
            if ($this->state === self::DISCONNECTED) {
                return;
            }
            if (!$this->address->tls && strlen($chunk) < 65536) {
                // A short read emptied the socket; over TLS, decrypted bytes may still
                // wait in the stream without the socket showing readable.
                break;
            }
        }
    }

    /**
     * Closes the connection, or gives up the one being opened (its socket is closed);
     * the listener hears `closed($cause, $text)`, then nothing more from it.
     */
    public function close(string $cause = 'other', string $text = 'closed by the client'): void
    {
        if ($this->state !== self::DISCONNECTED) {
            $this->fail($cause, $text);
        }
    }

    private function dispatch(Reply $reply): void
    {
        if ($this->state === self::HANDSHAKE) {
            $this->handshakeReplies--;
            if ($reply->kind() === Constants::REPLY_ERROR) {
                $this->fail('auth', $reply->bytes());
                return;
            }
            if ($this->handshakeReplies === 0) {
                $this->state = self::READY;
                $this->listener->connected();
                $this->flushOutgoing();
            }
            return;
        }
        $this->listener->reply($reply);
    }

    private function connectedTcp(): void
    {
        if ($this->address->tls) {
            $this->state = self::TLS_HANDSHAKE;
            $this->continueTls();
            return;
        }
        $this->startHandshake();
    }

    /**
     * @SuppressWarnings(PHPMD.UnusedFormalParameter) the error handler's signature
     */
    private function continueTls(): void
    {
        if ($this->stream === null) {
            return;
        }
        $error = null;
        set_error_handler(static function (int $no, string $message) use (&$error): bool {
            $error = $message;
            return true;
        });
        try {
            $done = stream_socket_enable_crypto($this->stream, true, STREAM_CRYPTO_METHOD_TLS_CLIENT);
        } finally {
            restore_error_handler();
        }
        if ($done === true) {
            $this->startHandshake();
        } elseif ($done === false) {
            $this->fail('tls', $error ?? 'TLS handshake failed');
        }
        // 0: the handshake needs more I/O; called again when the stream is ready.
    }

    private function startHandshake(): void
    {
        $a = $this->address;
        $commands = '';
        if ($a->password !== null) {
            $args = $a->username !== null ? ['AUTH', $a->username, $a->password] : ['AUTH', $a->password];
            $commands .= self::encode($args);
            $this->handshakeReplies++;
        }
        if ($a->database !== 0) {
            $commands .= self::encode(['SELECT', (string) $a->database]);
            $this->handshakeReplies++;
        }
        if ($this->handshakeReplies === 0) {
            $this->state = self::READY;
            $this->listener->connected();
            $this->flushOutgoing();
            return;
        }
        $this->state = self::HANDSHAKE;
        // The handshake goes before anything the link queued meanwhile.
        $this->outgoing = $commands . $this->outgoing;
        $this->writeNow();
    }

    private function flushOutgoing(): void
    {
        if ($this->state === self::READY && $this->outgoing !== '') {
            $this->writeNow();
        }
    }

    private function writeNow(): void
    {
        if ($this->stream === null) {
            return;
        }
        $written = @fwrite($this->stream, $this->outgoing);
        if ($written === false) {
            $this->fail('other', $this->lastError('write failed'));
            return;
        }
        $this->outgoing = (string) substr($this->outgoing, $written);
    }

    /** @return array{string, string}|null the cause and text of a failed connect */
    private function socketError(): ?array
    {
        if ($this->stream === null) {
            return ['other', 'no stream'];
        }
        if (function_exists('socket_import_stream')) {
            $socket = @socket_import_stream($this->stream);
            if ($socket !== false && $socket !== null) {
                $code = @socket_get_option($socket, SOL_SOCKET, SO_ERROR);
                if (is_int($code) && $code !== 0) {
                    return [self::cause($code, ''), socket_strerror($code)];
                }
                return null;
            }
        }
        // Without ext-sockets: a connection that failed shows as an immediate EOF.
        return null;
    }

    private function fail(string $cause, string $text): void
    {
        if ($this->stream !== null) {
            @fclose($this->stream);
        }
        $this->stream = null;
        $this->state = self::DISCONNECTED;
        $this->outgoing = '';
        $this->decoder = null;
        $this->handshakeReplies = 0;
        $this->listener->closed($cause, $text);
    }

    private function lastError(string $default): string
    {
        $error = error_get_last();
        return $error !== null ? $error['message'] : $default;
    }

    private static function cause(int $errno, string $errstr): string
    {
        // ECONNREFUSED is 111 on Linux, 61 on the BSDs and macOS; ETIMEDOUT 110 / 60.
        if ($errno === 111 || $errno === 61 || stripos($errstr, 'refused') !== false) {
            return 'refused';
        }
        if ($errno === 110 || $errno === 60 || stripos($errstr, 'timed out') !== false) {
            return 'timeout';
        }
        return 'other';
    }

    /** @param list<string> $args */
    public static function encode(array $args): string
    {
        $out = '*' . count($args) . "\r\n";
        foreach ($args as $arg) {
            $out .= '$' . strlen($arg) . "\r\n" . $arg . "\r\n";
        }
        return $out;
    }
}
