//! Keep-alive: one state machine that says when to extend a held lock, when to retry a
//! failed extension, and when the lock counts as lost. Every binding and the simulation
//! drive this one; none decides any of it itself.
//!
//! # Transitions
//!
//! ```text
//! Waiting --next extension due----------------------> Extending   (poll: Extend)
//! Waiting --lease ran out----------------------------> Lost(expired | extension_limit)
//! Extending --Extended------------------------------> Waiting     (new lease)
//! Extending --NotExtended: conflict / not held-------> Lost(taken / not_held)
//! Extending --NotExtended: nodes failed, failure-----> Waiting     (retry at the core's instant,
//!                                                                   or none: wait for the end)
//! Extending --lease ran out before the outcome-------> Lost(expired)
//! any --stop()---------------------------------------> Stopped
//! ```
//!
//! # The policy, once for every binding
//!
//! - The next extension starts at [`Config::next_extension`]: when `max(ttl / 3,
//!   2 * node_timeout)` of validity is left, so a whole round fits before the end.
//! - A failed extension whose nodes failed (or one the driver could not run at all:
//!   [`KeepAlive::handle_failure`]) is retried at [`Config::extension_retry_at`], as long
//!   as a round still fits; the lock is **not** lost while its validity lasts.
//! - The lock is lost the moment an extension finds it taken ([`LostReason::Taken`]) or
//!   gone ([`LostReason::NotHeld`]), or when its validity runs out
//!   ([`LostReason::Expired`], or [`LostReason::ExtensionLimit`] once
//!   [`Config::max_extensions`] extensions were made). A lost lock stays lost: an
//!   extension that succeeds after the lease ran out does not revive it.
//! - An extension's lease replaces the current one, whether it succeeded (its TTL counts
//!   from the extension's own start, so a shorter TTL ends the lease sooner) or failed
//!   (it may be shorter: see [`crate::NotExtended::lease`]). An outcome of another lock
//!   (another token, or other keys) changes nothing.

use alloc::vec::Vec;

use crate::config::Config;
use crate::outcome::{FailureReason, Lease, NodeResult, Outcome};
use crate::time::Time;

/// Why a held lock was lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LostReason {
    /// An extension found the keys holding another token on so many nodes that no
    /// quorum holds ours: someone else may hold the lock.
    Taken,
    /// An extension found the keys gone (expired or deleted) and nobody else holding
    /// them.
    NotHeld,
    /// The validity ran out before an extension succeeded.
    Expired,
    /// The validity ran out after the bound on extensions was reached.
    ExtensionLimit,
}

impl LostReason {
    /// A stable snake_case name: `taken`, `not_held`, `expired`, `extension_limit`.
    pub fn code(self) -> &'static str {
        match self {
            LostReason::Taken => "taken",
            LostReason::NotHeld => "not_held",
            LostReason::Expired => "expired",
            LostReason::ExtensionLimit => "extension_limit",
        }
    }
}

/// What the driver of a [`KeepAlive`] does next, from [`KeepAlive::poll`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
#[non_exhaustive]
pub enum KeepAliveAction {
    /// Start an extension of [`KeepAlive::lease`] now (with its own TTL) and hand its
    /// outcome to [`KeepAlive::handle_outcome`] (or report [`KeepAlive::handle_failure`]).
    Extend,
    /// Nothing until this instant (or until an outcome arrives); then poll again.
    WaitUntil(Time),
    /// The lock is lost. Final: tell the holder.
    Lost(LostReason),
    /// Keep-alive was stopped ([`KeepAlive::stop`]). Final.
    Stopped,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Waiting,
    Extending,
    Lost(LostReason),
    Stopped,
}

/// Keeps one lock alive: see the module documentation for the policy.
///
/// Driving it: after creating it, after every outcome or failure handed in, and at every
/// instant it named, call [`KeepAlive::poll`] with the current time and act on the
/// action. Extensions made by hand may be handed in too ([`KeepAlive::handle_outcome`]).
#[derive(Clone, Debug)]
pub struct KeepAlive {
    config: Config,
    lease: Lease,
    state: State,
    /// When to retry after a failed extension (taken once).
    retry_at: Option<Time>,
    /// No further extension fits before the lease ends: wait for the end.
    exhausted: bool,
    limit_reached: bool,
    last_failure: Vec<NodeResult>,
}

impl KeepAlive {
    /// Keep-alive for `lease` under `config` (the configuration the lock was acquired
    /// with; a lease with its own TTL is handled as [`Config::next_extension`] says).
    pub fn new(config: &Config, lease: Lease) -> KeepAlive {
        KeepAlive {
            config: config.clone(),
            lease,
            state: State::Waiting,
            retry_at: None,
            exhausted: false,
            limit_reached: false,
            last_failure: Vec::new(),
        }
    }

    /// The lease as it stands (the latest extension's, or the failed extension's).
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// Why the lock was lost, once it is.
    pub fn lost(&self) -> Option<LostReason> {
        match self.state {
            State::Lost(reason) => Some(reason),
            _ => None,
        }
    }

    /// True while an extension this machine asked for is under way.
    pub fn is_extending(&self) -> bool {
        self.state == State::Extending
    }

    /// How the nodes answered the last failed extension (empty if none failed).
    pub fn last_failure(&self) -> &[NodeResult] {
        &self.last_failure
    }

    /// What to do at `now`.
    pub fn poll(&mut self, now: Time) -> KeepAliveAction {
        match self.state {
            State::Stopped => KeepAliveAction::Stopped,
            State::Lost(reason) => KeepAliveAction::Lost(reason),
            State::Extending => {
                if self.lease.is_valid(now) {
                    KeepAliveAction::WaitUntil(self.lease.valid_until())
                } else {
                    self.lose(LostReason::Expired)
                }
            }
            State::Waiting => {
                if !self.lease.is_valid(now) {
                    let reason = if self.limit_reached {
                        LostReason::ExtensionLimit
                    } else {
                        LostReason::Expired
                    };
                    return self.lose(reason);
                }
                let next = if self.exhausted {
                    None
                } else if let Some(at) = self.retry_at {
                    Some(at)
                } else {
                    let next = self.config.next_extension(&self.lease, now);
                    // The lease is valid, so no next extension means the bound was hit.
                    self.limit_reached = next.is_none();
                    next
                };
                match next {
                    Some(at) if at <= now => {
                        self.retry_at = None;
                        self.state = State::Extending;
                        KeepAliveAction::Extend
                    }
                    Some(at) => KeepAliveAction::WaitUntil(at.min(self.lease.valid_until())),
                    None => KeepAliveAction::WaitUntil(self.lease.valid_until()),
                }
            }
        }
    }

    /// Hands in the outcome of an extension of this lock (the one [`KeepAliveAction::Extend`]
    /// asked for, or one made by hand) at `now`. Outcomes of other kinds, outcomes of
    /// another lock (a lease with another token or other keys), and any outcome once the
    /// lock is lost or keep-alive stopped, change nothing.
    pub fn handle_outcome(&mut self, outcome: &Outcome, now: Time) {
        if matches!(self.state, State::Lost(_) | State::Stopped) {
            return;
        }
        if outcome.lease().is_some_and(|lease| {
            lease.token() != self.lease.token() || lease.keys != self.lease.keys
        }) {
            // Another lock's outcome (another token, or the same token on other keys):
            // it says nothing about this lease.
            return;
        }
        if self.state == State::Extending && !self.lease.is_valid(now) {
            // Too late: the holder could not rely on the lock since valid_until.
            self.state = State::Lost(LostReason::Expired);
            return;
        }
        match outcome {
            Outcome::Extended(extended) => {
                // The extension's lease replaces the old one even when it ends sooner:
                // its PEXPIRE set the keys' TTL from the extension's own start, so the
                // old valid_until no longer holds on any node it reached (extending a
                // 10 s lock by 1 s leaves about 1 s, not the 10 s that were left).
                self.lease = extended.lease.clone();
                self.retry_at = None;
                self.exhausted = false;
                self.state = State::Waiting;
            }
            Outcome::NotExtended(failed) => {
                self.last_failure.clone_from(&failed.nodes);
                match failed.reason {
                    // The lock is gone now: the outcome's lease ends at its decision.
                    FailureReason::Conflict => {
                        self.lease = failed.lease.clone();
                        self.state = State::Lost(LostReason::Taken);
                    }
                    FailureReason::NotHeld => {
                        self.lease = failed.lease.clone();
                        self.state = State::Lost(LostReason::NotHeld);
                    }
                    _ => {
                        if failed.lease.valid_until() < self.lease.valid_until() {
                            self.lease = failed.lease.clone();
                        }
                        self.retry_at = failed.retry_at;
                        self.exhausted = failed.retry_at.is_none();
                        self.state = State::Waiting;
                    }
                }
            }
            _ => {}
        }
    }

    /// The extension could not be run at all at `now` (the driver failed before any
    /// outcome: a closed client, an exception). The same policy as an extension whose
    /// nodes all failed: retry while a round fits, lost when the validity runs out.
    pub fn handle_failure(&mut self, now: Time) {
        if matches!(self.state, State::Lost(_) | State::Stopped) {
            return;
        }
        self.retry_at = self.config.extension_retry_at(
            FailureReason::NodesFailed,
            self.lease.valid_until(),
            now,
        );
        self.exhausted = self.retry_at.is_none();
        self.state = State::Waiting;
    }

    /// Stops keeping the lock alive (it was released, or the holder no longer wants
    /// it extended). Final.
    pub fn stop(&mut self) {
        if !matches!(self.state, State::Lost(_)) {
            self.state = State::Stopped;
        }
    }

    fn lose(&mut self, reason: LostReason) -> KeepAliveAction {
        self.state = State::Lost(reason);
        KeepAliveAction::Lost(reason)
    }
}
