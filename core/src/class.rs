//! Error classes: what every binding raises, decided once here.
//!
//! A binding maps each [`ErrorClass`] to one exception (or error value) of its own and
//! never raises anything else for a documented failure or misuse. The codes are stable
//! and the same everywhere (C ABI, WASM, every language).
//!
//! | class | when |
//! |---|---|
//! | `held_elsewhere` | an acquisition failed because conflicts alone made the quorum impossible: someone else holds the lock |
//! | `nodes_failing` | an acquisition, extension or release failed because nodes failed (errors, timeouts, refused or lost connections), alone or mixed with conflicts, or a quorum came too late; each node's [`NodeCause`] says why |
//! | `lock_lost` | an extension found the lock taken, or its validity ran out |
//! | `not_held` | an extension found the keys gone (expired or released) and nobody else holding them |
//! | `invalid_argument` | a configuration or argument broke a rule ([`crate::ConfigError`], [`crate::UsageError`]); the message names the rule |
//! | `used_after_close` | a call on a client or lock after it was closed or released |
//! | `cancelled` | the caller cancelled an operation ([`crate::Operation::abandon`]) |

use core::fmt;

use crate::config::ConfigError;
use crate::error::UsageError;
use crate::outcome::{FailureReason, NodeResult, Outcome};

/// What kind of failure a binding reports. See the module documentation for when each
/// applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorClass {
    /// Someone else holds the lock.
    HeldElsewhere,
    /// Nodes are failing; see each node's [`NodeCause`].
    NodesFailing,
    /// The lock was held and is lost.
    LockLost,
    /// The lock's keys are gone and nobody else holds them.
    NotHeld,
    /// A configuration or argument broke a rule.
    InvalidArgument,
    /// A call on a client or lock after it was closed or released.
    UsedAfterClose,
    /// The caller cancelled the operation.
    Cancelled,
}

impl ErrorClass {
    /// Every class, in code order.
    pub const ALL: [ErrorClass; 7] = [
        ErrorClass::HeldElsewhere,
        ErrorClass::NodesFailing,
        ErrorClass::LockLost,
        ErrorClass::NotHeld,
        ErrorClass::InvalidArgument,
        ErrorClass::UsedAfterClose,
        ErrorClass::Cancelled,
    ];

    /// A stable snake_case name: `held_elsewhere`, `nodes_failing`, `lock_lost`,
    /// `not_held`, `invalid_argument`, `used_after_close`, `cancelled`.
    pub fn code(self) -> &'static str {
        match self {
            ErrorClass::HeldElsewhere => "held_elsewhere",
            ErrorClass::NodesFailing => "nodes_failing",
            ErrorClass::LockLost => "lock_lost",
            ErrorClass::NotHeld => "not_held",
            ErrorClass::InvalidArgument => "invalid_argument",
            ErrorClass::UsedAfterClose => "used_after_close",
            ErrorClass::Cancelled => "cancelled",
        }
    }

    /// A stable number, from 1 in [`ErrorClass::ALL`]'s order (0 stands for "no error"
    /// where a number is needed).
    pub fn number(self) -> u32 {
        match self {
            ErrorClass::HeldElsewhere => 1,
            ErrorClass::NodesFailing => 2,
            ErrorClass::LockLost => 3,
            ErrorClass::NotHeld => 4,
            ErrorClass::InvalidArgument => 5,
            ErrorClass::UsedAfterClose => 6,
            ErrorClass::Cancelled => 7,
        }
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorClass::HeldElsewhere => "the lock is held by someone else",
            ErrorClass::NodesFailing => "Redis nodes are failing",
            ErrorClass::LockLost => "the lock is lost",
            ErrorClass::NotHeld => "the lock is not held: its keys are gone",
            ErrorClass::InvalidArgument => "invalid argument",
            ErrorClass::UsedAfterClose => "used after close",
            ErrorClass::Cancelled => "cancelled",
        })
    }
}

/// Why one node failed, read from its [`NodeResult`].
///
/// Drivers report connection failures as [`crate::Reply::ConnectionFailed`] whose text
/// starts with a cause word and a colon (`refused: …`, `auth: …`, `tls: …`, `timeout: …`,
/// `stalled: …`, `closed: …`), as [`crate::Link`] builds them from
/// [`LinkCause`](crate::LinkCause); a server's error reply is classified by its error
/// code (`NOAUTH`, `WRONGPASS` are authentication).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NodeCause {
    /// The connection was refused (nothing listens there).
    Refused,
    /// Authentication failed or is required.
    Auth,
    /// The TLS handshake failed (an untrusted certificate, a protocol mismatch).
    Tls,
    /// No reply before the deadline (or no connection in time).
    Timeout,
    /// The node has a command unanswered past its deadline; nothing new was sent.
    Stalled,
    /// The connection failed or closed for another reason.
    Connection,
    /// The node answered with an error (its text is in the result).
    Error,
}

impl NodeCause {
    /// A stable snake_case name: `refused`, `auth`, `tls`, `timeout`, `stalled`,
    /// `connection`, `error`.
    pub fn code(self) -> &'static str {
        match self {
            NodeCause::Refused => "refused",
            NodeCause::Auth => "auth",
            NodeCause::Tls => "tls",
            NodeCause::Timeout => "timeout",
            NodeCause::Stalled => "stalled",
            NodeCause::Connection => "connection",
            NodeCause::Error => "error",
        }
    }
}

/// The prefix the core gives a connection failure's text in per-node results.
pub(crate) const CONNECTION_FAILED: &str = "connection failed: ";

impl NodeResult {
    /// Why this node failed, or `None` if it did not (success, conflict, pending, not
    /// asked).
    pub fn cause(&self) -> Option<NodeCause> {
        match self {
            NodeResult::Timeout => Some(NodeCause::Timeout),
            NodeResult::Error(text) => Some(match text.strip_prefix(CONNECTION_FAILED) {
                Some(detail) => connection_cause(detail),
                None => server_error_cause(text),
            }),
            _ => None,
        }
    }
}

fn connection_cause(detail: &str) -> NodeCause {
    let word = detail.split(':').next().unwrap_or("");
    match word {
        "refused" => NodeCause::Refused,
        "auth" => NodeCause::Auth,
        "tls" => NodeCause::Tls,
        "timeout" => NodeCause::Timeout,
        "stalled" => NodeCause::Stalled,
        _ => NodeCause::Connection,
    }
}

fn server_error_cause(text: &str) -> NodeCause {
    match text.split(|c: char| c.is_ascii_whitespace()).next() {
        Some("NOAUTH" | "WRONGPASS") => NodeCause::Auth,
        _ => NodeCause::Error,
    }
}

impl Outcome {
    /// The class of a failed outcome, `None` for a success.
    ///
    /// - `NotAcquired`: [`FailureReason::Conflict`] is `held_elsewhere`; every other
    ///   reason is `nodes_failing` (with conflicts mixed in, nobody can tell whether the
    ///   failing nodes would have granted it).
    /// - `NotExtended`: [`FailureReason::Conflict`] is `lock_lost`,
    ///   [`FailureReason::NotHeld`] `not_held`; otherwise `lock_lost` when no validity
    ///   is left, else `nodes_failing` (the lock still holds until its `valid_until`).
    /// - `NotReleased`, `NotInspected`: `nodes_failing`.
    pub fn error_class(&self) -> Option<ErrorClass> {
        match self {
            Outcome::Acquired(_)
            | Outcome::Extended(_)
            | Outcome::Released(_)
            | Outcome::Inspected(_) => None,
            Outcome::NotAcquired(n) => Some(match n.reason {
                FailureReason::Conflict => ErrorClass::HeldElsewhere,
                _ => ErrorClass::NodesFailing,
            }),
            Outcome::NotExtended(n) => Some(match n.reason {
                FailureReason::Conflict => ErrorClass::LockLost,
                FailureReason::NotHeld => ErrorClass::NotHeld,
                _ if n.validity.is_zero() => ErrorClass::LockLost,
                _ => ErrorClass::NodesFailing,
            }),
            Outcome::NotReleased(_) | Outcome::NotInspected(_) => Some(ErrorClass::NodesFailing),
        }
    }
}

impl ConfigError {
    /// Always [`ErrorClass::InvalidArgument`].
    pub fn error_class(self) -> ErrorClass {
        ErrorClass::InvalidArgument
    }
}

impl UsageError {
    /// Always [`ErrorClass::InvalidArgument`]: every usage error is an argument that
    /// broke a rule (a resource list, a token, a reply for the wrong request).
    pub fn error_class(self) -> ErrorClass {
        ErrorClass::InvalidArgument
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;

    fn error(text: &str) -> NodeResult {
        NodeResult::Error(String::from(text))
    }

    #[test]
    fn node_causes() {
        assert_eq!(NodeResult::Timeout.cause(), Some(NodeCause::Timeout));
        assert_eq!(NodeResult::Success.cause(), None);
        assert_eq!(NodeResult::Conflict.cause(), None);
        assert_eq!(NodeResult::Pending.cause(), None);
        for (text, cause) in [
            (
                "connection failed: refused: ECONNREFUSED 127.0.0.1:1",
                NodeCause::Refused,
            ),
            (
                "connection failed: auth: WRONGPASS invalid",
                NodeCause::Auth,
            ),
            (
                "connection failed: tls: certificate unknown",
                NodeCause::Tls,
            ),
            (
                "connection failed: timeout: no connection",
                NodeCause::Timeout,
            ),
            ("connection failed: stalled: not sent", NodeCause::Stalled),
            ("connection failed: reset by peer", NodeCause::Connection),
            ("connection failed: refused", NodeCause::Refused),
            ("WRONGPASS invalid username-password pair", NodeCause::Auth),
            ("NOAUTH Authentication required.", NodeCause::Auth),
            ("ERR unknown command", NodeCause::Error),
            ("unexpected reply: a null reply", NodeCause::Error),
        ] {
            assert_eq!(error(text).cause(), Some(cause), "{text}");
        }
    }

    #[test]
    fn codes_and_numbers_are_distinct() {
        for (i, a) in ErrorClass::ALL.iter().enumerate() {
            assert_eq!(a.number() as usize, i + 1);
            for b in &ErrorClass::ALL[i + 1..] {
                assert_ne!(a.code(), b.code());
            }
        }
    }
}
