//! What an operation ends with. Losing a lock is an outcome, not an error.

use alloc::string::String;
use alloc::vec::Vec;
use core::time::Duration;

use crate::config::Config;
use crate::random::Token;
use crate::time::Time;

/// How one node answered the round an outcome reports on.
///
/// `Conflict` is the node refusing on the key's state: for an acquisition, the key
/// already exists (someone else holds it, or a stale key of ours); for an extension,
/// the key holds another token (`Missing` when it is gone); for a release, the key is
/// missing or holds another token.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeResult {
    /// No command was sent to this node in this round.
    NotAsked,
    /// The command was sent and neither a reply nor its deadline has come yet (a node
    /// still in flight when the quorum decided early).
    Pending,
    /// The node did what was asked: set the key, extended it, or deleted it.
    Success,
    /// The node refused because of the key's state (see the type's documentation).
    Conflict,
    /// An extension found the key gone on this node (expired or released, held by
    /// nobody), where [`NodeResult::Conflict`] says it holds another token.
    Missing,
    /// The node answered with an error, an unexpected reply, or the connection failed;
    /// the text says which.
    Error(String),
    /// No reply came before the deadline.
    Timeout,
}

impl NodeResult {
    /// A stable snake_case name: `not_asked`, `pending`, `success`, `conflict`,
    /// `missing`, `error`, `timeout`.
    pub fn code(&self) -> &'static str {
        match self {
            NodeResult::NotAsked => "not_asked",
            NodeResult::Pending => "pending",
            NodeResult::Success => "success",
            NodeResult::Conflict => "conflict",
            NodeResult::Missing => "missing",
            NodeResult::Error(_) => "error",
            NodeResult::Timeout => "timeout",
        }
    }

    pub(crate) fn is_settled(&self) -> bool {
        !matches!(self, NodeResult::NotAsked | NodeResult::Pending)
    }
}

/// Why an acquisition or extension failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureReason {
    /// Conflicts alone made the quorum impossible: for an acquisition, the lock is held
    /// by someone else; for an extension, the lock is lost (the key is gone or taken on
    /// so many nodes that at most `quorum - 1` still hold it).
    Conflict,
    /// Errors and timeouts alone made the quorum impossible: the nodes are failing.
    NodesFailed,
    /// Conflicts and failures together made the quorum impossible.
    Mixed,
    /// A quorum agreed, but too late: the validity left was below the floor.
    ValidityTooShort,
    /// Extensions only: conflicts alone made the quorum impossible and every one of them
    /// found the key missing (expired or released), none holding another token: the
    /// lock is gone, and nobody else holds it on those nodes.
    NotHeld,
}

impl FailureReason {
    /// A stable snake_case name: `conflict`, `nodes_failed`, `mixed`, `validity_too_short`,
    /// `not_held`.
    pub fn code(self) -> &'static str {
        match self {
            FailureReason::Conflict => "conflict",
            FailureReason::NodesFailed => "nodes_failed",
            FailureReason::Mixed => "mixed",
            FailureReason::ValidityTooShort => "validity_too_short",
            FailureReason::NotHeld => "not_held",
        }
    }

    pub(crate) fn from_counts(conflicts: usize, failures: usize, failures_to_lose: usize) -> Self {
        if conflicts >= failures_to_lose {
            FailureReason::Conflict
        } else if failures >= failures_to_lose {
            FailureReason::NodesFailed
        } else {
            FailureReason::Mixed
        }
    }
}

/// A held lock: what extending and releasing it need, and until when it is valid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    pub(crate) keys: Vec<Vec<u8>>,
    pub(crate) token: Token,
    pub(crate) valid_until: Time,
    pub(crate) extensions: u32,
    pub(crate) ttl_ms: u64,
    /// The longest TTL any command of this lease set on a key, if known.
    pub(crate) key_ttl_ms: Option<u64>,
    /// The fencing token of a fenced acquisition.
    pub(crate) fencing_token: Option<u64>,
    /// A waiting acquisition's id in the resource's queue of waiters, which its release
    /// takes out of the queue on every node.
    pub(crate) waiter: Option<Token>,
}

impl Lease {
    /// The locked keys (resource names with the key prefix), in the order given.
    pub fn keys(&self) -> &[Vec<u8>] {
        &self.keys
    }

    /// The token stored under every key.
    pub fn token(&self) -> &Token {
        &self.token
    }

    /// The instant, on the caller's monotonic clock, until which the lock is held:
    /// `start + ttl - drift` of the round that acquired or last extended it. The holder
    /// MUST NOT rely on the lock at or after this instant.
    pub fn valid_until(&self) -> Time {
        self.valid_until
    }

    /// Validity left at `now` (zero once expired).
    pub fn validity(&self, now: Time) -> Duration {
        self.valid_until.saturating_duration_since(now)
    }

    /// True while `now < valid_until`.
    pub fn is_valid(&self, now: Time) -> bool {
        now < self.valid_until
    }

    /// The TTL the lock was acquired or last extended with, in milliseconds; extensions
    /// use it unless given another.
    pub fn ttl_ms(&self) -> u64 {
        self.ttl_ms
    }

    /// Successful extensions since the lock was acquired.
    pub fn extensions(&self) -> u32 {
        self.extensions
    }

    /// The longest TTL, in milliseconds, that any of this lock's keys may carry: the
    /// largest TTL its acquisition and every extension (failed ones included: their
    /// `PEXPIRE` may have reached some keys) set. `None` for a lease rebuilt from its
    /// parts ([`crate::Redlock::lease`]), whose keys' TTL this process never saw: such a
    /// key may live longer than [`Lease::ttl_ms`] says.
    pub fn key_ttl_ms(&self) -> Option<u64> {
        self.key_ttl_ms
    }

    /// The fencing token of this acquisition: strictly greater than every token of its
    /// resources handed out by an acquisition whose write-back completed before this
    /// acquisition started (see `docs/fencing.md`). `None` without fencing, and for a lease rebuilt from its
    /// parts. Send it with every write to the protected resource, which rejects a token
    /// lower than one it has seen.
    pub fn fencing_token(&self) -> Option<u64> {
        self.fencing_token
    }
}

impl Config {
    /// When a holder that keeps its lock alive automatically should start the next
    /// extension of `lease`, or `None` if it should not: the lease has expired at `now`,
    /// or [`Config::max_extensions`] extensions were already made.
    ///
    /// The extension starts when `max(ttl / 3, 2 * node_timeout)` of validity is left,
    /// with the lease's own TTL ([`Lease::ttl_ms`]) and the node timeout that goes with
    /// it, so a full round (at most `node_timeout`) ends well before the lease does; if
    /// that moment has passed, it is `now`.
    pub fn next_extension(&self, lease: &Lease, now: Time) -> Option<Time> {
        if !lease.is_valid(now) {
            return None;
        }
        if self
            .max_extensions()
            .is_some_and(|max| lease.extensions >= max)
        {
            return None;
        }
        let node_timeout_us = if lease.ttl_ms == self.ttl_ms() {
            self.node_timeout_us()
        } else {
            // A lease from `acquire_for`/`extend_for`: its TTL was accepted by this
            // configuration then, so `with_ttl` succeeds; if not, the configured one.
            self.with_ttl(Duration::from_millis(lease.ttl_ms))
                .map_or(self.node_timeout_us(), |config| config.node_timeout_us())
        };
        let ttl_us = lease.ttl_ms.saturating_mul(1000);
        let margin = (ttl_us / 3).max(node_timeout_us.saturating_mul(2));
        Some(lease.valid_until.minus_micros(margin).max(now))
    }

    /// After a failed extension (or one the driver could not run at all) at `now`, when
    /// to try again: after `min(retry_delay, validity / 4)` (at least 1 ms, so failing
    /// nodes are not hammered), if that round can still end before `valid_until`. `None`
    /// for a lost lock ([`FailureReason::Conflict`], [`FailureReason::NotHeld`]) or when
    /// no round fits.
    pub fn extension_retry_at(
        &self,
        reason: FailureReason,
        valid_until: Time,
        now: Time,
    ) -> Option<Time> {
        if matches!(reason, FailureReason::Conflict | FailureReason::NotHeld) {
            return None;
        }
        let left = valid_until.micros_since(now);
        let pause = self.retry_delay_us().min(left / 4).max(1000);
        let at = now.plus_micros(pause);
        (at.plus_micros(self.node_timeout_us()) < valid_until).then_some(at)
    }
}

/// The outcome of an operation, polled once as [`crate::Output::Outcome`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// The lock is held.
    Acquired(Acquired),
    /// Every attempt failed; each was followed by a release on all nodes.
    NotAcquired(NotAcquired),
    /// The lock was extended.
    Extended(Extended),
    /// The extension failed; see [`NotExtended`] for how long the lock is still held.
    NotExtended(NotExtended),
    /// A quorum of nodes confirmed the lock's keys are gone.
    Released(Released),
    /// Every node settled and fewer than a quorum confirmed the keys are gone: the lock
    /// may still be held (by this holder's token) until its keys' TTL.
    NotReleased(NotReleased),
    /// A quorum of nodes answered an inspection: who, if anyone, holds the lock.
    Inspected(Inspected),
    /// Too few nodes answered an inspection to say whether anyone holds the lock.
    NotInspected(NotInspected),
}

/// An inspection that a quorum of nodes answered ([`crate::Redlock::inspect`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Inspected {
    /// The token that at least a quorum of nodes hold on every key of the lock, or
    /// `None` when no token has a quorum: nobody holds the lock (keys left on fewer
    /// nodes by a failed attempt or a lost holder do not make it held).
    pub holder: Option<Vec<u8>>,
    /// Per node: `Success` (it answered), `Error`, `Timeout` or `Pending`.
    pub nodes: Vec<NodeResult>,
}

impl Inspected {
    /// Whether someone holds the lock: a quorum of nodes hold one token on every key.
    pub fn is_locked(&self) -> bool {
        self.holder.is_some()
    }

    /// Whether `lease` holds the lock at `now`: a quorum of nodes hold its token, and its
    /// validity has not run out (keys may outlive the validity by the clock drift; the
    /// holder must not count on them then).
    pub fn is_held_by(&self, lease: &Lease, now: Time) -> bool {
        lease.is_valid(now) && self.holder.as_deref() == Some(lease.token.as_str().as_bytes())
    }
}

/// An inspection that fewer than a quorum of nodes answered: nothing can be said.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct NotInspected {
    /// Per node, as for [`Inspected::nodes`].
    pub nodes: Vec<NodeResult>,
}

/// A successful acquisition.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Acquired {
    /// The lock.
    pub lease: Lease,
    /// Validity left when the quorum was reached: `lease.valid_until - now`.
    pub validity: Duration,
    /// Attempts made, this one included.
    pub attempts: u32,
    /// Per node, how the successful attempt went when it decided.
    pub nodes: Vec<NodeResult>,
}

/// A failed acquisition.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct NotAcquired {
    /// Why the last attempt failed.
    pub reason: FailureReason,
    /// Attempts made.
    pub attempts: u32,
    /// The last attempt's token (already released on every node that answered).
    pub token: Token,
    /// Per node, how the last attempt went when it decided.
    pub nodes: Vec<NodeResult>,
}

/// A successful extension.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Extended {
    /// The lock with its new `valid_until`, measured from the extension's own start.
    pub lease: Lease,
    /// Validity left when the quorum was reached.
    pub validity: Duration,
    /// Per node, how the extension went when it decided.
    pub nodes: Vec<NodeResult>,
}

/// A failed extension. Nothing was deleted: the lock stays held until
/// `lease.valid_until`, and is lost from then on.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct NotExtended {
    /// Why it failed. [`FailureReason::Conflict`] means the lock is already lost.
    pub reason: FailureReason,
    /// The lock as it stands: the old `valid_until`, no later than the extension round's
    /// own `start + ttl - drift` (its `PEXPIRE` may have shortened some keys), or `now`
    /// when the lock is lost.
    pub lease: Lease,
    /// Validity left on the old lease (zero when lost).
    pub validity: Duration,
    /// When to try again if the holder keeps extending, or `None` when no time is left
    /// for another round (or the lock is lost).
    pub retry_at: Option<Time>,
    /// Per node, how the extension went when it decided.
    pub nodes: Vec<NodeResult>,
}

impl NotExtended {
    /// True when the lock is already lost, not merely unextended.
    pub fn is_lost(&self) -> bool {
        matches!(
            self.reason,
            FailureReason::Conflict | FailureReason::NotHeld
        ) || self.validity.is_zero()
    }
}

/// A finished release: a quorum of nodes confirmed the key is no longer ours. Nodes
/// still `Pending` have their command in flight.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Released {
    /// Nodes that deleted at least one key holding the token, when the release decided.
    pub released: usize,
    /// Per node: `Success` (deleted), `Conflict` (nothing of ours there), `Error`,
    /// `Timeout`, or `Pending`.
    pub nodes: Vec<NodeResult>,
}

/// A release that fewer than a quorum of nodes confirmed (the rest failed or timed out):
/// the keys may still be held until their TTL, so nobody else can be sure to lock
/// before then.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct NotReleased {
    /// Nodes that deleted at least one key holding the token.
    pub released: usize,
    /// Per node, as for [`Released::nodes`].
    pub nodes: Vec<NodeResult>,
}

impl Outcome {
    /// True for `Acquired`, `Extended`, `Released` and `Inspected`.
    pub fn is_success(&self) -> bool {
        matches!(
            self,
            Outcome::Acquired(_)
                | Outcome::Extended(_)
                | Outcome::Released(_)
                | Outcome::Inspected(_)
        )
    }

    /// A stable snake_case name: `acquired`, `not_acquired`, `extended`, `not_extended`,
    /// `released`, `not_released`, `inspected`, `not_inspected`.
    pub fn code(&self) -> &'static str {
        match self {
            Outcome::Acquired(_) => "acquired",
            Outcome::NotAcquired(_) => "not_acquired",
            Outcome::Extended(_) => "extended",
            Outcome::NotExtended(_) => "not_extended",
            Outcome::Released(_) => "released",
            Outcome::NotReleased(_) => "not_released",
            Outcome::Inspected(_) => "inspected",
            Outcome::NotInspected(_) => "not_inspected",
        }
    }

    /// The lease, for every outcome that has one.
    pub fn lease(&self) -> Option<&Lease> {
        match self {
            Outcome::Acquired(a) => Some(&a.lease),
            Outcome::Extended(e) => Some(&e.lease),
            Outcome::NotExtended(n) => Some(&n.lease),
            Outcome::NotAcquired(_)
            | Outcome::Released(_)
            | Outcome::NotReleased(_)
            | Outcome::Inspected(_)
            | Outcome::NotInspected(_) => None,
        }
    }

    /// The reason, for the two failures.
    pub fn reason(&self) -> Option<FailureReason> {
        match self {
            Outcome::NotAcquired(n) => Some(n.reason),
            Outcome::NotExtended(n) => Some(n.reason),
            _ => None,
        }
    }

    /// Per-node results.
    pub fn nodes(&self) -> &[NodeResult] {
        match self {
            Outcome::Acquired(a) => &a.nodes,
            Outcome::NotAcquired(n) => &n.nodes,
            Outcome::Extended(e) => &e.nodes,
            Outcome::NotExtended(n) => &n.nodes,
            Outcome::Released(r) => &r.nodes,
            Outcome::NotReleased(r) => &r.nodes,
            Outcome::Inspected(i) => &i.nodes,
            Outcome::NotInspected(i) => &i.nodes,
        }
    }
}
