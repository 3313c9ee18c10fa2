//! Events for observability hooks: what an operation reports (`poll_event`), with the
//! same kinds and fields in every binding.

use std::ffi::{c_char, CStr};

use redlock_core::{EventKind, OperationKind};

use crate::boundary::{guard, guard_value, put_bytes};
use crate::class::cause_number;
use crate::error::{redlock_result, redlock_result as R};
use crate::operation::{
    redlock_operation, REDLOCK_OPERATION_ACQUIRE, REDLOCK_OPERATION_EXTEND,
    REDLOCK_OPERATION_INSPECT, REDLOCK_OPERATION_RELEASE,
};
use crate::outcome::{micros, node_kind, write_reason};

/// The lock was acquired (`redlock_operation_poll_event`).
pub const REDLOCK_EVENT_ACQUIRED: u32 = 1;
/// Every attempt failed.
pub const REDLOCK_EVENT_NOT_ACQUIRED: u32 = 2;
/// An attempt failed; another starts at `redlock_operation_event_retry_at`.
pub const REDLOCK_EVENT_RETRY: u32 = 3;
/// The lock was extended.
pub const REDLOCK_EVENT_EXTENDED: u32 = 4;
/// An extension failed.
pub const REDLOCK_EVENT_NOT_EXTENDED: u32 = 5;
/// A held lock is lost: bindings report it from the keep-alive's `REDLOCK_KEEPALIVE_LOST`
/// (operations never emit it).
pub const REDLOCK_EVENT_LOST: u32 = 6;
/// The lock was released.
pub const REDLOCK_EVENT_RELEASED: u32 = 7;
/// Fewer than a quorum confirmed the release.
pub const REDLOCK_EVENT_NOT_RELEASED: u32 = 8;
/// An inspection said who holds the lock.
pub const REDLOCK_EVENT_INSPECTED: u32 = 9;
/// An inspection could not say.
pub const REDLOCK_EVENT_NOT_INSPECTED: u32 = 10;
/// One node failed in a round: `redlock_operation_event_node`.
pub const REDLOCK_EVENT_NODE_FAILED: u32 = 11;

/// The stable snake_case name of a `REDLOCK_EVENT_*` value (`"acquired"`, `"retry"`,
/// `"node_failed"`, ...), NULL for a number that is none. Static; never freed.
#[no_mangle]
pub extern "C" fn redlock_event_kind_name(kind: u32) -> *const c_char {
    guard_value(std::ptr::null(), || {
        EventKind::ALL
            .iter()
            .find(|k| k.number() == kind)
            .map_or(std::ptr::null(), |k| name(*k).as_ptr())
    })
}

fn name(kind: EventKind) -> &'static CStr {
    match kind {
        EventKind::Acquired => c"acquired",
        EventKind::NotAcquired => c"not_acquired",
        EventKind::Retry => c"retry",
        EventKind::Extended => c"extended",
        EventKind::NotExtended => c"not_extended",
        EventKind::Lost => c"lost",
        EventKind::Released => c"released",
        EventKind::NotReleased => c"not_released",
        EventKind::Inspected => c"inspected",
        EventKind::NotInspected => c"not_inspected",
        EventKind::NodeFailed => c"node_failed",
        _ => c"unknown",
    }
}

/// Takes the operation's next event (oldest first) into the handle, where the
/// `redlock_operation_event*` getters read it until the next call, and writes its
/// `REDLOCK_EVENT_*` kind. `REDLOCK_NO_VALUE` (and no current event) when there is none.
/// Drain events after each input, next to `redlock_operation_poll_output`; an operation
/// keeps at most 64 unread ones.
#[no_mangle]
pub unsafe extern "C" fn redlock_operation_poll_event(
    operation: *mut redlock_operation,
    out_kind: *mut u32,
) -> redlock_result {
    guard(|| {
        let op = arg_mut!(operation);
        let out = arg_out!(out_kind);
        op.event = op.inner.poll_event();
        match &op.event {
            Some(event) => {
                out.write(event.kind.number());
                R::REDLOCK_OK
            }
            None => R::REDLOCK_NO_VALUE,
        }
    })
}

/// The current event's timing and attempt: when it happened (`*out_at_us`), how long
/// after the operation started (`*out_elapsed_us`), the attempt it concerns (from 1) and
/// the operation's `REDLOCK_OPERATION_*` kind. `REDLOCK_NO_VALUE` without a current event.
#[no_mangle]
pub unsafe extern "C" fn redlock_operation_event(
    operation: *const redlock_operation,
    out_at_us: *mut u64,
    out_elapsed_us: *mut u64,
    out_attempt: *mut u32,
    out_operation_kind: *mut u32,
) -> redlock_result {
    guard(|| {
        let op = arg_ref!(operation);
        let (at, elapsed) = (arg_out!(out_at_us), arg_out!(out_elapsed_us));
        let (attempt, kind) = (arg_out!(out_attempt), arg_out!(out_operation_kind));
        let Some(event) = &op.event else {
            return R::REDLOCK_NO_VALUE;
        };
        at.write(event.at.as_micros());
        elapsed.write(micros(event.elapsed));
        attempt.write(event.attempt);
        kind.write(match event.operation {
            Some(OperationKind::Acquire) => REDLOCK_OPERATION_ACQUIRE,
            Some(OperationKind::Extend) => REDLOCK_OPERATION_EXTEND,
            Some(OperationKind::Release) => REDLOCK_OPERATION_RELEASE,
            Some(OperationKind::Inspect) => REDLOCK_OPERATION_INSPECT,
            _ => 0,
        });
        R::REDLOCK_OK
    })
}

/// Why the attempt or operation failed (retry, not acquired, not extended): a
/// `REDLOCK_REASON_*` value. `REDLOCK_NO_VALUE` for other events or none.
#[no_mangle]
pub unsafe extern "C" fn redlock_operation_event_reason(
    operation: *const redlock_operation,
    out_reason: *mut u32,
) -> redlock_result {
    guard(|| {
        let op = arg_ref!(operation);
        let out = arg_out!(out_reason);
        match op.event.as_ref().and_then(|e| e.reason) {
            Some(reason) => write_reason(reason, out),
            None => R::REDLOCK_NO_VALUE,
        }
    })
}

/// When the next attempt starts (retry events). `REDLOCK_NO_VALUE` otherwise.
#[no_mangle]
pub unsafe extern "C" fn redlock_operation_event_retry_at(
    operation: *const redlock_operation,
    out_at_us: *mut u64,
) -> redlock_result {
    guard(|| {
        let op = arg_ref!(operation);
        let out = arg_out!(out_at_us);
        match op.event.as_ref().and_then(|e| e.retry_at) {
            Some(at) => {
                out.write(at.as_micros());
                R::REDLOCK_OK
            }
            None => R::REDLOCK_NO_VALUE,
        }
    })
}

/// The failed node of a node-failed event (its index in the configuration) and its
/// `REDLOCK_NODE_CAUSE_*` cause. `REDLOCK_NO_VALUE` for other events or none.
#[no_mangle]
pub unsafe extern "C" fn redlock_operation_event_node(
    operation: *const redlock_operation,
    out_node: *mut usize,
    out_cause: *mut u32,
) -> redlock_result {
    guard(|| {
        let op = arg_ref!(operation);
        let (node, cause) = (arg_out!(out_node), arg_out!(out_cause));
        match op.event.as_ref().and_then(|e| Some((e.node?, e.cause?))) {
            Some((index, why)) => {
                node.write(index);
                cause.write(cause_number(why));
                R::REDLOCK_OK
            }
            None => R::REDLOCK_NO_VALUE,
        }
    })
}

/// The number of per-node results the current event carries (N for outcomes and
/// retries, 1 for a node failure, 0 without a current event or NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_operation_event_node_count(
    operation: *const redlock_operation,
) -> usize {
    guard_value(0, || {
        arg_ref!(operation, 0)
            .event
            .as_ref()
            .map_or(0, |e| e.nodes.len())
    })
}

/// Per-node result `index` of the current event, as `redlock_outcome_node` gives one:
/// a `REDLOCK_NODE_*` kind and, for errors, the text (borrowed until the next
/// `redlock_operation_poll_event`). `REDLOCK_OUT_OF_RANGE` past the last.
#[no_mangle]
pub unsafe extern "C" fn redlock_operation_event_node_result(
    operation: *const redlock_operation,
    index: usize,
    out_kind: *mut u32,
    out_text: *mut *const u8,
    out_text_len: *mut usize,
) -> redlock_result {
    guard(|| {
        let op = arg_ref!(operation);
        let out_kind = arg_out!(out_kind);
        let (out_ptr, out_len) = (arg_out!(out_text), arg_out!(out_text_len));
        let Some(event) = &op.event else {
            return R::REDLOCK_NO_VALUE;
        };
        let Some(result) = event.nodes.get(index) else {
            return R::REDLOCK_OUT_OF_RANGE;
        };
        let (kind, text) = node_kind(result);
        out_kind.write(kind);
        put_bytes(out_ptr, out_len, text);
        R::REDLOCK_OK
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_names_are_the_cores() {
        for kind in EventKind::ALL {
            let name_ptr = redlock_event_kind_name(kind.number());
            assert!(!name_ptr.is_null());
            // SAFETY: a non-NULL name is a static NUL-terminated string.
            let text = unsafe { CStr::from_ptr(name_ptr) };
            assert_eq!(text.to_str().ok(), Some(kind.code()));
        }
        assert!(redlock_event_kind_name(0).is_null());
        assert!(redlock_event_kind_name(12).is_null());
        let constants = [
            REDLOCK_EVENT_ACQUIRED,
            REDLOCK_EVENT_NOT_ACQUIRED,
            REDLOCK_EVENT_RETRY,
            REDLOCK_EVENT_EXTENDED,
            REDLOCK_EVENT_NOT_EXTENDED,
            REDLOCK_EVENT_LOST,
            REDLOCK_EVENT_RELEASED,
            REDLOCK_EVENT_NOT_RELEASED,
            REDLOCK_EVENT_INSPECTED,
            REDLOCK_EVENT_NOT_INSPECTED,
            REDLOCK_EVENT_NODE_FAILED,
        ];
        let numbers: Vec<u32> = EventKind::ALL.iter().map(|k| k.number()).collect();
        assert_eq!(constants.to_vec(), numbers);
    }
}
