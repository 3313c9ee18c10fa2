//! Property tests: for any configuration and any order, timing and content of replies
//! (including garbage and misuse), the core
//! - never reports a lock acquired without a quorum of OKs for that attempt's token,
//! - never reports more validity than `ttl - drift`, and reports exactly
//!   `round start + ttl - drift - now`,
//! - follows every failed attempt with release commands to all N nodes,
//! - never extends without a quorum, and sends nothing after a failed extension,
//! - always finishes once time runs on,
//! - and never panics.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use proptest::prelude::*;
use redlock_core::resp::{encode_command, Decoder};
use redlock_core::{
    Command, CommandKind, Config, Operation, Outcome, Output, Redlock, Reply, RequestId, Time,
    UsageError,
};

#[derive(Debug, Clone)]
enum Answer {
    /// The positive answer in the form the command expects (OK to SET, 1 to scripts).
    Yes,
    Ok,
    Nil,
    Integer(i64),
    Error,
    NoScript,
    Timeout,
    ConnectionFailed,
    Bulk,
    Array,
    Status,
}

fn answer() -> impl Strategy<Value = Answer> {
    prop_oneof![
        6 => Just(Answer::Yes),
        2 => Just(Answer::Ok),
        2 => Just(Answer::Nil),
        3 => (-1i64..=3).prop_map(Answer::Integer),
        1 => Just(Answer::Error),
        1 => Just(Answer::NoScript),
        1 => Just(Answer::Timeout),
        1 => Just(Answer::ConnectionFailed),
        1 => Just(Answer::Bulk),
        1 => Just(Answer::Array),
        1 => Just(Answer::Status),
    ]
}

impl Answer {
    fn reply(&self, kind: CommandKind) -> Reply {
        match self {
            Answer::Yes if kind == CommandKind::Set => Reply::Ok,
            Answer::Yes => Reply::Integer(1),
            Answer::Ok => Reply::Ok,
            Answer::Nil => Reply::Nil,
            Answer::Integer(n) => Reply::Integer(*n),
            Answer::Error => Reply::Error("ERR something".into()),
            Answer::NoScript => Reply::Error("NOSCRIPT No matching script.".into()),
            Answer::Timeout => Reply::Timeout,
            Answer::ConnectionFailed => Reply::ConnectionFailed("reset".into()),
            Answer::Bulk => Reply::Bulk(b"OK".to_vec()),
            Answer::Array => Reply::Array(vec![Reply::Ok]),
            Answer::Status => Reply::Status("QUEUED".into()),
        }
    }
}

#[derive(Debug, Clone)]
enum Event {
    /// Answer the in-flight command at `pick` (modulo their number) after `advance` us.
    Reply {
        pick: usize,
        answer: Answer,
        advance: u64,
    },
    /// Call handle_timeout after `advance` us, or at the wait instant when `to_wait`.
    Timeout { advance: u64, to_wait: bool },
    /// A reply for an id never issued, or for one already answered.
    Misuse { id: u64, duplicate: bool },
    /// A reply whose time is earlier than the latest seen.
    Backwards {
        pick: usize,
        answer: Answer,
        back: u64,
    },
    /// A release notice from `node` (possibly no node of the configuration) after
    /// `advance` us, with no message (0), one naming someone else (1) or one naming the
    /// current attempt's token (2): it may only ever start an attempt sooner.
    Notice {
        node: usize,
        advance: u64,
        named: u8,
    },
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        8 => (any::<usize>(), answer(), 0u64..30_000).prop_map(|(pick, answer, advance)| Event::Reply { pick, answer, advance }),
        3 => (0u64..80_000, any::<bool>()).prop_map(|(advance, to_wait)| Event::Timeout { advance, to_wait }),
        1 => (any::<u64>(), any::<bool>()).prop_map(|(id, duplicate)| Event::Misuse { id, duplicate }),
        1 => (any::<usize>(), answer(), 0u64..50_000).prop_map(|(pick, answer, back)| Event::Backwards { pick, answer, back }),
        2 => (0usize..12, 0u64..5_000, 0u8..3).prop_map(|(node, advance, named)| Event::Notice { node, advance, named }),
    ]
}

fn config() -> impl Strategy<Value = Config> {
    (
        1usize..=9,
        // Short TTLs make replies arrive too late for a valid lock.
        prop_oneof![20u64..60, 60u64..20_000],
        // Only the last attempt's reason is reported: single attempts show every reason.
        prop_oneof![Just(1u32), 1u32..=4],
        0u64..=3,
        0u64..=2,
        any::<bool>(),
    )
        .prop_filter_map(
            "valid configuration",
            |(nodes, ttl_ms, attempts, jitter_ms, floor_ms, explicit_timeout)| {
                let mut builder = Config::builder(nodes, Duration::from_millis(ttl_ms))
                    .attempts(attempts)
                    .retry_delay(Duration::from_millis(3))
                    .retry_jitter(Duration::from_millis(jitter_ms))
                    .min_validity(Duration::from_millis(floor_ms));
                if explicit_timeout {
                    builder = builder.node_timeout(Duration::from_millis(7));
                }
                builder.build().ok()
            },
        )
}

/// Drives one operation through `events`, checking every output against an
/// independent account of what was sent and answered.
struct Check {
    config: Config,
    op: Operation,
    now: u64,
    in_flight: Vec<Command>,
    answered: Vec<RequestId>,
    /// Per token of an acquisition attempt: the round's start and the nodes that said yes.
    attempts: Vec<(String, u64, BTreeSet<usize>)>,
    /// Per token: the nodes a release was sent to.
    released: HashMap<String, BTreeSet<usize>>,
    /// Per token: the nodes an extension said yes on.
    extended: BTreeSet<usize>,
    outcome: Option<(Outcome, u64)>,
    sends_after_outcome: usize,
    /// The instant of the last `Wait`: the only source of wake-ups.
    wait: Option<u64>,
}

impl Check {
    fn new(config: Config, op: Operation) -> Check {
        let mut check = Check {
            config,
            op,
            now: 0,
            in_flight: Vec::new(),
            answered: Vec::new(),
            attempts: Vec::new(),
            released: HashMap::new(),
            extended: BTreeSet::new(),
            outcome: None,
            sends_after_outcome: 0,
            wait: None,
        };
        check.drain();
        check
    }

    fn token_of(command: &Command) -> String {
        let index = match command.kind() {
            CommandKind::Set => 2,
            // EVAL[SHA] script numkeys keys... token ...
            _ => {
                3 + std::str::from_utf8(command.arg(2).unwrap())
                    .unwrap()
                    .parse::<usize>()
                    .unwrap()
            }
        };
        String::from_utf8(command.arg(index).unwrap().to_vec()).unwrap()
    }

    fn drain(&mut self) {
        let finished_before = self.outcome.is_some();
        let mut last = None;
        while let Some(output) = self.op.poll_output() {
            last = Some(match &output {
                Output::Send(_) => "send",
                Output::Wait(_) => "wait",
                _ => "outcome",
            });
            match output {
                Output::Send(command) => {
                    if self.outcome.is_some() {
                        self.sends_after_outcome += 1;
                    }
                    let deadline = command.deadline().as_micros();
                    assert!(deadline <= self.now + self.config.node_timeout().as_micros() as u64);
                    let token = Check::token_of(&command);
                    match command.kind() {
                        CommandKind::Set | CommandKind::Acquire | CommandKind::QueuedAcquire
                            if !command.is_eval() =>
                        {
                            // A new attempt: every earlier attempt must have been released
                            // on all N nodes already.
                            for (earlier, _, _) in self.attempts.iter().filter(|a| a.0 != token) {
                                assert_eq!(
                                    self.released.get(earlier).map_or(0, BTreeSet::len),
                                    self.config.nodes(),
                                    "attempt {earlier} was not released on every node before the next"
                                );
                            }
                            if self.attempts.last().map(|a| &a.0) != Some(&token) {
                                self.attempts.push((token, self.now, BTreeSet::new()));
                            }
                        }
                        CommandKind::Release => {
                            self.released
                                .entry(token)
                                .or_default()
                                .insert(command.node());
                        }
                        _ => {}
                    }
                    self.in_flight.push(command);
                }
                Output::Wait(until) => self.wait = Some(until.as_micros()),
                Output::Outcome(outcome) => {
                    self.wait = None;
                    assert!(self.outcome.is_none(), "a second outcome");
                    self.outcome = Some((outcome, self.now));
                }
                other => panic!("unknown output {other:?}"),
            }
        }
        // The one output rule: every input of an unfinished operation ends with exactly
        // one wait or the outcome; a finished one outputs nothing.
        if finished_before {
            assert_eq!(last, None, "a finished operation output something");
        } else {
            assert!(
                matches!(last, Some("wait" | "outcome")),
                "an input ended with {last:?}, not a wait or the outcome"
            );
        }
    }

    fn reply(&mut self, pick: usize, answer: &Answer, now: u64) {
        if self.in_flight.is_empty() {
            return;
        }
        let command = self.in_flight.remove(pick % self.in_flight.len());
        let reply = answer.reply(command.kind());
        let yes = match command.kind() {
            CommandKind::Set => reply == Reply::Ok,
            _ => reply == Reply::Integer(1),
        };
        if yes {
            let token = Check::token_of(&command);
            match command.kind() {
                CommandKind::Set | CommandKind::Acquire => {
                    if let Some(attempt) = self.attempts.iter_mut().find(|a| a.0 == token) {
                        attempt.2.insert(command.node());
                    }
                }
                CommandKind::Extend => {
                    self.extended.insert(command.node());
                }
                _ => {}
            }
        }
        self.op
            .handle_reply(command.request_id(), reply, Time::from_micros(now))
            .unwrap();
        self.answered.push(command.request_id());
        self.drain();
    }

    fn run(&mut self, events: &[Event]) {
        for event in events {
            match event {
                Event::Reply {
                    pick,
                    answer,
                    advance,
                } => {
                    self.now += advance;
                    self.reply(*pick, answer, self.now);
                }
                Event::Backwards { pick, answer, back } => {
                    // The core treats an earlier time as the latest seen.
                    self.reply(*pick, answer, self.now.saturating_sub(*back));
                }
                Event::Timeout { advance, to_wait } => {
                    self.now = match self.wait {
                        Some(until) if *to_wait => self.now.max(until),
                        _ => self.now + advance,
                    };
                    self.op.handle_timeout(Time::from_micros(self.now));
                    self.drain();
                    self.expire_in_flight();
                }
                Event::Notice {
                    node,
                    advance,
                    named,
                } => {
                    let before = format!("{:?}", self.op);
                    let at = Time::from_micros(self.now + advance);
                    let message = match named {
                        0 => Vec::new(),
                        1 => b"someone".to_vec(),
                        _ => self.op.token().as_bytes().to_vec(),
                    };
                    let result = if message.is_empty() {
                        self.op.handle_notice(*node, at)
                    } else {
                        self.op.handle_notice_message(*node, &message, at)
                    };
                    if *node >= self.config.nodes() {
                        // Refused: not an input, so the core's clock did not move either.
                        assert_eq!(result, Err(UsageError::UnknownNode));
                        assert_eq!(
                            format!("{:?}", self.op),
                            before,
                            "a refused notice changes nothing"
                        );
                        assert!(
                            self.op.poll_output().is_none(),
                            "a refused call is not an input"
                        );
                    } else {
                        self.now += advance;
                        assert_eq!(result, Ok(()));
                        self.drain();
                        self.expire_in_flight();
                    }
                }
                Event::Misuse { id, duplicate } => {
                    let (id, expected) = match self.answered.first() {
                        Some(first) if *duplicate => (*first, UsageError::DuplicateReply),
                        _ => (RequestId(id | (1 << 62)), UsageError::UnknownRequest),
                    };
                    let before = format!("{:?}", self.op);
                    assert_eq!(
                        self.op
                            .handle_reply(id, Reply::Ok, Time::from_micros(self.now)),
                        Err(expected)
                    );
                    assert_eq!(
                        format!("{:?}", self.op),
                        before,
                        "a refused call changes nothing"
                    );
                    assert!(
                        self.op.poll_output().is_none(),
                        "a refused call is not an input"
                    );
                }
            }
        }
        // Then let time run on: the operation must finish.
        for _ in 0..(4 * self.config.attempts() + 4) {
            if self.outcome.is_some() {
                break;
            }
            let until = self.wait.expect("an unfinished operation has a deadline");
            self.now = self.now.max(until);
            self.op.handle_timeout(Time::from_micros(self.now));
            self.drain();
            self.expire_in_flight();
        }
        assert!(self.outcome.is_some(), "the operation never finished");
    }

    /// Commands past their deadline are given up by a driver.
    fn expire_in_flight(&mut self) {
        let now = self.now;
        self.in_flight.retain(|c| c.deadline().as_micros() > now);
    }

    fn check_outcome(&self) {
        let (outcome, decided_at) = self.outcome.as_ref().expect("finished");
        let lease_us =
            self.config.ttl().as_micros() as u64 - self.config.drift().as_micros() as u64;
        let floor = (self.config.min_validity().as_micros() as u64).max(1);
        match outcome {
            Outcome::Acquired(acquired) => {
                let token = acquired.lease.token().as_str();
                let (_, start, yes) = self
                    .attempts
                    .iter()
                    .find(|a| a.0 == token)
                    .expect("token of an attempt");
                assert!(
                    yes.len() >= self.config.quorum(),
                    "acquired with {} of {} OKs",
                    yes.len(),
                    self.config.quorum()
                );
                assert_eq!(acquired.lease.valid_until().as_micros(), start + lease_us);
                let validity = acquired.validity.as_micros() as u64;
                assert!(validity <= lease_us, "validity above ttl - drift");
                assert!(validity >= floor);
                assert_eq!(validity, start + lease_us - decided_at);
                for (earlier, _, _) in self.attempts.iter().filter(|a| a.0 != token) {
                    assert_eq!(self.released[earlier].len(), self.config.nodes());
                }
                assert_eq!(self.sends_after_outcome, 0);
            }
            Outcome::NotAcquired(failed) => {
                assert_eq!(failed.attempts as usize, self.attempts.len());
                for (token, _, _) in &self.attempts {
                    assert_eq!(
                        self.released.get(token).map_or(0, BTreeSet::len),
                        self.config.nodes(),
                        "not released everywhere"
                    );
                }
            }
            other => panic!("unexpected outcome {other:?}"),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn acquisition_invariants(config in config(), keys in 1usize..=3, seed in any::<[u8; 32]>(), events in prop::collection::vec(event(), 0..80)) {
        let mut client = Redlock::with_seed(config.clone(), seed);
        let resources: Vec<String> = (0..keys).map(|i| format!("res{i}")).collect();
        let op = client.acquire(&resources, Time::ZERO).unwrap();
        let mut check = Check::new(config, op);
        check.run(&events);
        check.check_outcome();
    }

    #[test]
    fn extension_invariants(config in config(), events in prop::collection::vec(event(), 0..60)) {
        let client = Redlock::with_seed(config.clone(), [0; 32]);
        let lease = client.lease(&["res"], "token", Time::from_micros(3_000_000)).unwrap();
        let op = client.extend(&lease, Time::ZERO).unwrap();
        let mut check = Check::new(config.clone(), op);
        check.run(&events);
        let (outcome, decided_at) = check.outcome.clone().unwrap();
        let lease_us = config.ttl().as_micros() as u64 - config.drift().as_micros() as u64;
        match outcome {
            Outcome::Extended(extended) => {
                prop_assert!(check.extended.len() >= config.quorum());
                prop_assert_eq!(extended.lease.valid_until().as_micros(), lease_us);
                prop_assert!(extended.validity.as_micros() as u64 <= lease_us);
                prop_assert_eq!(extended.lease.extensions(), 1);
            }
            Outcome::NotExtended(failed) => {
                prop_assert!(failed.lease.valid_until() <= lease.valid_until());
                prop_assert_eq!(failed.validity, failed.lease.validity(Time::from_micros(decided_at)));
                if let Some(retry_at) = failed.retry_at {
                    prop_assert!(retry_at.as_micros() > decided_at);
                    prop_assert!(retry_at.as_micros() + config.node_timeout().as_micros() as u64 <= failed.lease.valid_until().as_micros());
                }
            }
            other => prop_assert!(false, "unexpected outcome {:?}", other),
        }
        prop_assert_eq!(check.sends_after_outcome, 0, "nothing is sent after an extension decides");
    }

    #[test]
    fn release_counts_only_deletions(config in config(), events in prop::collection::vec(event(), 0..60)) {
        let client = Redlock::with_seed(config.clone(), [0; 32]);
        let lease = client.lease(&["res"], "token", Time::ZERO).unwrap();
        let op = client.release(&lease, Time::ZERO);
        let mut check = Check::new(config.clone(), op);
        check.run(&events);
        let (outcome, _) = check.outcome.clone().unwrap();
        let (released, nodes, success) = match &outcome {
            Outcome::Released(r) => (r.released, r.nodes.clone(), true),
            Outcome::NotReleased(r) => (r.released, r.nodes.clone(), false),
            _ => return Err(TestCaseError::fail(format!("unexpected outcome {outcome:?}"))),
        };
        prop_assert_eq!(nodes.len(), config.nodes());
        prop_assert_eq!(released, nodes.iter().filter(|n| **n == redlock_core::NodeResult::Success).count());
        // A success only when a quorum confirmed the key is gone (deleted or not ours).
        let confirmed = nodes
            .iter()
            .filter(|n| matches!(n, redlock_core::NodeResult::Success | redlock_core::NodeResult::Conflict))
            .count();
        prop_assert_eq!(success, confirmed >= config.quorum());
        prop_assert_eq!(outcome.is_success(), success);
        prop_assert_eq!(outcome.error_class().is_none(), success);
    }

    #[test]
    fn decoder_never_panics(chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..64), 0..8)) {
        let mut decoder = Decoder::new();
        for chunk in &chunks {
            decoder.feed(chunk);
            while let Ok(Some(_)) = decoder.next_reply() {}
        }
    }

    #[test]
    fn decoder_is_split_independent(replies in prop::collection::vec(resp_reply(), 1..6), cut in any::<prop::sample::Index>()) {
        let mut bytes = Vec::new();
        for reply in &replies {
            encode_reply(reply, &mut bytes);
        }
        let cut = cut.index(bytes.len() + 1);
        let mut decoder = Decoder::new();
        let mut decoded = Vec::new();
        for part in [&bytes[..cut], &bytes[cut..]] {
            decoder.feed(part);
            while let Some(reply) = decoder.next_reply().unwrap() {
                decoded.push(reply);
            }
        }
        prop_assert_eq!(decoded, replies);
        prop_assert_eq!(decoder.buffered(), 0);
    }

    #[test]
    fn command_encoding_round_trips(args in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 1..8)) {
        let mut bytes = Vec::new();
        encode_command(args.iter().map(Vec::as_slice), &mut bytes);
        let mut decoder = Decoder::new();
        decoder.feed(&bytes);
        let expected = Reply::Array(args.iter().map(|a| Reply::Bulk(a.clone())).collect());
        prop_assert_eq!(decoder.next_reply().unwrap(), Some(expected));
    }
}

fn resp_reply() -> impl Strategy<Value = Reply> {
    let leaf = prop_oneof![
        Just(Reply::Ok),
        "[a-zA-Z ]{1,12}".prop_filter_map("not OK", |s| (s != "OK").then_some(Reply::Status(s))),
        Just(Reply::Nil),
        any::<i64>().prop_map(Reply::Integer),
        prop::collection::vec(any::<u8>(), 0..20).prop_map(Reply::Bulk),
        "[A-Z]{1,8} [a-z ]{0,20}".prop_map(Reply::Error),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop::collection::vec(inner, 0..4).prop_map(Reply::Array)
    })
}

fn encode_reply(reply: &Reply, out: &mut Vec<u8>) {
    match reply {
        Reply::Ok => out.extend_from_slice(b"+OK\r\n"),
        Reply::Status(s) => out.extend_from_slice(format!("+{s}\r\n").as_bytes()),
        Reply::Nil => out.extend_from_slice(b"$-1\r\n"),
        Reply::Integer(n) => out.extend_from_slice(format!(":{n}\r\n").as_bytes()),
        Reply::Bulk(b) => {
            out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
            out.extend_from_slice(b);
            out.extend_from_slice(b"\r\n");
        }
        Reply::Error(e) => out.extend_from_slice(format!("-{e}\r\n").as_bytes()),
        Reply::Array(items) => {
            out.extend_from_slice(format!("*{}\r\n", items.len()).as_bytes());
            for item in items {
                encode_reply(item, out);
            }
        }
        other => panic!("not encodable: {other:?}"),
    }
}

/// The generators above must reach every kind of outcome, or the properties would hold
/// vacuously.
#[test]
fn generators_reach_every_outcome() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config as RunnerConfig, TestRng, TestRunner};
    let mut runner = TestRunner::new_with_rng(
        RunnerConfig::default(),
        TestRng::deterministic_rng(RunnerConfig::default().rng_algorithm),
    );
    let mut seen = BTreeSet::new();
    let strategy = (config(), 1usize..=3, prop::collection::vec(event(), 0..80));
    for _ in 0..3000 {
        let (config, keys, events) = strategy.new_tree(&mut runner).unwrap().current();
        let mut client = Redlock::with_seed(config.clone(), [5; 32]);
        let resources: Vec<String> = (0..keys).map(|i| format!("res{i}")).collect();
        let mut check = Check::new(config, client.acquire(&resources, Time::ZERO).unwrap());
        check.run(&events);
        let (outcome, _) = check.outcome.unwrap();
        seen.insert(match &outcome {
            Outcome::Acquired(a) => format!("acquired after {}", a.attempts.min(2)),
            other => format!("{}: {}", other.code(), other.reason().unwrap().code()),
        });
    }
    for expected in [
        "acquired after 1",
        "acquired after 2",
        "not_acquired: conflict",
        "not_acquired: nodes_failed",
        "not_acquired: mixed",
        "not_acquired: validity_too_short",
    ] {
        assert!(
            seen.contains(expected),
            "never reached {expected}; reached {seen:?}"
        );
    }
}

// ---- node links ---------------------------------------------------------------------

#[derive(Clone, Debug)]
enum LinkEvent {
    Submit { kind: u8, token: u8, advance: u64 },
    Connected,
    Closed,
    Reply { pick: usize, answer: u8 },
    Stale { id: u64 },
    Timeout { advance: u64 },
}

fn link_event() -> impl Strategy<Value = LinkEvent> {
    prop_oneof![
        4 => (0u8..3, 0u8..6, 0u64..30_000).prop_map(|(kind, token, advance)| LinkEvent::Submit { kind, token, advance }),
        1 => Just(LinkEvent::Connected),
        1 => Just(LinkEvent::Closed),
        4 => (0usize..8, 0u8..4).prop_map(|(pick, answer)| LinkEvent::Reply { pick, answer }),
        1 => (0u64..200).prop_map(|id| LinkEvent::Stale { id }),
        2 => (0u64..12_000_000).prop_map(|advance| LinkEvent::Timeout { advance }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, .. ProptestConfig::default() })]

    /// Whatever the connection does, a link never panics, stays bounded, delivers each
    /// command at most once and only to the tag it came with, writes nothing while it has
    /// no connection, and writes the scripts before anything else on every connection.
    #[test]
    fn links_stay_bounded_and_deliver_once(events in prop::collection::vec(link_event(), 0..200)) {
        use redlock_core::{Link, LinkCause, LinkOutput, Write};
        let config = Config::builder(1, Duration::from_millis(1000)).build().unwrap();
        let mut redlock = Redlock::with_seed(config, [1; 32]);
        let mut link = Link::new();
        let mut now = 0u64;
        let mut open = false;
        let mut written: Vec<Write> = Vec::new();
        let mut scripts_due = 0usize;
        let mut submitted: HashMap<u64, u64> = HashMap::new(); // tag -> request
        let mut delivered: BTreeSet<u64> = BTreeSet::new();
        let mut next_tag = 0u64;
        for event in &events {
            match event {
                LinkEvent::Submit { kind, token, advance } => {
                    now += advance;
                    let tokens = ["t0", "t1", "t2", "t3", "t4", "t5"];
                    let lease = redlock.lease(&["r"], tokens[*token as usize], Time::ZERO).unwrap();
                    let mut op = match kind {
                        0 => redlock.acquire(&["r"], Time::from_micros(now)).unwrap(),
                        1 => redlock.release(&lease, Time::from_micros(now)),
                        _ => redlock.extend(&lease, Time::from_micros(now)).unwrap(),
                    };
                    if let Some(Output::Send(command)) = op.poll_output() {
                        next_tag += 1;
                        submitted.insert(next_tag, command.request_id().0);
                        link.submit(next_tag, command, Time::from_micros(now));
                    }
                }
                LinkEvent::Connected => {
                    if !open {
                        open = true;
                        scripts_due = 3;
                        written.clear();
                        link.handle_connected(Time::from_micros(now));
                    }
                }
                LinkEvent::Closed => {
                    open = false;
                    written.clear();
                    link.handle_closed(LinkCause::Closed, "gone", Time::from_micros(now));
                }
                LinkEvent::Reply { pick, answer } => {
                    if !written.is_empty() {
                        let write = written.remove(pick % written.len());
                        let reply = match answer {
                            0 => Reply::Ok,
                            1 => Reply::Integer(1),
                            2 => Reply::Error("NOSCRIPT x".into()),
                            _ => Reply::Nil,
                        };
                        link.handle_reply(write.id(), reply, Time::from_micros(now));
                    }
                }
                LinkEvent::Stale { id } => {
                    link.handle_reply(redlock_core::WriteId(*id + 10_000), Reply::Ok, Time::from_micros(now));
                }
                LinkEvent::Timeout { advance } => {
                    now += advance;
                    link.handle_timeout(Time::from_micros(now));
                }
            }
            while let Some(output) = link.poll_output() {
                match output {
                    LinkOutput::Connect => {}
                    LinkOutput::Close => {
                        open = false;
                        written.clear();
                    }
                    LinkOutput::Write(write) => {
                        prop_assert!(open, "a write without a connection");
                        let is_script = write.arg(0) == Some(&b"SCRIPT"[..]);
                        if scripts_due > 0 {
                            prop_assert!(is_script, "a command before the scripts");
                            scripts_due -= 1;
                        } else {
                            prop_assert!(!is_script);
                        }
                        written.push(write);
                    }
                    LinkOutput::Deliver(delivery) => {
                        prop_assert_eq!(submitted.get(&delivery.tag), Some(&delivery.request.0));
                        prop_assert!(delivered.insert(delivery.tag), "delivered twice");
                    }
                    _ => {}
                }
            }
            prop_assert!(link.in_flight() <= redlock_core::MAX_IN_FLIGHT + 3);
            prop_assert!(link.queued() <= redlock_core::MAX_QUEUED);
            prop_assert!(link.owed() <= redlock_core::MAX_OWED);
        }
    }
}

// ---- fencing ------------------------------------------------------------------------

/// A node as the fencing scripts see it: the lock key (token, expiry on the global
/// clock) and the fence counter.
#[derive(Clone, Default)]
struct FenceNode {
    lock: Option<(Vec<u8>, u64)>,
    fence: u64,
}

impl FenceNode {
    fn held(&self, now: u64) -> Option<&[u8]> {
        self.lock
            .as_ref()
            .filter(|(_, expires)| *expires > now)
            .map(|(token, _)| token.as_slice())
    }

    /// Runs one command of the core at `now`, as Redis runs the scripts.
    fn run(&mut self, command: &Command, now: u64) -> Reply {
        let token = command.token().to_vec();
        match command.kind() {
            CommandKind::FencedAcquire => {
                if self.held(now).is_some() {
                    return Reply::Integer(0);
                }
                self.fence += 1;
                self.lock = Some((token, now + command.ttl_ms() * 1000));
                Reply::Integer(self.fence as i64)
            }
            CommandKind::WriteBack => {
                if self.held(now) != Some(token.as_slice()) {
                    return Reply::Integer(0);
                }
                let args: Vec<&[u8]> = command.args().collect();
                let fence: u64 = std::str::from_utf8(args[args.len() - 1])
                    .unwrap()
                    .parse()
                    .unwrap();
                self.fence = self.fence.max(fence);
                Reply::Integer(1)
            }
            CommandKind::Release => {
                if self.held(now) == Some(token.as_slice()) {
                    self.lock = None;
                    Reply::Integer(1)
                } else {
                    Reply::Integer(0)
                }
            }
            _ => Reply::Error("ERR not modelled".into()),
        }
    }
}

#[derive(Clone, Debug)]
struct FenceStep {
    /// Per command: 0 delivered, 1 lost before the node, 2 reply lost; delays in us.
    fates: Vec<(u8, u64, u64)>,
    /// Time before this acquisition starts (may exceed the TTL: the last holder paused).
    gap: u64,
    /// Whether the previous holder releases before the gap.
    release: bool,
}

fn fence_step() -> impl Strategy<Value = FenceStep> {
    (
        prop::collection::vec(
            (
                prop_oneof![6 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8)],
                0u64..3000,
                0u64..3000,
            ),
            40,
        ),
        prop_oneof![Just(0u64), 0u64..3_000_000],
        any::<bool>(),
    )
        .prop_map(|(fates, gap, release)| FenceStep {
            fates,
            gap,
            release,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, .. ProptestConfig::default() })]

    /// Fenced acquisitions one after the other (each finishes before the next starts;
    /// holders may pause past their lease, never release, or lose replies and commands)
    /// hand out strictly increasing fencing tokens, whatever the timing: the scheme
    /// assumes no clock, only the order of operations on the nodes (persistence kept).
    #[test]
    fn fencing_tokens_strictly_increase(nodes in 1usize..6, steps in prop::collection::vec(fence_step(), 1..12)) {
        let config = Config::builder(nodes, Duration::from_millis(1000))
            .fencing(true)
            .attempts(1)
            .build()
            .unwrap();
        let mut redlock = Redlock::with_seed(config, [4; 32]);
        let mut state = vec![FenceNode::default(); nodes];
        let mut now = 0u64;
        let mut issued: Vec<u64> = Vec::new();
        let mut held: Option<redlock_core::Lease> = None;
        // Commands still travelling: (arrival time, node, command, reply lost, operation).
        let mut late: Vec<(u64, usize, Command, bool, usize)> = Vec::new();
        for (index, step) in steps.iter().enumerate() {
            if step.release {
                if let Some(lease) = held.take() {
                    let mut op = redlock.release(&lease, Time::from_micros(now));
                    while let Some(output) = op.poll_output() {
                        if let Output::Send(command) = output {
                            let reply = state[command.node()].run(&command, now);
                            let _ = op.handle_reply(command.request_id(), reply, Time::from_micros(now));
                        }
                    }
                }
            }
            now += step.gap;
            let mut op = redlock.acquire(&["res"], Time::from_micros(now)).unwrap();
            let mut fates = step.fates.iter().cycle();
            // Replies on their way: (arrival time, request, reply).
            let mut replies: Vec<(u64, RequestId, Reply)> = Vec::new();
            let mut wait = None;
            let outcome = loop {
                let mut outcome = None;
                while let Some(output) = op.poll_output() {
                    match output {
                        Output::Send(command) => {
                            let (fate, to_node, back) = *fates.next().unwrap();
                            if fate != 1 {
                                late.push((now + to_node, command.node(), command.clone(), fate == 2, index));
                            }
                            let _ = back;
                        }
                        Output::Wait(t) => wait = Some(t.as_micros()),
                        Output::Outcome(o) => outcome = Some(o),
                        _ => {}
                    }
                }
                if let Some(o) = outcome {
                    break o;
                }
                // The next event: a command arriving, a reply arriving, or the wait.
                late.sort_by_key(|e| e.0);
                replies.sort_by_key(|e| e.0);
                let next_cmd = late.first().map(|e| e.0);
                let next_reply = replies.first().map(|e| e.0);
                let next = [next_cmd, next_reply, wait].into_iter().flatten().min().unwrap();
                now = now.max(next);
                if next_cmd == Some(next) {
                    let (at, node, command, lost, from) = late.remove(0);
                    let reply = state[node].run(&command, at);
                    // A reply to an earlier operation's command is not this one's.
                    if !lost && from == index {
                        let (_, _, back) = *fates.next().unwrap();
                        replies.push((at + back, command.request_id(), reply));
                    }
                } else if next_reply == Some(next) {
                    let (_, request, reply) = replies.remove(0);
                    let _ = op.handle_reply(request, reply, Time::from_micros(now));
                } else {
                    op.handle_timeout(Time::from_micros(now));
                }
            };
            // Commands of this operation still travelling stay in `late`: they land
            // later, interleaved with the next acquisition.
            if let Outcome::Acquired(acquired) = outcome {
                let token = acquired.lease.fencing_token().expect("fenced acquisition");
                if let Some(last) = issued.last() {
                    prop_assert!(token > *last, "token {} after {}", token, last);
                }
                issued.push(token);
                held = Some(acquired.lease);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, .. ProptestConfig::default() })]

    /// An acquisition with a wait limit never starts an attempt that could not end by
    /// the limit, ends once none fits, and waits between attempts at least the floor.
    #[test]
    fn wait_limits_hold(
        nodes in 1usize..6,
        wait_ms in 0u64..400,
        fencing in any::<bool>(),
        answers in prop::collection::vec((0u8..3, 0u64..20_000), 1..200),
    ) {
        let config = Config::builder(nodes, Duration::from_millis(1000))
            .attempts(1)
            .retry_delay(Duration::from_millis(20))
            .retry_jitter(Duration::from_millis(10))
            .fencing(fencing)
            .build()
            .unwrap();
        let span = config.node_timeout().as_micros() as u64 * if fencing { 2 } else { 1 };
        let mut redlock = Redlock::with_seed(config, [8; 32]);
        let start = 1_000u64;
        let limit = start + wait_ms * 1000;
        let options = redlock_core::AcquireOptions::new().wait(Duration::from_millis(wait_ms));
        let mut op = redlock.acquire_with(&["w"], &options, Time::from_micros(start)).unwrap();
        let mut now = start;
        let mut in_flight: Vec<Command> = Vec::new();
        let mut wait = None;
        let mut attempt_starts: Vec<u64> = Vec::new();
        let mut answers = answers.into_iter().cycle();
        let mut finished = false;
        for _ in 0..2_000 {
            while let Some(output) = op.poll_output() {
                match output {
                    Output::Send(command) => {
                        if matches!(command.kind(), CommandKind::Set | CommandKind::FencedAcquire | CommandKind::QueuedAcquire) && !command.is_eval() && command.node() == 0 {
                            attempt_starts.push(now);
                        }
                        in_flight.push(command);
                    }
                    Output::Wait(t) => wait = Some(t.as_micros()),
                    Output::Outcome(_) => finished = true,
                    _ => {}
                }
            }
            if finished {
                break;
            }
            let (kind, advance) = answers.next().unwrap();
            if in_flight.is_empty() || kind == 2 {
                now = now.max(wait.unwrap()).max(now + advance.min(1));
                op.handle_timeout(Time::from_micros(now));
                in_flight.retain(|c| c.deadline().as_micros() > now);
            } else {
                now += advance / 10;
                let command = in_flight.remove(0);
                let reply = match (command.kind(), kind) {
                    (CommandKind::Set, _) => Reply::Nil,
                    (CommandKind::FencedAcquire | CommandKind::Acquire, _) => Reply::Integer(0),
                    // Refused, at some place in the queue of waiters.
                    (CommandKind::QueuedAcquire, _) => Reply::Integer(-((advance % 4) as i64)),
                    (_, 0) => Reply::Integer(1),
                    _ => Reply::Integer(0),
                };
                let _ = op.handle_reply(command.request_id(), reply, Time::from_micros(now));
            }
        }
        prop_assert!(finished, "the acquisition never ended");
        prop_assert_eq!(attempt_starts[0], start, "the first attempt starts at once");
        for pair in attempt_starts.windows(2) {
            prop_assert!(pair[1] >= pair[0] + 1000, "attempts {} and {} back to back", pair[0], pair[1]);
        }
        for at in &attempt_starts[1..] {
            prop_assert!(at + span <= limit, "an attempt at {} cannot end by {}", at, limit);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, .. ProptestConfig::default() })]

    /// An inspection names a holder only when a quorum hold that token, says nobody only
    /// when no token could have a quorum even on the nodes that failed, and says nothing
    /// only when neither is certain; whatever the order of the answers.
    #[test]
    fn inspections_are_sound(
        nodes in 1usize..8,
        answers in prop::collection::vec((0u8..5, 0u64..100_000), 7),
    ) {
        let config = Config::builder(nodes, Duration::from_millis(1000)).build().unwrap();
        let quorum = config.quorum();
        let client = Redlock::with_seed(config, [1; 32]);
        let mut op = client.inspect(&["r"], Time::from_micros(0)).unwrap();
        let mut sent = Vec::new();
        let mut deadline = 0;
        while let Some(output) = op.poll_output() {
            match output {
                Output::Send(command) => sent.push(command),
                Output::Wait(t) => deadline = t.as_micros(),
                _ => {}
            }
        }
        // 0: token a, 1: token b, 2: nil, 3: an error, 4: no answer (a timeout).
        let answers = &answers[..nodes];
        let mut order: Vec<usize> = (0..nodes).filter(|&n| answers[n].0 < 4).collect();
        order.sort_by_key(|&n| answers[n].1);
        let mut outcome = None;
        for node in order {
            let reply = match answers[node].0 {
                0 => Reply::Bulk(b"a".to_vec()),
                1 => Reply::Bulk(b"b".to_vec()),
                2 => Reply::Nil,
                _ => Reply::Error("ERR down".into()),
            };
            let at = Time::from_micros(answers[node].1.min(deadline - 1));
            op.handle_reply(sent[node].request_id(), reply, at).unwrap();
            while let Some(output) = op.poll_output() {
                if let Output::Outcome(o) = output { outcome = Some(o); }
            }
        }
        if outcome.is_none() {
            op.handle_timeout(Time::from_micros(deadline));
            while let Some(output) = op.poll_output() {
                if let Output::Outcome(o) = output { outcome = Some(o); }
            }
        }
        let count = |kind: u8| answers.iter().filter(|(k, _)| *k == kind).count();
        let failed = count(3) + count(4);
        let most = count(0).max(count(1));
        match outcome {
            Some(Outcome::Inspected(i)) => match i.holder.as_deref() {
                Some(b"a") => prop_assert!(count(0) >= quorum),
                Some(b"b") => prop_assert!(count(1) >= quorum),
                Some(other) => prop_assert!(false, "holder {:?}", other),
                None => prop_assert!(most + failed < quorum),
            },
            Some(Outcome::NotInspected(_)) => {
                prop_assert!(most < quorum && most + failed >= quorum)
            }
            other => prop_assert!(false, "no inspection outcome: {:?}", other),
        }
    }
}
