//! One acquisition, extension or release, as a state machine driven by replies and time.
//!
//! # Transitions
//!
//! ```text
//! acquire:  Acquiring --quorum, validity >= floor--------------------------> Done(Acquired)
//!           Acquiring --quorum, validity >= floor, fencing---> WritingBack
//!           WritingBack --quorum, validity >= floor------------------------> Done(Acquired)
//!           WritingBack --quorum too late | quorum impossible--> CleaningUp
//!           Acquiring --quorum too late | quorum impossible--> CleaningUp
//!           CleaningUp --all N settled, attempts left--> Delaying --until--> Acquiring
//!           Delaying --release notices make a quorum possible-------------> Acquiring
//!           CleaningUp --all N settled, none left-----------------------------> Done(NotAcquired)
//! extend:   Extending --quorum, validity >= floor----------------------------> Done(Extended)
//!           Extending --quorum too late | quorum impossible-------------------> Done(NotExtended)
//! release:  Releasing --quorum confirmed gone-----------------------------------> Done(Released)
//!           Releasing --all N settled, fewer than quorum confirmed-------------> Done(NotReleased)
//! any:      --abandon(now)--> Done, after emitting what must still be sent (see
//!           [`Operation::abandon`])
//! ```
//!
//! # Invariants
//!
//! - A round sends one command to each of the N nodes at once; they share one deadline,
//!   `round start + node_timeout`. A `NOSCRIPT` fallback inherits it: a node's budget
//!   for one round is `node_timeout`, however many commands that takes.
//! - Decisions are early both ways: success at `quorum` successes, failure at
//!   `N - quorum + 1` conflicts and failures. Since `quorum + (N - quorum + 1) = N + 1`,
//!   once every node has settled one of the two has happened: nothing can hang.
//! - Validity is `start + ttl - drift - now`, where `start` is the instant the round's
//!   commands were emitted (just before the first is sent) and `now` the instant the
//!   deciding reply was handed in; drift is rounded up, and every input's time is at
//!   least the latest seen, so validity can only come out short, never long.
//! - A failed attempt is released on all N nodes, not only on those that answered OK:
//!   a node may have set the key while its reply was lost or is still on its way.
//!   The outcome waits until those releases settle, so a caller that sees
//!   `NotAcquired` knows every live node has been cleaned.
//! - A failed extension deletes nothing: the lock was still valid on its old lease, but
//!   never longer than the extension's own TTL allows (`start + ttl - drift` of the
//!   extension round): its `PEXPIRE` may have reached some keys, and a shorter TTL
//!   shortens them.
//! - A release is decided once `quorum` nodes confirmed our key is gone (deleted it, or
//!   never had it): then at most `N - quorum` nodes hold it and anyone else can lock, so
//!   one dead node does not hold the releaser up for a node timeout. The commands to
//!   the other nodes are already out; their replies are recorded as late replies. If
//!   so many nodes fail that no quorum can confirm, it waits for every node to settle
//!   and reports `NotReleased`: the key may still be held until its TTL.
//! - Replies to requests of an earlier round, or arriving after the decision, are
//!   accepted and change nothing but the live per-node view; a second reply for one
//!   request, or a reply for an id never issued, is a [`UsageError`] and changes nothing.

use alloc::collections::VecDeque;
use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::time::Duration;

use crate::command::{Argv, Command, CommandKind, RequestId};
use crate::config::Config;
use crate::error::UsageError;
use crate::event::{Event, EventKind, MAX_EVENTS};
use crate::outcome::{
    Acquired, Extended, FailureReason, Inspected, Lease, NodeResult, NotAcquired, NotExtended,
    NotInspected, NotReleased, Outcome, Released,
};
use crate::random::{OperationRandom, Token};
use crate::reply::Reply;
use crate::time::Time;

/// What an operation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OperationKind {
    /// Acquire a lock, retries included.
    Acquire,
    /// Extend a held lock.
    Extend,
    /// Release a lock.
    Release,
    /// Read who holds a lock ([`crate::Redlock::inspect`]).
    Inspect,
}

/// The next thing the driver must do, from [`Operation::poll_output`].
///
/// The one rule: after creating an operation and after every input, poll until the
/// output is a [`Output::Wait`] or the [`Output::Outcome`] (or `None`, for an operation
/// that was already finished). `Wait` is the only source of wake-ups.
#[derive(Debug)]
#[must_use]
#[non_exhaustive]
pub enum Output {
    /// Send this command to its node now.
    Send(Command),
    /// Nothing more until a reply arrives or this instant passes; at that instant call
    /// [`Operation::handle_timeout`]. Always the last output after an input of an
    /// operation that is not finished.
    Wait(Time),
    /// The operation is finished. Nothing else will be output.
    Outcome(Outcome),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Acquiring,
    /// Fencing: the fencing token is being written back to the nodes.
    WritingBack,
    CleaningUp,
    Delaying {
        until: Time,
    },
    Extending,
    Releasing,
    Inspecting,
    Done,
}

/// How a conflict on an extension came about, from the extend script's reply.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ConflictKind {
    /// The key is gone (0): expired or deleted; nobody holds it on that node.
    Missing,
    /// The key holds another value (-1), or the reply did not say (acquisitions,
    /// releases).
    Taken,
}

struct Request {
    node: usize,
    round: u32,
    /// True for a `NOSCRIPT` fallback, which carries the script's text.
    eval: bool,
    answered: bool,
}

struct Round {
    number: u32,
    kind: CommandKind,
    start: Time,
    deadline: Time,
    /// The `EVAL` form of the round's command, built when a node first needs it.
    eval_argv: Option<Arc<Argv>>,
    /// Per node: the request currently standing for it, and its result.
    slots: Vec<(RequestId, NodeResult)>,
    /// Fenced acquisitions: per node, the fence counter it answered (0: none).
    counters: Vec<u64>,
    successes: usize,
    conflicts: usize,
    /// Conflicts where the key holds another value (extensions); the rest were missing.
    taken: usize,
    failures: usize,
}

impl Round {
    fn settled(&self) -> usize {
        self.successes + self.conflicts + self.failures
    }
}

enum Verdict {
    Success,
    Conflict(ConflictKind),
    Failed(NodeResult),
    NoScript,
}

/// One acquisition, extension or release, created by [`crate::Redlock`].
///
/// # Driving an operation
///
/// Methods come in three kinds: inputs (`handle_reply`, `handle_timeout`), the output
/// (`poll_output`), and getters. After creating the operation and after every input,
/// call `poll_output` until it returns `None`, acting on each output:
///
/// - [`Output::Send`]: send the command to its node; when its reply comes, call
///   `handle_reply` with the command's request id. Stop waiting at its deadline.
/// - [`Output::Wait`]: if no reply arrives before this instant, call `handle_timeout`
///   then. Calling it early is harmless. It is the last output of the sequence.
/// - [`Output::Outcome`]: the operation is finished.
///
/// Abandoning it (the caller cancelled) is [`Operation::abandon`]: it emits what must
/// still be sent so that nothing the operation may have set outlives it.
///
/// ```
/// use core::time::Duration;
/// use redlock_core::{Config, Output, Redlock, Reply, Time};
///
/// let config = Config::builder(3, Duration::from_millis(10_000)).build().unwrap();
/// let mut client = Redlock::with_seed(config, [7; 32]);
/// let mut op = client.acquire(&["orders:42"], Time::from_micros(1_000)).unwrap();
/// let mut in_flight = Vec::new();
/// let outcome = loop {
///     match op.poll_output() {
///         Some(Output::Send(command)) => in_flight.push(command), // a real driver sends it
///         Some(Output::Wait(_until)) => {}                         // and arms a timer
///         Some(Output::Outcome(outcome)) => break outcome,
///         None => {
///             // Here a real driver waits for the next reply or timer. This one pretends
///             // every node answers OK 300 us later.
///             let command = in_flight.remove(0);
///             op.handle_reply(command.request_id(), Reply::Ok, Time::from_micros(1_300)).unwrap();
///         }
///         Some(_) => unreachable!("no other outputs exist in this version"),
///     }
/// };
/// assert!(outcome.is_success());
/// ```
pub struct Operation {
    config: Arc<Config>,
    kind: OperationKind,
    keys: Vec<Vec<u8>>,
    token: Token,
    random: OperationRandom,
    attempt: u32,
    phase: Phase,
    round: Round,
    requests: Vec<Request>,
    sends: VecDeque<Command>,
    outcome: Option<Outcome>,
    latest: Time,
    wait_due: bool,
    /// Extend: the lease being extended. Acquire: unused.
    lease: Option<Lease>,
    /// Acquire, while cleaning up after a failed attempt: why it failed and how the
    /// nodes answered.
    failure: Option<(FailureReason, Vec<NodeResult>)>,
    /// Fenced acquire, while writing back: the fencing token, the lease's end as the
    /// acquisition round fixed it, and how the nodes answered that round.
    fence: Option<(u64, Time, Vec<NodeResult>)>,
    /// Acquire with a wait limit: no attempt starts unless it can end by then.
    wait_until: Option<Time>,
    /// Acquire with a wait limit: it listens before any other reason to
    /// ([`Operation::listens`]): from its start (its client waited for one of its
    /// resources a moment ago), or since a node refused it because the key was held.
    /// Never reset: once it listens, it listens until it ends.
    listens_early: bool,
    /// A refusal of its first attempt made it start listening. Its subscription was
    /// asked after that attempt's commands went out, so during that attempt a node most
    /// likely confirms it after handling the attempt, whichever reply the driver reads
    /// first.
    listens_from_first_refusal: bool,
    /// Per node: the current (or failed) attempt's queued acquire was refused there with
    /// this waiter first in the resource's queue.
    first_in_queue: Vec<bool>,
    /// Per node: its confirmed subscription counts as a release unheard (see
    /// [`Operation::handle_subscribed`]), since the current attempt started.
    confirmed: Vec<bool>,
    /// Per node: a release notice arrived since the current attempt failed, and whom
    /// it named as the first waiter.
    noticed: Vec<Option<Named>>,
    /// While delaying: how long after the notice that makes a quorum possible the next
    /// attempt starts (microseconds), so that waiters woken by one release spread out.
    notice_delay: u64,
    /// While delaying: the window `notice_delay` was drawn from (twice the failed
    /// attempt's cleanup round, at most a node timeout).
    notice_window: u64,
    /// Acquire with a wait limit (and no fencing): the waiter's id in the resource's
    /// queue on each node (the first attempt's token), kept for every attempt.
    waiter: Option<Token>,
    /// An abandoned acquisition's release: the waiter leaves the queue.
    leaving: bool,
    /// When the current acquisition attempt started: the next one never starts before
    /// `MIN_RETRY_DELAY` after it, notices or not.
    attempt_start: Time,
    /// The kind of outcome polled, while it may still be given back
    /// ([`Operation::decline`]).
    handed_out: Option<core::mem::Discriminant<Outcome>>,
    /// Inspect: per node, what it holds on the lock's keys, once it answered.
    held: Vec<Option<Held>>,
    /// When the operation started, for events' `elapsed`.
    started: Time,
    /// Events not polled yet, at most `MAX_EVENTS`.
    events: VecDeque<Event>,
    /// Whether events are made at all (`Operation::record_events`).
    recording: bool,
}

/// Whom a release notice named first in the queue of waiters.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Named {
    /// Nobody (no queue on that node, or a notice without its message).
    Nobody,
    /// This acquisition.
    Us,
    /// Another waiter.
    Other,
}

/// What one node holds on an inspected lock's keys.
#[derive(Clone, PartialEq, Eq)]
enum Held {
    /// The same token on every key.
    Token(Vec<u8>),
    /// No key, or keys with different values: no holder on this node.
    Nobody,
}

impl Operation {
    pub(crate) fn acquire(
        config: Arc<Config>,
        keys: Vec<Vec<u8>>,
        mut random: OperationRandom,
        now: Time,
        wait_until: Option<Time>,
        listen_from_start: bool,
    ) -> Operation {
        let token = random.token(config.token_bytes());
        let mut op = Operation::new(config, OperationKind::Acquire, keys, token, random, now);
        op.wait_until = wait_until;
        op.listens_early = wait_until.is_some() && listen_from_start;
        if wait_until.is_some() && !op.config.fencing() {
            op.waiter = Some(op.token.clone());
        }
        op.start_round(op.acquire_kind(), now);
        op.phase = Phase::Acquiring;
        op
    }

    pub(crate) fn extend(config: Arc<Config>, lease: &Lease, now: Time) -> Operation {
        let mut op = Operation::new(
            config,
            OperationKind::Extend,
            lease.keys.clone(),
            lease.token.clone(),
            OperationRandom::None,
            now,
        );
        op.lease = Some(lease.clone());
        op.start_round(CommandKind::Extend, now);
        op.phase = Phase::Extending;
        op
    }

    pub(crate) fn release(config: Arc<Config>, lease: &Lease, now: Time) -> Operation {
        let mut op = Operation::new(
            config,
            OperationKind::Release,
            lease.keys.clone(),
            lease.token.clone(),
            OperationRandom::None,
            now,
        );
        // The holder leaves the queue of waiters too: on a node that refused its
        // winning attempt, its entry would otherwise name it first until it expires.
        op.waiter = lease.waiter.clone();
        op.start_round(CommandKind::Release, now);
        op.phase = Phase::Releasing;
        op
    }

    pub(crate) fn inspect(config: Arc<Config>, keys: Vec<Vec<u8>>, now: Time) -> Operation {
        let mut op = Operation::new(
            config,
            OperationKind::Inspect,
            keys,
            Token::empty(),
            OperationRandom::None,
            now,
        );
        op.held = alloc::vec![None; op.config.nodes()];
        op.start_round(CommandKind::Inspect, now);
        op.phase = Phase::Inspecting;
        op
    }

    fn new(
        config: Arc<Config>,
        kind: OperationKind,
        keys: Vec<Vec<u8>>,
        token: Token,
        random: OperationRandom,
        now: Time,
    ) -> Operation {
        let nodes = config.nodes();
        Operation {
            kind,
            keys,
            token,
            random,
            attempt: 1,
            phase: Phase::Done,
            round: Round {
                number: 0,
                kind: CommandKind::Set,
                start: now,
                deadline: now,
                eval_argv: None,
                slots: Vec::with_capacity(nodes),
                counters: Vec::new(),
                successes: 0,
                conflicts: 0,
                taken: 0,
                failures: 0,
            },
            requests: Vec::with_capacity(nodes),
            sends: VecDeque::with_capacity(nodes),
            outcome: None,
            latest: now,
            wait_due: true,
            lease: None,
            failure: None,
            fence: None,
            wait_until: None,
            listens_early: false,
            listens_from_first_refusal: false,
            noticed: Vec::new(),
            first_in_queue: Vec::new(),
            confirmed: Vec::new(),
            notice_delay: 0,
            notice_window: 0,
            waiter: None,
            leaving: false,
            attempt_start: Time::ZERO,
            handed_out: None,
            held: Vec::new(),
            started: now,
            events: VecDeque::new(),
            recording: true,
            config,
        }
    }

    // ---- inputs -------------------------------------------------------------------

    /// Hands in the reply to request `request`, received at `now`.
    ///
    /// Errors (and leaves the operation unchanged) for an id this operation never
    /// issued or a request that already had its reply. A reply after the decision, or
    /// for a request of an earlier round, is accepted and changes nothing but
    /// [`Operation::node_results`].
    pub fn handle_reply(
        &mut self,
        request: RequestId,
        reply: Reply,
        now: Time,
    ) -> Result<(), UsageError> {
        let index = usize::try_from(request.0)
            .ok()
            .and_then(|id| id.checked_sub(1))
            .filter(|&i| i < self.requests.len())
            .ok_or(UsageError::UnknownRequest)?;
        let entry = &mut self.requests[index];
        if entry.answered {
            return Err(UsageError::DuplicateReply);
        }
        entry.answered = true;
        let (node, round, eval) = (entry.node, entry.round, entry.eval);
        let now = self.observe(now);
        // However a driver built it, the status `OK` is `Reply::Ok`.
        let reply = match reply {
            Reply::Status(text) if text == "OK" => Reply::Ok,
            other => other,
        };
        if round != self.round.number {
            return Ok(());
        }
        let Some(slot) = self.round.slots.get(node) else {
            return Ok(());
        };
        if slot.0 != request || slot.1.is_settled() {
            // Superseded by a fallback, or already timed out.
            return Ok(());
        }
        let deciding = self.phase != Phase::Done;
        if let (CommandKind::FencedAcquire, Reply::Integer(counter)) = (self.round.kind, &reply) {
            if let (Ok(counter), Some(slot)) =
                (u64::try_from(*counter), self.round.counters.get_mut(node))
            {
                *slot = counter;
            }
        }
        if let (CommandKind::QueuedAcquire, Reply::Integer(0)) = (self.round.kind, &reply) {
            if self.first_in_queue.len() != self.config.nodes() {
                self.first_in_queue = alloc::vec![false; self.config.nodes()];
            }
            if let Some(first) = self.first_in_queue.get_mut(node) {
                *first = true;
            }
            // A confirmation from this node read before this refusal may count now.
            self.confirmations_stand_for_releases(now);
        }
        if self.round.kind == CommandKind::Inspect {
            if let (Some(held), Some(slot)) =
                (read_held(&reply, self.keys.len()), self.held.get_mut(node))
            {
                *slot = Some(held);
            }
        }
        match self.classify(&reply, eval) {
            Verdict::NoScript if deciding && now < self.round.deadline => {
                self.send_eval_fallback(node);
            }
            Verdict::NoScript => {
                let text = match reply {
                    Reply::Error(text) => text,
                    _ => String::new(),
                };
                self.settle(node, NodeResult::Error(text));
            }
            Verdict::Success => self.settle(node, NodeResult::Success),
            Verdict::Conflict(kind) => {
                let result = if kind == ConflictKind::Taken {
                    self.round.taken += 1;
                    NodeResult::Conflict
                } else {
                    // The extend script's 0: the key is gone, held by nobody. Said as
                    // such, so that a node's result tells a missing key from another
                    // token (the overall reason, not_held, needs every conflict missing).
                    NodeResult::Missing
                };
                self.settle(node, result);
            }
            Verdict::Failed(result) => self.settle(node, result),
        }
        if deciding {
            self.decide(now);
        }
        Ok(())
    }

    /// Tells the operation that time has reached `now`: requests past their deadline
    /// count as timed out, and a retry whose delay has passed starts. Calling it before
    /// anything is due is harmless.
    pub fn handle_timeout(&mut self, now: Time) {
        let now = self.observe(now);
        match self.phase {
            Phase::Done => {}
            Phase::Delaying { until } => {
                if now >= until {
                    self.start_next_attempt(now);
                }
            }
            Phase::Acquiring
            | Phase::WritingBack
            | Phase::CleaningUp
            | Phase::Extending
            | Phase::Releasing
            | Phase::Inspecting => {
                if now >= self.round.deadline {
                    for node in 0..self.round.slots.len() {
                        if !self.round.slots[node].1.is_settled() {
                            self.settle(node, NodeResult::Timeout);
                        }
                    }
                    // Fallback commands not yet polled will never be answered in time.
                    self.sends.clear();
                    self.decide(now);
                }
            }
        }
    }

    /// Hands in a release notice for this acquisition's resource from node `node`,
    /// received at `now` (a message on [`crate::notice_channel`] of the lock's key),
    /// without its message: as [`Operation::handle_notice_message`] with one that names
    /// nobody.
    pub fn handle_notice(&mut self, node: usize, now: Time) -> Result<(), UsageError> {
        self.handle_notice_message(node, &[], now)
    }

    /// Hands in, at `now`, that node `node` confirmed the driver's subscription to this
    /// acquisition's notice channel (`docs/bindings.md`, rule 13). A release published
    /// there before the subscription took effect reached nobody, so one may have gone
    /// unheard since the node refused this acquisition's attempt.
    ///
    /// A confirmation counts when the node refused the attempt under way (or the failed
    /// one) with this waiter first in the resource's queue there: a release since then
    /// named it, and nobody else has the turn. Once the nodes whose confirmation counts,
    /// with those that announced a release, make a quorum, they count as notices naming
    /// this waiter, whose attempt may then start at once. Otherwise nothing changes:
    ///
    /// - the node has not answered yet, and the acquisition listened from its start: the
    ///   subscription most likely took effect before the node refused, and every release
    ///   after that is heard. One that began listening at a refusal during this attempt
    ///   asked for its subscription after the attempt went out, so a node most likely
    ///   confirms it after handling the attempt: its confirmation counts once the node's
    ///   refusal (with this waiter first) is read, in whichever order the two arrive. (A
    ///   node that read the subscription first, on its other connection, makes that
    ///   count early: one early attempt, since a notice only triggers an attempt);
    /// - another waiter was first there: a release named that one, which has the turn;
    ///   trying early would only race it (the queue's order would not hold);
    /// - the acquisition has no wait limit (it is not queued, and counts its attempts:
    ///   an early one would spend one of them on a release that most often did not
    ///   happen) or is fenced (not queued either).
    ///
    /// A quorum is asked of confirmations, where one notice may do, because a
    /// subscription's confirmations come one per node: counted one at a time, each
    /// could start another attempt. So they start one early attempt at most.
    /// `UnknownNode` (nothing changes) for an index outside `0..N`.
    pub fn handle_subscribed(&mut self, node: usize, now: Time) -> Result<(), UsageError> {
        let nodes = self.config.nodes();
        if node >= nodes {
            return Err(UsageError::UnknownNode);
        }
        let now = self.observe(now);
        if !self.waiting() || self.waiter.is_none() {
            return Ok(());
        }
        // A subscription asked after the attempt went out is confirmed after the node
        // handled it: the confirmation counts even if its refusal is read later.
        let after_attempt = self.listens_from_first_refusal && self.attempt == 1;
        if !after_attempt && !self.first_in_queue.get(node).copied().unwrap_or(false) {
            return Ok(());
        }
        if self.confirmed.len() != nodes {
            self.confirmed = alloc::vec![false; nodes];
        }
        if let Some(flag) = self.confirmed.get_mut(node) {
            *flag = true;
        }
        self.confirmations_stand_for_releases(now);
        Ok(())
    }

    /// Whether the operation is between the start of an attempt and its outcome.
    fn waiting(&self) -> bool {
        matches!(
            self.phase,
            Phase::Acquiring | Phase::WritingBack | Phase::CleaningUp | Phase::Delaying { .. }
        )
    }

    /// The nodes whose confirmed subscription counts ([`Operation::handle_subscribed`]):
    /// confirmed, and refused the attempt with this waiter first in the queue.
    fn counted_confirmation(&self, node: usize) -> bool {
        self.confirmed.get(node).copied().unwrap_or(false)
            && self.first_in_queue.get(node).copied().unwrap_or(false)
    }

    /// Once the counted confirmations, with the nodes that announced a release, make a
    /// quorum: they count as notices naming this waiter. Before that, a delaying waiter's
    /// retry may still come forward ([`Operation::notice_retry_in`]).
    fn confirmations_stand_for_releases(&mut self, now: Time) {
        let nodes = self.config.nodes();
        if !(0..nodes).any(|i| self.counted_confirmation(i)) {
            return;
        }
        let heard = (0..nodes)
            .filter(|&i| {
                self.counted_confirmation(i) || self.noticed.get(i).is_some_and(Option::is_some)
            })
            .count();
        if heard >= self.config.quorum() {
            for i in 0..nodes {
                if self.counted_confirmation(i) {
                    self.notice(i, Named::Us);
                }
            }
        }
        if let Phase::Delaying { until } = self.phase {
            self.retry_early(now, until);
        }
    }

    /// Hands in a release notice for this acquisition's resource from node `node`,
    /// received at `now`, with the message it carried: the id of the waiter first in the
    /// resource's queue on that node, or empty when nobody waits there
    /// ([`crate::RELEASE_SCRIPT`]).
    ///
    /// An acquisition waiting to retry tries again when the notices make a quorum
    /// possible: counting as held only the nodes that refused the failed attempt because
    /// of the key (conflict) and have not announced a release since, at least `quorum`
    /// nodes are left. When it tries depends on who the messages name: at once if one
    /// names this acquisition; not early at all if one names another waiter (it has the
    /// turn, and its own release names the next; if it is gone, this one's retry
    /// schedule still tries); after a random share of a short
    /// window if none names anybody, so that waiters woken by one release spread out.
    /// Notices that name this acquisition from too few nodes to make a quorum possible
    /// (the nodes' queues disagree on who came first) bring it forward to the whole
    /// window plus that random share: the other nodes' releases named other waiters.
    /// One whose attempt is still under way (or cleaning up) remembers the notice and,
    /// if that attempt fails, retries as soon as its cleanup ends (with the same rule).
    ///
    /// A notice only ever starts an attempt sooner: a lost notice leaves the normal
    /// retry schedule, and a duplicated or forged one costs one attempt at most. A wait
    /// limit still holds, and notices change nothing at other times. `UnknownNode`
    /// (nothing changes) for an index outside `0..N`.
    pub fn handle_notice_message(
        &mut self,
        node: usize,
        message: &[u8],
        now: Time,
    ) -> Result<(), UsageError> {
        if node >= self.config.nodes() {
            return Err(UsageError::UnknownNode);
        }
        let now = self.observe(now);
        let named = match &self.waiter {
            _ if message.is_empty() => Named::Nobody,
            Some(waiter) if waiter.as_bytes() == message => Named::Us,
            _ => Named::Other,
        };
        match self.phase {
            Phase::Acquiring | Phase::WritingBack | Phase::CleaningUp => {
                // Remembered: if this attempt fails, the retry may come at once.
                self.notice(node, named);
            }
            Phase::Delaying { until } => {
                self.notice(node, named);
                self.retry_early(now, until);
            }
            _ => {}
        }
        Ok(())
    }

    /// While delaying until `until`: brings the next attempt forward if the notices
    /// received make a quorum possible (when: [`Operation::handle_notice_message`]).
    fn retry_early(&mut self, now: Time, until: Time) {
        if let Some(wait) = self.notice_retry_in() {
            let early = now.plus_micros(wait).max(self.attempt_floor());
            if early <= now {
                self.start_next_attempt(now);
            } else if early < until {
                self.phase = Phase::Delaying { until: early };
            }
        }
    }

    /// Abandons the operation at `now` (the caller cancelled it: a dropped future, a
    /// cancelled task, an aborted signal). Afterwards [`Operation::poll_output`] yields
    /// the commands that must still be sent, then `None`; no outcome follows.
    ///
    /// - An acquisition whose current attempt's commands are out (some `SET` may have
    ///   landed, or will) emits a release of that attempt's token to every node. One
    ///   that was already releasing a failed attempt has those releases out, and one
    ///   waiting to retry has nothing set: neither emits anything, unless it waits with
    ///   a wait limit: then it is in the queue of waiters, and it emits the release that
    ///   takes it out on every node (carrying its waiter id).
    /// - An extension emits nothing: a `PEXPIRE` that lands only lengthens our own key,
    ///   which the holder still releases or lets expire.
    /// - An acquisition that decided "acquired" whose outcome was not polled yet (so its
    ///   caller never got the lock) emits a release of its token to every node, as one
    ///   in flight does.
    /// - A release emits nothing more: its commands are out.
    ///
    /// Replies to requests of the operation may still be handed in; they change nothing.
    /// Abandoning a finished operation whose outcome was polled does nothing: a lock
    /// handed out is its holder's to release.
    pub fn abandon(&mut self, now: Time) {
        let now = self.observe(now);
        self.wait_due = false;
        if let Some(Outcome::Acquired(acquired)) = self.outcome.take() {
            // The lease took the keys; the release needs them back.
            self.keys = acquired.lease.keys;
            self.sends.clear();
            self.leaving = true;
            self.start_round(CommandKind::Release, now);
        } else if matches!(self.phase, Phase::Acquiring | Phase::WritingBack) {
            // Commands not polled yet were never sent; the release covers every node
            // (and takes a waiter out of the queue).
            self.sends.clear();
            self.leaving = true;
            self.start_round(CommandKind::Release, now);
        } else if self.waiter.is_some()
            && matches!(self.phase, Phase::CleaningUp | Phase::Delaying { .. })
        {
            // A waiter between attempts (its usual state) has nothing set, but it is
            // still in the queue on the nodes that refused it: releases would keep
            // naming it, and give it turns that keep newcomers out, until its entry
            // expires. Its leaving release takes it out; the key release in it matches
            // nothing (the failed attempt was, or is being, cleaned up).
            self.leaving = true;
            self.start_round(CommandKind::Release, now);
        }
        self.phase = Phase::Done;
        self.outcome = None;
    }

    /// Gives back, at `now`, the outcome this operation handed out when it reached no
    /// caller: the caller stopped waiting (a cancelled future, an interrupted thread)
    /// as the outcome was decided, on a thread of the driver's that had already polled
    /// it. The operation then does what [`Operation::abandon`] does for an outcome not
    /// polled yet: an acquired lock is nobody's, so [`Operation::poll_output`] yields
    /// the release of its token to every node, then `None`. Every other outcome holds
    /// nothing that its caller would have released (a failed acquisition cleaned up
    /// after itself; an extension's lease stays its holder's) and emits nothing.
    ///
    /// Drivers that poll outcomes where the caller waits never need this: they abandon
    /// before polling.
    ///
    /// # Errors
    ///
    /// [`UsageError::ForeignOutcome`] for an outcome this operation did not hand out,
    /// before its outcome was polled, or a second time; the operation is left unchanged.
    /// An outcome must be of the kind this operation handed out, and an acquisition's
    /// (acquired or not) must carry its token, so that nothing else given back can stand
    /// for the lock it handed out. Outcomes that carry no token of the operation (a
    /// release's, an inspection's) are told apart by their kind only; giving them back
    /// emits nothing either way.
    pub fn decline(&mut self, outcome: Outcome, now: Time) -> Result<(), UsageError> {
        let ours = self.handed_out == Some(core::mem::discriminant(&outcome))
            && match &outcome {
                Outcome::Acquired(acquired) => acquired.lease.token == self.token,
                Outcome::NotAcquired(failed) => failed.token == self.token,
                _ => true,
            };
        if !ours {
            return Err(UsageError::ForeignOutcome);
        }
        self.handed_out = None;
        if matches!(outcome, Outcome::Acquired(_)) {
            self.outcome = Some(outcome);
            self.abandon(now);
        }
        Ok(())
    }

    // ---- output -------------------------------------------------------------------

    /// The next output, or `None` when there is nothing more to do until the next input.
    ///
    /// Order: every queued [`Output::Send`], then the [`Output::Outcome`] if the operation
    /// just finished, otherwise one [`Output::Wait`] per input.
    pub fn poll_output(&mut self) -> Option<Output> {
        if let Some(command) = self.sends.pop_front() {
            return Some(Output::Send(command));
        }
        if let Some(outcome) = self.outcome.take() {
            self.wait_due = false;
            self.handed_out = Some(core::mem::discriminant(&outcome));
            return Some(Output::Outcome(outcome));
        }
        if self.wait_due {
            self.wait_due = false;
            if let Some(until) = self.next_timeout() {
                return Some(Output::Wait(until));
            }
        }
        None
    }

    // ---- getters ------------------------------------------------------------------

    /// When `handle_timeout` is next due, or `None` when finished. Drivers take this
    /// instant from [`Output::Wait`].
    fn next_timeout(&self) -> Option<Time> {
        match self.phase {
            Phase::Done => None,
            Phase::Delaying { until } => Some(until),
            _ => Some(self.round.deadline),
        }
    }

    /// What this operation does.
    pub fn kind(&self) -> OperationKind {
        self.kind
    }

    /// True once the outcome has been decided (it may not have been polled yet).
    pub fn is_finished(&self) -> bool {
        self.phase == Phase::Done
    }

    /// The attempt under way (or the last one made), from 1.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The current round's token.
    pub fn token(&self) -> &Token {
        &self.token
    }

    /// The next event for the user's observability hooks (`crate::event`), oldest first;
    /// `None` when there is none. Drain it after each input, next to
    /// [`Operation::poll_output`]; the outcome's own event comes as the outcome is
    /// decided. Events never affect the operation.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Whether this operation makes events for [`Operation::poll_event`] (the default),
    /// from now on. A driver that nobody listens to spares building them; turning it
    /// off drops the unread ones. Events never affect the operation.
    pub fn record_events(&mut self, record: bool) {
        self.recording = record;
        if !record {
            self.events.clear();
        }
    }

    /// Whether the driver should listen for this acquisition's release notices now
    /// (subscribe to [`Operation::notice_channels`], `docs/bindings.md`, rules 12 and 14),
    /// decided once for every driver:
    ///
    /// - an acquisition with a wait limit listens from the first refusal of a node
    ///   where the key is held (a conflict), or once an attempt failed, so that a lock
    ///   nobody holds is taken without subscribing to anything; a release unheard
    ///   before its subscription took effect is made up for by the confirmations
    ///   ([`Operation::handle_subscribed`]). It listens from its start instead when its
    ///   client started a waiting acquisition of one of its resources less than
    ///   [`crate::NOTICE_CHANNEL_LINGER_MS`] before: the channels are then most likely
    ///   still subscribed (they linger), listening costs nothing, and a release that
    ///   comes while its first attempt is out is heard (a channel already subscribed
    ///   gets no new confirmation to stand for it);
    /// - one without a wait limit listens once an attempt failed and another may follow
    ///   (from the failed attempt's cleanup on); an acquisition that wins at once, or
    ///   has no attempt left, never subscribes to anything;
    /// - nothing else listens: extensions, releases, inspections, finished operations.
    ///
    /// Once true it stays true until the operation finishes: poll it after every input
    /// (with the outputs), start listening when it turns true, stop when the operation
    /// ends.
    pub fn listens(&self) -> bool {
        if self.kind != OperationKind::Acquire || self.phase == Phase::Done {
            return false;
        }
        if self.attempt > 1 || self.listens_early {
            return true;
        }
        let failed = matches!(self.phase, Phase::CleaningUp | Phase::Delaying { .. });
        if self.wait_until.is_some() {
            return failed;
        }
        failed && self.attempt < self.config.attempts()
    }

    /// The channels on which releases of this acquisition's keys are announced: each
    /// key's [`crate::notice_channel`] (releases that name no waiter) and, for a waiting
    /// acquisition, each key's [`crate::waiter_channel`] of its waiter id (releases that
    /// name one of its client's waiters). Subscribe to them on every node while the
    /// acquisition listens, and hand each message to [`Operation::handle_notice_message`].
    /// Empty for extensions, releases and finished acquisitions.
    pub fn notice_channels(&self) -> Vec<Vec<u8>> {
        if self.kind != OperationKind::Acquire || self.phase == Phase::Done {
            return Vec::new();
        }
        crate::command::listening_channels(&self.keys, self.waiter.as_ref().map(Token::as_bytes))
    }

    /// The live per-node view of the current (or last) round, late replies included.
    pub fn node_results(&self) -> Vec<NodeResult> {
        self.round
            .slots
            .iter()
            .map(|(_, result)| result.clone())
            .collect()
    }

    // ---- internals ----------------------------------------------------------------

    /// Every input's time is at least the latest seen: a clock that appears to step
    /// back can only shorten validity.
    fn observe(&mut self, now: Time) -> Time {
        self.latest = self.latest.max(now);
        self.wait_due = true;
        self.latest
    }

    fn notice(&mut self, node: usize, named: Named) {
        if self.noticed.len() != self.config.nodes() {
            self.noticed = alloc::vec![None; self.config.nodes()];
        }
        if let Some(flag) = self.noticed.get_mut(node) {
            // A node's latest notice says who is first there now.
            *flag = Some(named);
        }
    }

    /// Whether the release notices received since the failed attempt leave at least
    /// `quorum` nodes not known to hold the key.
    fn notices_make_quorum_possible(&self) -> bool {
        if !self.noticed.iter().any(Option::is_some) {
            return false;
        }
        let Some((_, nodes)) = self.failure.as_ref() else {
            return false;
        };
        let held = nodes
            .iter()
            .enumerate()
            .filter(|(node, result)| {
                **result == NodeResult::Conflict
                    && self.noticed.get(*node).copied().flatten().is_none()
            })
            .count();
        self.config.nodes().saturating_sub(held) >= self.config.quorum()
    }

    /// How long from now the next attempt waits because of the notices received since
    /// the failed attempt, or `None` (its retry schedule):
    ///
    /// - once they make a quorum possible, [`Operation::notice_wait`];
    /// - before that, if one named this waiter, or a confirmation counts for one
    ///   ([`Operation::handle_subscribed`]: the release it stands for would have named
    ///   this waiter): the whole spread window, then its random share of it (drawn after
    ///   the failed attempt). The nodes' queues disagree on who came first (waiters
    ///   refused within the same moment, in different orders), so each node's release
    ///   named its own first waiter and may name none of them on a quorum: rather than
    ///   all keeping their retry delay while the lock is free, the named waiters try,
    ///   spread out, after the window. A waiter that a quorum named goes at once and
    ///   has about a round trip to take the lock first; one named by nobody goes within
    ///   the window. The other nodes' releases are never heard: they named other
    ///   waiters, on their clients' channels.
    fn notice_retry_in(&self) -> Option<u64> {
        if self.notices_make_quorum_possible() {
            return self.notice_wait();
        }
        let nodes = self.config.nodes();
        if self.noticed.contains(&Some(Named::Us))
            || (0..nodes).any(|i| self.counted_confirmation(i))
        {
            return Some(self.notice_window.saturating_add(self.notice_delay));
        }
        None
    }

    /// How long after the notices that make a quorum possible the next attempt starts:
    /// at once for the waiter a notice named first in the queue; not early at all for
    /// one a notice told that another waiter is first (`None`: that one has the turn,
    /// and its own release will name the next; if it is gone, this one keeps its retry
    /// schedule); otherwise (no queue: nobody named) the random share of the window
    /// drawn after the failed attempt.
    fn notice_wait(&self) -> Option<u64> {
        if self.noticed.contains(&Some(Named::Us)) {
            Some(0)
        } else if self.noticed.contains(&Some(Named::Other)) {
            None
        } else {
            Some(self.notice_delay)
        }
    }

    /// The earliest instant the next attempt may start: `MIN_RETRY_DELAY` after the
    /// current one started. Notices bring attempts forward, never closer together than
    /// this, so that a stream of them (real, duplicated or forged) cannot make a waiter
    /// hammer the nodes.
    fn attempt_floor(&self) -> Time {
        self.attempt_start
            .plus_micros(crate::time::micros_floor(crate::config::MIN_RETRY_DELAY))
    }

    /// Starts the next attempt of an acquisition at `now`, with its own token.
    fn start_next_attempt(&mut self, now: Time) {
        self.attempt = self.attempt.saturating_add(1);
        self.token = self.random.token(self.config.token_bytes());
        self.noticed.clear();
        self.first_in_queue.clear();
        self.confirmed.clear();
        self.start_round(self.acquire_kind(), now);
        self.phase = Phase::Acquiring;
    }

    /// The longest an attempt's rounds take: one node timeout, two with fencing.
    fn attempt_span_us(&self) -> u64 {
        let rounds = if self.config.fencing() { 2 } else { 1 };
        self.config.node_timeout_us().saturating_mul(rounds)
    }

    /// The command of an acquisition attempt.
    fn acquire_kind(&self) -> CommandKind {
        if self.config.fencing() {
            CommandKind::FencedAcquire
        } else if self.waiter.is_some() {
            CommandKind::QueuedAcquire
        } else if self.keys.len() == 1 {
            CommandKind::Set
        } else {
            CommandKind::Acquire
        }
    }

    /// The number a round's command carries: the fencing token for a write-back, the
    /// TTL otherwise.
    fn round_number(&self, kind: CommandKind) -> u64 {
        match (kind, &self.fence) {
            (CommandKind::WriteBack, Some((fence, _, _))) => *fence,
            _ => self.config.ttl_ms(),
        }
    }

    /// A queued attempt's waiter id and entry lifetime (ms): an entry must outlive the
    /// longest gap between two attempts of a live waiter (a full retry delay and an
    /// attempt), twice over; a waiter that gives up leaves an entry that ends by then.
    /// Never above [`crate::MAX_QUEUE_ENTRY_LIFETIME_MS`], which the script enforces too.
    fn queue_entry(&self, kind: CommandKind) -> Option<(&[u8], u64)> {
        let waiter = self.waiter.as_ref()?;
        match kind {
            CommandKind::QueuedAcquire => {}
            // A release that ends the waiter's part (a held lock's, or an abandoned
            // acquisition's) takes it out of the queue; a failed attempt's cleanup does
            // not: the waiter keeps its place.
            CommandKind::Release if self.kind == OperationKind::Release || self.leaving => {
                return Some((waiter.as_bytes(), 0));
            }
            _ => return None,
        }
        let gap_us = self
            .config
            .retry_delay_us()
            .saturating_add(self.config.retry_jitter_us())
            .saturating_add(self.attempt_span_us());
        let lifetime_ms = gap_us
            .saturating_mul(2)
            .div_ceil(1000)
            .clamp(1, crate::command::MAX_QUEUE_ENTRY_LIFETIME_MS);
        Some((waiter.as_bytes(), lifetime_ms))
    }

    fn next_request_id(&self) -> RequestId {
        RequestId(self.requests.len() as u64 + 1)
    }

    fn start_round(&mut self, kind: CommandKind, now: Time) {
        let config = &self.config;
        let deadline = now.plus_micros(config.node_timeout_us());
        let argv = Arc::new(Argv::build_with(
            kind,
            false,
            &self.keys,
            self.token.as_bytes(),
            self.round_number(kind),
            self.queue_entry(kind),
        ));
        let number = self.round.number + 1;
        self.round.slots.clear();
        self.round.counters.clear();
        self.round.counters.resize(config.nodes(), 0);
        for node in 0..config.nodes() {
            let id = RequestId(self.requests.len() as u64 + 1);
            self.requests.push(Request {
                node,
                round: number,
                eval: false,
                answered: false,
            });
            self.round.slots.push((id, NodeResult::Pending));
            self.sends.push_back(Command::new(
                node,
                id,
                deadline,
                kind,
                false,
                Arc::clone(&argv),
            ));
        }
        if matches!(
            kind,
            CommandKind::Set
                | CommandKind::Acquire
                | CommandKind::QueuedAcquire
                | CommandKind::FencedAcquire
        ) {
            self.attempt_start = now;
        }
        self.round.number = number;
        self.round.kind = kind;
        self.round.start = now;
        self.round.deadline = deadline;
        self.round.eval_argv = None;
        self.round.successes = 0;
        self.round.conflicts = 0;
        self.round.taken = 0;
        self.round.failures = 0;
    }

    fn send_eval_fallback(&mut self, node: usize) {
        let argv = match &self.round.eval_argv {
            Some(argv) => Arc::clone(argv),
            None => {
                let argv = Arc::new(Argv::build_with(
                    self.round.kind,
                    true,
                    &self.keys,
                    self.token.as_bytes(),
                    self.round_number(self.round.kind),
                    self.queue_entry(self.round.kind),
                ));
                self.round.eval_argv = Some(Arc::clone(&argv));
                argv
            }
        };
        let id = self.next_request_id();
        self.requests.push(Request {
            node,
            round: self.round.number,
            eval: true,
            answered: false,
        });
        self.round.slots[node].0 = id;
        self.sends.push_back(Command::new(
            node,
            id,
            self.round.deadline,
            self.round.kind,
            true,
            argv,
        ));
    }

    fn classify(&self, reply: &Reply, eval: bool) -> Verdict {
        let kind = self.round.kind;
        match (kind, reply) {
            (CommandKind::Set, Reply::Ok) => Verdict::Success,
            (CommandKind::QueuedAcquire, Reply::Integer(1)) => Verdict::Success,
            (CommandKind::QueuedAcquire, Reply::Integer(n)) if *n <= 0 => {
                Verdict::Conflict(ConflictKind::Taken)
            }
            (CommandKind::Set, Reply::Nil) => Verdict::Conflict(ConflictKind::Taken),
            (CommandKind::Acquire | CommandKind::Extend, Reply::Integer(1)) => Verdict::Success,
            (CommandKind::Acquire, Reply::Integer(0)) => Verdict::Conflict(ConflictKind::Taken),
            (CommandKind::Extend, Reply::Integer(0)) => Verdict::Conflict(ConflictKind::Missing),
            (CommandKind::Extend, Reply::Integer(-1)) => Verdict::Conflict(ConflictKind::Taken),
            (CommandKind::Release, Reply::Integer(0)) => Verdict::Conflict(ConflictKind::Taken),
            (CommandKind::FencedAcquire, Reply::Integer(n)) if *n >= 1 => Verdict::Success,
            (CommandKind::FencedAcquire | CommandKind::WriteBack, Reply::Integer(0)) => {
                Verdict::Conflict(ConflictKind::Taken)
            }
            (CommandKind::WriteBack, Reply::Integer(1)) => Verdict::Success,
            (CommandKind::Release, Reply::Integer(n))
                if *n > 0 && usize::try_from(*n).is_ok_and(|n| n <= self.keys.len()) =>
            {
                Verdict::Success
            }
            (CommandKind::Inspect, reply) if read_held(reply, self.keys.len()).is_some() => {
                Verdict::Success
            }
            (CommandKind::Set | CommandKind::Inspect, Reply::Error(_)) => {
                Verdict::Failed(error_result(reply))
            }
            (_, Reply::Error(_)) if reply.is_noscript() && !eval => Verdict::NoScript,
            (_, Reply::Error(_)) => Verdict::Failed(error_result(reply)),
            (_, Reply::Timeout) => Verdict::Failed(NodeResult::Timeout),
            (_, Reply::ConnectionFailed(text)) => {
                Verdict::Failed(NodeResult::Error(format!("connection failed: {text}")))
            }
            (_, other) => Verdict::Failed(NodeResult::Error(format!(
                "unexpected reply: {}",
                other.describe()
            ))),
        }
    }

    fn settle(&mut self, node: usize, result: NodeResult) {
        if let Some(cause) = result.cause().filter(|_| self.recording) {
            let mut event = Event::new(EventKind::NodeFailed, self.kind, self.latest, self.started);
            event.attempt = self.attempt;
            event.node = Some(node);
            event.cause = Some(cause);
            event.nodes = alloc::vec![result.clone()];
            self.push_event(event);
        }
        let round = &mut self.round;
        match &result {
            NodeResult::Success => round.successes += 1,
            NodeResult::Missing => round.conflicts += 1,
            NodeResult::Conflict => {
                round.conflicts += 1;
                // Held elsewhere: a waiter listens from now on (see `listens`).
                if self.wait_until.is_some() && self.phase == Phase::Acquiring {
                    // The first attempt's refusal: nothing listened before it. (A later
                    // attempt's waiter has listened since the failed one's cleanup, so
                    // its subscription may predate this attempt.)
                    if !self.listens_early && self.attempt == 1 {
                        self.listens_from_first_refusal = true;
                    }
                    self.listens_early = true;
                }
            }
            NodeResult::Error(_) | NodeResult::Timeout => round.failures += 1,
            NodeResult::NotAsked | NodeResult::Pending => return,
        }
        if let Some(slot) = round.slots.get_mut(node) {
            slot.1 = result;
        }
    }

    fn decide(&mut self, now: Time) {
        match self.phase {
            Phase::Acquiring => self.decide_acquire(now),
            Phase::WritingBack => self.decide_write_back(now),
            Phase::CleaningUp => self.decide_cleanup(now),
            Phase::Extending => self.decide_extend(now),
            Phase::Releasing => self.decide_release(),
            Phase::Inspecting => self.decide_inspect(),
            Phase::Delaying { .. } | Phase::Done => {}
        }
    }

    /// `Some(validity)` if a quorum reached at `now` leaves at least the floor, where
    /// validity = `start + ttl - drift - now`; the floor is `min_validity`, and at least
    /// one microsecond so that a lock is never reported with no time left.
    fn validity_at(&self, now: Time) -> Result<(Time, u64), ()> {
        let valid_until = self.round.start.plus_micros(self.config.lease_us());
        let validity = valid_until.micros_since(now);
        if validity >= self.config.min_validity_us().max(1) {
            Ok((valid_until, validity))
        } else {
            Err(())
        }
    }

    fn quorum_state(&self) -> Option<Result<(), FailureReason>> {
        let round = &self.round;
        if round.successes >= self.config.quorum() {
            Some(Ok(()))
        } else if round.conflicts + round.failures >= self.config.failures_to_lose() {
            Some(Err(FailureReason::from_counts(
                round.conflicts,
                round.failures,
                self.config.failures_to_lose(),
            )))
        } else {
            None
        }
    }

    fn decide_acquire(&mut self, now: Time) {
        let reason = match self.quorum_state() {
            None => return,
            Some(Ok(())) => match self.validity_at(now) {
                Ok((valid_until, validity)) if self.config.fencing() => {
                    // The token: the largest counter among the nodes that granted. It
                    // is handed out only once a quorum holds it: written back, unless
                    // a quorum of the granting nodes answered it themselves (their
                    // scripts set their counters to it along with the lock).
                    let granted = || {
                        (0..self.round.slots.len())
                            .filter(|&node| self.round.slots[node].1 == NodeResult::Success)
                    };
                    let fence = granted()
                        .map(|node| self.round.counters[node])
                        .max()
                        .unwrap_or(0);
                    let holding = granted()
                        .filter(|&node| self.round.counters[node] == fence)
                        .count();
                    if holding >= self.config.quorum() {
                        self.finish_acquired(
                            valid_until,
                            validity,
                            Some(fence),
                            self.node_results(),
                        );
                        return;
                    }
                    self.fence = Some((fence, valid_until, self.node_results()));
                    self.start_round(CommandKind::WriteBack, now);
                    self.phase = Phase::WritingBack;
                    return;
                }
                Ok((valid_until, validity)) => {
                    self.finish_acquired(valid_until, validity, None, self.node_results());
                    return;
                }
                Err(()) => FailureReason::ValidityTooShort,
            },
            Some(Err(reason)) => reason,
        };
        // Release on all N nodes, whatever they answered: a node may have set the key
        // while its reply was lost or is still on its way.
        self.failure = Some((reason, self.node_results()));
        self.start_round(CommandKind::Release, now);
        self.phase = Phase::CleaningUp;
    }

    fn finish_acquired(
        &mut self,
        valid_until: Time,
        validity: u64,
        fencing_token: Option<u64>,
        nodes: Vec<NodeResult>,
    ) {
        let lease = Lease {
            keys: core::mem::take(&mut self.keys),
            token: self.token.clone(),
            valid_until,
            extensions: 0,
            ttl_ms: self.config.ttl_ms(),
            key_ttl_ms: Some(self.config.ttl_ms()),
            fencing_token,
            waiter: self.waiter.clone(),
        };
        self.finish(Outcome::Acquired(Acquired {
            lease,
            validity: Duration::from_micros(validity),
            attempts: self.attempt,
            nodes,
        }));
    }

    /// Fenced acquisitions: the write-back round decides like an acquisition round, on
    /// the lease the acquisition round fixed.
    fn decide_write_back(&mut self, now: Time) {
        let Some((fence, valid_until, _)) = self.fence.as_ref() else {
            return;
        };
        let (fence, valid_until) = (*fence, *valid_until);
        let reason = match self.quorum_state() {
            None => return,
            Some(Ok(())) => {
                let validity = valid_until.micros_since(now);
                if validity >= self.config.min_validity_us().max(1) {
                    let nodes = self
                        .fence
                        .take()
                        .map(|(_, _, nodes)| nodes)
                        .unwrap_or_default();
                    self.finish_acquired(valid_until, validity, Some(fence), nodes);
                    return;
                }
                FailureReason::ValidityTooShort
            }
            Some(Err(reason)) => reason,
        };
        // No token without a quorum of write-backs: release on all N, as after any
        // failed attempt.
        self.fence = None;
        self.failure = Some((reason, self.node_results()));
        self.start_round(CommandKind::Release, now);
        self.phase = Phase::CleaningUp;
    }

    fn decide_cleanup(&mut self, now: Time) {
        if self.round.settled() < self.config.nodes() {
            return;
        }
        // With a wait limit: attempts until the limit, as long as one can still end by
        // it (and caller-supplied random bytes last); otherwise the configured count.
        let last_start = self
            .wait_until
            .map(|limit| limit.minus_micros(self.attempt_span_us()));
        let floor = crate::time::micros_floor(crate::config::MIN_RETRY_DELAY);
        let another = match last_start {
            // Never back to back: the last attempt too waits the floor.
            Some(last_start) => {
                now.plus_micros(floor) <= last_start
                    && self.attempt < u32::MAX
                    && self.random.can_draw(8 + self.config.token_bytes())
            }
            None => self.attempt < self.config.attempts(),
        };
        if another {
            // delay = base - jitter + (r mod (2 * jitter + 1)), uniform in base ± jitter.
            let jitter = u128::from(self.config.retry_jitter_us());
            let draw = self.random.next_u64();
            let offset = u128::from(draw) % (2 * jitter + 1);
            // A retry a notice brings forward waits (r >> 32) mod (window + 1), where the
            // window is twice this cleanup round's duration (about a round trip), at
            // most a node timeout: waiters woken by the same release spread over it, so
            // that the first one's attempt can land whole before the others'. Notices
            // naming this waiter from too few nodes wait the whole window first.
            let window = now
                .micros_since(self.round.start)
                .saturating_mul(2)
                .min(self.config.node_timeout_us());
            self.notice_delay = (draw >> 32) % window.saturating_add(1);
            self.notice_window = window;
            let base = u128::from(self.config.retry_delay_us()).saturating_sub(jitter);
            let mut delay = u64::try_from(base + offset).unwrap_or(u64::MAX);
            if last_start.is_some() {
                // A wait limit retries whatever `attempts` says: never back to back.
                delay = delay.max(floor);
            }
            let mut until = now.plus_micros(delay);
            if let Some(wait) = self.notice_retry_in() {
                until = until.min(now.plus_micros(wait).max(self.attempt_floor()));
            }
            if let Some(last_start) = last_start {
                // The last attempt starts at the latest instant it can still end by the
                // limit, rather than not at all.
                until = until.min(last_start);
            }
            if self.recording {
                let mut event = Event::new(EventKind::Retry, self.kind, now, self.started);
                event.attempt = self.attempt;
                event.retry_at = Some(until);
                if let Some((reason, nodes)) = &self.failure {
                    event.reason = Some(*reason);
                    event.nodes = nodes.clone();
                }
                self.push_event(event);
            }
            self.phase = Phase::Delaying { until };
            if until <= now {
                self.start_next_attempt(now);
            }
            return;
        }
        let (reason, nodes) = self
            .failure
            .take()
            .unwrap_or((FailureReason::NodesFailed, Vec::new()));
        if self.waiter.is_some() {
            // A waiter that gives up leaves the queue on every node, as an abandoned one
            // does: otherwise its entry stays first until it expires, releases name it,
            // and the waiters behind it keep their retry schedule. The round's key
            // release matches nothing (its attempt was cleaned up); nothing waits for
            // its replies.
            self.leaving = true;
            self.start_round(CommandKind::Release, now);
        }
        self.finish(Outcome::NotAcquired(NotAcquired {
            reason,
            attempts: self.attempt,
            token: self.token.clone(),
            nodes,
        }));
    }

    fn decide_extend(&mut self, now: Time) {
        let Some(old) = self.lease.as_ref() else {
            return;
        };
        let result = match self.quorum_state() {
            None => return,
            Some(Ok(())) => self
                .validity_at(now)
                .map_err(|()| FailureReason::ValidityTooShort),
            Some(Err(FailureReason::Conflict)) if self.round.taken == 0 => {
                Err(FailureReason::NotHeld)
            }
            Some(Err(reason)) => Err(reason),
        };
        // Keys this round's `PEXPIRE` reached carry the new TTL from now on.
        let key_ttl_ms = old.key_ttl_ms.map(|ttl| ttl.max(self.config.ttl_ms()));
        let outcome = match result {
            Ok((valid_until, validity)) => Outcome::Extended(Extended {
                lease: Lease {
                    valid_until,
                    extensions: old.extensions.saturating_add(1),
                    ttl_ms: self.config.ttl_ms(),
                    key_ttl_ms,
                    ..old.clone()
                },
                validity: Duration::from_micros(validity),
                nodes: self.node_results(),
            }),
            Err(reason) => {
                let mut lease = old.clone();
                lease.key_ttl_ms = key_ttl_ms;
                // The round's `PEXPIRE` may have reached some keys (even a quorum, too
                // late): with a TTL shorter than what was left, those keys now end
                // sooner, no earlier than this round's own `start + ttl - drift`.
                let round_end = self.round.start.plus_micros(self.config.lease_us());
                lease.valid_until = lease.valid_until.min(round_end);
                if matches!(reason, FailureReason::Conflict | FailureReason::NotHeld) {
                    // At most quorum - 1 nodes still hold our key: the lock is gone now.
                    lease.valid_until = lease.valid_until.min(now);
                }
                let validity = lease.valid_until.micros_since(now);
                Outcome::NotExtended(NotExtended {
                    reason,
                    retry_at: self
                        .config
                        .extension_retry_at(reason, lease.valid_until, now),
                    validity: Duration::from_micros(validity),
                    lease,
                    nodes: self.node_results(),
                })
            }
        };
        self.finish(outcome);
    }

    fn decide_release(&mut self) {
        let confirmed = self.round.successes + self.round.conflicts;
        if confirmed >= self.config.quorum() {
            let outcome = Outcome::Released(Released {
                released: self.round.successes,
                nodes: self.node_results(),
            });
            self.finish(outcome);
        } else if self.round.settled() >= self.config.nodes() {
            // Fewer than a quorum confirmed the key is gone: it may still be held, by
            // us, until its TTL. Not a success.
            self.finish(Outcome::NotReleased(NotReleased {
                released: self.round.successes,
                nodes: self.node_results(),
            }));
        }
    }

    /// Inspections: a token held by a quorum is the holder; nobody holds the lock once no
    /// token could reach a quorum even if every node that has not answered (pending or
    /// failed) held it; and when every node has settled without either, too few
    /// answered to say (`NotInspected`).
    fn decide_inspect(&mut self) {
        let nodes = self.config.nodes();
        let quorum = self.config.quorum();
        let pending = nodes.saturating_sub(self.round.settled());
        let answered = self.held.iter().filter(|h| h.is_some()).count();
        let unknown = nodes.saturating_sub(answered);
        let mut best: Option<(&[u8], usize)> = None;
        for held in self.held.iter().flatten() {
            if let Held::Token(token) = held {
                let votes = self
                    .held
                    .iter()
                    .filter(|h| matches!(h, Some(Held::Token(t)) if t == token))
                    .count();
                if best.is_none_or(|(_, most)| votes > most) {
                    best = Some((token.as_slice(), votes));
                }
            }
        }
        let most = best.map_or(0, |(_, votes)| votes);
        let outcome = if most >= quorum {
            Outcome::Inspected(Inspected {
                holder: best.map(|(token, _)| token.to_vec()),
                nodes: self.node_results(),
            })
        } else if most + unknown < quorum {
            Outcome::Inspected(Inspected {
                holder: None,
                nodes: self.node_results(),
            })
        } else if most + pending < quorum && most + (unknown - pending) >= quorum {
            // Neither can come any more: no token can reach a quorum with the nodes still
            // pending, and the failed nodes alone keep "nobody" from being sure. (With
            // nothing pending this is every case left.)
            Outcome::NotInspected(NotInspected {
                nodes: self.node_results(),
            })
        } else {
            return;
        };
        self.finish(outcome);
    }

    fn push_event(&mut self, event: Event) {
        if self.events.len() >= MAX_EVENTS {
            self.events.pop_front();
        }
        self.events.push_back(event);
    }

    fn finish(&mut self, outcome: Outcome) {
        if self.recording {
            let event =
                Event::of_outcome(&outcome, self.kind, self.attempt, self.latest, self.started);
            self.push_event(event);
        }
        self.phase = Phase::Done;
        self.outcome = Some(outcome);
    }
}

/// What a node's answer to an inspection says it holds, or `None` for an answer of the
/// wrong shape: `GET` answers a bulk string or null, `MGET` an array of `keys` of them.
fn read_held(reply: &Reply, keys: usize) -> Option<Held> {
    let value = |reply: &Reply| match reply {
        Reply::Bulk(bytes) => Some(Some(bytes.clone())),
        Reply::Nil => Some(None),
        _ => None,
    };
    let values: Vec<Option<Vec<u8>>> = match reply {
        Reply::Array(items) if keys > 1 && items.len() == keys => {
            items.iter().map(value).collect::<Option<_>>()?
        }
        Reply::Array(_) => return None,
        single if keys == 1 => alloc::vec![value(single)?],
        _ => return None,
    };
    match values.first() {
        Some(Some(first)) if values.iter().all(|v| v.as_ref() == Some(first)) => {
            Some(Held::Token(first.clone()))
        }
        _ => Some(Held::Nobody),
    }
}

fn error_result(reply: &Reply) -> NodeResult {
    match reply {
        Reply::Error(text) => NodeResult::Error(text.clone()),
        other => NodeResult::Error(format!("unexpected reply: {}", other.describe())),
    }
}

impl core::fmt::Debug for Operation {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Operation")
            .field("kind", &self.kind)
            .field("phase", &self.phase)
            .field("attempt", &self.attempt)
            .field("round", &self.round.number)
            .field("nodes", &self.node_results())
            .finish_non_exhaustive()
    }
}
