//! One acquisition, extension or release: inputs (replies, timeouts), the polled
//! output, and getters.

use redlock_core::{Command, CommandKind, NodeResult, Operation, OperationKind, Output};
use redlock_core::{RequestId, Time};

use crate::boundary::{free_handle, guard, guard_value, put_args, put_bytes};
use crate::error::{code_of, redlock_result, redlock_result as R};
use crate::link::{current_delivery, redlock_link};
use crate::outcome::{node_kind, redlock_outcome};
use crate::reply::{redlock_reply, reply_from_parts};

/// Nothing to do until the next input (`redlock_operation_poll_output`).
pub const REDLOCK_OUTPUT_NONE: u32 = 0;
/// Send a command: read it with `redlock_operation_command`.
pub const REDLOCK_OUTPUT_SEND: u32 = 1;
/// Wait: call `redlock_operation_handle_timeout` at `redlock_operation_wait_until` if
/// no reply arrives before.
pub const REDLOCK_OUTPUT_WAIT: u32 = 2;
/// The operation finished: take it with `redlock_operation_take_outcome`.
pub const REDLOCK_OUTPUT_OUTCOME: u32 = 3;

/// An acquisition, retries included (`redlock_operation_kind`).
pub const REDLOCK_OPERATION_ACQUIRE: u32 = 1;
/// An extension.
pub const REDLOCK_OPERATION_EXTEND: u32 = 2;
/// A release.
pub const REDLOCK_OPERATION_RELEASE: u32 = 3;
/// An inspection (`redlock_client_inspect`).
pub const REDLOCK_OPERATION_INSPECT: u32 = 4;

/// `SET key token NX PX ttl`, acquiring one resource (`redlock_operation_command_kind`).
pub const REDLOCK_COMMAND_SET: u32 = 1;
/// The acquire script, for several resources.
pub const REDLOCK_COMMAND_ACQUIRE: u32 = 2;
/// The release script.
pub const REDLOCK_COMMAND_RELEASE: u32 = 3;
/// The extend script.
pub const REDLOCK_COMMAND_EXTEND: u32 = 4;
/// The fenced acquisition script (lock keys and fence keys).
pub const REDLOCK_COMMAND_FENCED_ACQUIRE: u32 = 5;
/// The fencing write-back script.
pub const REDLOCK_COMMAND_WRITE_BACK: u32 = 6;
/// `GET key` or `MGET key...`, reading who holds a lock.
pub const REDLOCK_COMMAND_INSPECT: u32 = 7;
/// A waiting acquisition's attempt: the queued acquire script (lock keys, then the
/// resource's queue of waiters).
pub const REDLOCK_COMMAND_QUEUED_ACQUIRE: u32 = 8;

enum Current {
    None,
    Send(Command),
    Wait(Time),
    /// The outcome, already in the handle `redlock_operation_take_outcome` hands out
    /// (boxed here so that every poll moves only a command-sized value).
    Outcome(Option<Box<redlock_outcome>>),
}

/// One acquisition, extension or release. Freed by `redlock_operation_free`.
pub struct redlock_operation {
    pub(crate) inner: Operation,
    /// The output of the last poll: what the `command`/`wait_until`/`take_outcome`
    /// getters read. Borrowed pointers into it stay valid until the next poll.
    current: Current,
    /// RESP encoding of the current command, built on request.
    resp: Vec<u8>,
    resp_ready: bool,
    /// Whether the current command went to a link (`redlock_link_submit_current`).
    submitted: bool,
    /// The live per-node view as of the last `redlock_operation_node` call.
    nodes: Vec<NodeResult>,
    /// The event taken by the last `redlock_operation_poll_event`.
    pub(crate) event: Option<redlock_core::Event>,
}

impl redlock_operation {
    pub(crate) fn new(inner: Operation) -> redlock_operation {
        redlock_operation {
            inner,
            current: Current::None,
            resp: Vec::new(),
            resp_ready: false,
            submitted: false,
            nodes: Vec::new(),
            event: None,
        }
    }

    /// A copy of the current command for a link, once per command.
    pub(crate) fn take_submission(&mut self) -> Option<Command> {
        if self.submitted {
            return None;
        }
        let command = self.command()?.clone();
        self.submitted = true;
        Some(command)
    }

    fn command(&self) -> Option<&Command> {
        match &self.current {
            Current::Send(command) => Some(command),
            _ => None,
        }
    }
}

/// Frees an operation (and any outcome not taken). NULL is ignored.
#[no_mangle]
pub unsafe extern "C" fn redlock_operation_free(operation: *mut redlock_operation) {
    guard_value((), || {
        // SAFETY: by the crate's contract `operation` is NULL or a live operation handle.
        unsafe { free_handle(operation) }
    })
}

/// Hands in the reply to request `request_id`, received at `now_us`. `kind` is a
/// `REDLOCK_REPLY_*` value other than `REDLOCK_REPLY_ARRAY` (use
/// `redlock_operation_handle_reply_value` for arrays); `integer` is read for
/// `REDLOCK_REPLY_INTEGER`; the `text_len` bytes at `text` for `REDLOCK_REPLY_STATUS`,
/// `_BULK`, `_ERROR` and `_CONNECTION_FAILED` (node texts need not be UTF-8: invalid
/// sequences become U+FFFD, as in the core's decoder). A status `OK` counts as
/// `REDLOCK_REPLY_OK`.
///
/// `REDLOCK_UNKNOWN_REQUEST` for an id this operation never issued,
/// `REDLOCK_DUPLICATE_REPLY` for a second reply; either way the operation is unchanged.
/// A reply after the outcome is accepted and changes nothing. Poll after every call.
#[no_mangle]
pub unsafe extern "C" fn redlock_operation_handle_reply(
    operation: *mut redlock_operation,
    request_id: u64,
    kind: u32,
    integer: i64,
    text: *const u8,
    text_len: usize,
    now_us: u64,
) -> redlock_result {
    guard(|| {
        let op = arg_mut!(operation);
        let text = arg_bytes!(text, text_len);
        let reply = match reply_from_parts(kind, integer, text) {
            Ok(reply) => reply,
            Err(code) => return code,
        };
        code_of(
            op.inner
                .handle_reply(RequestId(request_id), reply, Time::from_micros(now_us)),
        )
    })
}

/// Like `redlock_operation_handle_reply`, with a reply built by `redlock_reply_new*` or
/// taken from a `redlock_decoder`. The reply is copied; the caller still frees it.
#[no_mangle]
pub unsafe extern "C" fn redlock_operation_handle_reply_value(
    operation: *mut redlock_operation,
    request_id: u64,
    reply: *const redlock_reply,
    now_us: u64,
) -> redlock_result {
    guard(|| {
        let op = arg_mut!(operation);
        let reply = arg_ref!(reply);
        code_of(op.inner.handle_reply(
            RequestId(request_id),
            reply.inner.clone(),
            Time::from_micros(now_us),
        ))
    })
}

/// Hands the reply of `link`'s current `REDLOCK_LINK_OUTPUT_DELIVER` output (any kind,
/// arrays included) to this operation, at `now_us`: the same as
/// `redlock_operation_handle_reply` with the delivery's request id and reply. The caller
/// picks the operation by the delivery's tag (`redlock_link_delivery`).
/// `REDLOCK_NO_VALUE` when the link's current output is no delivery; the usage errors
/// of `redlock_operation_handle_reply` otherwise. Poll after every call.
#[no_mangle]
pub unsafe extern "C" fn redlock_operation_handle_delivery(
    operation: *mut redlock_operation,
    link: *const redlock_link,
    now_us: u64,
) -> redlock_result {
    guard(|| {
        let op = arg_mut!(operation);
        let link = arg_ref!(link);
        let Some((request, reply)) = current_delivery(link) else {
            return R::REDLOCK_NO_VALUE;
        };
        code_of(
            op.inner
                .handle_reply(request, reply.clone(), Time::from_micros(now_us)),
        )
    })
}

/// Tells the operation that time has reached `now_us`: requests past their deadline
/// count as timed out, and a retry whose delay has passed starts. Calling it early is
/// harmless. Poll after every call.
#[no_mangle]
pub unsafe extern "C" fn redlock_operation_handle_timeout(
    operation: *mut redlock_operation,
    now_us: u64,
) -> redlock_result {
    guard(|| {
        let op = arg_mut!(operation);
        op.inner.handle_timeout(Time::from_micros(now_us));
        R::REDLOCK_OK
    })
}

/// The next output: writes a `REDLOCK_OUTPUT_*` value to `*out_kind`. After creating
/// the operation and after every input, call it until it gives `REDLOCK_OUTPUT_WAIT`,
/// `REDLOCK_OUTPUT_OUTCOME` or `REDLOCK_OUTPUT_NONE` (a finished or abandoned
/// operation). Order: every command to send, then the outcome if the operation just
/// finished, otherwise one wait: the wait is the operation's only wake-up. Each poll replaces the previous output: pointers borrowed from
/// it become invalid, and an outcome not taken is dropped.
#[no_mangle]
pub unsafe extern "C" fn redlock_operation_poll_output(
    operation: *mut redlock_operation,
    out_kind: *mut u32,
) -> redlock_result {
    guard(|| {
        let op = arg_mut!(operation);
        let out_kind = arg_out!(out_kind);
        op.resp_ready = false;
        op.submitted = false;
        let (current, kind) = match op.inner.poll_output() {
            None => (Current::None, REDLOCK_OUTPUT_NONE),
            Some(Output::Send(command)) => (Current::Send(command), REDLOCK_OUTPUT_SEND),
            Some(Output::Wait(until)) => (Current::Wait(until), REDLOCK_OUTPUT_WAIT),
            Some(Output::Outcome(outcome)) => (
                Current::Outcome(Some(Box::new(redlock_outcome::new(outcome)))),
                REDLOCK_OUTPUT_OUTCOME,
            ),
            // An output this version does not know: report an error rather than
            // silently dropping an instruction.
            Some(_) => {
                op.current = Current::None;
                return R::REDLOCK_UNKNOWN_ERROR;
            }
        };
        op.current = current;
        out_kind.write(kind);
        R::REDLOCK_OK
    })
}

/// The command of the current `REDLOCK_OUTPUT_SEND` output: the node to send it to
/// (0..N-1, in the order the caller numbers its nodes), the request id to hand back
/// with its reply, the deadline after which to stop waiting for it, and its number of
/// arguments. `REDLOCK_NO_VALUE` when the current output is not a send.
#[no_mangle]
pub unsafe extern "C" fn redlock_operation_command(
    operation: *const redlock_operation,
    out_node: *mut usize,
    out_request_id: *mut u64,
    out_deadline_us: *mut u64,
    out_argc: *mut usize,
) -> redlock_result {
    guard(|| {
        let op = arg_ref!(operation);
        let out_node = arg_out!(out_node);
        let out_request_id = arg_out!(out_request_id);
        let out_deadline = arg_out!(out_deadline_us);
        let out_argc = arg_out!(out_argc);
        let Some(command) = op.command() else {
            return R::REDLOCK_NO_VALUE;
        };
        out_node.write(command.node());
        out_request_id.write(command.request_id().0);
        out_deadline.write(command.deadline().as_micros());
        out_argc.write(command.arg_count());
        R::REDLOCK_OK
    })
}

/// Argument `index` of the current command (0 is the command name), borrowed: valid
/// until the next poll or the operation is freed. `REDLOCK_OUT_OF_RANGE` past the last.
#[no_mangle]
pub unsafe extern "C" fn redlock_operation_command_arg(
    operation: *const redlock_operation,
    index: usize,
    out_arg: *mut *const u8,
    out_arg_len: *mut usize,
) -> redlock_result {
    guard(|| {
        let op = arg_ref!(operation);
        let (out_ptr, out_len) = (arg_out!(out_arg), arg_out!(out_arg_len));
        let Some(command) = op.command() else {
            return R::REDLOCK_NO_VALUE;
        };
        match command.arg(index) {
            Some(arg) => {
                put_bytes(out_ptr, out_len, arg);
                R::REDLOCK_OK
            }
            None => R::REDLOCK_OUT_OF_RANGE,
        }
    })
}

/// Every argument of the current command at once, into caller arrays of `capacity`
/// elements: `args[i]`, `arg_lens[i]` (borrowed as in `redlock_operation_command_arg`),
/// and the count into `*out_argc`. `REDLOCK_BUFFER_TOO_SMALL` (nothing written) when
/// `capacity` is below the count, which `redlock_operation_command` gives.
#[no_mangle]
pub unsafe extern "C" fn redlock_operation_command_args(
    operation: *const redlock_operation,
    args: *mut *const u8,
    arg_lens: *mut usize,
    capacity: usize,
    out_argc: *mut usize,
) -> redlock_result {
    guard(|| {
        let op = arg_ref!(operation);
        if args.is_null() || arg_lens.is_null() {
            return R::REDLOCK_NULL_PARAMETER;
        }
        let out_argc = arg_out!(out_argc);
        let Some(command) = op.command() else {
            return R::REDLOCK_NO_VALUE;
        };
        // SAFETY: both arrays were checked non-NULL above and are writable for
        // `capacity` elements by the crate's contract.
        let argc = match unsafe { put_args(command.args(), args, arg_lens, capacity) } {
            Ok(argc) => argc,
            Err(code) => return code,
        };
        out_argc.write(argc);
        R::REDLOCK_OK
    })
}

/// The current command encoded in RESP (an array of bulk strings, valid for RESP2 and
/// RESP3 servers), ready to write to a socket; borrowed: valid until the next poll or
/// the operation is freed.
#[no_mangle]
pub unsafe extern "C" fn redlock_operation_command_resp(
    operation: *mut redlock_operation,
    out_bytes: *mut *const u8,
    out_bytes_len: *mut usize,
) -> redlock_result {
    guard(|| {
        let op = arg_mut!(operation);
        let (out_ptr, out_len) = (arg_out!(out_bytes), arg_out!(out_bytes_len));
        let Current::Send(command) = &op.current else {
            return R::REDLOCK_NO_VALUE;
        };
        if !op.resp_ready {
            op.resp.clear();
            command.encode_resp(&mut op.resp);
            op.resp_ready = true;
        }
        put_bytes(out_ptr, out_len, &op.resp);
        R::REDLOCK_OK
    })
}

/// What the current command does (a `REDLOCK_COMMAND_*` value) and whether it carries
/// the script's text (`EVAL`, a fallback after `NOSCRIPT`) rather than its SHA-1.
#[no_mangle]
pub unsafe extern "C" fn redlock_operation_command_kind(
    operation: *const redlock_operation,
    out_kind: *mut u32,
    out_is_eval: *mut bool,
) -> redlock_result {
    guard(|| {
        let op = arg_ref!(operation);
        let (out_kind, out_is_eval) = (arg_out!(out_kind), arg_out!(out_is_eval));
        let Some(command) = op.command() else {
            return R::REDLOCK_NO_VALUE;
        };
        let kind = match command.kind() {
            CommandKind::Set => REDLOCK_COMMAND_SET,
            CommandKind::Acquire => REDLOCK_COMMAND_ACQUIRE,
            CommandKind::Release => REDLOCK_COMMAND_RELEASE,
            CommandKind::Extend => REDLOCK_COMMAND_EXTEND,
            CommandKind::FencedAcquire => REDLOCK_COMMAND_FENCED_ACQUIRE,
            CommandKind::WriteBack => REDLOCK_COMMAND_WRITE_BACK,
            CommandKind::Inspect => REDLOCK_COMMAND_INSPECT,
            CommandKind::QueuedAcquire => REDLOCK_COMMAND_QUEUED_ACQUIRE,
            _ => return R::REDLOCK_UNKNOWN_ERROR,
        };
        out_kind.write(kind);
        out_is_eval.write(command.is_eval());
        R::REDLOCK_OK
    })
}

/// The instant of the current `REDLOCK_OUTPUT_WAIT` output.
#[no_mangle]
pub unsafe extern "C" fn redlock_operation_wait_until(
    operation: *const redlock_operation,
    out_until_us: *mut u64,
) -> redlock_result {
    guard(|| {
        let op = arg_ref!(operation);
        let out = arg_out!(out_until_us);
        match op.current {
            Current::Wait(until) => {
                out.write(until.as_micros());
                R::REDLOCK_OK
            }
            _ => R::REDLOCK_NO_VALUE,
        }
    })
}

/// Takes the outcome of the current `REDLOCK_OUTPUT_OUTCOME` output as a handle of its
/// own (freed by `redlock_outcome_free`; it outlives the operation).
/// `REDLOCK_NO_VALUE` when the current output is no outcome or it was already taken.
#[no_mangle]
pub unsafe extern "C" fn redlock_operation_take_outcome(
    operation: *mut redlock_operation,
    out_outcome: *mut *mut redlock_outcome,
) -> redlock_result {
    guard(|| {
        let op = arg_mut!(operation);
        let out = arg_out!(out_outcome);
        let Current::Outcome(slot) = &mut op.current else {
            return R::REDLOCK_NO_VALUE;
        };
        match slot.take() {
            Some(outcome) => {
                // The pointer is freed by `redlock_outcome_free` (`free_handle`).
                out.write(Box::into_raw(outcome));
                R::REDLOCK_OK
            }
            None => R::REDLOCK_NO_VALUE,
        }
    })
}

/// Abandons the operation at `now_us`: the caller cancelled it (a dropped future, a
/// cancelled task, an interrupt). Poll afterwards as after any input: an acquisition
/// whose commands are out gives the sends of a release of its token (hand them to the
/// links like any other command), then `REDLOCK_OUTPUT_NONE`; no outcome and no wait
/// follow. Replies handed in later change nothing. Abandoning a finished operation does
/// nothing once its outcome was polled; an acquisition that decided "acquired" on an
/// input not polled since gives the sends of a release of its token (its caller never
/// got the lock).
#[no_mangle]
pub unsafe extern "C" fn redlock_operation_abandon(
    operation: *mut redlock_operation,
    now_us: u64,
) -> redlock_result {
    guard(|| {
        let op = arg_mut!(operation);
        op.inner.abandon(Time::from_micros(now_us));
        R::REDLOCK_OK
    })
}

/// Gives back, at `now_us`, the outcome this operation handed out when it reached no
/// caller: the caller stopped waiting (a cancelled future, an interrupt) as the outcome
/// was decided, after a thread of the driver's had taken it. An acquired lock is then
/// nobody's: poll afterwards for the sends of a release of its token to every node (hand
/// them to the links like any other command), then `REDLOCK_OUTPUT_NONE`. Any other
/// outcome emits nothing. `outcome` is consumed whatever the result (it must not be used
/// or freed afterwards), so that a lock handle is never left to two owners.
/// `REDLOCK_FOREIGN_OUTCOME` when this operation did not hand `outcome` out (another
/// operation's, before its own outcome was polled, or a second time); the operation is
/// then unchanged.
#[no_mangle]
pub unsafe extern "C" fn redlock_operation_decline(
    operation: *mut redlock_operation,
    outcome: *mut redlock_outcome,
    now_us: u64,
) -> redlock_result {
    guard(|| {
        if outcome.is_null() {
            return R::REDLOCK_NULL_PARAMETER;
        }
        // SAFETY: by the crate's contract a non-NULL `outcome` came from
        // `redlock_operation_take_outcome` (`Box::into_raw`) and was not freed; the caller
        // gives up the pointer with this call, so it is freed exactly once, here.
        let outcome = unsafe { Box::from_raw(outcome) }.into_inner();
        let op = arg_mut!(operation);
        code_of(op.inner.decline(outcome, Time::from_micros(now_us)))
    })
}

/// Hands in a release notice for this acquisition's resource from node `node` (0-based,
/// in configuration order), received at `now_us`: a message on one of the channels
/// `redlock_operation_notice_channel` names, from that node's subscriber connection.
/// A waiting acquisition may try again at once; a notice never decides anything by
/// itself. `REDLOCK_UNKNOWN_NODE` for an index outside `0..N`. Poll afterwards.
#[no_mangle]
pub unsafe extern "C" fn redlock_operation_handle_notice(
    operation: *mut redlock_operation,
    node: usize,
    now_us: u64,
) -> redlock_result {
    guard(|| {
        let op = arg_mut!(operation);
        code_of(op.inner.handle_notice(node, Time::from_micros(now_us)))
    })
}

/// Hands in, at `now_us`, that node `node` confirmed the driver's subscription to one of
/// this acquisition's notice channels (the `subscribe` reply naming it). A release
/// published there before the subscription took effect reached nobody; the core decides
/// whether one may have gone unheard: for a waiter that node refused while it was first
/// in the queue there, once a quorum of such nodes confirmed, they stand for releases
/// naming it; fewer bring its retry forward (see the core's
/// `Operation::handle_subscribed`).
/// `REDLOCK_UNKNOWN_NODE` for an index outside `0..N`. Poll afterwards.
#[no_mangle]
pub unsafe extern "C" fn redlock_operation_handle_subscribed(
    operation: *mut redlock_operation,
    node: usize,
    now_us: u64,
) -> redlock_result {
    guard(|| {
        let op = arg_mut!(operation);
        code_of(op.inner.handle_subscribed(node, Time::from_micros(now_us)))
    })
}

/// As `redlock_operation_handle_notice`, with the notice's message (`message_len` bytes;
/// NULL with length 0 for none): the id of the waiter first in the resource's queue on
/// that node, or empty. The core decides from it when the next attempt starts: at once
/// for the waiter it names; the others keep their retry schedule. Pass every message as
/// the subscriber received it. `REDLOCK_UNKNOWN_NODE` for an index outside `0..N`,
/// `REDLOCK_NULL_PARAMETER` for a NULL message with a length. Poll afterwards.
#[no_mangle]
pub unsafe extern "C" fn redlock_operation_handle_notice_message(
    operation: *mut redlock_operation,
    node: usize,
    message: *const u8,
    message_len: usize,
    now_us: u64,
) -> redlock_result {
    guard(|| {
        let op = arg_mut!(operation);
        let message = arg_bytes!(message, message_len);
        code_of(
            op.inner
                .handle_notice_message(node, message, Time::from_micros(now_us)),
        )
    })
}

/// Whether the driver should listen for this acquisition's release notices now (the
/// core decides: with a wait limit from the first refusal by a held key or a failed
/// attempt, or from its start when its client waited for one of its resources a moment
/// ago; otherwise once an attempt failed and another may follow; never for other
/// operations or finished ones). Once true it stays true until the operation finishes.
/// False for NULL.
#[no_mangle]
pub unsafe extern "C" fn redlock_operation_listens(operation: *const redlock_operation) -> bool {
    guard_value(false, || arg_ref!(operation, false).inner.listens())
}

/// The number of notice channels of a running acquisition (one per resource; 0 for
/// other operations, finished ones and NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_operation_notice_channel_count(
    operation: *const redlock_operation,
) -> usize {
    guard_value(0, || arg_ref!(operation, 0).inner.notice_channels().len())
}

/// Notice channel `index` of a running acquisition: the channel on which releases of
/// its resource's key are announced (subscribe on every node while it waits). Copied
/// into `buffer` (`capacity` bytes); `*out_len` is the full length, and
/// `REDLOCK_BUFFER_TOO_SMALL` (nothing copied) when `capacity` is below it.
/// `REDLOCK_OUT_OF_RANGE` past the last channel.
#[no_mangle]
pub unsafe extern "C" fn redlock_operation_notice_channel(
    operation: *const redlock_operation,
    index: usize,
    buffer: *mut u8,
    capacity: usize,
    out_len: *mut usize,
) -> redlock_result {
    guard(|| {
        let op = arg_ref!(operation);
        let out_len = arg_out!(out_len);
        let channels = op.inner.notice_channels();
        let Some(channel) = channels.get(index) else {
            return R::REDLOCK_OUT_OF_RANGE;
        };
        out_len.write(channel.len());
        if capacity < channel.len() {
            return R::REDLOCK_BUFFER_TOO_SMALL;
        }
        if channel.is_empty() {
            return R::REDLOCK_OK;
        }
        if buffer.is_null() {
            return R::REDLOCK_NULL_PARAMETER;
        }
        // SAFETY: `buffer` is non-NULL and writable for `capacity >= channel.len()`
        // bytes by the crate's contract.
        unsafe { std::ptr::copy_nonoverlapping(channel.as_ptr(), buffer, channel.len()) };
        R::REDLOCK_OK
    })
}

/// What the operation does: a `REDLOCK_OPERATION_*` value (0 for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_operation_kind(operation: *const redlock_operation) -> u32 {
    guard_value(0, || match arg_ref!(operation, 0).inner.kind() {
        OperationKind::Acquire => REDLOCK_OPERATION_ACQUIRE,
        OperationKind::Extend => REDLOCK_OPERATION_EXTEND,
        OperationKind::Release => REDLOCK_OPERATION_RELEASE,
        OperationKind::Inspect => REDLOCK_OPERATION_INSPECT,
        _ => 0,
    })
}

/// True once the outcome is decided, polled or not (false for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_operation_is_finished(
    operation: *const redlock_operation,
) -> bool {
    guard_value(false, || arg_ref!(operation, false).inner.is_finished())
}

/// The attempt under way (or the last one made), from 1 (0 for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_operation_attempt(operation: *const redlock_operation) -> u32 {
    guard_value(0, || arg_ref!(operation, 0).inner.attempt())
}

/// The current attempt's token, borrowed: valid until the next input to the operation
/// or its free.
#[no_mangle]
pub unsafe extern "C" fn redlock_operation_token(
    operation: *const redlock_operation,
    out_token: *mut *const u8,
    out_token_len: *mut usize,
) -> redlock_result {
    guard(|| {
        let op = arg_ref!(operation);
        let (out_ptr, out_len) = (arg_out!(out_token), arg_out!(out_token_len));
        put_bytes(out_ptr, out_len, op.inner.token().as_bytes());
        R::REDLOCK_OK
    })
}

/// Number of nodes, N (0 for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_operation_node_count(
    operation: *const redlock_operation,
) -> usize {
    guard_value(0, || arg_ref!(operation, 0).inner.node_results().len())
}

/// The live view of node `index` in the current (or last) round, late replies
/// included: a `REDLOCK_NODE_*` value, and for `REDLOCK_NODE_ERROR` the error's text
/// (empty otherwise), borrowed: valid until the next call on the operation.
#[no_mangle]
pub unsafe extern "C" fn redlock_operation_node(
    operation: *mut redlock_operation,
    index: usize,
    out_kind: *mut u32,
    out_error: *mut *const u8,
    out_error_len: *mut usize,
) -> redlock_result {
    guard(|| {
        let op = arg_mut!(operation);
        let out_kind = arg_out!(out_kind);
        let (out_ptr, out_len) = (arg_out!(out_error), arg_out!(out_error_len));
        op.nodes = op.inner.node_results();
        let Some(node) = op.nodes.get(index) else {
            return R::REDLOCK_OUT_OF_RANGE;
        };
        let (kind, text) = node_kind(node);
        out_kind.write(kind);
        put_bytes(out_ptr, out_len, text);
        R::REDLOCK_OK
    })
}
