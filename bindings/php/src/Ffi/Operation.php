<?php

declare(strict_types=1);

namespace Redlock\Ffi;

use FFI;
use FFI\CData;

/**
 * One acquisition, extension or release (`redlock_operation*`). The core decides; this
 * class only carries inputs in and outputs out:
 *
 *   after creating it and after every input, call poll() until it returns
 *   Constants::OUTPUT_WAIT (sleep until waitUntil() or the next reply) or
 *   Constants::OUTPUT_OUTCOME (takeOutcome()); for Constants::OUTPUT_SEND read the
 *   command (command(), commandResp() or commandArgs()) before polling again.
 */
final class Operation
{
    private readonly \FFI $ffi;
    /** @var CData `const char*[]` for commandArgs(), grown on demand */
    private ?CData $args = null;
    private ?CData $argLens = null;
    private int $argCapacity = 0;

    public function __construct(public readonly Native $native, public readonly CData $handle)
    {
        $this->ffi = $native->ffi;
    }

    /** The next output: a `Constants::OUTPUT_*` value. */
    public function poll(): int
    {
        $rc = $this->ffi->redlock_operation_poll_output($this->handle, FFI::addr($this->native->u32));
        if ($rc !== Constants::OK) {
            $this->native->check($rc, 'poll');
        }
        return $this->native->u32->cdata;
    }

    /**
     * The current send: [node, request id, deadline (µs), argc].
     *
     * @return array{int, int, int, int}
     */
    public function command(): array
    {
        $n = $this->native;
        $rc = $this->ffi->redlock_operation_command(
            $this->handle,
            FFI::addr($n->size),
            FFI::addr($n->u64),
            FFI::addr($n->u64b),
            FFI::addr($n->size2),
        );
        if ($rc !== Constants::OK) {
            $n->check($rc, 'command');
        }
        return [$n->size->cdata, $n->u64->cdata, $n->u64b->cdata, $n->size2->cdata];
    }

    /** The current command in RESP, ready to write to a socket. */
    public function commandResp(): string
    {
        $n = $this->native;
        $n->check($this->ffi->redlock_operation_command_resp($this->handle, FFI::addr($n->bytes), FFI::addr($n->bytesLen)), 'command');
        return $n->takeBytes();
    }

    /**
     * The current command's arguments, the command name first.
     *
     * @return list<string>
     */
    public function commandArgs(int $argc): array
    {
        if ($argc > $this->argCapacity) {
            $this->argCapacity = max(8, $argc);
            $this->args = $this->ffi->new("const char*[{$this->argCapacity}]");
            $this->argLens = $this->ffi->new("size_t[{$this->argCapacity}]");
        }
        $n = $this->native;
        $n->check(
            $this->ffi->redlock_operation_command_args(
                $this->handle,
                $this->args,
                $this->argLens,
                $this->argCapacity,
                FFI::addr($n->size),
            ),
            'command',
        );
        $out = [];
        $count = $n->size->cdata;
        for ($i = 0; $i < $count; $i++) {
            $length = $this->argLens[$i];
            $out[] = $length === 0 ? '' : FFI::string($this->args[$i], $length);
        }
        return $out;
    }

    /**
     * What the current command does (a `Constants::COMMAND_*` value) and whether it is
     * an `EVAL` fallback.
     *
     * @return array{int, bool}
     */
    public function commandKind(): array
    {
        $n = $this->native;
        $n->check($this->ffi->redlock_operation_command_kind($this->handle, FFI::addr($n->u32b), FFI::addr($n->flag)), 'command');
        return [$n->u32b->cdata, $n->flag->cdata];
    }

    /** The instant of the current wait, in microseconds. */
    public function waitUntil(): int
    {
        $n = $this->native;
        $n->check($this->ffi->redlock_operation_wait_until($this->handle, FFI::addr($n->u64)), 'wait');
        return $n->u64->cdata;
    }

    public function takeOutcome(): Outcome
    {
        $out = $this->ffi->new('redlock_outcome*');
        $this->native->check($this->ffi->redlock_operation_take_outcome($this->handle, FFI::addr($out)), 'outcome');
        return new Outcome($this->native, $out);
    }

    /**
     * Hands in a reply; returns the result code (usage errors such as
     * `duplicate_reply` leave the operation unchanged and are the caller's to judge).
     */
    public function handleReply(int $requestId, Reply $reply, int $nowUs): int
    {
        return $this->ffi->redlock_operation_handle_reply_value($this->handle, $requestId, $reply->handle, $nowUs);
    }

    /** Hands in a reply of a simple kind (not an array) without building a Reply. */
    public function handleSimpleReply(int $requestId, int $kind, int $integer, string $text, int $nowUs): int
    {
        return $this->ffi->redlock_operation_handle_reply(
            $this->handle,
            $requestId,
            $kind,
            $integer,
            $text === '' ? null : $text,
            strlen($text),
            $nowUs,
        );
    }

    /** Hands in the link's current delivery (any reply kind); returns the result code. */
    public function handleDelivery(Link $link, int $nowUs): int
    {
        return $this->ffi->redlock_operation_handle_delivery($this->handle, $link->handle, $nowUs);
    }

    /** Cancels the operation (poll afterwards: an acquisition emits its release). */
    public function abandon(int $nowUs): void
    {
        $this->native->check($this->ffi->redlock_operation_abandon($this->handle, $nowUs), 'abandon');
    }

    /**
     * Hands in a release notice from node `$node` (a message on one of
     * noticeChannels(), from that node's subscriber connection) without its message: the
     * core cannot tell whom it names, so every waiter spreads its next attempt at random.
     * Prefer handleNoticeMessage(). A notice never decides anything by itself. Poll
     * afterwards.
     */
    public function handleNotice(int $node, int $nowUs): void
    {
        if ($node < 0) {
            throw new \Redlock\Exception\InvalidArgumentException("no node $node", 'unknown_node');
        }
        $this->native->check($this->ffi->redlock_operation_handle_notice($this->handle, $node, $nowUs), 'notice');
    }

    /**
     * Hands in that node `$node` confirmed the subscription to one of noticeChannels()
     * (docs/bindings.md, rule 13): a release published there before it took effect
     * reached nobody. The core decides whether that counts as a notice (for a waiter
     * first in the queue there: at once when a quorum of nodes confirmed, after the
     * spread window when fewer did). Poll afterwards.
     */
    public function handleSubscribed(int $node, int $nowUs): void
    {
        if ($node < 0) {
            throw new \Redlock\Exception\InvalidArgumentException("no node $node", 'unknown_node');
        }
        $this->native->check($this->ffi->redlock_operation_handle_subscribed($this->handle, $node, $nowUs), 'subscribed');
    }

    /**
     * Hands in a release notice from node `$node` with its message, the bytes exactly as
     * the subscriber received them: the id of the waiter first in the resource's queue on
     * that node, or empty. The core reads it: the waiter it names tries at once, the
     * others keep their retry schedule. Poll afterwards.
     */
    public function handleNoticeMessage(int $node, string $message, int $nowUs): void
    {
        if ($node < 0) {
            throw new \Redlock\Exception\InvalidArgumentException("no node $node", 'unknown_node');
        }
        $this->native->check(
            $this->ffi->redlock_operation_handle_notice_message(
                $this->handle,
                $node,
                $message === '' ? null : $message,
                strlen($message),
                $nowUs,
            ),
            'notice',
        );
    }

    /**
     * Whether the driver should listen for this acquisition's release notices now
     * (subscribe to noticeChannels()), as the core decides it for every binding: with a
     * wait limit from the first refusal by a held key or a failed attempt, or from its
     * start when its client waited for one of its resources a moment ago; without one,
     * once an attempt failed and another may
     * follow (from the failed attempt's cleanup on); until the outcome. Never for
     * extensions, releases, inspections or finished operations. Once true it stays true
     * until the operation finishes: ask after every input, with the outputs.
     */
    public function listens(): bool
    {
        return $this->ffi->redlock_operation_listens($this->handle);
    }

    /**
     * The channels on which releases of this acquisition's keys are announced (one per
     * resource; none for other operations and finished ones).
     *
     * @return list<string>
     */
    public function noticeChannels(): array
    {
        $n = $this->native;
        $count = $this->ffi->redlock_operation_notice_channel_count($this->handle);
        $channels = [];
        for ($i = 0; $i < $count; $i++) {
            $capacity = 256;
            while (true) {
                $buffer = $this->ffi->new("uint8_t[$capacity]");
                $rc = $this->ffi->redlock_operation_notice_channel($this->handle, $i, $buffer, $capacity, FFI::addr($n->size));
                if ($rc === Constants::OK) {
                    $channels[] = FFI::string($buffer, $n->size->cdata);
                    break;
                }
                if ($rc !== 9003 || $n->size->cdata <= $capacity) {
                    $n->check($rc, 'notice channel');
                }
                $capacity = $n->size->cdata;
            }
        }
        return $channels;
    }

    /**
     * The operation's next event (oldest first), or null when none is left: its
     * `Constants::EVENT_*` kind, when it happened, how long after the operation started,
     * the attempt, the operation's kind, and what the kind carries (reason, retry
     * instant, failed node and cause, per-node results as [Constants::NODE_*, text]).
     *
     * @return array{kind: int, at: int, elapsed: int, attempt: int, operation: int, reason: ?int,
     *     retryAt: ?int, node: ?int, cause: ?int, nodes: list<array{int, string}>}|null
     */
    public function pollEvent(): ?array
    {
        $n = $this->native;
        $ffi = $this->ffi;
        $rc = $ffi->redlock_operation_poll_event($this->handle, FFI::addr($n->u32));
        if ($rc === Constants::NO_VALUE) {
            return null;
        }
        $n->check($rc, 'event');
        $kind = $n->u32->cdata;
        $n->check(
            $ffi->redlock_operation_event($this->handle, FFI::addr($n->u64), FFI::addr($n->u64b), FFI::addr($n->u32), FFI::addr($n->u32b)),
            'event',
        );
        $event = [
            'kind' => $kind,
            'at' => $n->u64->cdata,
            'elapsed' => $n->u64b->cdata,
            'attempt' => $n->u32->cdata,
            'operation' => $n->u32b->cdata,
            'reason' => null,
            'retryAt' => null,
            'node' => null,
            'cause' => null,
            'nodes' => [],
        ];
        if ($ffi->redlock_operation_event_reason($this->handle, FFI::addr($n->u32)) === Constants::OK) {
            $event['reason'] = $n->u32->cdata;
        }
        if ($ffi->redlock_operation_event_retry_at($this->handle, FFI::addr($n->u64)) === Constants::OK) {
            $event['retryAt'] = $n->u64->cdata;
        }
        if ($ffi->redlock_operation_event_node($this->handle, FFI::addr($n->size), FFI::addr($n->u32)) === Constants::OK) {
            $event['node'] = $n->size->cdata;
            $event['cause'] = $n->u32->cdata;
        }
        $count = $ffi->redlock_operation_event_node_count($this->handle);
        for ($i = 0; $i < $count; $i++) {
            $n->check(
                $ffi->redlock_operation_event_node_result($this->handle, $i, FFI::addr($n->u32), FFI::addr($n->bytes), FFI::addr($n->bytesLen)),
                'event node',
            );
            $event['nodes'][] = [$n->u32->cdata, $n->takeBytes()];
        }
        return $event;
    }

    public function handleTimeout(int $nowUs): void
    {
        $this->native->check($this->ffi->redlock_operation_handle_timeout($this->handle, $nowUs), 'timeout');
    }

    public function kind(): int
    {
        return $this->ffi->redlock_operation_kind($this->handle);
    }

    public function isFinished(): bool
    {
        return $this->ffi->redlock_operation_is_finished($this->handle);
    }

    public function attempt(): int
    {
        return $this->ffi->redlock_operation_attempt($this->handle);
    }

    public function nodeCount(): int
    {
        return $this->ffi->redlock_operation_node_count($this->handle);
    }

    public function __destruct()
    {
        $this->native->free('redlock_operation_free', $this->handle);
    }
}
