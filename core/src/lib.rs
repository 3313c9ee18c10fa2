//! # redlock-core
//!
//! The Redlock distributed-lock algorithm as a sans-IO state machine: it decides the
//! quorum, the lock's validity, retries, the release plan and extensions from replies
//! and timestamps the caller supplies, and never touches a socket, a clock or (unless
//! asked) OS randomness. Every binding of this project (Rust, C, WebAssembly, Python,
//! Node, Java, PHP) drives this one core with its own Redis client.
//!
//! ## The algorithm
//!
//! Single instance and Redlock are the same code with N = 1 or N > 1.
//!
//! - **Acquire**: every node gets `SET <key> <token> NX PX <ttl_ms>` at once, each with
//!   the deadline `start + node_timeout`. Success as soon as `quorum = N / 2 + 1` nodes
//!   said OK; failure as soon as `N - quorum + 1` failed (conflict, error, timeout).
//! - **Validity**: `ttl - elapsed - drift`, where `elapsed` runs on the caller's
//!   monotonic clock from the moment the round's commands were emitted to the reply that
//!   completed the quorum, and `drift = ceil(ttl * drift_factor) + drift_fixed`. The
//!   lock is held until `valid_until = start + ttl - drift`. Below `min_validity` (or
//!   at zero) the attempt counts as failed.
//! - **After a failed attempt**: release on all N nodes, wait a random delay in
//!   `retry_delay ± retry_jitter`, try again with a fresh token, up to `attempts`.
//! - **Release**: a compare-and-delete script on all N nodes.
//! - **Extend**: a compare-and-`PEXPIRE` script on all N nodes; a quorum and a positive
//!   validity from the extension's own start are needed; a missing key is never
//!   re-created.
//!
//! ## Driving it
//!
//! [`Redlock`] starts [`Operation`]s. An operation takes inputs
//! ([`Operation::handle_reply`], [`Operation::handle_timeout`], [`Operation::abandon`])
//! and, after each, is polled with [`Operation::poll_output`] until it returns a
//! [`Output::Wait`] or the [`Outcome`]: send commands, wait until an instant, or the
//! outcome. `Wait` is the only source of wake-ups. See [`Operation`] for the loop.
//!
//! Time is [`Time`], microseconds on the caller's monotonic clock.
//!
//! ## The lock's whole life
//!
//! If two drivers would make the same decision, it is made here:
//!
//! - **Node links** ([`Link`]): per node, the order of commands, the bound on commands
//!   in flight, what a stalled node still gets (releases it owes) and what it no longer
//!   gets (new acquisitions), that nothing but a release is ever written twice, and that
//!   the scripts are loaded first on every new connection. Drivers hand every command
//!   to its node's link and do what the link outputs.
//! - **Keep-alive** ([`KeepAlive`]): when to extend, when to retry a failed extension,
//!   when the lock counts as lost, the extension bound.
//! - **Cancellation** ([`Operation::abandon`], [`Operation::decline`]): what a cancelled
//!   operation must still send so that nothing it may have set outlives it, also when
//!   its outcome was polled but never reached the caller.
//! - **Error classes** ([`ErrorClass`], [`NodeCause`]): held elsewhere, nodes failing
//!   (each node's cause), lock lost, not held, invalid argument, used after close,
//!   cancelled; every binding maps them to its own errors.
//! - **Node addresses** ([`duplicate_node`]): the same server given twice is refused.
//!
//! ## What a driver must still get right
//!
//! - **Enforce each command's deadline yourself**, whatever the Redis client's own
//!   timeouts and retry settings: stop waiting at [`Command::deadline`] (the operation's
//!   `Wait` says when) and call [`Operation::handle_timeout`]. Never let a client
//!   library's offline queue or retries decide anything: report its "ready" and
//!   "disconnected" events to the node's [`Link`].
//! - **Let commands still in flight after an outcome finish** (up to their deadlines,
//!   [`Link::is_idle`]) before a process exits: an early decision leaves the slower
//!   nodes' commands out, and for a release those are what clean the remaining nodes.
//!
//! The project's `docs/bindings.md` describes a binding's parts, these rules and the
//! tests every binding carries.

//! ## Randomness
//!
//! Tokens are lowercase hex of `token_bytes` random bytes (160 bits by default), one per
//! attempt. They come from the OS (feature `os-random`, on by default, [`Redlock::new`]),
//! from a seeded ChaCha20 stream ([`Redlock::with_seed`]), or from bytes the caller
//! supplies ([`Redlock::acquire_with_random`]), drawn in this order: the first
//! attempt's token; then, after each failed attempt with attempts left, 8 bytes
//! (`u64`, little-endian) for the retry delay's jitter, then the next attempt's token.
//!
//! ## Guarantees
//!
//! No input, in any order, panics the core. Misuse is a [`UsageError`], configuration
//! mistakes a [`ConfigError`], and what nodes do is reported in outcomes and
//! [`NodeResult`]s. Time arithmetic saturates and rounds against the lock holder.

#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

extern crate alloc;

mod class;
mod client;
mod command;
mod config;
mod error;
mod event;
mod guard;
mod keepalive;
mod link;
mod operation;
mod outcome;
mod random;
mod reply;
pub mod resp;
mod subscriptions;
mod time;

pub use class::{ErrorClass, NodeCause};
pub use client::{AcquireOptions, Redlock, MAX_RESOURCES};
pub use command::{
    fence_key, notice_channel, queue_keys, reserved_key_owner, sentinel_connect_timeout_ms,
    waiter_channel, Command, CommandKind, RequestId, ACQUIRE_SCRIPT, ACQUIRE_SHA1,
    AUXILIARY_SUFFIXES, CONNECT_TIMEOUT_DEFAULT_MS, EXTEND_SCRIPT, EXTEND_SHA1,
    FENCED_ACQUIRE_SCRIPT, FENCED_ACQUIRE_SHA1, HANDOFF_TURN_MS, LISTENER_ID_BYTES,
    LISTENER_ID_CHARS, MAX_QUEUE_ENTRY_LIFETIME_MS, NOTICE_CHANNEL_LINGER_MS,
    NOTICE_CHANNEL_PREFIX, QUEUED_ACQUIRE_SCRIPT, QUEUED_ACQUIRE_SHA1, RELEASE_SCRIPT,
    RELEASE_SHA1, SENTINEL_QUERY_TIMEOUT_DEFAULT_MS, SUBSCRIBER_REOPEN_FIRST_MS,
    SUBSCRIBER_REOPEN_MAX_MS, WAITER_CHANNEL_PREFIX, WRITE_BACK_SCRIPT, WRITE_BACK_SHA1,
};
pub use config::{
    duplicate_node, Config, ConfigBuilder, ConfigError, DEFAULT_ATTEMPTS, DEFAULT_DRIFT_FACTOR,
    DEFAULT_DRIFT_FIXED, DEFAULT_NODE_TIMEOUT_CAP, DEFAULT_RETRY_DELAY, DEFAULT_RETRY_JITTER,
    DEFAULT_TOKEN_BYTES, MAX_ATTEMPTS, MAX_NODES, MAX_NODE_TIMEOUT_FRACTION, MAX_TOKEN_BYTES,
    MAX_TTL_MS, MIN_RETRY_DELAY, MIN_TOKEN_BYTES,
};
pub use error::UsageError;
pub use event::{Event, EventKind, MAX_EVENTS};
pub use guard::{
    fence_guard_key, FencedSet, FencedWrite, FENCED_SET_SCRIPT, FENCED_SET_SHA1, MAX_FENCING_TOKEN,
};
pub use keepalive::{KeepAlive, KeepAliveAction, LostReason};
pub use link::{
    Delivery, Link, LinkCause, LinkOutput, Write, WriteId, LATE_RELEASE_BUDGET, MAX_IN_FLIGHT,
    MAX_OWED, MAX_QUEUED, RECONNECT_MAX, RECONNECT_MIN, STALL_CLOSE,
};
pub use operation::{Operation, OperationKind, Output};
pub use outcome::{
    Acquired, Extended, FailureReason, Inspected, Lease, NodeResult, NotAcquired, NotExtended,
    NotInspected, NotReleased, Outcome, Released,
};
pub use random::{Token, MAX_TOKEN_TEXT};
pub use reply::Reply;
pub use subscriptions::{SubscriberOutput, Subscriptions};
pub use time::Time;

/// This crate's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
