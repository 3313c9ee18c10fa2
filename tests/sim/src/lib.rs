//! # redlock-sim
//!
//! A deterministic simulation of Redis locks. It runs the real `redlock-core`, and the
//! legacy patterns the literature warns about, through the classic failure scenarios,
//! and checks mutual exclusion on a global clock nobody inside the simulation can read.
//!
//! - **Time**: one virtual global clock in microseconds; an event queue ordered by
//!   (time, sequence number). Nothing reads the wall clock.
//! - **Nodes** ([`node`]): a keyspace with `SET NX PX`, `SETNX`, `EXPIRE`, `GETSET`,
//!   `GET`, `DEL` and the core's scripts, fenced acquisition and write-back included
//!   (`EVALSHA`, `NOSCRIPT`, `EVAL`), expiry on the node's own clock (which drifts and
//!   can jump), crashes with or without data (fence counters included), restarts, an
//!   optional asynchronous replica promoted on failover.
//! - **Network** ([`network`]): per-message delay, loss, partitions, scripted loss of
//!   one reply; order kept per connection.
//! - **Clients**: their own monotonic clocks (drift) and wall clocks (offset); pauses
//!   before reading replies, after acquiring, before writing; crashes. Clients of our
//!   strategies drive the real core through its public API with the bindings' loop
//!   ([`model::CoreModel`]); legacy clients are small state machines
//!   ([`model::LegacyModel`]).
//! - **Resource** ([`check::Resource`]): logs who wrote when and checks fencing tokens:
//!   with the core's own check (`FencedSet` against a simulated Redis) for our fenced
//!   strategies, by rejecting a lower token for ZooKeeper's and etcd's.
//! - **Checks** ([`check`]): exclusion, stale writes, token order, keys left behind.
//!
//! Randomness comes only from ChaCha streams seeded with the run's seed; collections
//! that are iterated are ordered (`BTreeMap`, `Vec`). The same seed gives the same
//! trace byte for byte.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod check;
pub mod clock;
pub mod coordination;
pub mod coordination_model;
pub mod model;
pub mod network;
pub mod node;
pub mod report;
pub mod rng;
pub mod scenario;
pub mod sim;
pub mod strategy;
pub mod timeline;
pub mod trace;

pub use check::Verdict;
pub use report::{evaluate, table, Cell, Settings};
pub use scenario::{Plan, Scenario};
pub use sim::{run, run_plan, RunResult, SimError, Stats};
pub use strategy::Strategy;
