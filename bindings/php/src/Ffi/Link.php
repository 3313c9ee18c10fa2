<?php

declare(strict_types=1);

namespace Redlock\Ffi;

use FFI;
use FFI\CData;
use Redlock\Exception\InvalidArgumentException;

/**
 * One node's core Link (`redlock_link_*`): the per-node command policy (order, the
 * bound in flight, stalled nodes, owed releases, scripts first on every connection,
 * reconnect backoff, how long a connection attempt may take). The loop submits every
 * command for the node here and does what poll() says; see Redlock\Engine.
 */
final class Link
{
    /**
     * The longest connect timeout setConnectTimeout() takes (ms): the link's deadlines
     * stay within the microseconds a PHP int counts on Clock::nowUs().
     */
    public const CONNECT_TIMEOUT_MAX_MS = PHP_INT_MAX >> 11;

    private readonly \FFI $ffi;
    private ?CData $args = null;
    private ?CData $argLens = null;
    private int $argCapacity = 0;

    private function __construct(public readonly Native $native, public readonly CData $handle)
    {
        $this->ffi = $native->ffi;
    }

    public static function create(Native $native): self
    {
        $out = $native->ffi->new('redlock_link*');
        $native->check($native->ffi->redlock_link_new(FFI::addr($out)), 'link');
        return new self($native, $out);
    }

    /**
     * How long a connection attempt (TCP, TLS, AUTH, SELECT) may take before the link
     * gives it up: poll() then says LINK_OUTPUT_CLOSE (close the socket under way,
     * report nothing more for it) and the attempt counts failed with cause `timeout`.
     * The user's client's connect timeout when it has one; a new link has the core's
     * (Native::connectTimeoutDefaultMs()). 0 is taken as 1 ms; an attempt already
     * under way keeps its limit.
     *
     * @throws InvalidArgumentException a negative timeout or one over
     *     CONNECT_TIMEOUT_MAX_MS, or a freed link (`null_parameter`)
     */
    public function setConnectTimeout(int $ms): void
    {
        if ($ms < 0 || $ms > self::CONNECT_TIMEOUT_MAX_MS) {
            throw new InvalidArgumentException(
                "the connect timeout must be between 0 and " . self::CONNECT_TIMEOUT_MAX_MS . " ms, got $ms",
            );
        }
        $this->native->check($this->ffi->redlock_link_set_connect_timeout($this->handle, $ms), 'connect timeout');
    }

    /**
     * The connect timeout (ms) the link's next connection attempt gets.
     *
     * @throws InvalidArgumentException a freed link (`null_parameter`)
     */
    public function connectTimeoutMs(): int
    {
        $ms = $this->ffi->redlock_link_connect_timeout_ms($this->handle);
        if ($ms === 0) {
            // The library's answer for NULL: a link's timeout is at least 1 ms.
            throw $this->native->error(Constants::NULL_PARAMETER, 'connect timeout');
        }
        return $ms;
    }

    /** Hands the operation's current send to this link, tagged with `$tag`. */
    public function submit(int $tag, Operation $op, int $nowUs): void
    {
        $this->native->check($this->ffi->redlock_link_submit_current($this->handle, $tag, $op->handle, $nowUs), 'submit');
    }

    public function handleConnected(int $nowUs): void
    {
        $this->native->check($this->ffi->redlock_link_handle_connected($this->handle, $nowUs), 'connected');
    }

    /** `$cause` is a `Constants::LINK_CAUSE_*` value. */
    public function handleClosed(int $cause, string $text, int $nowUs): void
    {
        $this->native->check(
            $this->ffi->redlock_link_handle_closed($this->handle, $cause, $text === '' ? null : $text, strlen($text), $nowUs),
            'closed',
        );
    }

    public function handleReply(int $writeId, Reply $reply, int $nowUs): void
    {
        $this->native->check($this->ffi->redlock_link_handle_reply_value($this->handle, $writeId, $reply->handle, $nowUs), 'reply');
    }

    /** A reply of a simple kind (not an array) without building a Reply. */
    public function handleSimpleReply(int $writeId, int $kind, int $integer, string $text, int $nowUs): void
    {
        $this->native->check(
            $this->ffi->redlock_link_handle_reply($this->handle, $writeId, $kind, $integer, $text === '' ? null : $text, strlen($text), $nowUs),
            'reply',
        );
    }

    public function handleTimeout(int $nowUs): void
    {
        $this->native->check($this->ffi->redlock_link_handle_timeout($this->handle, $nowUs), 'link timeout');
    }

    /** The next output: a `Constants::LINK_OUTPUT_*` value. */
    public function poll(): int
    {
        $n = $this->native;
        $rc = $this->ffi->redlock_link_poll_output($this->handle, FFI::addr($n->u32));
        if ($rc !== Constants::OK) {
            $n->check($rc, 'link poll');
        }
        return $n->u32->cdata;
    }

    /**
     * The current write: [write id, argc].
     *
     * @return array{int, int}
     */
    public function write(): array
    {
        $n = $this->native;
        $n->check($this->ffi->redlock_link_write($this->handle, FFI::addr($n->u64), FFI::addr($n->size)), 'write');
        return [$n->u64->cdata, $n->size->cdata];
    }

    /** The current write in RESP, ready for the socket. */
    public function writeResp(): string
    {
        $n = $this->native;
        $n->check($this->ffi->redlock_link_write_resp($this->handle, FFI::addr($n->bytes), FFI::addr($n->bytesLen)), 'write');
        return $n->takeBytes();
    }

    /**
     * The current write's arguments, the command name first.
     *
     * @return list<string>
     */
    public function writeArgs(int $argc): array
    {
        if ($argc > $this->argCapacity) {
            $this->argCapacity = max(8, $argc);
            $this->args = $this->ffi->new("const char*[{$this->argCapacity}]");
            $this->argLens = $this->ffi->new("size_t[{$this->argCapacity}]");
        }
        $n = $this->native;
        $n->check(
            $this->ffi->redlock_link_write_args($this->handle, $this->args, $this->argLens, $this->argCapacity, FFI::addr($n->size)),
            'write',
        );
        $out = [];
        $count = $n->size->cdata;
        for ($i = 0; $i < $count; $i++) {
            $length = $this->argLens[$i];
            $out[] = $length === 0 ? '' : FFI::string($this->args[$i], $length);
        }
        return $out;
    }

    /** The tag of the current delivery (its operation). */
    public function deliveryTag(): int
    {
        $n = $this->native;
        $n->check(
            $this->ffi->redlock_link_delivery(
                $this->handle,
                FFI::addr($n->u64),
                FFI::addr($n->u64b),
                FFI::addr($n->u32b),
                FFI::addr($n->i64),
                FFI::addr($n->bytes),
                FFI::addr($n->bytesLen),
            ),
            'delivery',
        );
        return $n->u64->cdata;
    }

    /** When handleTimeout() is next due, null when nothing waits on time. */
    public function pollTimeout(): ?int
    {
        $n = $this->native;
        $n->check($this->ffi->redlock_link_poll_timeout($this->handle, FFI::addr($n->flag), FFI::addr($n->u64)), 'link timeout');
        return $n->flag->cdata ? $n->u64->cdata : null;
    }

    public function isIdle(): bool
    {
        return $this->ffi->redlock_link_is_idle($this->handle);
    }

    public function isStalled(int $nowUs): bool
    {
        return $this->ffi->redlock_link_is_stalled($this->handle, $nowUs);
    }

    public function isOpen(): bool
    {
        return $this->ffi->redlock_link_is_open($this->handle);
    }

    /** Writes awaiting their replies, the script loads included. */
    public function inFlight(): int
    {
        return $this->ffi->redlock_link_in_flight($this->handle);
    }

    public function queued(): int
    {
        return $this->ffi->redlock_link_queued($this->handle);
    }

    public function owed(): int
    {
        return $this->ffi->redlock_link_owed($this->handle);
    }

    public function __destruct()
    {
        $this->native->free('redlock_link_free', $this->handle);
    }
}
