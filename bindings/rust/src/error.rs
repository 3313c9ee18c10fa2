//! Errors, and the per-node detail they carry.
//!
//! Every error has at most one [`ErrorClass`] of the core ([`Error::class`]): the
//! classes are decided by the core (from outcomes, configuration and usage errors) and
//! the same in every binding. Each node's failure has its [`NodeCause`]
//! ([`NodeReport::cause`]).

use std::fmt;
use std::time::Duration;

use redlock_core::{ConfigError, ErrorClass, FailureReason, NodeCause, NodeResult, UsageError};

use crate::lock::{Lost, LostReason};

/// How one node answered, with the node's position and URL (password redacted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeReport {
    /// Position of the node in the list the client was built with.
    pub index: usize,
    /// The node's URL, any password replaced by `***`.
    pub url: String,
    /// What the node did.
    pub result: NodeResult,
}

impl NodeReport {
    /// Why this node failed (`refused`, `auth`, `tls`, `timeout`, `stalled`,
    /// `connection`, `error`), or `None` if it did not fail.
    pub fn cause(&self) -> Option<NodeCause> {
        self.result.cause()
    }
}

impl fmt::Display for NodeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node {} ({}): ", self.index, self.url)?;
        match &self.result {
            NodeResult::Error(text) => write!(f, "error: {text}"),
            other => f.write_str(other.code()),
        }
    }
}

/// A lock that could not be acquired: every attempt failed, and each was released on
/// every node before the next (or before this error was returned).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotAcquired {
    /// Why the last attempt failed: [`FailureReason::Conflict`] means the lock is held by
    /// someone else, [`FailureReason::NodesFailed`] that too many nodes are unreachable
    /// or failing.
    pub reason: FailureReason,
    /// Attempts made.
    pub attempts: u32,
    /// How each node answered the last attempt.
    pub nodes: Vec<NodeReport>,
}

/// An extension that failed. Nothing was deleted: the lock stays valid on its old lease
/// for [`NotExtended::validity`] (zero when [`NotExtended::lost`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotExtended {
    /// The core's class: `lock_lost` (taken, or no validity left), `not_held` (the keys
    /// are gone and nobody else holds them), or `nodes_failing`.
    pub class: ErrorClass,
    /// Why it failed: [`FailureReason::Conflict`] means the lock was taken,
    /// [`FailureReason::NotHeld`] that its keys are gone.
    pub reason: FailureReason,
    /// True when the lock is lost now, not merely unextended.
    pub lost: bool,
    /// Validity left on the old lease.
    pub validity: Duration,
    /// How each node answered.
    pub nodes: Vec<NodeReport>,
}

/// A release that fewer than a quorum of nodes confirmed: the keys may still be held
/// until their TTL (class `nodes_failing`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotReleased {
    /// Nodes that deleted a key holding the token.
    pub released: usize,
    /// How each node answered.
    pub nodes: Vec<NodeReport>,
}

/// An inspection ([`crate::Client::is_locked`], [`crate::Lock::is_owned`]) that too few
/// nodes answered to say whether anyone holds the lock (class `nodes_failing`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotInspected {
    /// How each node answered.
    pub nodes: Vec<NodeReport>,
}

/// Everything that can go wrong.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The configuration is invalid (no nodes, a TTL the configuration cannot serve, ...).
    Config(ConfigError),
    /// The core refused a call: an empty or duplicate resource, an invalid token, ...
    Usage(UsageError),
    /// A node URL the `redis` crate does not accept.
    InvalidUrl {
        /// Position of the URL in the list.
        index: usize,
        /// The URL, password redacted.
        url: String,
        /// Why it was refused.
        message: String,
    },
    /// The same Redis server given twice (it would count twice towards the quorum).
    DuplicateNode {
        /// Position of its first mention.
        first: usize,
        /// Position of the second.
        second: usize,
        /// The second URL, password redacted.
        url: String,
    },
    /// A TLS root certificate that could not be used.
    InvalidCertificate(String),
    /// A builder setting the client cannot work with (one the core's configuration does
    /// not cover, such as `ClientBuilder::sentinel_query_timeout` of the `sentinel`
    /// feature).
    InvalidSetting {
        /// The builder method.
        setting: &'static str,
        /// Why the value was refused.
        message: String,
    },
    /// The lock could not be acquired.
    NotAcquired(NotAcquired),
    /// The lock could not be extended.
    NotExtended(NotExtended),
    /// The release was not confirmed by a quorum of nodes.
    NotReleased(NotReleased),
    /// Too few nodes answered an inspection to say who holds the lock.
    NotInspected(NotInspected),
    /// The lock was lost earlier (taken, gone, or expired), so it cannot be extended.
    LockLost(Lost),
    /// The lock was already released.
    Released,
    /// The client was closed ([`crate::Client::close`]): every call on it or on its
    /// locks after that is this error (class `used_after_close`), and changes nothing.
    Closed,
    /// A fenced write ([`crate::fenced_set`]) whose server answered an error or something
    /// other than the check's reply, or gave no answer: the text says which. After a lost
    /// connection, whether the write happened is not known.
    FencedWrite(String),
    /// The blocking client could not start its runtime.
    Runtime(std::io::Error),
    /// A broken invariant of this crate or the core (a bug: please report it).
    Internal(&'static str),
}

impl Error {
    /// The core's class of this error, the same in every binding; `None` only for
    /// [`Error::Runtime`] and [`Error::Internal`], which no rule of the lock explains.
    pub fn class(&self) -> Option<ErrorClass> {
        Some(match self {
            Error::Config(_)
            | Error::Usage(_)
            | Error::InvalidUrl { .. }
            | Error::DuplicateNode { .. }
            | Error::InvalidCertificate(_)
            | Error::InvalidSetting { .. } => ErrorClass::InvalidArgument,
            Error::NotAcquired(n) => match n.reason {
                FailureReason::Conflict => ErrorClass::HeldElsewhere,
                _ => ErrorClass::NodesFailing,
            },
            Error::NotExtended(n) => n.class,
            Error::NotReleased(_) | Error::NotInspected(_) | Error::FencedWrite(_) => {
                ErrorClass::NodesFailing
            }
            Error::LockLost(lost) => match lost.reason {
                LostReason::NotHeld => ErrorClass::NotHeld,
                _ => ErrorClass::LockLost,
            },
            Error::Released | Error::Closed => ErrorClass::UsedAfterClose,
            Error::Runtime(_) | Error::Internal(_) => return None,
        })
    }

    /// The core's reason for a failed acquisition or extension.
    pub fn failure_reason(&self) -> Option<FailureReason> {
        match self {
            Error::NotAcquired(n) => Some(n.reason),
            Error::NotExtended(n) => Some(n.reason),
            _ => None,
        }
    }

    /// True when the lock is held by someone else (class `held_elsewhere`).
    pub fn is_held_elsewhere(&self) -> bool {
        self.class() == Some(ErrorClass::HeldElsewhere)
    }

    /// True when nodes failed (class `nodes_failing`): each node's
    /// [`NodeReport::cause`] says why.
    pub fn is_unreachable(&self) -> bool {
        self.class() == Some(ErrorClass::NodesFailing)
    }

    /// True when an extension found the lock's keys gone and nobody else holding them
    /// (class `not_held`).
    pub fn is_not_held(&self) -> bool {
        self.class() == Some(ErrorClass::NotHeld)
    }

    /// Per-node detail of a failed acquisition, extension, release or inspection (empty
    /// otherwise).
    pub fn nodes(&self) -> &[NodeReport] {
        match self {
            Error::NotAcquired(n) => &n.nodes,
            Error::NotExtended(n) => &n.nodes,
            Error::NotReleased(n) => &n.nodes,
            Error::NotInspected(n) => &n.nodes,
            Error::LockLost(lost) => &lost.nodes,
            _ => &[],
        }
    }
}

/// Text a message quotes (a URL, a name the caller gave), cut to its first 64 bytes and
/// "…" when longer, so that a huge input never floods a message.
pub(crate) fn clip(text: &str) -> std::borrow::Cow<'_, str> {
    const SHOWN: usize = 64;
    if text.len() <= SHOWN {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut end = SHOWN;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{}… ({} bytes)", &text[..end], text.len()))
}

/// A reason in words, for messages.
pub(crate) fn describe_reason(reason: FailureReason) -> &'static str {
    match reason {
        FailureReason::Conflict => "held by someone else",
        FailureReason::NodesFailed => "too many nodes unreachable or failing",
        FailureReason::Mixed => "held by someone else on some nodes, others unreachable",
        FailureReason::ValidityTooShort => "a quorum agreed too late to leave enough validity",
        FailureReason::NotHeld => "not held: its keys are gone (expired or released)",
        _ => "failed",
    }
}

fn write_nodes(f: &mut fmt::Formatter<'_>, nodes: &[NodeReport]) -> fmt::Result {
    for (i, node) in nodes.iter().enumerate() {
        f.write_str(if i == 0 { " [" } else { "; " })?;
        write!(f, "{node}")?;
    }
    if !nodes.is_empty() {
        f.write_str("]")?;
    }
    Ok(())
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config(error) => write!(f, "invalid configuration: {error}"),
            Error::Usage(error) => write!(f, "{error}"),
            Error::InvalidUrl {
                index,
                url,
                message,
            } => write!(f, "invalid node URL #{index} {:?}: {message}", clip(url)),
            Error::DuplicateNode { first, second, url } => write!(
                f,
                "node #{second} {:?} is the same server as node #{first}: each node must be \
                 an independent server",
                clip(url)
            ),
            Error::InvalidSetting { setting, message } => {
                write!(f, "invalid {setting}: {message}")
            }
            Error::InvalidCertificate(message) => {
                write!(f, "invalid TLS root certificate: {message}")
            }
            Error::NotAcquired(n) => {
                write!(
                    f,
                    "lock not acquired after {} attempt{}: {}",
                    n.attempts,
                    if n.attempts == 1 { "" } else { "s" },
                    describe_reason(n.reason)
                )?;
                write_nodes(f, &n.nodes)
            }
            Error::NotExtended(n) => {
                if n.class == ErrorClass::NotHeld {
                    write!(f, "lock not extended: {}", describe_reason(n.reason))?;
                } else if n.lost {
                    write!(f, "lock lost: {}", describe_reason(n.reason))?;
                } else {
                    write!(
                        f,
                        "lock not extended ({}); still valid for {} ms",
                        describe_reason(n.reason),
                        n.validity.as_millis()
                    )?;
                }
                write_nodes(f, &n.nodes)
            }
            Error::NotReleased(n) => {
                let confirmed = n
                    .nodes
                    .iter()
                    .filter(|node| {
                        matches!(node.result, NodeResult::Success | NodeResult::Conflict)
                    })
                    .count();
                write!(
                    f,
                    "lock not released: {confirmed} of {} nodes confirmed, fewer than a \
                     quorum; the keys may stay until their TTL",
                    n.nodes.len()
                )?;
                write_nodes(f, &n.nodes)
            }
            Error::NotInspected(n) => {
                let failed = n.nodes.iter().filter(|node| node.cause().is_some()).count();
                write!(
                    f,
                    "cannot tell who holds the lock: {failed} of {} nodes failed, too many \
                     to decide",
                    n.nodes.len()
                )?;
                write_nodes(f, &n.nodes)
            }
            Error::LockLost(lost) => write!(f, "lock lost: {lost}"),
            Error::Released => f.write_str("the lock was already released"),
            Error::Closed => f.write_str(
                "used after close: the client was closed (its locks were released when it \
                 closed); build a new client",
            ),
            Error::FencedWrite(text) => write!(f, "fenced write failed: {text}"),
            Error::Runtime(error) => write!(f, "could not start the runtime: {error}"),
            Error::Internal(what) => write!(f, "internal error: {what}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Config(error) => Some(error),
            Error::Usage(error) => Some(error),
            Error::Runtime(error) => Some(error),
            _ => None,
        }
    }
}

impl From<ConfigError> for Error {
    fn from(error: ConfigError) -> Self {
        Error::Config(error)
    }
}

impl From<UsageError> for Error {
    fn from(error: UsageError) -> Self {
        match error {
            UsageError::InvalidTtl(config) => Error::Config(config),
            other => Error::Usage(other),
        }
    }
}
