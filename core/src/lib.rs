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
//! ([`Operation::handle_reply`], [`Operation::handle_timeout`]) and, after each, is
//! polled with [`Operation::poll_output`] until `None`: send commands, wait until an
//! instant, or the [`Outcome`]. See [`Operation`] for the loop.
//!
//! Time is [`Time`], microseconds on the caller's monotonic clock.
//!
//! ## What a driver must get right
//!
//! The core decides everything about the lock; the transport is the driver's. Every
//! driver of this project learned these the same way, so they are stated once here:
//!
//! - **Enforce each command's deadline yourself**, whatever the Redis client's own
//!   timeouts and retry settings: stop waiting at [`Command::deadline`] and report
//!   [`Reply::Timeout`] (or let [`Operation::handle_timeout`] do it). Do not let the
//!   next command to that node queue behind one stuck on a frozen node.
//! - **Keep each node's commands in the order they were emitted.** After a failed
//!   attempt the core emits the release while that attempt's `SET` may still be in
//!   flight; if the release overtakes it on another connection, the `SET` lands after
//!   it and the key stays until its TTL.
//! - **Load the scripts when a connection opens** (`SCRIPT LOAD` of [`ACQUIRE_SCRIPT`],
//!   [`RELEASE_SCRIPT`], [`EXTEND_SCRIPT`]). The core falls back to `EVAL` on `NOSCRIPT`
//!   while it is deciding, but a `NOSCRIPT` that arrives after an early decision gets no
//!   fallback.
//! - **Let commands still in flight after an outcome finish** (up to their deadlines)
//!   before a process exits: an early decision leaves the slower nodes' commands out, and
//!   for a release those are what clean the remaining nodes.
//!
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

mod client;
mod command;
mod config;
mod error;
mod operation;
mod outcome;
mod random;
mod reply;
pub mod resp;
mod time;

pub use client::{Redlock, MAX_RESOURCES};
pub use command::{
    Command, CommandKind, RequestId, ACQUIRE_SCRIPT, ACQUIRE_SHA1, EXTEND_SCRIPT, EXTEND_SHA1,
    RELEASE_SCRIPT, RELEASE_SHA1,
};
pub use config::{
    Config, ConfigBuilder, ConfigError, DEFAULT_ATTEMPTS, DEFAULT_DRIFT_FACTOR,
    DEFAULT_DRIFT_FIXED, DEFAULT_NODE_TIMEOUT_CAP, DEFAULT_RETRY_DELAY, DEFAULT_RETRY_JITTER,
    DEFAULT_TOKEN_BYTES, MAX_ATTEMPTS, MAX_NODES, MAX_TOKEN_BYTES, MAX_TTL_MS, MIN_TOKEN_BYTES,
};
pub use error::UsageError;
pub use operation::{Operation, OperationKind, Output};
pub use outcome::{
    Acquired, Extended, FailureReason, Lease, NodeResult, NotAcquired, NotExtended, Outcome,
    Released,
};
pub use random::{Token, MAX_TOKEN_TEXT};
pub use reply::Reply;
pub use time::Time;

/// This crate's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
