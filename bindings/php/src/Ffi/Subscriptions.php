<?php

declare(strict_types=1);

namespace Redlock\Ffi;

use FFI;
use FFI\CData;
use Redlock\Exception\InvalidArgumentException;
use Redlock\Exception\UsedAfterCloseException;

/**
 * The core's Subscriptions (`redlock_subscriptions_*`): the policy of a client's notice
 * subscriber connections, one per node. It decides which channels each node's
 * connection subscribes (a channel lingers the core's NOTICE_CHANNEL_LINGER_MS after its
 * last listener left), when a connection opens and closes, how long a failed one stays
 * closed (SUBSCRIBER_REOPEN_FIRST_MS doubling to _MAX_MS, back to the first after a
 * confirmed subscription), and that one which neither opens nor confirms a
 * subscription within the timeout counts as lost. The caller (Redlock\Driver\NoticeListener)
 * does what poll() says and reports what happened; see core/src/subscriptions.rs.
 *
 * Freed by close() or the destructor, once.
 */
final class Subscriptions
{
    private readonly \FFI $ffi;
    private bool $closed = false;

    private function __construct(public readonly Native $native, private readonly CData $handle)
    {
        $this->ffi = $native->ffi;
    }

    /**
     * Subscriptions over `$nodes` nodes; a connection that neither opens nor confirms a
     * subscription within `$timeoutMs` counts as lost.
     *
     * @throws \Redlock\Exception\ConfigurationException no nodes, or too many (`no_nodes`, `too_many_nodes`)
     */
    public static function create(Native $native, int $nodes, int $timeoutMs): self
    {
        if ($nodes < 0 || $timeoutMs < 0) {
            throw new InvalidArgumentException("not a node count ($nodes) or a timeout ($timeoutMs ms)");
        }
        $out = $native->ffi->new('redlock_subscriptions*');
        $native->check($native->ffi->redlock_subscriptions_new($nodes, $timeoutMs, FFI::addr($out)), 'subscriptions');
        return new self($native, $out);
    }

    /** One more listener on `$channel` (an acquisition started waiting). Poll afterwards. */
    public function want(string $channel, int $nowUs): void
    {
        $this->check($this->ffi->redlock_subscriptions_want($this->live(), self::bytes($channel), strlen($channel), $nowUs), 'want');
    }

    /**
     * One listener fewer on `$channel` (it lingers once none is left); false, and
     * nothing changes, for a channel nobody listens on.
     */
    public function unwant(string $channel, int $nowUs): bool
    {
        $rc = $this->ffi->redlock_subscriptions_unwant($this->live(), self::bytes($channel), strlen($channel), $nowUs);
        if ($rc === Constants::NO_VALUE) {
            return false;
        }
        $this->check($rc, 'unwant');
        return true;
    }

    /** Node `$node`'s subscriber connection opened. */
    public function handleOpened(int $node, int $nowUs): void
    {
        $this->check($this->ffi->redlock_subscriptions_handle_opened($this->live(), self::node($node), $nowUs), 'opened');
    }

    /** Node `$node`'s subscriber connection could not be opened, or dropped. */
    public function handleLost(int $node, int $nowUs): void
    {
        $this->check($this->ffi->redlock_subscriptions_handle_lost($this->live(), self::node($node), $nowUs), 'lost');
    }

    /** Node `$node` refused a `SUBSCRIBE` (an error reply on its subscriber connection). */
    public function handleRefused(int $node, int $nowUs): void
    {
        $this->check($this->ffi->redlock_subscriptions_handle_refused($this->live(), self::node($node), $nowUs), 'refused');
    }

    /**
     * Node `$node` confirmed the subscription to `$channel`: true when it counts (hand
     * it to the channel's waiting acquisition then), false for a stale one.
     */
    public function handleConfirmed(int $node, string $channel, int $nowUs): bool
    {
        $n = $this->native;
        $this->check(
            $this->ffi->redlock_subscriptions_handle_confirmed(
                $this->live(),
                self::node($node),
                self::bytes($channel),
                strlen($channel),
                $nowUs,
                FFI::addr($n->flag),
            ),
            'confirmed',
        );
        return $n->flag->cdata;
    }

    /** Time has reached `$nowUs` (calling it early is harmless). Poll afterwards. */
    public function handleTimeout(int $nowUs): void
    {
        $this->check($this->ffi->redlock_subscriptions_handle_timeout($this->live(), $nowUs), 'subscriptions timeout');
    }

    /**
     * The next output: [a `Constants::SUBSCRIBER_OUTPUT_*` value, the node it is for,
     * the channel (SUBSCRIBE, UNSUBSCRIBE) or null].
     *
     * @return array{int, int, ?string}
     */
    public function poll(): array
    {
        $n = $this->native;
        $this->check($this->ffi->redlock_subscriptions_poll_output($this->live(), FFI::addr($n->u32), FFI::addr($n->size)), 'subscriptions poll');
        $kind = $n->u32->cdata;
        $node = $n->size->cdata;
        $channel = null;
        if ($kind === Constants::SUBSCRIBER_OUTPUT_SUBSCRIBE || $kind === Constants::SUBSCRIBER_OUTPUT_UNSUBSCRIBE) {
            $this->check(
                $this->ffi->redlock_subscriptions_channel($this->handle, FFI::addr($n->bytes), FFI::addr($n->bytesLen)),
                'subscriptions channel',
            );
            $channel = $n->takeBytes();
        }
        return [$kind, $node, $channel];
    }

    /** When handleTimeout() is next due (Clock::nowUs()), null when nothing waits on time. */
    public function pollTimeout(): ?int
    {
        $n = $this->native;
        $this->check(
            $this->ffi->redlock_subscriptions_poll_timeout($this->live(), FFI::addr($n->flag), FFI::addr($n->u64)),
            'subscriptions timeout',
        );
        return $n->flag->cdata ? $n->u64->cdata : null;
    }

    /** Whether node `$node`'s subscriber connection counts as open. */
    public function isOpen(int $node): bool
    {
        return $node >= 0 && $this->ffi->redlock_subscriptions_is_open($this->live(), $node);
    }

    /** The number of channels wanted or lingering. */
    public function channelCount(): int
    {
        return $this->ffi->redlock_subscriptions_channel_count($this->live());
    }

    public function isClosed(): bool
    {
        return $this->closed;
    }

    /** Frees the core's object; later calls throw UsedAfterCloseException. Idempotent. */
    public function close(): void
    {
        if (!$this->closed) {
            $this->closed = true;
            $this->native->free('redlock_subscriptions_free', $this->handle);
        }
    }

    public function __destruct()
    {
        $this->close();
    }

    private function live(): CData
    {
        if ($this->closed) {
            throw new UsedAfterCloseException('these subscriptions are closed');
        }
        return $this->handle;
    }

    private function check(int $rc, string $context): void
    {
        if ($rc !== Constants::OK) {
            $this->native->check($rc, $context);
        }
    }

    private static function node(int $node): int
    {
        if ($node < 0) {
            throw new InvalidArgumentException("no node $node", 'unknown_node');
        }
        return $node;
    }

    private static function bytes(string $channel): ?string
    {
        return $channel === '' ? null : $channel;
    }
}
