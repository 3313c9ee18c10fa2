//! Node links: one per node for as long as the caller's client lives. The core decides
//! the order of a node's commands, the bound in flight, what a stalled node still gets,
//! what is written again after a reconnection, and when to reconnect; the driver only
//! opens, writes, closes and delivers as the link says.
//!
//! Driving a link: after every input (`redlock_link_submit_current`,
//! `redlock_link_handle_*`), call `redlock_link_poll_output` until it gives
//! `REDLOCK_LINK_OUTPUT_NONE`, and call `redlock_link_handle_timeout` at
//! `redlock_link_poll_timeout`.

use redlock_core::{Delivery, Link, LinkCause, LinkOutput, Reply, RequestId, Time, Write, WriteId};

use crate::boundary::{free_handle, guard, guard_value, into_handle, put_args, put_bytes};
use crate::error::{redlock_result, redlock_result as R};
use crate::operation::redlock_operation;
use crate::reply::{redlock_reply, reply_from_parts, reply_kind};

/// Nothing to do until the next input (`redlock_link_poll_output`).
pub const REDLOCK_LINK_OUTPUT_NONE: u32 = 0;
/// Open a connection to the node (TLS, `AUTH`, `SELECT` included), then call
/// `redlock_link_handle_connected`, or `redlock_link_handle_closed` if it fails.
pub const REDLOCK_LINK_OUTPUT_CONNECT: u32 = 1;
/// Write the current command (`redlock_link_write*`) on the connection now, and hand its
/// reply to `redlock_link_handle_reply*` with its write id.
pub const REDLOCK_LINK_OUTPUT_WRITE: u32 = 2;
/// Close the current connection, or give up the attempt to open one that is under way
/// (it took longer than the link's connect timeout); report nothing more for it.
pub const REDLOCK_LINK_OUTPUT_CLOSE: u32 = 3;
/// Hand the current delivery (`redlock_link_delivery*`) to the operation it is tagged
/// with, for instance with `redlock_operation_handle_delivery`.
pub const REDLOCK_LINK_OUTPUT_DELIVER: u32 = 4;

/// The connection was refused (`redlock_link_handle_closed`).
pub const REDLOCK_LINK_CAUSE_REFUSED: u32 = 1;
/// Authentication failed (`AUTH`/`HELLO` refused, `NOAUTH`, `WRONGPASS`).
pub const REDLOCK_LINK_CAUSE_AUTH: u32 = 2;
/// The TLS handshake failed.
pub const REDLOCK_LINK_CAUSE_TLS: u32 = 3;
/// Connecting took too long.
pub const REDLOCK_LINK_CAUSE_TIMEOUT: u32 = 4;
/// Any other failure, or the peer closed the connection.
pub const REDLOCK_LINK_CAUSE_CLOSED: u32 = 5;

/// The most writes of one link awaiting their replies.
pub const REDLOCK_LINK_MAX_IN_FLIGHT: usize = 64;
/// The most commands one link keeps queued (not yet written).
pub const REDLOCK_LINK_MAX_QUEUED: usize = 1024;

enum Current {
    None,
    Connect,
    Write(Write),
    Close,
    Deliver(Delivery),
}

/// One node's command policy and connection state. Freed by `redlock_link_free`.
pub struct redlock_link {
    inner: Link,
    /// The output of the last poll; borrowed pointers into it stay valid until the next
    /// poll.
    current: Current,
    /// RESP encoding of the current write, built on request.
    resp: Vec<u8>,
    resp_ready: bool,
}

impl redlock_link {
    fn write(&self) -> Option<&Write> {
        match &self.current {
            Current::Write(write) => Some(write),
            _ => None,
        }
    }

    fn delivery(&self) -> Option<&Delivery> {
        match &self.current {
            Current::Deliver(delivery) => Some(delivery),
            _ => None,
        }
    }
}

/// The reply of the link's current delivery, for `redlock_operation_handle_delivery`.
pub(crate) fn current_delivery(link: &redlock_link) -> Option<(RequestId, &Reply)> {
    link.delivery()
        .map(|delivery| (delivery.request, &delivery.reply))
}

fn cause_from(cause: u32) -> Option<LinkCause> {
    Some(match cause {
        REDLOCK_LINK_CAUSE_REFUSED => LinkCause::Refused,
        REDLOCK_LINK_CAUSE_AUTH => LinkCause::Auth,
        REDLOCK_LINK_CAUSE_TLS => LinkCause::Tls,
        REDLOCK_LINK_CAUSE_TIMEOUT => LinkCause::Timeout,
        REDLOCK_LINK_CAUSE_CLOSED => LinkCause::Closed,
        _ => return None,
    })
}

/// A link with no connection yet. Free it with `redlock_link_free`.
#[no_mangle]
pub unsafe extern "C" fn redlock_link_new(out_link: *mut *mut redlock_link) -> redlock_result {
    guard(|| {
        let out = arg_out!(out_link);
        out.write(into_handle(redlock_link {
            inner: Link::new(),
            current: Current::None,
            resp: Vec::new(),
            resp_ready: false,
        }));
        R::REDLOCK_OK
    })
}

/// How long the link's connection attempts may take (TCP, TLS, `AUTH`, `SELECT`), in
/// milliseconds, before it gives one up with `REDLOCK_LINK_OUTPUT_CLOSE` and counts it
/// failed with `timeout`: the user's client's connect timeout when it has one; a new
/// link has `redlock_connect_timeout_default_ms()`. 0 is taken as 1 ms; an attempt
/// already under way keeps its limit.
#[no_mangle]
pub unsafe extern "C" fn redlock_link_set_connect_timeout(
    link: *mut redlock_link,
    timeout_ms: u64,
) -> redlock_result {
    guard(|| {
        let link = arg_mut!(link);
        link.inner
            .set_connect_timeout(core::time::Duration::from_millis(timeout_ms));
        R::REDLOCK_OK
    })
}

/// The link's connect timeout in milliseconds (0 for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_link_connect_timeout_ms(link: *const redlock_link) -> u64 {
    guard_value(0, || {
        let timeout = arg_ref!(link, 0).inner.connect_timeout();
        u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)
    })
}

/// Frees a link. NULL is ignored.
#[no_mangle]
pub unsafe extern "C" fn redlock_link_free(link: *mut redlock_link) {
    guard_value((), || {
        // SAFETY: by the crate's contract `link` is NULL or a live link handle.
        unsafe { free_handle(link) }
    })
}

/// Hands the operation's current `REDLOCK_OUTPUT_SEND` command to this link (the link
/// of the node `redlock_operation_command` names), at `now_us`. `tag` identifies the
/// operation to the caller and comes back with its replies (`redlock_link_delivery`).
/// The command is copied; each command is submitted once: `REDLOCK_NO_VALUE` when the
/// current output is no send or it was already submitted. Poll the link afterwards.
#[no_mangle]
pub unsafe extern "C" fn redlock_link_submit_current(
    link: *mut redlock_link,
    tag: u64,
    operation: *mut redlock_operation,
    now_us: u64,
) -> redlock_result {
    guard(|| {
        let link = arg_mut!(link);
        let op = arg_mut!(operation);
        let Some(command) = op.take_submission() else {
            return R::REDLOCK_NO_VALUE;
        };
        link.inner.submit(tag, command, Time::from_micros(now_us));
        R::REDLOCK_OK
    })
}

/// The connection asked for by `REDLOCK_LINK_OUTPUT_CONNECT` is ready (after TLS,
/// `AUTH`, `SELECT`), at `now_us`.
#[no_mangle]
pub unsafe extern "C" fn redlock_link_handle_connected(
    link: *mut redlock_link,
    now_us: u64,
) -> redlock_result {
    guard(|| {
        let link = arg_mut!(link);
        link.inner.handle_connected(Time::from_micros(now_us));
        R::REDLOCK_OK
    })
}

/// The connection closed, or could not be opened, at `now_us`: `cause` is a
/// `REDLOCK_LINK_CAUSE_*` value (`REDLOCK_INVALID_INPUT` otherwise) and the `text_len`
/// bytes at `text` say how (invalid UTF-8 becomes U+FFFD).
#[no_mangle]
pub unsafe extern "C" fn redlock_link_handle_closed(
    link: *mut redlock_link,
    cause: u32,
    text: *const u8,
    text_len: usize,
    now_us: u64,
) -> redlock_result {
    guard(|| {
        let link = arg_mut!(link);
        let text = arg_bytes!(text, text_len);
        let Some(cause) = cause_from(cause) else {
            return R::REDLOCK_INVALID_INPUT;
        };
        link.inner.handle_closed(
            cause,
            &String::from_utf8_lossy(text),
            Time::from_micros(now_us),
        );
        R::REDLOCK_OK
    })
}

/// The reply to write `write_id`, received at `now_us`, given as for
/// `redlock_operation_handle_reply` (any kind but `REDLOCK_REPLY_ARRAY`, which
/// `redlock_link_handle_reply_value` takes). A reply to a write of a connection closed
/// since, or to an id never written, is ignored.
#[no_mangle]
pub unsafe extern "C" fn redlock_link_handle_reply(
    link: *mut redlock_link,
    write_id: u64,
    kind: u32,
    integer: i64,
    text: *const u8,
    text_len: usize,
    now_us: u64,
) -> redlock_result {
    guard(|| {
        let link = arg_mut!(link);
        let text = arg_bytes!(text, text_len);
        let reply = match reply_from_parts(kind, integer, text) {
            Ok(reply) => reply,
            Err(code) => return code,
        };
        link.inner
            .handle_reply(WriteId(write_id), reply, Time::from_micros(now_us));
        R::REDLOCK_OK
    })
}

/// Like `redlock_link_handle_reply`, with a reply built by `redlock_reply_new*` or taken
/// from a `redlock_decoder`. The reply is copied; the caller still frees it.
#[no_mangle]
pub unsafe extern "C" fn redlock_link_handle_reply_value(
    link: *mut redlock_link,
    write_id: u64,
    reply: *const redlock_reply,
    now_us: u64,
) -> redlock_result {
    guard(|| {
        let link = arg_mut!(link);
        let reply = arg_ref!(reply);
        link.inner.handle_reply(
            WriteId(write_id),
            reply.inner.clone(),
            Time::from_micros(now_us),
        );
        R::REDLOCK_OK
    })
}

/// Time has reached `now_us`: drops what is past its time, closes a connection stalled
/// too long, reconnects when due. Calling it early is harmless.
#[no_mangle]
pub unsafe extern "C" fn redlock_link_handle_timeout(
    link: *mut redlock_link,
    now_us: u64,
) -> redlock_result {
    guard(|| {
        let link = arg_mut!(link);
        link.inner.handle_timeout(Time::from_micros(now_us));
        R::REDLOCK_OK
    })
}

/// The next output: writes a `REDLOCK_LINK_OUTPUT_*` value to `*out_kind`. Call it
/// after every input until it gives `REDLOCK_LINK_OUTPUT_NONE`. Each poll replaces the
/// previous output: pointers borrowed from it become invalid.
#[no_mangle]
pub unsafe extern "C" fn redlock_link_poll_output(
    link: *mut redlock_link,
    out_kind: *mut u32,
) -> redlock_result {
    guard(|| {
        let link = arg_mut!(link);
        let out_kind = arg_out!(out_kind);
        link.resp_ready = false;
        let (current, kind) = match link.inner.poll_output() {
            None => (Current::None, REDLOCK_LINK_OUTPUT_NONE),
            Some(LinkOutput::Connect) => (Current::Connect, REDLOCK_LINK_OUTPUT_CONNECT),
            Some(LinkOutput::Write(write)) => (Current::Write(write), REDLOCK_LINK_OUTPUT_WRITE),
            Some(LinkOutput::Close) => (Current::Close, REDLOCK_LINK_OUTPUT_CLOSE),
            Some(LinkOutput::Deliver(delivery)) => {
                (Current::Deliver(delivery), REDLOCK_LINK_OUTPUT_DELIVER)
            }
            // An output this version does not know: an error, not a dropped instruction.
            Some(_) => {
                link.current = Current::None;
                return R::REDLOCK_UNKNOWN_ERROR;
            }
        };
        link.current = current;
        out_kind.write(kind);
        R::REDLOCK_OK
    })
}

/// The current `REDLOCK_LINK_OUTPUT_WRITE`: the id to hand back with its reply, and its
/// number of arguments. `REDLOCK_NO_VALUE` when the current output is no write.
#[no_mangle]
pub unsafe extern "C" fn redlock_link_write(
    link: *const redlock_link,
    out_write_id: *mut u64,
    out_argc: *mut usize,
) -> redlock_result {
    guard(|| {
        let link = arg_ref!(link);
        let (out_id, out_argc) = (arg_out!(out_write_id), arg_out!(out_argc));
        let Some(write) = link.write() else {
            return R::REDLOCK_NO_VALUE;
        };
        out_id.write(write.id().0);
        out_argc.write(write.arg_count());
        R::REDLOCK_OK
    })
}

/// Argument `index` of the current write (0 is the command name), borrowed: valid until
/// the next poll or the link is freed. `REDLOCK_OUT_OF_RANGE` past the last.
#[no_mangle]
pub unsafe extern "C" fn redlock_link_write_arg(
    link: *const redlock_link,
    index: usize,
    out_arg: *mut *const u8,
    out_arg_len: *mut usize,
) -> redlock_result {
    guard(|| {
        let link = arg_ref!(link);
        let (out_ptr, out_len) = (arg_out!(out_arg), arg_out!(out_arg_len));
        let Some(write) = link.write() else {
            return R::REDLOCK_NO_VALUE;
        };
        match write.arg(index) {
            Some(arg) => {
                put_bytes(out_ptr, out_len, arg);
                R::REDLOCK_OK
            }
            None => R::REDLOCK_OUT_OF_RANGE,
        }
    })
}

/// Every argument of the current write at once, into caller arrays of `capacity`
/// elements, as `redlock_operation_command_args` does.
#[no_mangle]
pub unsafe extern "C" fn redlock_link_write_args(
    link: *const redlock_link,
    args: *mut *const u8,
    arg_lens: *mut usize,
    capacity: usize,
    out_argc: *mut usize,
) -> redlock_result {
    guard(|| {
        let link = arg_ref!(link);
        if args.is_null() || arg_lens.is_null() {
            return R::REDLOCK_NULL_PARAMETER;
        }
        let out_argc = arg_out!(out_argc);
        let Some(write) = link.write() else {
            return R::REDLOCK_NO_VALUE;
        };
        // SAFETY: both arrays were checked non-NULL above and are writable for
        // `capacity` elements by the crate's contract.
        let argc = match unsafe { put_args(write.args(), args, arg_lens, capacity) } {
            Ok(argc) => argc,
            Err(code) => return code,
        };
        out_argc.write(argc);
        R::REDLOCK_OK
    })
}

/// The current write encoded in RESP, ready for the socket; borrowed: valid until the
/// next poll or the link is freed.
#[no_mangle]
pub unsafe extern "C" fn redlock_link_write_resp(
    link: *mut redlock_link,
    out_bytes: *mut *const u8,
    out_bytes_len: *mut usize,
) -> redlock_result {
    guard(|| {
        let link = arg_mut!(link);
        let (out_ptr, out_len) = (arg_out!(out_bytes), arg_out!(out_bytes_len));
        let Current::Write(write) = &link.current else {
            return R::REDLOCK_NO_VALUE;
        };
        if !link.resp_ready {
            link.resp.clear();
            write.encode_resp(&mut link.resp);
            link.resp_ready = true;
        }
        put_bytes(out_ptr, out_len, &link.resp);
        R::REDLOCK_OK
    })
}

/// The current `REDLOCK_LINK_OUTPUT_DELIVER`: the tag given at submission, the request
/// id to hand to the operation, and the reply: its `REDLOCK_REPLY_*` kind, its integer
/// (0 unless an integer) and its text or bytes (empty unless a status, bulk, error or
/// connection failure), borrowed: valid until the next poll or the link is freed. An
/// array reply is read with `redlock_link_delivery_reply` (or handed over whole with
/// `redlock_operation_handle_delivery`). `REDLOCK_NO_VALUE` when the current output is
/// no delivery.
#[no_mangle]
pub unsafe extern "C" fn redlock_link_delivery(
    link: *const redlock_link,
    out_tag: *mut u64,
    out_request_id: *mut u64,
    out_reply_kind: *mut u32,
    out_integer: *mut i64,
    out_text: *mut *const u8,
    out_text_len: *mut usize,
) -> redlock_result {
    guard(|| {
        let link = arg_ref!(link);
        let (out_tag, out_request) = (arg_out!(out_tag), arg_out!(out_request_id));
        let (out_kind, out_integer) = (arg_out!(out_reply_kind), arg_out!(out_integer));
        let (out_ptr, out_len) = (arg_out!(out_text), arg_out!(out_text_len));
        let Some(delivery) = link.delivery() else {
            return R::REDLOCK_NO_VALUE;
        };
        let reply = &delivery.reply;
        let kind = reply_kind(reply);
        if kind == 0 {
            return R::REDLOCK_UNKNOWN_ERROR;
        }
        let (integer, bytes): (i64, &[u8]) = match reply {
            Reply::Integer(n) => (*n, &[]),
            Reply::Status(text) | Reply::Error(text) | Reply::ConnectionFailed(text) => {
                (0, text.as_bytes())
            }
            Reply::Bulk(bytes) => (0, bytes),
            _ => (0, &[]),
        };
        out_tag.write(delivery.tag);
        out_request.write(delivery.request.0);
        out_kind.write(kind);
        out_integer.write(integer);
        put_bytes(out_ptr, out_len, bytes);
        R::REDLOCK_OK
    })
}

/// A copy of the current delivery's reply (any kind, arrays included) as a handle of its
/// own, freed by `redlock_reply_free`. `REDLOCK_NO_VALUE` when the current output is no
/// delivery.
#[no_mangle]
pub unsafe extern "C" fn redlock_link_delivery_reply(
    link: *const redlock_link,
    out_reply: *mut *mut redlock_reply,
) -> redlock_result {
    guard(|| {
        let link = arg_ref!(link);
        let out = arg_out!(out_reply);
        let Some(delivery) = link.delivery() else {
            return R::REDLOCK_NO_VALUE;
        };
        out.write(into_handle(redlock_reply {
            inner: delivery.reply.clone(),
        }));
        R::REDLOCK_OK
    })
}

/// When `redlock_link_handle_timeout` is next due: `*out_due` true and `*out_at_us` the
/// instant, or `*out_due` false (and `*out_at_us` 0) when nothing waits on time.
#[no_mangle]
pub unsafe extern "C" fn redlock_link_poll_timeout(
    link: *const redlock_link,
    out_due: *mut bool,
    out_at_us: *mut u64,
) -> redlock_result {
    guard(|| {
        let link = arg_ref!(link);
        let (out_due, out_at) = (arg_out!(out_due), arg_out!(out_at_us));
        let at = link.inner.poll_timeout();
        out_due.write(at.is_some());
        out_at.write(at.map_or(0, Time::as_micros));
        R::REDLOCK_OK
    })
}

/// True when nothing is queued or awaiting a reply: the connection may be closed
/// (true for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_link_is_idle(link: *const redlock_link) -> bool {
    guard_value(true, || arg_ref!(link, true).inner.is_idle())
}

/// True while a written command is unanswered past its deadline at `now_us` (false for
/// NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_link_is_stalled(link: *const redlock_link, now_us: u64) -> bool {
    guard_value(false, || {
        arg_ref!(link, false)
            .inner
            .is_stalled(Time::from_micros(now_us))
    })
}

/// True while a connection is open (false for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_link_is_open(link: *const redlock_link) -> bool {
    guard_value(false, || arg_ref!(link, false).inner.is_open())
}

/// Writes awaiting their replies, the script loads included (0 for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_link_in_flight(link: *const redlock_link) -> usize {
    guard_value(0, || arg_ref!(link, 0).inner.in_flight())
}

/// Commands queued, not yet written (0 for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_link_queued(link: *const redlock_link) -> usize {
    guard_value(0, || arg_ref!(link, 0).inner.queued())
}

/// Tokens whose release this link still owes (0 for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_link_owed(link: *const redlock_link) -> usize {
    guard_value(0, || arg_ref!(link, 0).inner.owed())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_are_the_cores() {
        assert_eq!(REDLOCK_LINK_MAX_IN_FLIGHT, redlock_core::MAX_IN_FLIGHT);
        assert_eq!(REDLOCK_LINK_MAX_QUEUED, redlock_core::MAX_QUEUED);
        for cause in 1..=5 {
            assert!(cause_from(cause).is_some());
        }
        assert!(cause_from(0).is_none());
        assert!(cause_from(6).is_none());
    }
}
