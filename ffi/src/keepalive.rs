//! Keep-alive: the core's one policy for when to extend a held lock, when to retry a
//! failed extension, and when the lock counts as lost.
//!
//! Driving it: after creating it, after every outcome or failure handed in, and at every
//! instant it names, call `redlock_keepalive_poll` and act on the action:
//! `REDLOCK_KEEPALIVE_EXTEND` (start `redlock_client_extend` of `redlock_keepalive_lease`
//! now and hand its outcome to `redlock_keepalive_handle_outcome`, or report
//! `redlock_keepalive_handle_failure` if the driver could not run it),
//! `REDLOCK_KEEPALIVE_WAIT` (poll again at the instant, or when an outcome arrives),
//! `REDLOCK_KEEPALIVE_LOST` (final: tell the holder why), `REDLOCK_KEEPALIVE_STOPPED`
//! (final).

use redlock_core::{KeepAlive, KeepAliveAction, LostReason, Time};

use crate::boundary::{free_handle, guard, guard_value, into_handle};
use crate::client::{redlock_client, redlock_lease};
use crate::error::{redlock_result, redlock_result as R};
use crate::outcome::redlock_outcome;

/// Start an extension of the keep-alive's lease now (`redlock_keepalive_poll`).
pub const REDLOCK_KEEPALIVE_EXTEND: u32 = 1;
/// Nothing until the instant given (or until an outcome arrives); then poll again.
pub const REDLOCK_KEEPALIVE_WAIT: u32 = 2;
/// The lock is lost (final); the reason is a `REDLOCK_LOST_*` value.
pub const REDLOCK_KEEPALIVE_LOST: u32 = 3;
/// Keep-alive was stopped (final).
pub const REDLOCK_KEEPALIVE_STOPPED: u32 = 4;

/// An extension found the keys holding another token: someone else may hold the lock.
pub const REDLOCK_LOST_TAKEN: u32 = 1;
/// An extension found the keys gone and nobody else holding them.
pub const REDLOCK_LOST_NOT_HELD: u32 = 2;
/// The validity ran out before an extension succeeded.
pub const REDLOCK_LOST_EXPIRED: u32 = 3;
/// The validity ran out after the bound on extensions was reached.
pub const REDLOCK_LOST_EXTENSION_LIMIT: u32 = 4;

/// Keeps one lock alive. Freed by `redlock_keepalive_free`.
pub struct redlock_keepalive {
    inner: KeepAlive,
}

fn lost_number(reason: LostReason) -> u32 {
    match reason {
        LostReason::Taken => REDLOCK_LOST_TAKEN,
        LostReason::NotHeld => REDLOCK_LOST_NOT_HELD,
        LostReason::Expired => REDLOCK_LOST_EXPIRED,
        LostReason::ExtensionLimit => REDLOCK_LOST_EXTENSION_LIMIT,
        // A reason this version does not know still means lost.
        _ => REDLOCK_LOST_EXPIRED,
    }
}

/// Keep-alive for `lease` under `client`'s configuration (the one the lock was acquired
/// with). The lease is copied. Free it with `redlock_keepalive_free`.
#[no_mangle]
pub unsafe extern "C" fn redlock_keepalive_new(
    client: *const redlock_client,
    lease: *const redlock_lease,
    out_keepalive: *mut *mut redlock_keepalive,
) -> redlock_result {
    guard(|| {
        let client = arg_ref!(client);
        let lease = arg_ref!(lease);
        let out = arg_out!(out_keepalive);
        out.write(into_handle(redlock_keepalive {
            inner: KeepAlive::new(client.inner.config(), lease.inner.clone()),
        }));
        R::REDLOCK_OK
    })
}

/// Frees a keep-alive. NULL is ignored.
#[no_mangle]
pub unsafe extern "C" fn redlock_keepalive_free(keepalive: *mut redlock_keepalive) {
    guard_value((), || {
        // SAFETY: by the crate's contract `keepalive` is NULL or a live keep-alive handle.
        unsafe { free_handle(keepalive) }
    })
}

/// What to do at `now_us`: a `REDLOCK_KEEPALIVE_*` value into `*out_action`; for
/// `REDLOCK_KEEPALIVE_WAIT` the instant into `*out_until_us` (0 otherwise); for
/// `REDLOCK_KEEPALIVE_LOST` a `REDLOCK_LOST_*` value into `*out_lost_reason` (0
/// otherwise).
#[no_mangle]
pub unsafe extern "C" fn redlock_keepalive_poll(
    keepalive: *mut redlock_keepalive,
    now_us: u64,
    out_action: *mut u32,
    out_until_us: *mut u64,
    out_lost_reason: *mut u32,
) -> redlock_result {
    guard(|| {
        let keepalive = arg_mut!(keepalive);
        let out_action = arg_out!(out_action);
        let out_until = arg_out!(out_until_us);
        let out_reason = arg_out!(out_lost_reason);
        let (action, until, reason) = match keepalive.inner.poll(Time::from_micros(now_us)) {
            KeepAliveAction::Extend => (REDLOCK_KEEPALIVE_EXTEND, 0, 0),
            KeepAliveAction::WaitUntil(at) => (REDLOCK_KEEPALIVE_WAIT, at.as_micros(), 0),
            KeepAliveAction::Lost(reason) => (REDLOCK_KEEPALIVE_LOST, 0, lost_number(reason)),
            KeepAliveAction::Stopped => (REDLOCK_KEEPALIVE_STOPPED, 0, 0),
            _ => return R::REDLOCK_UNKNOWN_ERROR,
        };
        out_action.write(action);
        out_until.write(until);
        out_reason.write(reason);
        R::REDLOCK_OK
    })
}

/// Hands in the outcome of an extension of this lock (the one
/// `REDLOCK_KEEPALIVE_EXTEND` asked for, or one made by hand) at `now_us`. Outcomes of
/// other kinds change nothing. The outcome is read, not taken: the caller still frees it.
#[no_mangle]
pub unsafe extern "C" fn redlock_keepalive_handle_outcome(
    keepalive: *mut redlock_keepalive,
    outcome: *const redlock_outcome,
    now_us: u64,
) -> redlock_result {
    guard(|| {
        let keepalive = arg_mut!(keepalive);
        let outcome = arg_ref!(outcome);
        keepalive
            .inner
            .handle_outcome(outcome.inner(), Time::from_micros(now_us));
        R::REDLOCK_OK
    })
}

/// The extension could not be run at all at `now_us` (the driver failed before any
/// outcome): retried while a round fits, lost when the validity runs out.
#[no_mangle]
pub unsafe extern "C" fn redlock_keepalive_handle_failure(
    keepalive: *mut redlock_keepalive,
    now_us: u64,
) -> redlock_result {
    guard(|| {
        let keepalive = arg_mut!(keepalive);
        keepalive.inner.handle_failure(Time::from_micros(now_us));
        R::REDLOCK_OK
    })
}

/// Stops keeping the lock alive (released, or no longer wanted). Final; a lost lock
/// stays lost.
#[no_mangle]
pub unsafe extern "C" fn redlock_keepalive_stop(
    keepalive: *mut redlock_keepalive,
) -> redlock_result {
    guard(|| {
        let keepalive = arg_mut!(keepalive);
        keepalive.inner.stop();
        R::REDLOCK_OK
    })
}

/// A copy of the lease as it stands (the latest extension's), to extend or release the
/// lock; freed by `redlock_lease_free`.
#[no_mangle]
pub unsafe extern "C" fn redlock_keepalive_lease(
    keepalive: *const redlock_keepalive,
    out_lease: *mut *mut redlock_lease,
) -> redlock_result {
    guard(|| {
        let keepalive = arg_ref!(keepalive);
        let out = arg_out!(out_lease);
        out.write(into_handle(redlock_lease {
            inner: keepalive.inner.lease().clone(),
        }));
        R::REDLOCK_OK
    })
}

/// Why the lock was lost: a `REDLOCK_LOST_*` value, or 0 while it is not (and for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_keepalive_lost_reason(keepalive: *const redlock_keepalive) -> u32 {
    guard_value(0, || {
        arg_ref!(keepalive, 0).inner.lost().map_or(0, lost_number)
    })
}

/// True while an extension the keep-alive asked for is under way (false for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_keepalive_is_extending(
    keepalive: *const redlock_keepalive,
) -> bool {
    guard_value(false, || arg_ref!(keepalive, false).inner.is_extending())
}

/// The stable name of a `REDLOCK_LOST_*` value (`"taken"`, `"not_held"`, `"expired"`,
/// `"extension_limit"`), or NULL for another value. Static, NUL-terminated; never freed.
#[no_mangle]
pub extern "C" fn redlock_lost_reason_name(reason: u32) -> *const std::ffi::c_char {
    guard_value(std::ptr::null(), || {
        match reason {
            REDLOCK_LOST_TAKEN => c"taken",
            REDLOCK_LOST_NOT_HELD => c"not_held",
            REDLOCK_LOST_EXPIRED => c"expired",
            REDLOCK_LOST_EXTENSION_LIMIT => c"extension_limit",
            _ => return std::ptr::null(),
        }
        .as_ptr()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reason_names_are_the_cores() {
        for reason in [
            LostReason::Taken,
            LostReason::NotHeld,
            LostReason::Expired,
            LostReason::ExtensionLimit,
        ] {
            let name = redlock_lost_reason_name(lost_number(reason));
            // SAFETY: the function returns a static NUL-terminated text for these.
            let name = unsafe { std::ffi::CStr::from_ptr(name) };
            assert_eq!(name.to_str().unwrap(), reason.code());
        }
        assert!(redlock_lost_reason_name(0).is_null());
    }
}
