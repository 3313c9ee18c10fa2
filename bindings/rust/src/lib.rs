//! # redlock-client
//!
//! Distributed locks over N independent Redis nodes (the Redlock algorithm), with the
//! [`redis`] crate for I/O and [`redlock_core`] for every decision: quorum, validity,
//! retries and their delays, what to release after a failed attempt, when to extend,
//! what each node is sent and when. This crate only does the I/O the core asks for and
//! hands replies and timeouts back. With one node it is a single-instance lock.
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
//! - The core decides everything about the lock's life, and the client does what it
//!   says: every command an operation emits goes to its node's [`redlock_core::Link`]
//!   (one per node, living as long as the client), which decides the order of writes,
//!   the bound in flight, what a stalled (frozen) node still gets, which releases it
//!   owes a node, what is written again after a lost connection, that the scripts are
//!   loaded first on every connection, and when to reconnect. Each node has one I/O
//!   task that connects, writes and reads as its link says.
//! - The driver loop is one rule: poll the operation until it says `Wait` or gives its
//!   outcome; wake up for a reply the links deliver, or at the `Wait` instant. The core
//!   decides as soon as a quorum agrees or can no longer agree, so a dead or frozen
//!   node costs nothing when the others answer.
//! - Keep-alive is the core's [`redlock_core::KeepAlive`]: when to extend, when to
//!   retry a failed extension, and when the lock is lost (taken, gone, or expired).
//! - Dropping an acquisition before it finishes (a `select!`, a timeout) abandons it
//!   ([`redlock_core::Operation::abandon`]): the release of its current token goes to
//!   the links at once and reaches every node, also one that is frozen now and answers
//!   later. Nothing is spawned.
//! - Time is one monotonic origin per client ([`std::time::Instant`] at build time),
//!   in microseconds as the core's [`Time`].
//!
//! ## Errors
//!
//! Every [`Error`] has the core's [`ErrorClass`] ([`Error::class`]): `held_elsewhere`,
//! `nodes_failing` (each node's [`NodeCause`]: `refused`, `auth`, `tls`, `timeout`,
//! `stalled`, `connection`, `error`, via [`NodeReport::cause`]), `lock_lost`,
//! `not_held` (an extension found the keys gone and nobody else holding them),
//! `invalid_argument` (configuration, URLs, the same server twice), `used_after_close`.
//! A release fewer than a quorum confirmed is [`Error::NotReleased`]
//! (`nodes_failing`), not a success. Losing a held lock is not an error until the
//! holder extends it: it is a [`LockState`], announced by [`Lock::lost`].
//! Cancelling is dropping the future, so `cancelled` is never returned.
//!
//! ## Waiting
//!
//! [`LockOptions::wait`] waits up to a limit for the lock (the core's wait limit: attempts
//! until then, never one that could not end by it). A release publishes a notice per key;
//! an acquisition with a wait limit (once a node refuses it because the key is held), or
//! one that may retry once it finds its key held, subscribes on every node (one
//! subscriber connection per node, opened on first need, shared by the client's waiters)
//! and hands each notice to [`redlock_core::Operation::handle_notice`], so it tries again
//! as soon as the core says, not after its retry delay; each confirmed subscription goes
//! to [`redlock_core::Operation::handle_subscribed`]. A lost notice costs at most that delay;
//! [`ClientBuilder::release_notices`] turns notices off.
//!
//! ## Fencing
//!
//! [`ClientBuilder::fencing`] or [`LockOptions::fencing`] gives each lock a fencing token,
//! [`Lock::fencing_token`], strictly increasing per resource across the quorum. The
//! protected resource must check it: [`fenced_set`] (and [`blocking::fenced_set`]) does
//! that for a Redis key on your own connection.
//!
//! ## Inspection and observability
//!
//! [`Client::is_locked`] and [`Lock::is_owned`] are the core's inspection (a quorum
//! holding one token). [`ClientBuilder::on_event`] hooks receive every core
//! [`Event`] (and `lost` from the keep-alive); a panicking hook is caught. The cargo
//! feature `tracing` adds one span per operation (`redlock.acquire`, ...).
//!
//! ## Your own connections
//!
//! [`Client::from_connections`] builds a client over `redis` connections you opened.
//! With the `sentinel` feature, `Client::sentinel` locks the master that Redis Sentinels
//! name (N = 1, with the failover caveat of a single instance with a replica), asking
//! them in turn with the core's per-Sentinel bound (`SENTINEL_QUERY_TIMEOUT_DEFAULT_MS`).
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
mod fence;
mod lock;
mod node;
mod notice;
#[cfg(feature = "sentinel")]
mod sentinel;
mod trace;

#[cfg(feature = "sentinel")]
pub use client::DEFAULT_SENTINEL_QUERY_TIMEOUT;
pub use client::{
    Client, ClientBuilder, ExtendReport, KeyStatus, LockOptions, ReleaseReport, RetryProgress,
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_TTL,
};
pub use error::{Error, NodeReport, NotAcquired, NotExtended, NotInspected, NotReleased};
pub use fence::{fenced_set, FencedWrite};
pub use lock::{Lock, LockState, Lost, LostReason};
pub use node::LinkStats;
pub use redlock_core::{
    self as core, Config, ConfigBuilder, ErrorClass, Event, EventKind, FailureReason, NodeCause,
    NodeResult, OperationKind, Time,
};
