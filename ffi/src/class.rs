//! Error classes and per-node causes: what every binding raises, decided by the core,
//! and the check that no Redis server is given twice.

use std::ffi::{c_char, CStr};

use redlock_core::{ErrorClass, NodeCause};

use crate::boundary::{guard, guard_value};
use crate::error::{redlock_result, redlock_result as R};

/// Someone else holds the lock (`redlock_outcome_error_class`; 0 means no error).
pub const REDLOCK_ERROR_CLASS_HELD_ELSEWHERE: u32 = 1;
/// Nodes are failing; each node's cause says why (`redlock_outcome_node_cause`).
pub const REDLOCK_ERROR_CLASS_NODES_FAILING: u32 = 2;
/// The lock was held and is lost.
pub const REDLOCK_ERROR_CLASS_LOCK_LOST: u32 = 3;
/// The lock's keys are gone and nobody else holds them.
pub const REDLOCK_ERROR_CLASS_NOT_HELD: u32 = 4;
/// A configuration or argument broke a rule.
pub const REDLOCK_ERROR_CLASS_INVALID_ARGUMENT: u32 = 5;
/// A call on a client or lock after it was closed or released.
pub const REDLOCK_ERROR_CLASS_USED_AFTER_CLOSE: u32 = 6;
/// The caller cancelled the operation.
pub const REDLOCK_ERROR_CLASS_CANCELLED: u32 = 7;

/// The connection was refused (`redlock_outcome_node_cause`; 0 means the node did not
/// fail).
pub const REDLOCK_NODE_CAUSE_REFUSED: u32 = 1;
/// Authentication failed or is required.
pub const REDLOCK_NODE_CAUSE_AUTH: u32 = 2;
/// The TLS handshake failed.
pub const REDLOCK_NODE_CAUSE_TLS: u32 = 3;
/// No reply before the deadline (or no connection in time).
pub const REDLOCK_NODE_CAUSE_TIMEOUT: u32 = 4;
/// The node has a command unanswered past its deadline; nothing new was sent.
pub const REDLOCK_NODE_CAUSE_STALLED: u32 = 5;
/// The connection failed or closed for another reason.
pub const REDLOCK_NODE_CAUSE_CONNECTION: u32 = 6;
/// The node answered with an error.
pub const REDLOCK_NODE_CAUSE_ERROR: u32 = 7;

/// The `REDLOCK_ERROR_CLASS_*` number of `class`.
pub(crate) fn class_number(class: ErrorClass) -> u32 {
    class.number()
}

/// The `REDLOCK_NODE_CAUSE_*` number of `cause`.
pub(crate) fn cause_number(cause: NodeCause) -> u32 {
    match cause {
        NodeCause::Refused => REDLOCK_NODE_CAUSE_REFUSED,
        NodeCause::Auth => REDLOCK_NODE_CAUSE_AUTH,
        NodeCause::Tls => REDLOCK_NODE_CAUSE_TLS,
        NodeCause::Timeout => REDLOCK_NODE_CAUSE_TIMEOUT,
        NodeCause::Stalled => REDLOCK_NODE_CAUSE_STALLED,
        NodeCause::Connection => REDLOCK_NODE_CAUSE_CONNECTION,
        // A cause this version does not know is reported as the node's error.
        _ => REDLOCK_NODE_CAUSE_ERROR,
    }
}

const CLASS_NAMES: [&CStr; 7] = [
    c"held_elsewhere",
    c"nodes_failing",
    c"lock_lost",
    c"not_held",
    c"invalid_argument",
    c"used_after_close",
    c"cancelled",
];

const CAUSE_NAMES: [&CStr; 7] = [
    c"refused",
    c"auth",
    c"tls",
    c"timeout",
    c"stalled",
    c"connection",
    c"error",
];

fn name_of(names: &[&'static CStr], number: u32) -> *const c_char {
    let index = (number as usize).wrapping_sub(1);
    names
        .get(index)
        .map_or(std::ptr::null(), |name| name.as_ptr())
}

/// The stable name of a `REDLOCK_ERROR_CLASS_*` value (`"held_elsewhere"`,
/// `"nodes_failing"`, `"lock_lost"`, `"not_held"`, `"invalid_argument"`,
/// `"used_after_close"`, `"cancelled"`: the same in every binding), or NULL for another
/// value. Static, NUL-terminated; never freed.
#[no_mangle]
pub extern "C" fn redlock_error_class_name(class: u32) -> *const c_char {
    guard_value(std::ptr::null(), || name_of(&CLASS_NAMES, class))
}

/// The stable name of a `REDLOCK_NODE_CAUSE_*` value (`"refused"`, `"auth"`, `"tls"`,
/// `"timeout"`, `"stalled"`, `"connection"`, `"error"`), or NULL for another value.
/// Static, NUL-terminated; never freed.
#[no_mangle]
pub extern "C" fn redlock_node_cause_name(cause: u32) -> *const c_char {
    guard_value(std::ptr::null(), || name_of(&CAUSE_NAMES, cause))
}

/// The `REDLOCK_ERROR_CLASS_*` of a result code: `REDLOCK_ERROR_CLASS_INVALID_ARGUMENT`
/// for every usage and configuration error (and `REDLOCK_INVALID_INPUT`), 0 for
/// `REDLOCK_OK` and for codes that are no documented failure of the lock (a NULL
/// parameter, a panic, a protocol error: the caller's or the connection's bug).
#[no_mangle]
pub extern "C" fn redlock_result_error_class(result: u32) -> u32 {
    guard_value(0, || match result {
        9004 | 9100..=9199 | 9200..=9299 => class_number(ErrorClass::InvalidArgument),
        _ => 0,
    })
}

/// Whether two of the `count` node addresses name the same Redis server (Redlock's
/// safety rests on independent nodes). Address `i` is the `address_lens[i]` bytes at
/// `addresses[i]`, UTF-8 (`REDLOCK_INVALID_INPUT` otherwise), in any form a client
/// takes (`redis://user:pw@host:port/db`, `host:port`, `[::1]:6379`): compared as host
/// and port, hosts without case, `localhost` as `127.0.0.1`, port 6379 when missing.
/// `*out_found` says whether a pair was found, `*out_first < *out_second` the first
/// such pair's indices (0 and 0 when none).
#[no_mangle]
pub unsafe extern "C" fn redlock_duplicate_node(
    addresses: *const *const u8,
    address_lens: *const usize,
    count: usize,
    out_found: *mut bool,
    out_first: *mut usize,
    out_second: *mut usize,
) -> redlock_result {
    guard(|| {
        let addresses = arg_byte_strings!(addresses, address_lens, count);
        let out_found = arg_out!(out_found);
        let (out_first, out_second) = (arg_out!(out_first), arg_out!(out_second));
        let mut texts = Vec::with_capacity(addresses.len());
        for address in addresses.iter() {
            match std::str::from_utf8(address) {
                Ok(text) => texts.push(text),
                Err(_) => return R::REDLOCK_INVALID_INPUT,
            }
        }
        let pair = redlock_core::duplicate_node(&texts);
        out_found.write(pair.is_some());
        let (first, second) = pair.unwrap_or((0, 0));
        out_first.write(first);
        out_second.write(second);
        R::REDLOCK_OK
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(ptr: *const c_char) -> &'static str {
        // SAFETY: the functions under test return static NUL-terminated texts.
        unsafe { CStr::from_ptr(ptr) }.to_str().unwrap()
    }

    #[test]
    fn names_are_the_cores() {
        for class in ErrorClass::ALL {
            assert_eq!(
                text(redlock_error_class_name(class_number(class))),
                class.code()
            );
        }
        for cause in [
            NodeCause::Refused,
            NodeCause::Auth,
            NodeCause::Tls,
            NodeCause::Timeout,
            NodeCause::Stalled,
            NodeCause::Connection,
            NodeCause::Error,
        ] {
            assert_eq!(
                text(redlock_node_cause_name(cause_number(cause))),
                cause.code()
            );
        }
        assert!(redlock_error_class_name(0).is_null());
        assert!(redlock_error_class_name(8).is_null());
        assert!(redlock_node_cause_name(0).is_null());
        assert!(redlock_node_cause_name(u32::MAX).is_null());
    }

    #[test]
    fn results_have_classes() {
        assert_eq!(redlock_result_error_class(R::REDLOCK_OK as u32), 0);
        assert_eq!(redlock_result_error_class(R::REDLOCK_PANIC as u32), 0);
        assert_eq!(
            redlock_result_error_class(R::REDLOCK_INVALID_TTL as u32),
            REDLOCK_ERROR_CLASS_INVALID_ARGUMENT
        );
        assert_eq!(
            redlock_result_error_class(R::REDLOCK_CONFIG_NO_NODES as u32),
            REDLOCK_ERROR_CLASS_INVALID_ARGUMENT
        );
    }
}
