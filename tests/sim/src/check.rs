//! What a run is judged by.
//!
//! - **Exclusion**: no two clients believe they hold the lock at the same global
//!   instant. A client's belief starts when it learns it acquired the lock and ends at
//!   the earliest of: the global instant its own clock reaches the `valid_until` it was
//!   given (the core's outcome, or the legacy client's own expiry timestamp; a client
//!   with no notion of validity has no such bound), the moment it starts releasing, and
//!   its crash. Extensions move the end; a belief that lapsed and is renewed by a late
//!   extension counts as two intervals.
//! - **Resource**: the resource accepts writes in the order the locks were granted. A
//!   write from a holder that was granted the lock *before* another holder who has
//!   already written is a stale write: the two holders' writes interleaved. This is
//!   exactly the write a fencing token would let the resource reject.
//! - **Token order** (strategies with fencing tokens): a holder that started asking for
//!   the lock after another holder had been granted it must get a greater token. This is
//!   what fencing guarantees; a node that restarts empty and forgets its counter can
//!   break it, and then the resource turns away the newer holder's writes, or accepts
//!   the older holder's after them.
//! - **Key left behind**: once every client has finished (released, given up or
//!   crashed) and every scheduled fault is over, the simulation lets another
//!   `2 x TTL + 1 s` of global time pass; a lock key still present then on a node that
//!   is up is left behind forever: it never expires, and nobody can lock again. Keys
//!   that still had some TTL when the clients finished are allowed (a release can fail
//!   to reach a node; the TTL is what cleans up then) and are listed in the trace.

use redlock_core::{FencedSet, FencedWrite};

use crate::clock::Clock;
use crate::model::millis;
use crate::node::{Effects, Node};
use crate::trace::stamp;

/// One holding of the lock, as the holder believed it.
#[derive(Clone, Debug)]
pub struct Session {
    /// The holder (index).
    pub client: usize,
    /// The value under the key.
    pub token: String,
    /// When it learned it holds the lock (global time).
    pub granted: u64,
    /// When it started the acquisition that granted it (global time).
    pub asked: u64,
    /// Believed-valid intervals `[from, to)` in global time; `to == u64::MAX` for
    /// open-ended beliefs.
    pub intervals: Vec<(u64, u64)>,
    /// The end of validity the holder was given, on its own clock, if any.
    pub valid_until: Option<u64>,
    /// The fencing token the holder sends with its writes, if the strategy has one.
    pub fencing_token: Option<u64>,
}

/// A write to the shared resource.
#[derive(Clone, Debug)]
pub struct Write {
    /// When it reached the resource (global time).
    pub at: u64,
    /// Which session wrote.
    pub session: usize,
    /// Its fencing token, if the strategy has one.
    pub fencing_token: Option<u64>,
    /// False if the resource rejected it (a stale fencing token).
    pub accepted: bool,
}

/// How the resource checks a write's fencing token.
pub enum TokenCheck {
    /// Rejects a token lower than the highest it accepted (a holder may write several
    /// times with its token): the check described for ZooKeeper's `czxid` and etcd's
    /// revision.
    RejectLower,
    /// The core's own check ([`redlock_core::FencedSet`]): the item is a key on a Redis
    /// node that runs `FENCED_SET_SCRIPT`, which accepts only a token greater than the
    /// highest it accepted.
    Core(Box<Node>),
}

/// The shared resource: it logs who wrote when and rejects a write whose fencing token
/// its [`TokenCheck`] refuses. A write without a token is accepted, except under the
/// core's check, where it is an error (a fenced client always has one).
pub struct Resource {
    /// How tokens are checked.
    pub check: TokenCheck,
    highest: Option<u64>,
    /// Every write, in order.
    pub log: Vec<Write>,
}

/// The protected item under the core's check (its guard key is next to it).
pub const ITEM: &[u8] = b"protected-item";

impl Resource {
    /// A resource that rejects a fencing token lower than the highest it accepted.
    pub fn with_fencing() -> Resource {
        Resource {
            check: TokenCheck::RejectLower,
            highest: None,
            log: Vec::new(),
        }
    }

    /// A resource behind the core's check: a Redis node running `FENCED_SET_SCRIPT`.
    pub fn with_core_check() -> Resource {
        Resource {
            check: TokenCheck::Core(Box::new(Node::new(Clock::new(0, 0), false))),
            ..Resource::with_fencing()
        }
    }

    /// Records a write of `session` at `at`; returns whether it was accepted, or what
    /// went wrong with the core's check.
    pub fn write(
        &mut self,
        at: u64,
        session: usize,
        fencing_token: Option<u64>,
    ) -> Result<bool, String> {
        let accepted = match (&mut self.check, fencing_token) {
            (TokenCheck::RejectLower, Some(token)) => self.highest.is_none_or(|h| token >= h),
            (TokenCheck::RejectLower, None) => true,
            (TokenCheck::Core(node), Some(token)) => core_check(node, at, session, token)?,
            (TokenCheck::Core(_), None) => {
                return Err("a write without a fencing token under the core's check".into())
            }
        };
        if accepted {
            if let Some(token) = fencing_token {
                self.highest = Some(self.highest.map_or(token, |h| h.max(token)));
            }
        }
        self.log.push(Write {
            at,
            session,
            fencing_token,
            accepted,
        });
        Ok(accepted)
    }
}

/// One write through the core's [`FencedSet`], as a binding's helper sends it:
/// `EVALSHA`, then `EVAL` if the node answers `NOSCRIPT`.
fn core_check(node: &mut Node, at: u64, session: usize, token: u64) -> Result<bool, String> {
    let value = format!("written by session {session}");
    let write = FencedSet::new(ITEM, value.as_bytes(), token)
        .map_err(|error| format!("the core refused the write: {error:?}"))?;
    let mut eval = false;
    loop {
        let reply = node.execute(
            at,
            &write.args(eval),
            &mut Vec::new(),
            &mut Effects::default(),
        );
        match write.handle_reply(&reply) {
            FencedWrite::Accepted => return Ok(true),
            FencedWrite::Stale { .. } => return Ok(false),
            FencedWrite::RetryAsEval if !eval => eval = true,
            other => return Err(format!("the fenced write failed: {other:?}")),
        }
    }
}

/// The three checks of one run; `None` means the check passed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Two clients believed they held the lock at once.
    pub exclusion: Option<String>,
    /// A stale write reached the resource.
    pub stale_write: Option<String>,
    /// A holder that asked after another was granted got a token that is not greater.
    pub token_order: Option<String>,
    /// A lock key was left behind forever.
    pub key_left: Option<String>,
}

impl Verdict {
    /// True if every check passed.
    pub fn is_safe(&self) -> bool {
        self.checks().iter().all(|(_, result)| result.is_none())
    }

    /// Every check with its name (as the report prints it) and its finding, in a fixed
    /// order.
    pub fn checks(&self) -> [(&'static str, &Option<String>); 4] {
        [
            ("exclusion", &self.exclusion),
            ("stale write", &self.stale_write),
            ("token order", &self.token_order),
            ("key left", &self.key_left),
        ]
    }

    /// Names of the failed checks, in a fixed order.
    pub fn failed(&self) -> Vec<&'static str> {
        self.checks()
            .into_iter()
            .filter(|(_, result)| result.is_some())
            .map(|(name, _)| name)
            .collect()
    }
}

fn interval_text(from: u64, to: u64) -> String {
    if to == u64::MAX {
        format!("from {}", stamp(from))
    } else {
        format!("{}..{}", stamp(from), stamp(to))
    }
}

/// Two different clients' believed intervals that overlap, if any.
pub fn exclusion(sessions: &[Session], names: &[String]) -> Option<String> {
    let mut intervals: Vec<(u64, u64, usize)> = sessions
        .iter()
        .enumerate()
        .flat_map(|(index, s)| {
            s.intervals
                .iter()
                .filter(|(f, t)| f < t)
                .map(move |&(f, t)| (f, t, index))
        })
        .collect();
    intervals.sort_unstable();
    // The interval reaching furthest so far: any later start before its end overlaps it.
    let mut reach: Option<(u64, u64, usize)> = None;
    for &(from, to, session) in &intervals {
        if let Some((r_from, r_to, r_session)) = reach {
            if from < r_to && sessions[r_session].client != sessions[session].client {
                let overlap = r_to.min(to) - from;
                return Some(format!(
                    "{} believed it held the lock {} and {} {} ({} overlap)",
                    names[sessions[r_session].client],
                    interval_text(r_from, r_to),
                    names[sessions[session].client],
                    interval_text(from, to),
                    if r_to.min(to) == u64::MAX {
                        "open-ended".into()
                    } else {
                        millis(u128::from(overlap))
                    },
                ));
            }
        }
        if reach.is_none_or(|(_, r_to, _)| to > r_to) {
            reach = Some((from, to, session));
        }
    }
    None
}

/// The first accepted write from a holder granted before another holder that had
/// already written.
pub fn stale_write(resource: &Resource, sessions: &[Session], names: &[String]) -> Option<String> {
    let mut latest: Option<usize> = None;
    for write in resource.log.iter().filter(|w| w.accepted) {
        if let Some(newest) = latest {
            if sessions[write.session].granted < sessions[newest].granted {
                return Some(format!(
                    "{} wrote at {} on a lock granted at {}, after {} (granted at {}) had written",
                    names[sessions[write.session].client],
                    stamp(write.at),
                    stamp(sessions[write.session].granted),
                    names[sessions[newest].client],
                    stamp(sessions[newest].granted),
                ));
            }
        }
        if latest.is_none_or(|newest| sessions[write.session].granted > sessions[newest].granted) {
            latest = Some(write.session);
        }
    }
    None
}

/// The first pair of holders where one asked for the lock after the other was granted
/// it, and yet got a token that is not greater.
pub fn token_order(sessions: &[Session], names: &[String]) -> Option<String> {
    for (i, earlier) in sessions.iter().enumerate() {
        let Some(first) = earlier.fencing_token else {
            continue;
        };
        for (j, later) in sessions.iter().enumerate() {
            let Some(second) = later.fencing_token else {
                continue;
            };
            if i != j && later.asked >= earlier.granted && second <= first {
                return Some(format!(
                    "{} asked at {} and got token {second}, not above the token {first} {} was granted at {}",
                    names[later.client],
                    stamp(later.asked),
                    names[earlier.client],
                    stamp(earlier.granted),
                ));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(client: usize, granted: u64, intervals: Vec<(u64, u64)>) -> Session {
        Session {
            client,
            token: String::new(),
            granted,
            asked: granted,
            intervals,
            valid_until: None,
            fencing_token: None,
        }
    }

    fn names() -> Vec<String> {
        vec!["C1".into(), "C2".into(), "C3".into()]
    }

    #[test]
    fn overlapping_beliefs_are_found_even_behind_a_long_one() {
        let sessions = vec![
            session(0, 0, vec![(0, 100)]),
            session(1, 100, vec![(100, 200)]),
            session(2, 150, vec![(150, 160)]),
        ];
        let found = exclusion(&sessions, &names()).expect("C2 and C3 overlap");
        assert!(found.contains("C2") && found.contains("C3"), "{found}");
        assert_eq!(exclusion(&sessions[..2], &names()), None);
        let open = vec![
            session(0, 0, vec![(0, u64::MAX)]),
            session(1, 5, vec![(500, 600)]),
        ];
        assert!(exclusion(&open, &names()).is_some());
    }

    #[test]
    fn a_write_after_a_later_holder_wrote_is_stale() {
        let sessions = vec![session(0, 10, vec![]), session(1, 20, vec![])];
        let mut resource = Resource::with_fencing();
        assert_eq!(resource.write(11, 0, None), Ok(true));
        assert_eq!(resource.write(21, 1, None), Ok(true));
        assert_eq!(stale_write(&resource, &sessions, &names()), None);
        assert_eq!(resource.write(22, 0, None), Ok(true));
        assert!(stale_write(&resource, &sessions, &names()).is_some());
    }

    #[test]
    fn fencing_rejects_a_lower_token_and_then_nothing_is_stale() {
        let sessions = vec![session(0, 10, vec![]), session(1, 20, vec![])];
        let mut resource = Resource::with_fencing();
        assert_eq!(resource.write(11, 0, Some(33)), Ok(true));
        assert_eq!(resource.write(21, 1, Some(34)), Ok(true));
        assert_eq!(resource.write(22, 1, Some(34)), Ok(true));
        assert_eq!(resource.write(23, 0, Some(33)), Ok(false));
        assert_eq!(stale_write(&resource, &sessions, &names()), None);
    }

    #[test]
    fn a_later_holder_needs_a_greater_token() {
        let mut sessions = vec![session(0, 10, vec![]), session(1, 20, vec![])];
        assert_eq!(token_order(&sessions, &names()), None);
        sessions[0].fencing_token = Some(5);
        sessions[1].fencing_token = Some(5);
        assert!(token_order(&sessions, &names()).is_some());
        sessions[1].fencing_token = Some(6);
        assert_eq!(token_order(&sessions, &names()), None);
        // Overlapping acquisitions are ordered by their write-backs, not by time.
        sessions[1].fencing_token = Some(4);
        sessions[1].asked = 9;
        assert_eq!(token_order(&sessions, &names()), None);
    }

    #[test]
    fn the_core_check_accepts_only_a_greater_token_once() {
        let sessions = vec![session(0, 10, vec![]), session(1, 20, vec![])];
        let mut resource = Resource::with_core_check();
        assert_eq!(resource.write(11, 0, Some(33)), Ok(true));
        assert_eq!(resource.write(21, 1, Some(34)), Ok(true));
        // The same token again is refused: the core's check wants a greater one.
        assert_eq!(resource.write(22, 1, Some(34)), Ok(false));
        assert_eq!(resource.write(23, 0, Some(33)), Ok(false));
        assert_eq!(stale_write(&resource, &sessions, &names()), None);
        assert!(resource.write(24, 0, None).is_err());
    }
}
