//! # redlock-client
//!
//! Distributed locks over N independent Redis nodes (the Redlock algorithm), with the
//! [`redis`] crate for I/O and [`redlock_core`] for every decision: quorum, validity,
//! retries and their delays, what to release after a failed attempt, when to extend.
//! This crate only sends the commands the core emits, to all nodes at once, waits for
//! the replies no longer than each command's deadline, and hands replies and timeouts
//! back. With one node it is a single-instance lock.
//!
//! ```no_run
//! # async fn example() -> Result<(), redlock_client::Error> {
//! use std::time::Duration;
//! use redlock_client::{Client, LockOptions};
//!
//! let client = Client::new([
//!     "redis://127.0.0.1:7000",
//!     "redis://127.0.0.1:7001",
//!     "redis://127.0.0.1:7002",
//! ])?;
//! let lock = client
//!     .lock_with(&["orders:42"], LockOptions::new().ttl(Duration::from_secs(10)).auto_extend(true))
//!     .await?;
//! tokio::select! {
//!     lost = lock.lost() => eprintln!("stopped: {lost}"),
//!     () = async { /* the protected work */ } => {}
//! }
//! lock.release().await?;
//! # Ok(()) }
//! ```
//!
//! ## How a call runs
//!
//! - Every command goes to its node at once; each has the core's deadline
//!   (`round start + node_timeout`), enforced here with a timer around connecting and
//!   waiting, whatever the `redis` client's own settings. The core decides as soon as a
//!   quorum agrees or can no longer agree, so a dead or frozen node costs nothing when
//!   the others answer.
//! - A connection whose command timed out or failed is dropped, and the next command to
//!   that node opens a new one (within its own deadline), so nothing queues behind a
//!   command a frozen node will never answer.
//! - Dropping an acquisition before it finishes (a `select!`, a timeout) is safe: its
//!   current token is released on every node in the background, as after a failed
//!   attempt, so no key is left behind.
//! - Time is one monotonic origin per client ([`std::time::Instant`] at build time),
//!   in microseconds as the core's [`Time`].
//!
//! ## Errors
//!
//! [`Error::NotAcquired`] tells "held by someone else" ([`Error::is_held_elsewhere`])
//! from "nodes unreachable" ([`Error::is_unreachable`]), with every node's answer.
//! Losing a held lock is not an error: it is a [`LockState`], announced by
//! [`Lock::lost`].
//!
//! ## TLS and AUTH
//!
//! Through the `redis` crate's URLs: `redis://:password@host:port`,
//! `redis://user:password@host:port`, `rediss://host:port` (TLS with rustls; the
//! system's roots, or [`ClientBuilder::tls_root_certificate`], or `rediss://host:port/#insecure`
//! to skip verification in tests).
//!
//! ## Blocking
//!
//! [`blocking::Client`] runs the same client on a small runtime of its own.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod blocking;
mod client;
mod error;
mod lock;
mod node;

pub use client::{
    Client, ClientBuilder, ExtendReport, KeyStatus, LockOptions, ReleaseReport, RetryProgress,
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_TTL,
};
pub use error::{Error, NodeReport, NotAcquired, NotExtended};
pub use lock::{Lock, LockState, Lost, LostReason};
pub use redlock_core::{self as core, Config, ConfigBuilder, FailureReason, NodeResult, Time};
