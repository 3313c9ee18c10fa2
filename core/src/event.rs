//! What an operation tells a user's observability hooks: the same events, with the same
//! names and fields, in every binding.
//!
//! A binding drains [`crate::Operation::poll_event`] after each input (next to
//! `poll_output`) and hands each event to the user's hooks, metrics or tracing. Events
//! only report: nothing about the lock depends on whether anyone reads them, and an
//! operation keeps at most [`MAX_EVENTS`] unread ones (the oldest go first).
//!
//! | kind | when |
//! |---|---|
//! | `acquired`, `not_acquired`, `extended`, `not_extended`, `released`, `not_released`, `inspected`, `not_inspected` | the operation's outcome, as it is polled |
//! | `retry` | an attempt of an acquisition failed and another will start at `retry_at` |
//! | `node_failed` | a node answered an error or timed out in any round (with its cause) |
//! | `lost` | a held lock is lost: reported by [`crate::KeepAlive`] ([`Event::lost`]) |

use alloc::vec::Vec;
use core::time::Duration;

use crate::class::NodeCause;
use crate::keepalive::LostReason;
use crate::operation::OperationKind;
use crate::outcome::{FailureReason, NodeResult, Outcome};
use crate::time::Time;

/// The most unread events an operation keeps.
pub const MAX_EVENTS: usize = 64;

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventKind {
    /// The lock was acquired.
    Acquired,
    /// Every attempt failed.
    NotAcquired,
    /// An attempt failed; another starts at [`Event::retry_at`].
    Retry,
    /// The lock was extended.
    Extended,
    /// An extension failed.
    NotExtended,
    /// A held lock is lost ([`Event::lost_reason`] says how).
    Lost,
    /// The lock was released.
    Released,
    /// Fewer than a quorum confirmed the release.
    NotReleased,
    /// An inspection said who holds the lock.
    Inspected,
    /// An inspection could not say.
    NotInspected,
    /// One node failed in a round ([`Event::node`], [`Event::cause`]).
    NodeFailed,
}

impl EventKind {
    /// Every kind, in code order.
    pub const ALL: [EventKind; 11] = [
        EventKind::Acquired,
        EventKind::NotAcquired,
        EventKind::Retry,
        EventKind::Extended,
        EventKind::NotExtended,
        EventKind::Lost,
        EventKind::Released,
        EventKind::NotReleased,
        EventKind::Inspected,
        EventKind::NotInspected,
        EventKind::NodeFailed,
    ];

    /// A stable snake_case name, the same in every binding: `acquired`, `not_acquired`,
    /// `retry`, `extended`, `not_extended`, `lost`, `released`, `not_released`,
    /// `inspected`, `not_inspected`, `node_failed`.
    pub fn code(self) -> &'static str {
        match self {
            EventKind::Acquired => "acquired",
            EventKind::NotAcquired => "not_acquired",
            EventKind::Retry => "retry",
            EventKind::Extended => "extended",
            EventKind::NotExtended => "not_extended",
            EventKind::Lost => "lost",
            EventKind::Released => "released",
            EventKind::NotReleased => "not_released",
            EventKind::Inspected => "inspected",
            EventKind::NotInspected => "not_inspected",
            EventKind::NodeFailed => "node_failed",
        }
    }

    /// A stable number from 1, in the order of [`EventKind::ALL`] (for C and WASM).
    pub fn number(self) -> u32 {
        let index = EventKind::ALL
            .iter()
            .position(|kind| *kind == self)
            .unwrap_or(0);
        // At most 11 kinds: the cast cannot truncate.
        index as u32 + 1
    }
}

/// One event. Fields that do not apply to its kind are `None` or empty.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Event {
    /// What happened.
    pub kind: EventKind,
    /// The operation it happened in (`None` for [`EventKind::Lost`]).
    pub operation: Option<OperationKind>,
    /// When it happened (the input that caused it).
    pub at: Time,
    /// How long after the operation started.
    pub elapsed: Duration,
    /// The attempt it concerns, from 1 (acquisitions; 1 otherwise).
    pub attempt: u32,
    /// Why an attempt or operation failed.
    pub reason: Option<FailureReason>,
    /// When the next attempt starts ([`EventKind::Retry`]).
    pub retry_at: Option<Time>,
    /// The node ([`EventKind::NodeFailed`]), by index in the configuration.
    pub node: Option<usize>,
    /// Why the node failed ([`EventKind::NodeFailed`]).
    pub cause: Option<NodeCause>,
    /// How a lock was lost ([`EventKind::Lost`]).
    pub lost_reason: Option<LostReason>,
    /// Per node: the round the event reports on (outcomes, retries), or the failed
    /// node's result alone ([`EventKind::NodeFailed`]).
    pub nodes: Vec<NodeResult>,
}

impl Event {
    /// The event of a lock lost at `now` (what [`crate::KeepAlive`] reported), for the
    /// binding's hooks. `held_since` is when the lock was acquired, for `elapsed`.
    pub fn lost(reason: LostReason, held_since: Time, now: Time) -> Event {
        Event {
            kind: EventKind::Lost,
            operation: None,
            at: now,
            elapsed: now.saturating_duration_since(held_since),
            attempt: 1,
            reason: None,
            retry_at: None,
            node: None,
            cause: None,
            lost_reason: Some(reason),
            nodes: Vec::new(),
        }
    }

    pub(crate) fn new(kind: EventKind, operation: OperationKind, at: Time, started: Time) -> Event {
        Event {
            kind,
            operation: Some(operation),
            at,
            elapsed: at.saturating_duration_since(started),
            attempt: 1,
            reason: None,
            retry_at: None,
            node: None,
            cause: None,
            lost_reason: None,
            nodes: Vec::new(),
        }
    }

    pub(crate) fn of_outcome(
        outcome: &Outcome,
        operation: OperationKind,
        attempt: u32,
        at: Time,
        started: Time,
    ) -> Event {
        let kind = match outcome {
            Outcome::Acquired(_) => EventKind::Acquired,
            Outcome::NotAcquired(_) => EventKind::NotAcquired,
            Outcome::Extended(_) => EventKind::Extended,
            Outcome::NotExtended(_) => EventKind::NotExtended,
            Outcome::Released(_) => EventKind::Released,
            Outcome::NotReleased(_) => EventKind::NotReleased,
            Outcome::Inspected(_) => EventKind::Inspected,
            Outcome::NotInspected(_) => EventKind::NotInspected,
        };
        let mut event = Event::new(kind, operation, at, started);
        event.attempt = attempt;
        event.reason = outcome.reason();
        event.nodes = outcome.nodes().to_vec();
        event
    }
}
