//! Notice subscriptions: one object per client deciding when each node's subscriber
//! connection opens, which channels it subscribes to, when it unsubscribes and closes,
//! and how long a failed one stays closed. The driver only opens, subscribes,
//! unsubscribes and closes as it says, and hands notices and confirmations to its
//! waiting operations.
//!
//! Driving it: after every input (`redlock_subscriptions_want`, `_unwant`,
//! `_handle_*`), call `redlock_subscriptions_poll_output` until it gives
//! `REDLOCK_SUBSCRIBER_OUTPUT_NONE`, and call `redlock_subscriptions_handle_timeout` at
//! `redlock_subscriptions_poll_timeout`.

use std::time::Duration;

use redlock_core::{SubscriberOutput, Subscriptions, Time, UsageError};

use crate::boundary::{free_handle, guard, guard_value, into_handle, put_bytes};
use crate::error::{redlock_result, redlock_result as R};

/// Nothing to do until the next input (`redlock_subscriptions_poll_output`).
pub const REDLOCK_SUBSCRIBER_OUTPUT_NONE: u32 = 0;
/// Open the node's subscriber connection, then call
/// `redlock_subscriptions_handle_opened`, or `redlock_subscriptions_handle_lost` if it
/// fails.
pub const REDLOCK_SUBSCRIBER_OUTPUT_OPEN: u32 = 1;
/// Subscribe the current channel (`redlock_subscriptions_channel`) on the node's
/// subscriber connection; hand its confirmation to
/// `redlock_subscriptions_handle_confirmed`, a refusal to
/// `redlock_subscriptions_handle_refused`.
pub const REDLOCK_SUBSCRIBER_OUTPUT_SUBSCRIBE: u32 = 2;
/// Unsubscribe the current channel there; its confirmation needs no input.
pub const REDLOCK_SUBSCRIBER_OUTPUT_UNSUBSCRIBE: u32 = 3;
/// Close the node's subscriber connection; report nothing more for it.
pub const REDLOCK_SUBSCRIBER_OUTPUT_CLOSE: u32 = 4;

/// A client's notice subscriptions. Freed by `redlock_subscriptions_free`.
pub struct redlock_subscriptions {
    inner: Subscriptions,
    /// The channel of the last polled output; borrowed until the next poll.
    channel: Option<Vec<u8>>,
}

/// Subscriptions over `nodes` nodes. A subscriber connection that neither opens nor
/// confirms a subscription within `timeout_ms` (the driver's connect timeout; 0 is
/// taken as 1) counts as lost. `REDLOCK_CONFIG_NO_NODES` / `_TOO_MANY_NODES` for a bad
/// node count. Free it with `redlock_subscriptions_free`.
#[no_mangle]
pub unsafe extern "C" fn redlock_subscriptions_new(
    nodes: usize,
    timeout_ms: u64,
    out_subscriptions: *mut *mut redlock_subscriptions,
) -> redlock_result {
    guard(|| {
        let out = arg_out!(out_subscriptions);
        match Subscriptions::new(nodes, Duration::from_millis(timeout_ms)) {
            Ok(inner) => {
                out.write(into_handle(redlock_subscriptions {
                    inner,
                    channel: None,
                }));
                R::REDLOCK_OK
            }
            Err(error) => error.into(),
        }
    })
}

/// Frees subscriptions. NULL is ignored.
#[no_mangle]
pub unsafe extern "C" fn redlock_subscriptions_free(subscriptions: *mut redlock_subscriptions) {
    guard_value((), || {
        // SAFETY: by the crate's contract `subscriptions` is NULL or a live handle.
        unsafe { free_handle(subscriptions) }
    })
}

/// One more listener on `channel` (an acquisition started listening), at `now_us`.
#[no_mangle]
pub unsafe extern "C" fn redlock_subscriptions_want(
    subscriptions: *mut redlock_subscriptions,
    channel: *const u8,
    channel_len: usize,
    now_us: u64,
) -> redlock_result {
    // SAFETY: the caller's pointers, as this function's contract says.
    unsafe {
        on_channel(subscriptions, channel, channel_len, |inner, channel| {
            inner.want(channel, Time::from_micros(now_us));
            R::REDLOCK_OK
        })
    }
}

/// One listener fewer on `channel`: once none is left it lingers, then is
/// unsubscribed. `REDLOCK_NO_VALUE` (nothing changes) for a channel nobody listens on.
#[no_mangle]
pub unsafe extern "C" fn redlock_subscriptions_unwant(
    subscriptions: *mut redlock_subscriptions,
    channel: *const u8,
    channel_len: usize,
    now_us: u64,
) -> redlock_result {
    // SAFETY: the caller's pointers, as this function's contract says.
    unsafe {
        on_channel(subscriptions, channel, channel_len, |inner, channel| {
            if inner.unwant(channel, Time::from_micros(now_us)) {
                R::REDLOCK_OK
            } else {
                R::REDLOCK_NO_VALUE
            }
        })
    }
}

/// Node `node`'s subscriber connection opened. `REDLOCK_UNKNOWN_NODE` for a node
/// outside `0..nodes`.
#[no_mangle]
pub unsafe extern "C" fn redlock_subscriptions_handle_opened(
    subscriptions: *mut redlock_subscriptions,
    node: usize,
    now_us: u64,
) -> redlock_result {
    // SAFETY: the caller's pointer, as this function's contract says.
    unsafe { node_input(subscriptions, node, now_us, Subscriptions::handle_opened) }
}

/// Node `node`'s subscriber connection could not be opened, or dropped.
#[no_mangle]
pub unsafe extern "C" fn redlock_subscriptions_handle_lost(
    subscriptions: *mut redlock_subscriptions,
    node: usize,
    now_us: u64,
) -> redlock_result {
    // SAFETY: the caller's pointer, as this function's contract says.
    unsafe { node_input(subscriptions, node, now_us, Subscriptions::handle_lost) }
}

/// Node `node` refused a `SUBSCRIBE`: the connection is to be closed and counts as lost.
#[no_mangle]
pub unsafe extern "C" fn redlock_subscriptions_handle_refused(
    subscriptions: *mut redlock_subscriptions,
    node: usize,
    now_us: u64,
) -> redlock_result {
    // SAFETY: the caller's pointer, as this function's contract says.
    unsafe { node_input(subscriptions, node, now_us, Subscriptions::handle_refused) }
}

/// Node `node` confirmed the subscription to `channel`. `*out_counts` is true when it
/// confirms one asked for on the current connection: hand it to the channel's waiting
/// operations then (`redlock_operation_handle_subscribed`); false for a stale one.
#[no_mangle]
pub unsafe extern "C" fn redlock_subscriptions_handle_confirmed(
    subscriptions: *mut redlock_subscriptions,
    node: usize,
    channel: *const u8,
    channel_len: usize,
    now_us: u64,
    out_counts: *mut bool,
) -> redlock_result {
    guard(|| {
        let s = arg_mut!(subscriptions);
        let channel = arg_bytes!(channel, channel_len);
        let out_counts = arg_out!(out_counts);
        match s
            .inner
            .handle_confirmed(node, channel, Time::from_micros(now_us))
        {
            Ok(counts) => {
                out_counts.write(counts);
                R::REDLOCK_OK
            }
            Err(error) => error.into(),
        }
    })
}

/// Time has reached `now_us`: lingering channels come due, connections that did not
/// open or confirm in time count as lost, paused ones open again. Calling it early is
/// harmless.
#[no_mangle]
pub unsafe extern "C" fn redlock_subscriptions_handle_timeout(
    subscriptions: *mut redlock_subscriptions,
    now_us: u64,
) -> redlock_result {
    guard(|| {
        let s = arg_mut!(subscriptions);
        s.inner.handle_timeout(Time::from_micros(now_us));
        R::REDLOCK_OK
    })
}

/// The next output: writes a `REDLOCK_SUBSCRIBER_OUTPUT_*` value to `*out_kind` and
/// the node it is for to `*out_node` (0 with `REDLOCK_SUBSCRIBER_OUTPUT_NONE`). Call it
/// after every input until it gives `REDLOCK_SUBSCRIBER_OUTPUT_NONE`. Each poll
/// replaces the previous output: a channel borrowed from it becomes invalid.
#[no_mangle]
pub unsafe extern "C" fn redlock_subscriptions_poll_output(
    subscriptions: *mut redlock_subscriptions,
    out_kind: *mut u32,
    out_node: *mut usize,
) -> redlock_result {
    guard(|| {
        let s = arg_mut!(subscriptions);
        let (out_kind, out_node) = (arg_out!(out_kind), arg_out!(out_node));
        let (kind, node, channel) = match s.inner.poll_output() {
            None => (REDLOCK_SUBSCRIBER_OUTPUT_NONE, 0, None),
            Some(SubscriberOutput::Open { node }) => (REDLOCK_SUBSCRIBER_OUTPUT_OPEN, node, None),
            Some(SubscriberOutput::Subscribe { node, channel }) => {
                (REDLOCK_SUBSCRIBER_OUTPUT_SUBSCRIBE, node, Some(channel))
            }
            Some(SubscriberOutput::Unsubscribe { node, channel }) => {
                (REDLOCK_SUBSCRIBER_OUTPUT_UNSUBSCRIBE, node, Some(channel))
            }
            Some(SubscriberOutput::Close { node }) => (REDLOCK_SUBSCRIBER_OUTPUT_CLOSE, node, None),
        };
        s.channel = channel;
        out_kind.write(kind);
        out_node.write(node);
        R::REDLOCK_OK
    })
}

/// The channel of the current `SUBSCRIBE` or `UNSUBSCRIBE` output, borrowed until the
/// next poll. `REDLOCK_NO_VALUE` for other outputs.
#[no_mangle]
pub unsafe extern "C" fn redlock_subscriptions_channel(
    subscriptions: *const redlock_subscriptions,
    out_ptr: *mut *const u8,
    out_len: *mut usize,
) -> redlock_result {
    guard(|| {
        let s = arg_ref!(subscriptions);
        let (out_ptr, out_len) = (arg_out!(out_ptr), arg_out!(out_len));
        let Some(channel) = s.channel.as_deref() else {
            return R::REDLOCK_NO_VALUE;
        };
        put_bytes(out_ptr, out_len, channel);
        R::REDLOCK_OK
    })
}

/// When `redlock_subscriptions_handle_timeout` is next due: `*out_due` true and
/// `*out_at_us` the instant, or `*out_due` false (and `*out_at_us` 0).
#[no_mangle]
pub unsafe extern "C" fn redlock_subscriptions_poll_timeout(
    subscriptions: *const redlock_subscriptions,
    out_due: *mut bool,
    out_at_us: *mut u64,
) -> redlock_result {
    guard(|| {
        let s = arg_ref!(subscriptions);
        let (out_due, out_at) = (arg_out!(out_due), arg_out!(out_at_us));
        let at = s.inner.poll_timeout();
        out_due.write(at.is_some());
        out_at.write(at.map_or(0, Time::as_micros));
        R::REDLOCK_OK
    })
}

/// Whether node `node`'s subscriber connection is open (false for NULL or an unknown
/// node).
#[no_mangle]
pub unsafe extern "C" fn redlock_subscriptions_is_open(
    subscriptions: *const redlock_subscriptions,
    node: usize,
) -> bool {
    guard_value(false, || arg_ref!(subscriptions, false).inner.is_open(node))
}

/// The number of channels wanted or lingering (0 for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_subscriptions_channel_count(
    subscriptions: *const redlock_subscriptions,
) -> usize {
    guard_value(0, || arg_ref!(subscriptions, 0).inner.channels())
}

/// A node's connection event, handed to `input`.
///
/// # Safety
/// `subscriptions` is NULL or a live handle nothing else accesses during the call.
unsafe fn node_input(
    subscriptions: *mut redlock_subscriptions,
    node: usize,
    now_us: u64,
    input: fn(&mut Subscriptions, usize, Time) -> Result<(), UsageError>,
) -> redlock_result {
    guard(|| {
        let s = arg_mut!(subscriptions);
        match input(&mut s.inner, node, Time::from_micros(now_us)) {
            Ok(()) => R::REDLOCK_OK,
            Err(error) => error.into(),
        }
    })
}

/// `change` applied to the handle and the channel's bytes, with both checked first.
///
/// # Safety
/// `subscriptions` is NULL or a live handle nothing else accesses during the call;
/// `channel` is NULL or points to `channel_len` readable bytes.
unsafe fn on_channel(
    subscriptions: *mut redlock_subscriptions,
    channel: *const u8,
    channel_len: usize,
    change: impl FnOnce(&mut Subscriptions, &[u8]) -> redlock_result,
) -> redlock_result {
    guard(|| {
        let s = arg_mut!(subscriptions);
        let channel = arg_bytes!(channel, channel_len);
        change(&mut s.inner, channel)
    })
}
