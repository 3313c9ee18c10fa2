//! What an operation ends with. Losing a lock is an outcome, not an error.

use redlock_core::{FailureReason, Lease, NodeResult, Outcome, Time};

use crate::boundary::{free_handle, guard, guard_value, into_handle, put_bytes};
use crate::class::{cause_number, class_number};
use crate::client::redlock_lease;
use crate::error::{redlock_result, redlock_result as R};

/// The lock is held (`redlock_outcome_kind`).
pub const REDLOCK_OUTCOME_ACQUIRED: u32 = 1;
/// Every attempt failed; each was followed by a release on all nodes.
pub const REDLOCK_OUTCOME_NOT_ACQUIRED: u32 = 2;
/// The lock was extended.
pub const REDLOCK_OUTCOME_EXTENDED: u32 = 3;
/// The extension failed; the lock is held until the lease's `valid_until`.
pub const REDLOCK_OUTCOME_NOT_EXTENDED: u32 = 4;
/// A quorum of nodes confirmed the lock's keys are gone.
pub const REDLOCK_OUTCOME_RELEASED: u32 = 5;
/// Every node settled and fewer than a quorum confirmed the keys are gone: the lock may
/// still be held (by this token) until its keys' TTL. Not a success.
pub const REDLOCK_OUTCOME_NOT_RELEASED: u32 = 6;
/// A quorum of nodes answered an inspection (`redlock_client_inspect`): see
/// `redlock_outcome_holder`.
pub const REDLOCK_OUTCOME_INSPECTED: u32 = 7;
/// Too few nodes answered an inspection to say whether anyone holds the lock. Not a
/// success.
pub const REDLOCK_OUTCOME_NOT_INSPECTED: u32 = 8;

/// Conflicts alone made the quorum impossible: held by someone else (acquire), or
/// lost (extend) (`redlock_outcome_reason`).
pub const REDLOCK_REASON_CONFLICT: u32 = 1;
/// Errors and timeouts alone made the quorum impossible.
pub const REDLOCK_REASON_NODES_FAILED: u32 = 2;
/// Conflicts and failures together made the quorum impossible.
pub const REDLOCK_REASON_MIXED: u32 = 3;
/// A quorum agreed, but too late: the validity left was below the floor.
pub const REDLOCK_REASON_VALIDITY_TOO_SHORT: u32 = 4;
/// An extension found the keys gone (expired or deleted) and nobody else holding them.
pub const REDLOCK_REASON_NOT_HELD: u32 = 5;

/// No command was sent to this node in this round (`redlock_outcome_node`).
pub const REDLOCK_NODE_NOT_ASKED: u32 = 1;
/// Sent; neither a reply nor the deadline has come yet.
pub const REDLOCK_NODE_PENDING: u32 = 2;
/// The node did what was asked.
pub const REDLOCK_NODE_SUCCESS: u32 = 3;
/// The node refused because of the key's state.
pub const REDLOCK_NODE_CONFLICT: u32 = 4;
/// An error reply, an unexpected reply, or a connection failure; the text says which.
pub const REDLOCK_NODE_ERROR: u32 = 5;
/// No reply before the deadline.
pub const REDLOCK_NODE_TIMEOUT: u32 = 6;
/// An extension found the key gone on this node (expired or released, held by nobody),
/// where `REDLOCK_NODE_CONFLICT` says it holds another token.
pub const REDLOCK_NODE_MISSING: u32 = 7;

/// A finished operation's outcome. Freed by `redlock_outcome_free`.
pub struct redlock_outcome {
    inner: Outcome,
}

impl redlock_outcome {
    pub(crate) fn new(inner: Outcome) -> redlock_outcome {
        redlock_outcome { inner }
    }

    pub(crate) fn inner(&self) -> &Outcome {
        &self.inner
    }

    pub(crate) fn into_inner(self) -> Outcome {
        self.inner
    }
}

/// The `REDLOCK_NODE_*` value of `node` and its error text (empty unless an error).
pub(crate) fn node_kind(node: &NodeResult) -> (u32, &[u8]) {
    match node {
        NodeResult::NotAsked => (REDLOCK_NODE_NOT_ASKED, &[]),
        NodeResult::Pending => (REDLOCK_NODE_PENDING, &[]),
        NodeResult::Success => (REDLOCK_NODE_SUCCESS, &[]),
        NodeResult::Conflict => (REDLOCK_NODE_CONFLICT, &[]),
        NodeResult::Error(text) => (REDLOCK_NODE_ERROR, text.as_bytes()),
        NodeResult::Timeout => (REDLOCK_NODE_TIMEOUT, &[]),
        NodeResult::Missing => (REDLOCK_NODE_MISSING, &[]),
        // A result this version does not know is reported as an error without text.
        _ => (REDLOCK_NODE_ERROR, &[]),
    }
}

/// Writes the `REDLOCK_REASON_*` number of `reason` (`REDLOCK_UNKNOWN_ERROR` for a
/// reason this version has no number for).
pub(crate) fn write_reason(
    reason: FailureReason,
    out: &mut std::mem::MaybeUninit<u32>,
) -> redlock_result {
    let number = match reason {
        FailureReason::Conflict => REDLOCK_REASON_CONFLICT,
        FailureReason::NodesFailed => REDLOCK_REASON_NODES_FAILED,
        FailureReason::Mixed => REDLOCK_REASON_MIXED,
        FailureReason::ValidityTooShort => REDLOCK_REASON_VALIDITY_TOO_SHORT,
        FailureReason::NotHeld => REDLOCK_REASON_NOT_HELD,
        _ => return R::REDLOCK_UNKNOWN_ERROR,
    };
    out.write(number);
    R::REDLOCK_OK
}

pub(crate) fn micros(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

/// Frees an outcome. NULL is ignored.
#[no_mangle]
pub unsafe extern "C" fn redlock_outcome_free(outcome: *mut redlock_outcome) {
    guard_value((), || {
        // SAFETY: by the crate's contract `outcome` is NULL or a live outcome handle.
        unsafe { free_handle(outcome) }
    })
}

/// A `REDLOCK_OUTCOME_*` value (0 for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_outcome_kind(outcome: *const redlock_outcome) -> u32 {
    guard_value(0, || match arg_ref!(outcome, 0).inner {
        Outcome::Acquired(_) => REDLOCK_OUTCOME_ACQUIRED,
        Outcome::NotAcquired(_) => REDLOCK_OUTCOME_NOT_ACQUIRED,
        Outcome::Extended(_) => REDLOCK_OUTCOME_EXTENDED,
        Outcome::NotExtended(_) => REDLOCK_OUTCOME_NOT_EXTENDED,
        Outcome::Released(_) => REDLOCK_OUTCOME_RELEASED,
        Outcome::NotReleased(_) => REDLOCK_OUTCOME_NOT_RELEASED,
        Outcome::Inspected(_) => REDLOCK_OUTCOME_INSPECTED,
        Outcome::NotInspected(_) => REDLOCK_OUTCOME_NOT_INSPECTED,
        _ => 0,
    })
}

/// True for acquired, extended, released and inspected (false for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_outcome_is_success(outcome: *const redlock_outcome) -> bool {
    guard_value(false, || arg_ref!(outcome, false).inner.is_success())
}

/// Why an acquisition or extension failed: a `REDLOCK_REASON_*` value.
/// `REDLOCK_NO_VALUE` for the other outcomes.
#[no_mangle]
pub unsafe extern "C" fn redlock_outcome_reason(
    outcome: *const redlock_outcome,
    out_reason: *mut u32,
) -> redlock_result {
    guard(|| {
        let outcome = arg_ref!(outcome);
        let out = arg_out!(out_reason);
        match outcome.inner.reason() {
            Some(reason) => write_reason(reason, out),
            None => R::REDLOCK_NO_VALUE,
        }
    })
}

/// The token: the lease's for acquired, extended and not extended; the last attempt's
/// (already released) for not acquired; `REDLOCK_NO_VALUE` for released and not
/// released. Borrowed:
/// valid until the outcome is freed.
#[no_mangle]
pub unsafe extern "C" fn redlock_outcome_token(
    outcome: *const redlock_outcome,
    out_token: *mut *const u8,
    out_token_len: *mut usize,
) -> redlock_result {
    guard(|| {
        let outcome = arg_ref!(outcome);
        let (out_ptr, out_len) = (arg_out!(out_token), arg_out!(out_token_len));
        let token = match &outcome.inner {
            Outcome::NotAcquired(n) => &n.token,
            other => match other.lease() {
                Some(lease) => lease.token(),
                None => return R::REDLOCK_NO_VALUE,
            },
        };
        put_bytes(out_ptr, out_len, token.as_bytes());
        R::REDLOCK_OK
    })
}

fn lease_of(outcome: &Outcome) -> Option<&Lease> {
    outcome.lease()
}

/// The lease's `valid_until` (acquired, extended, not extended): the instant on the
/// caller's clock until which the lock is held (for not extended, the old lease's, or
/// the moment the lock was found lost). `REDLOCK_NO_VALUE` otherwise.
#[no_mangle]
pub unsafe extern "C" fn redlock_outcome_valid_until(
    outcome: *const redlock_outcome,
    out_valid_until_us: *mut u64,
) -> redlock_result {
    guard(|| {
        let outcome = arg_ref!(outcome);
        let out = arg_out!(out_valid_until_us);
        match lease_of(&outcome.inner) {
            Some(lease) => {
                out.write(lease.valid_until().as_micros());
                R::REDLOCK_OK
            }
            None => R::REDLOCK_NO_VALUE,
        }
    })
}

/// Validity left when the outcome was decided, in microseconds (acquired, extended,
/// not extended). `REDLOCK_NO_VALUE` otherwise.
#[no_mangle]
pub unsafe extern "C" fn redlock_outcome_validity(
    outcome: *const redlock_outcome,
    out_validity_us: *mut u64,
) -> redlock_result {
    guard(|| {
        let outcome = arg_ref!(outcome);
        let out = arg_out!(out_validity_us);
        let validity = match &outcome.inner {
            Outcome::Acquired(a) => a.validity,
            Outcome::Extended(e) => e.validity,
            Outcome::NotExtended(n) => n.validity,
            _ => return R::REDLOCK_NO_VALUE,
        };
        out.write(micros(validity));
        R::REDLOCK_OK
    })
}

/// Attempts made (acquired, not acquired). `REDLOCK_NO_VALUE` otherwise.
#[no_mangle]
pub unsafe extern "C" fn redlock_outcome_attempts(
    outcome: *const redlock_outcome,
    out_attempts: *mut u32,
) -> redlock_result {
    guard(|| {
        let outcome = arg_ref!(outcome);
        let out = arg_out!(out_attempts);
        let attempts = match &outcome.inner {
            Outcome::Acquired(a) => a.attempts,
            Outcome::NotAcquired(n) => n.attempts,
            _ => return R::REDLOCK_NO_VALUE,
        };
        out.write(attempts);
        R::REDLOCK_OK
    })
}

/// Successful extensions of the lease (acquired, extended, not extended).
/// `REDLOCK_NO_VALUE` otherwise.
#[no_mangle]
pub unsafe extern "C" fn redlock_outcome_extensions(
    outcome: *const redlock_outcome,
    out_extensions: *mut u32,
) -> redlock_result {
    guard(|| {
        let outcome = arg_ref!(outcome);
        let out = arg_out!(out_extensions);
        match lease_of(&outcome.inner) {
            Some(lease) => {
                out.write(lease.extensions());
                R::REDLOCK_OK
            }
            None => R::REDLOCK_NO_VALUE,
        }
    })
}

/// For not extended: when to try extending again (`*out_due` true, `*out_at_us` the
/// instant), or `*out_due` false (and `*out_at_us` 0) when no time is left for another
/// round or the lock is lost. `REDLOCK_NO_VALUE` for the other outcomes.
#[no_mangle]
pub unsafe extern "C" fn redlock_outcome_retry_at(
    outcome: *const redlock_outcome,
    out_due: *mut bool,
    out_at_us: *mut u64,
) -> redlock_result {
    guard(|| {
        let outcome = arg_ref!(outcome);
        let (out_due, out_at) = (arg_out!(out_due), arg_out!(out_at_us));
        let Outcome::NotExtended(n) = &outcome.inner else {
            return R::REDLOCK_NO_VALUE;
        };
        out_due.write(n.retry_at.is_some());
        out_at.write(n.retry_at.map_or(0, Time::as_micros));
        R::REDLOCK_OK
    })
}

/// For not extended: whether the lock is already lost, not merely unextended.
/// `REDLOCK_NO_VALUE` for the other outcomes.
#[no_mangle]
pub unsafe extern "C" fn redlock_outcome_is_lost(
    outcome: *const redlock_outcome,
    out_lost: *mut bool,
) -> redlock_result {
    guard(|| {
        let outcome = arg_ref!(outcome);
        let out = arg_out!(out_lost);
        let Outcome::NotExtended(n) = &outcome.inner else {
            return R::REDLOCK_NO_VALUE;
        };
        out.write(n.is_lost());
        R::REDLOCK_OK
    })
}

/// For released and not released: the nodes that deleted at least one key holding the
/// token. `REDLOCK_NO_VALUE` for the other outcomes.
#[no_mangle]
pub unsafe extern "C" fn redlock_outcome_released(
    outcome: *const redlock_outcome,
    out_released: *mut usize,
) -> redlock_result {
    guard(|| {
        let outcome = arg_ref!(outcome);
        let out = arg_out!(out_released);
        let released = match &outcome.inner {
            Outcome::Released(r) => r.released,
            Outcome::NotReleased(r) => r.released,
            _ => return R::REDLOCK_NO_VALUE,
        };
        out.write(released);
        R::REDLOCK_OK
    })
}

/// A copy of the lease (acquired, extended, not extended) as a handle of its own, to
/// extend or release the lock; freed by `redlock_lease_free`. `REDLOCK_NO_VALUE`
/// otherwise.
#[no_mangle]
pub unsafe extern "C" fn redlock_outcome_lease(
    outcome: *const redlock_outcome,
    out_lease: *mut *mut redlock_lease,
) -> redlock_result {
    guard(|| {
        let outcome = arg_ref!(outcome);
        let out = arg_out!(out_lease);
        match lease_of(&outcome.inner) {
            Some(lease) => {
                out.write(into_handle(redlock_lease {
                    inner: lease.clone(),
                }));
                R::REDLOCK_OK
            }
            None => R::REDLOCK_NO_VALUE,
        }
    })
}

/// The fencing token of a fenced acquisition's lease (acquired, extended, not
/// extended): strictly greater than every token handed out before it for the same
/// resource. `REDLOCK_NO_VALUE` without fencing or for other outcomes.
#[no_mangle]
pub unsafe extern "C" fn redlock_outcome_fencing_token(
    outcome: *const redlock_outcome,
    out_token: *mut u64,
) -> redlock_result {
    guard(|| {
        let outcome = arg_ref!(outcome);
        let out = arg_out!(out_token);
        match lease_of(&outcome.inner).and_then(Lease::fencing_token) {
            Some(token) => {
                out.write(token);
                R::REDLOCK_OK
            }
            None => R::REDLOCK_NO_VALUE,
        }
    })
}

/// The token that holds the lock, per an inspection: at least a quorum of nodes hold it
/// on every key. Borrowed until the outcome is freed. `REDLOCK_NO_VALUE` when nobody
/// holds the lock, and for outcomes other than `REDLOCK_OUTCOME_INSPECTED`.
#[no_mangle]
pub unsafe extern "C" fn redlock_outcome_holder(
    outcome: *const redlock_outcome,
    out_token: *mut *const u8,
    out_token_len: *mut usize,
) -> redlock_result {
    guard(|| {
        let outcome = arg_ref!(outcome);
        let (out_ptr, out_len) = (arg_out!(out_token), arg_out!(out_token_len));
        match &outcome.inner {
            Outcome::Inspected(inspected) => match &inspected.holder {
                Some(holder) => {
                    put_bytes(out_ptr, out_len, holder);
                    R::REDLOCK_OK
                }
                None => R::REDLOCK_NO_VALUE,
            },
            _ => R::REDLOCK_NO_VALUE,
        }
    })
}

/// Whether an inspection found the lock held by anyone (false for other outcomes and
/// NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_outcome_is_locked(outcome: *const redlock_outcome) -> bool {
    guard_value(
        false,
        || matches!(&arg_ref!(outcome, false).inner, Outcome::Inspected(i) if i.is_locked()),
    )
}

/// Whether an inspection found the lock held by `lease` at `now_us`: a quorum hold its
/// token and its validity has not run out (false for other outcomes and NULLs).
#[no_mangle]
pub unsafe extern "C" fn redlock_outcome_is_held_by(
    outcome: *const redlock_outcome,
    lease: *const redlock_lease,
    now_us: u64,
) -> bool {
    guard_value(false, || {
        let outcome = arg_ref!(outcome, false);
        let lease = arg_ref!(lease, false);
        matches!(&outcome.inner, Outcome::Inspected(i) if i.is_held_by(&lease.inner, Time::from_micros(now_us)))
    })
}

/// Number of per-node results (N; 0 for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_outcome_node_count(outcome: *const redlock_outcome) -> usize {
    guard_value(0, || arg_ref!(outcome, 0).inner.nodes().len())
}

/// How node `index` answered the round the outcome reports on: a `REDLOCK_NODE_*`
/// value, and for `REDLOCK_NODE_ERROR` the error's text (empty otherwise), borrowed:
/// valid until the outcome is freed. `REDLOCK_OUT_OF_RANGE` past the last node.
#[no_mangle]
pub unsafe extern "C" fn redlock_outcome_node(
    outcome: *const redlock_outcome,
    index: usize,
    out_kind: *mut u32,
    out_error: *mut *const u8,
    out_error_len: *mut usize,
) -> redlock_result {
    guard(|| {
        let outcome = arg_ref!(outcome);
        let out_kind = arg_out!(out_kind);
        let (out_ptr, out_len) = (arg_out!(out_error), arg_out!(out_error_len));
        let Some(node) = outcome.inner.nodes().get(index) else {
            return R::REDLOCK_OUT_OF_RANGE;
        };
        let (kind, text) = node_kind(node);
        out_kind.write(kind);
        put_bytes(out_ptr, out_len, text);
        R::REDLOCK_OK
    })
}

/// The error class of a failed outcome: a `REDLOCK_ERROR_CLASS_*` value (the core's
/// decision of what a binding raises), or 0 for a success (and for NULL). Not acquired
/// for conflicts alone is held elsewhere, any other failure to acquire is nodes
/// failing; not extended is lock lost (taken, or no validity left), not held (keys
/// gone), or nodes failing (the lock still holds until its `valid_until`); not
/// released is nodes failing.
#[no_mangle]
pub unsafe extern "C" fn redlock_outcome_error_class(outcome: *const redlock_outcome) -> u32 {
    guard_value(0, || {
        arg_ref!(outcome, 0)
            .inner
            .error_class()
            .map_or(0, class_number)
    })
}

/// Why node `index` failed in the round the outcome reports on: a
/// `REDLOCK_NODE_CAUSE_*` value, or 0 when it did not fail (success, conflict, pending,
/// not asked). `REDLOCK_OUT_OF_RANGE` past the last node.
#[no_mangle]
pub unsafe extern "C" fn redlock_outcome_node_cause(
    outcome: *const redlock_outcome,
    index: usize,
    out_cause: *mut u32,
) -> redlock_result {
    guard(|| {
        let outcome = arg_ref!(outcome);
        let out = arg_out!(out_cause);
        let Some(node) = outcome.inner.nodes().get(index) else {
            return R::REDLOCK_OUT_OF_RANGE;
        };
        out.write(node.cause().map_or(0, cause_number));
        R::REDLOCK_OK
    })
}
