//! Scenario tests of the public API, for what the conformance vectors cannot express:
//! randomness sources, per-call TTLs, the extension schedule, the live per-node view.

use std::time::Duration;

use redlock_core::{
    Command, CommandKind, Config, FailureReason, NodeResult, Operation, Outcome, Output, Redlock,
    Reply, Time, UsageError, MAX_RESOURCES,
};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn at(us: u64) -> Time {
    Time::from_micros(us)
}

/// Polls until empty; returns the commands, the last wait and the outcome, if any.
fn drain(op: &mut Operation) -> (Vec<Command>, Option<Time>, Option<Outcome>) {
    let (mut sends, mut wait, mut outcome) = (Vec::new(), None, None);
    while let Some(output) = op.poll_output() {
        match output {
            Output::Send(c) => sends.push(c),
            Output::Wait(t) => wait = Some(t),
            Output::Outcome(o) => outcome = Some(o),
            other => panic!("unknown output {other:?}"),
        }
    }
    (sends, wait, outcome)
}

/// Answers every command with `reply(node)` at time `now`; returns the commands the
/// replies caused and the outcome, if one came.
fn answer(
    op: &mut Operation,
    sends: &[Command],
    now: u64,
    reply: impl Fn(usize) -> Reply,
) -> (Vec<Command>, Option<Outcome>) {
    let (mut caused, mut outcome) = (Vec::new(), None);
    for command in sends {
        op.handle_reply(command.request_id(), reply(command.node()), at(now))
            .unwrap();
        let (more, _, o) = drain(op);
        caused.extend(more);
        outcome = outcome.or(o);
    }
    (caused, outcome)
}

/// Like [`answer`], for replies that cause no commands.
fn answer_all(
    op: &mut Operation,
    sends: &[Command],
    now: u64,
    reply: impl Fn(usize) -> Reply,
) -> Option<Outcome> {
    let (caused, outcome) = answer(op, sends, now, reply);
    assert!(caused.is_empty(), "unexpected commands {caused:?}");
    outcome
}

/// Like [`answer_all`], also returning the last wait the replies caused.
fn answer_all_wait(
    op: &mut Operation,
    sends: &[Command],
    now: u64,
    reply: impl Fn(usize) -> Reply,
) -> (Option<Time>, Option<Outcome>) {
    let (mut wait, mut outcome) = (None, None);
    for command in sends {
        op.handle_reply(command.request_id(), reply(command.node()), at(now))
            .unwrap();
        let (more, w, o) = drain(op);
        assert!(more.is_empty(), "unexpected commands {more:?}");
        wait = w.or(wait);
        outcome = outcome.or(o);
    }
    (wait, outcome)
}

fn config(nodes: usize) -> Config {
    Config::builder(nodes, ms(10_000)).build().unwrap()
}

#[test]
fn os_tokens_are_160_bit_hex_and_unique() {
    let mut client = Redlock::new(config(3));
    let mut seen = std::collections::HashSet::new();
    for _ in 0..1000 {
        let token = client.generate_token().unwrap();
        assert_eq!(token.as_str().len(), 40);
        assert!(token
            .as_str()
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        assert!(seen.insert(token));
    }
}

#[test]
fn seeded_clients_repeat_and_differ_by_seed() {
    let tokens = |seed| {
        let mut client = Redlock::with_seed(config(3), seed);
        (0..3)
            .map(|_| client.acquire(&["r"], at(0)).unwrap().token().clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(tokens([1; 32]), tokens([1; 32]));
    assert_ne!(tokens([1; 32]), tokens([2; 32]));
    let same_seed = tokens([1; 32]);
    assert_ne!(
        same_seed[0], same_seed[1],
        "each operation draws its own token"
    );
}

#[test]
fn every_attempt_has_its_own_token() {
    let config = Config::builder(3, ms(1000))
        .attempts(3)
        .retry_jitter(Duration::ZERO)
        .build()
        .unwrap();
    let mut client = Redlock::with_seed(config, [9; 32]);
    let mut op = client.acquire(&["r"], at(0)).unwrap();
    let mut now = 0;
    let mut tokens = Vec::new();
    loop {
        let (sends, _, _) = drain(&mut op);
        assert_eq!(sends.len(), 3);
        tokens.push(op.token().clone());
        // Every node refuses: conflict at the second refusal, then the release round.
        now += 100;
        let (releases, _) = answer(&mut op, &sends[..2], now, |_| Reply::Nil);
        assert_eq!(
            releases.len(),
            3,
            "a failed attempt is released on all N nodes"
        );
        assert!(releases
            .iter()
            .all(|c| c.kind() == CommandKind::Release && c.arg(4) == Some(op.token().as_bytes())));
        let (retry_at, outcome) =
            answer_all_wait(&mut op, &releases, now + 100, |_| Reply::Integer(0));
        if let Some(outcome) = outcome {
            let Outcome::NotAcquired(failed) = outcome else {
                panic!("{outcome:?}")
            };
            assert_eq!(failed.attempts, 3);
            assert_eq!(failed.reason, FailureReason::Conflict);
            assert_eq!(&failed.token, tokens.last().unwrap());
            break;
        }
        now = retry_at
            .expect("a failed attempt with attempts left waits")
            .as_micros();
        op.handle_timeout(at(now));
    }
    assert_eq!(tokens.len(), 3);
    assert!(tokens[0] != tokens[1] && tokens[1] != tokens[2] && tokens[0] != tokens[2]);
}

#[test]
fn per_call_ttl_is_checked_and_carried_by_the_lease() {
    let mut client = Redlock::with_seed(config(3), [0; 32]);
    assert_eq!(
        client
            .acquire_for(&["r"], Duration::ZERO, at(0))
            .unwrap_err(),
        UsageError::InvalidTtl(redlock_core::ConfigError::TtlZero)
    );
    let mut op = client.acquire_for(&["r"], ms(2000), at(1000)).unwrap();
    let (sends, wait, _) = drain(&mut op);
    assert_eq!(sends[0].arg(5), Some(&b"2000"[..]));
    // The default node timeout follows the TTL: min(50 ms, 200 ms).
    assert_eq!(wait, Some(at(51_000)));
    let Some(Outcome::Acquired(acquired)) = answer_all(&mut op, &sends, 2000, |_| Reply::Ok) else {
        panic!("not acquired")
    };
    assert_eq!(acquired.lease.ttl_ms(), 2000);
    // drift = 20 ms + 2 ms; valid_until = 1000 + 2 000 000 - 22 000.
    assert_eq!(acquired.lease.valid_until(), at(1_979_000));

    // extend() keeps the lease's TTL; extend_for() changes it.
    let mut op = client.extend(&acquired.lease, at(500_000)).unwrap();
    let (sends, _, _) = drain(&mut op);
    assert_eq!(sends[0].args().last(), Some(&b"2000"[..]));
    let Some(Outcome::Extended(extended)) =
        answer_all(&mut op, &sends, 501_000, |_| Reply::Integer(1))
    else {
        panic!("not extended")
    };
    assert_eq!(
        extended.lease.valid_until(),
        at(500_000 + 2_000_000 - 22_000)
    );
    assert_eq!(extended.lease.extensions(), 1);
    let mut op = client
        .extend_for(&extended.lease, ms(5000), at(600_000))
        .unwrap();
    let (sends, _, _) = drain(&mut op);
    assert_eq!(sends[0].args().last(), Some(&b"5000"[..]));
    let Some(Outcome::Extended(longer)) =
        answer_all(&mut op, &sends, 601_000, |_| Reply::Integer(1))
    else {
        panic!("not extended")
    };
    assert_eq!(longer.lease.ttl_ms(), 5000);
    assert_eq!(longer.lease.extensions(), 2);
    assert!(client.extend_for(&longer.lease, ms(1), at(0)).is_err());
}

#[test]
fn extension_schedule() {
    let config = Config::builder(3, ms(9000))
        .max_extensions(Some(2))
        .build()
        .unwrap();
    let client = Redlock::with_seed(config.clone(), [0; 32]);
    let lease = client.lease(&["r"], "tok", at(10_000_000)).unwrap();
    // margin = max(9000 ms / 3, 2 * 50 ms) = 3 s before valid_until.
    assert_eq!(config.next_extension(&lease, at(0)), Some(at(7_000_000)));
    assert_eq!(
        config.next_extension(&lease, at(8_000_000)),
        Some(at(8_000_000))
    );
    assert_eq!(
        config.next_extension(&lease, at(10_000_000)),
        None,
        "expired"
    );

    let mut op = client.extend(&lease, at(0)).unwrap();
    let (sends, _, _) = drain(&mut op);
    let Some(Outcome::Extended(once)) = answer_all(&mut op, &sends, 10, |_| Reply::Integer(1))
    else {
        panic!()
    };
    let mut op = client.extend(&once.lease, at(20)).unwrap();
    let (sends, _, _) = drain(&mut op);
    let Some(Outcome::Extended(twice)) = answer_all(&mut op, &sends, 30, |_| Reply::Integer(1))
    else {
        panic!()
    };
    assert!(config.next_extension(&once.lease, at(40)).is_some());
    assert_eq!(
        config.next_extension(&twice.lease, at(40)),
        None,
        "bounded at two extensions"
    );
}

#[test]
fn extension_schedule_follows_the_lease_ttl() {
    let config = Config::builder(3, ms(30_000)).build().unwrap();
    let mut client = Redlock::with_seed(config.clone(), [0; 32]);
    let mut op = client.acquire_for(&["r"], ms(3000), at(0)).unwrap();
    let (sends, _, _) = drain(&mut op);
    let Some(Outcome::Acquired(acquired)) = answer_all(&mut op, &sends, 100, |_| Reply::Ok) else {
        panic!("not acquired")
    };
    // 3 s lease: drift 32 ms, valid_until 2 968 000; a third of 3 s before that, not
    // a third of the configured 30 s (which would be before the lease even began).
    assert_eq!(acquired.lease.valid_until(), at(2_968_000));
    assert_eq!(
        config.next_extension(&acquired.lease, at(100)),
        Some(at(1_968_000))
    );
    // A 60 ms lease: its node timeout is 6 ms, margin max(20 ms, 12 ms).
    let mut op = client.acquire_for(&["s"], ms(60), at(0)).unwrap();
    let (sends, _, _) = drain(&mut op);
    let Some(Outcome::Acquired(short)) = answer_all(&mut op, &sends, 100, |_| Reply::Ok) else {
        panic!("not acquired")
    };
    assert_eq!(short.lease.valid_until(), at(60_000 - 2_600));
    assert_eq!(
        config.next_extension(&short.lease, at(100)),
        Some(at(57_400 - 20_000))
    );
}

#[test]
fn failed_extension_deletes_nothing_and_says_how_long_the_lock_lasts() {
    let client = Redlock::with_seed(config(5), [0; 32]);
    let lease = client.lease(&["r"], "tok", at(5_000_000)).unwrap();
    let mut op = client.extend(&lease, at(1_000_000)).unwrap();
    let (sends, _, _) = drain(&mut op);
    let outcome = answer_all(&mut op, &sends[..3], 1_001_000, |_| {
        Reply::ConnectionFailed("reset".into())
    });
    let Some(Outcome::NotExtended(failed)) = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(failed.reason, FailureReason::NodesFailed);
    assert!(!failed.is_lost());
    assert_eq!(failed.lease.valid_until(), at(5_000_000));
    assert_eq!(failed.validity, Duration::from_micros(3_999_000));
    // min(200 ms, 3.999 s / 4) after now.
    assert_eq!(failed.retry_at, Some(at(1_201_000)));
    assert_eq!(
        drain(&mut op),
        (Vec::new(), None, None),
        "nothing is sent after a failed extension"
    );
}

#[test]
fn live_node_view_records_late_replies() {
    let mut client = Redlock::with_seed(config(5), [0; 32]);
    let mut op = client.acquire(&["r"], at(0)).unwrap();
    let (sends, _, _) = drain(&mut op);
    let outcome = answer_all(&mut op, &sends[..3], 100, |_| Reply::Ok).unwrap();
    assert_eq!(outcome.nodes()[3], NodeResult::Pending);
    op.handle_reply(sends[3].request_id(), Reply::Ok, at(200))
        .unwrap();
    op.handle_reply(
        sends[4].request_id(),
        Reply::Error("LOADING".into()),
        at(300),
    )
    .unwrap();
    assert_eq!(op.node_results()[3], NodeResult::Success);
    assert_eq!(op.node_results()[4], NodeResult::Error("LOADING".into()));
    assert!(op.is_finished());
    assert!(op.poll_output().is_none());
}

#[test]
fn resource_validation() {
    let mut client = Redlock::with_seed(config(3), [0; 32]);
    let none: [&str; 0] = [];
    assert_eq!(
        client.acquire(&none, at(0)).unwrap_err(),
        UsageError::NoResources
    );
    assert_eq!(
        client.acquire(&[""], at(0)).unwrap_err(),
        UsageError::EmptyResource
    );
    assert_eq!(
        client.acquire(&["a", "a"], at(0)).unwrap_err(),
        UsageError::DuplicateResource
    );
    let many: Vec<String> = (0..=MAX_RESOURCES).map(|i| format!("r{i}")).collect();
    assert_eq!(
        client.acquire(&many, at(0)).unwrap_err(),
        UsageError::TooManyResources
    );
    assert!(client.acquire(&many[..MAX_RESOURCES], at(0)).is_ok());
    // With a prefix, an empty resource name is a valid key.
    let prefixed = Config::builder(3, ms(1000))
        .key_prefix("locks:")
        .build()
        .unwrap();
    let mut client = Redlock::with_seed(prefixed, [0; 32]);
    let mut op = client.acquire(&[""], at(0)).unwrap();
    let (sends, _, _) = drain(&mut op);
    assert_eq!(sends[0].arg(1), Some(&b"locks:"[..]));
    // Binary resource names travel unchanged.
    let mut op = client.acquire(&[&[0u8, 255, 10][..]], at(0)).unwrap();
    let (sends, _, _) = drain(&mut op);
    assert_eq!(sends[0].arg(1), Some(&b"locks:\x00\xff\n"[..]));
}

#[test]
fn commands_encode_as_resp() {
    let mut client = Redlock::with_seed(config(1), [0; 32]);
    let mut op = client.acquire(&["k"], at(0)).unwrap();
    let (sends, _, _) = drain(&mut op);
    let mut bytes = Vec::new();
    sends[0].encode_resp(&mut bytes);
    let token = op.token().as_str().to_string();
    let expected = format!(
        "*6\r\n$3\r\nSET\r\n$1\r\nk\r\n$40\r\n{token}\r\n$2\r\nNX\r\n$2\r\nPX\r\n$5\r\n10000\r\n"
    );
    assert_eq!(String::from_utf8(bytes).unwrap(), expected);
    assert!(format!("{:?}", sends[0]).contains("SET"));
    assert!(format!("{op:?}").contains("Acquire"));
}

#[test]
fn largest_configuration_runs() {
    let config = Config::builder(redlock_core::MAX_NODES, ms(redlock_core::MAX_TTL_MS))
        .build()
        .unwrap();
    let mut client = Redlock::with_seed(config, [0; 32]);
    let mut op = client.acquire(&["r"], at(u64::MAX - 10)).unwrap();
    let (sends, wait, _) = drain(&mut op);
    assert_eq!(sends.len(), 255);
    assert_eq!(wait, Some(at(u64::MAX)), "deadlines saturate");
    // valid_until saturates at the end of time, and a quorum at that instant leaves no
    // validity: saturation only ever shortens a lock. The attempt fails and is released.
    let (releases, outcome) = answer(&mut op, &sends, u64::MAX, |_| Reply::Ok);
    assert_eq!(outcome, None);
    assert_eq!(releases.len(), 255);
    assert!(
        op.node_results().iter().all(|n| *n == NodeResult::Pending),
        "release round under way"
    );
}

/// An acquisition on 3 nodes whose first attempt every node refused (a waiting one at
/// queue place `place`): returns it delaying after its cleanup (which ended at 200 us),
/// a time 1 ms after its attempt started (from which notices may start the next one:
/// `MIN_RETRY_DELAY`) and the retry's due time.
fn refused_at_place(wait: Option<Duration>, place: i64) -> (Operation, u64, Time) {
    let config = Config::builder(3, ms(10_000)).attempts(3).build().unwrap();
    let mut client = Redlock::with_seed(config, [4; 32]);
    let mut op = match wait {
        Some(limit) => client
            .acquire_with(
                &["r"],
                &redlock_core::AcquireOptions::new().wait(limit),
                at(0),
            )
            .unwrap(),
        None => client.acquire(&["r"], at(0)).unwrap(),
    };
    let (sends, _, _) = drain(&mut op);
    assert_eq!(sends.len(), 3);
    let refused = |_| match wait {
        Some(_) => Reply::Integer(-place),
        None => Reply::Nil,
    };
    let (cleanup, _) = answer(&mut op, &sends, 100, refused);
    assert_eq!(cleanup.len(), 3, "the failed attempt is cleaned up");
    let (retry_at, outcome) = answer_all_wait(&mut op, &cleanup, 200, |_| Reply::Integer(0));
    assert!(outcome.is_none());
    let retry_at = retry_at.expect("a retry is scheduled");
    assert!(
        retry_at >= at(100_000),
        "the retry delay is 200 ms +- 100 ms"
    );
    (op, 1_000, retry_at)
}

/// Asserts that `op`'s retry stays at `retry_at` after the confirmations from `nodes`.
fn keeps_its_retry(op: &mut Operation, nodes: &[usize], now: u64, retry_at: Time) {
    let attempt = op.attempt();
    for &node in nodes {
        op.handle_subscribed(node, at(now)).unwrap();
        let (sends, wait, _) = drain(op);
        assert!(sends.is_empty(), "no early attempt");
        assert!(
            wait.is_none_or(|w| w == retry_at),
            "the retry keeps its time"
        );
    }
    assert_eq!(op.attempt(), attempt);
}

#[test]
fn a_subscription_confirmed_after_refusals_as_first_waiter_tries_at_once() {
    // Rule 13 of docs/bindings.md: a release published before the subscription took
    // effect reached nobody, and it named this waiter, first in the queue there. One
    // node's confirmation does not start it at once (each node confirms, one by one:
    // counted alone, each could start an attempt), but brings the retry to the spread
    // window (twice the 100 us cleanup round) plus its share of it; a quorum's starts it.
    let (mut op, now, retry_at) = refused_at_place(Some(ms(5_000)), 0);
    op.handle_subscribed(0, at(now + 10)).unwrap();
    let (sends, wait, _) = drain(&mut op);
    assert!(sends.is_empty(), "not at once");
    let wait = wait.expect("a retry is due");
    assert!(
        wait >= at(now + 10 + 200) && wait <= at(now + 10 + 400),
        "{wait:?}"
    );
    assert!(wait < retry_at, "earlier than the retry delay");
    op.handle_subscribed(1, at(now + 20)).unwrap();
    let (sends, _, _) = drain(&mut op);
    assert_eq!(sends.len(), 3, "attempt 2 starts at once");
    assert_eq!(op.attempt(), 2);
    // Refused again, as first waiter: node 2's late confirmation changes nothing (its
    // answer came after the decision and counts for nothing).
    let (cleanup, _) = answer(&mut op, &sends, now + 100, |_| Reply::Integer(0));
    let (retry_at, _) = answer_all_wait(&mut op, &cleanup, now + 200, |_| Reply::Integer(0));
    let retry_at = retry_at.unwrap();
    keeps_its_retry(&mut op, &[2], now + 300, retry_at);
    // Node 0's subscriber connection opened again (more than MIN_RETRY_DELAY after
    // attempt 2 started): its confirmation brings the retry forward, and a second one
    // keeps that time.
    op.handle_subscribed(0, at(now + 1_400)).unwrap();
    let (sends, wait, _) = drain(&mut op);
    assert!(sends.is_empty());
    let early = wait.expect("a retry is due");
    assert!(
        early >= at(now + 1_400 + 200) && early <= at(now + 1_400 + 400),
        "{early:?}"
    );
    op.handle_subscribed(0, at(now + 1_500)).unwrap();
    let (sends, wait, _) = drain(&mut op);
    assert!(
        sends.is_empty() && wait.is_none_or(|w| w == early),
        "it stays"
    );
    assert_eq!(op.attempt(), 2);
}

#[test]
fn a_subscription_confirmed_behind_another_waiter_keeps_the_retry_schedule() {
    // A release named the waiter before this one, which has the turn: trying early
    // would only race it.
    let (mut op, now, retry_at) = refused_at_place(Some(ms(5_000)), 1);
    keeps_its_retry(&mut op, &[0, 1, 2], now + 10, retry_at);
}

#[test]
fn a_subscription_confirmed_without_a_wait_limit_keeps_the_retry_schedule() {
    // Not queued, and counting its attempts: an early one would spend one of them on a
    // release that most often did not happen.
    let (mut op, now, retry_at) = refused_at_place(None, 0);
    keeps_its_retry(&mut op, &[0, 1, 2], now + 10, retry_at);
    // A release's notice still brings it forward.
    op.handle_notice(0, at(now + 30)).unwrap();
    op.handle_notice(1, at(now + 30)).unwrap();
    let (sends, wait, _) = drain(&mut op);
    assert!(!sends.is_empty() || wait.is_some_and(|w| w < retry_at));
}

#[test]
fn a_subscription_confirmed_before_the_node_answered_is_not_a_notice() {
    let config = Config::builder(3, ms(10_000)).build().unwrap();
    let mut client = Redlock::with_seed(config, [5; 32]);
    let options = redlock_core::AcquireOptions::new().wait(ms(5_000));
    let mut op = client.acquire_with(&["r"], &options, at(0)).unwrap();
    let (sends, _, _) = drain(&mut op);
    // Every node confirms the subscription before answering: it most likely took
    // effect before they refused, and any later release is heard.
    for node in 0..3 {
        op.handle_subscribed(node, at(10)).unwrap();
    }
    let (cleanup, _) = answer(&mut op, &sends, 100, |_| Reply::Integer(0));
    let (retry_at, _) = answer_all_wait(&mut op, &cleanup, 200, |_| Reply::Integer(0));
    let retry_at = retry_at.unwrap();
    assert!(retry_at >= at(100_000), "the normal retry: {retry_at:?}");
    // Node 2's answer came after the attempt was decided and counts for nothing, so its
    // confirmation now is no notice either.
    keeps_its_retry(&mut op, &[2], 300, retry_at);
}

#[test]
fn a_subscription_confirmation_names_its_node() {
    let (mut op, now, _) = refused_at_place(Some(ms(5_000)), 0);
    assert_eq!(
        op.handle_subscribed(3, at(now)),
        Err(UsageError::UnknownNode)
    );
    assert!(drain(&mut op).0.is_empty());
    assert_eq!(op.attempt(), 1);
}

/// Answers a failed attempt's `cleanup` at `now`, asserts the acquisition still listens
/// while it delays, and returns the next attempt's commands at its retry time.
fn retries_while_listening(op: &mut Operation, cleanup: &[Command], now: u64) -> Vec<Command> {
    let (retry_at, outcome) = answer_all_wait(op, cleanup, now, |_| Reply::Integer(0));
    assert!(outcome.is_none());
    assert!(op.listens(), "delaying");
    op.handle_timeout(retry_at.expect("a retry is due"));
    drain(op).0
}

#[test]
fn a_waiting_acquisition_listens_from_its_first_conflict_and_until_it_ends() {
    let config = Config::builder(3, ms(10_000)).build().unwrap();
    let mut client = Redlock::with_seed(config, [6; 32]);
    let options = redlock_core::AcquireOptions::new().wait(ms(2_000));

    // Nobody holds it: it is taken without subscribing to anything.
    let mut op = client.acquire_with(&["free"], &options, at(0)).unwrap();
    assert!(!op.listens(), "before its first attempt is out");
    let (sends, _, _) = drain(&mut op);
    assert!(!op.listens(), "its first attempt is out");
    let outcome = answer_all(&mut op, &sends, 100, |_| Reply::Integer(1));
    assert!(matches!(outcome, Some(Outcome::Acquired(_))), "{outcome:?}");
    assert!(!op.listens(), "finished");

    // Held: the first refusal because of the key makes it listen, before the attempt
    // is decided, and it listens until it ends. Five nodes: three refusals decide.
    let config = Config::builder(5, ms(10_000)).build().unwrap();
    let mut client = Redlock::with_seed(config, [6; 32]);
    let mut op = client
        .acquire_with(&["held"], &options, at(1_000_000))
        .unwrap();
    let (sends, _, _) = drain(&mut op);
    assert!(!op.listens());
    // A node that fails is no sign of a holder.
    op.handle_reply(
        sends[0].request_id(),
        Reply::Error("ERR busy".into()),
        at(1_000_050),
    )
    .unwrap();
    assert!(drain(&mut op).0.is_empty());
    assert!(!op.listens(), "a failed node is not a conflict");
    op.handle_reply(sends[1].request_id(), Reply::Integer(0), at(1_000_100))
        .unwrap();
    assert!(drain(&mut op).0.is_empty(), "undecided");
    assert!(op.listens(), "refused where the key is held");
    op.handle_reply(sends[2].request_id(), Reply::Integer(1), at(1_000_150))
        .unwrap();
    op.handle_reply(sends[3].request_id(), Reply::Integer(0), at(1_000_200))
        .unwrap();
    let (cleanup, _, _) = drain(&mut op);
    assert!(!cleanup.is_empty(), "the failed attempt is released");
    assert!(op.listens(), "cleaning up");
    let sends = retries_while_listening(&mut op, &cleanup, 1_000_300);
    let outcome = answer_all(&mut op, &sends, 1_400_000, |_| Reply::Integer(1));
    assert!(matches!(outcome, Some(Outcome::Acquired(_))), "{outcome:?}");
    assert!(!op.listens(), "finished");
}

#[test]
fn a_waiting_acquisition_listens_from_its_start_after_a_recent_wait_for_its_resource() {
    let config = Config::builder(3, ms(10_000)).build().unwrap();
    let mut client = Redlock::with_seed(config, [9; 32]);
    let options = redlock_core::AcquireOptions::new().wait(ms(2_000));
    let linger = redlock_core::NOTICE_CHANNEL_LINGER_MS * 1000;
    let first = client.acquire_with(&["r"], &options, at(0)).unwrap();
    assert!(!first.listens(), "nothing waited for r before");
    // A wait for r started less than the linger before: its channels most likely still
    // linger, so listening costs nothing. One of several resources is enough.
    let again = client
        .acquire_with(&["other", "r"], &options, at(linger - 1))
        .unwrap();
    assert!(again.listens(), "from its start");
    // Each wait renews the resource's time: `other` and `r` were waited for at
    // linger - 1.
    let renewed = client
        .acquire_with(&["other"], &options, at(2 * linger - 2))
        .unwrap();
    assert!(renewed.listens());
    // The linger past the last wait: listening would subscribe again, so it waits for
    // a conflict.
    let later = client
        .acquire_with(&["r"], &options, at(2 * linger))
        .unwrap();
    assert!(!later.listens(), "the linger passed");
    // Without a wait limit nothing listens from its start, nor is remembered.
    let plain = client.acquire(&["plain"], at(2 * linger)).unwrap();
    assert!(!plain.listens());
    let waiting = client
        .acquire_with(&["plain"], &options, at(2 * linger + 1))
        .unwrap();
    assert!(!waiting.listens(), "a plain acquisition is no wait");
    // A clock that went back counts as a moment ago.
    let back = client
        .acquire_with(&["plain"], &options, at(2 * linger))
        .unwrap();
    assert!(back.listens());
}

#[test]
fn a_client_remembers_a_bounded_number_of_waits() {
    let config = Config::builder(3, ms(10_000)).build().unwrap();
    let mut client = Redlock::with_seed(config, [10; 32]);
    let options = redlock_core::AcquireOptions::new().wait(ms(2_000));
    for i in 0..1_000u64 {
        let name = format!("r{i}");
        let op = client.acquire_with(&[&name], &options, at(i)).unwrap();
        assert!(!op.listens());
    }
    // The oldest are forgotten (they only listen later); the newest are remembered.
    let old = client.acquire_with(&["r0"], &options, at(1_000)).unwrap();
    assert!(!old.listens(), "forgotten");
    let new = client.acquire_with(&["r999"], &options, at(1_001)).unwrap();
    assert!(new.listens(), "remembered");
}

#[test]
fn an_acquisition_without_a_wait_limit_listens_once_an_attempt_failed_and_another_may_follow() {
    // Two attempts: the first fails on a conflict. From its cleanup on it listens, through
    // the delay and the second attempt, until the outcome.
    let config = Config::builder(3, ms(10_000)).attempts(2).build().unwrap();
    let mut client = Redlock::with_seed(config, [7; 32]);
    let mut op = client.acquire(&["r"], at(0)).unwrap();
    assert!(
        !op.listens(),
        "a first attempt may win: it subscribes to nothing"
    );
    let (sends, _, _) = drain(&mut op);
    assert!(!op.listens());
    let (cleanup, _) = answer(&mut op, &sends, 100, |_| Reply::Nil);
    assert_eq!(cleanup.len(), 3);
    assert!(op.listens(), "the failed attempt's cleanup is out");
    let sends = retries_while_listening(&mut op, &cleanup, 200);
    assert_eq!(op.attempt(), 2);
    assert!(op.listens(), "the second attempt");
    let (cleanup, _) = answer(&mut op, &sends, 400_000, |_| Reply::Nil);
    assert!(
        op.listens(),
        "the last attempt's cleanup: still until the outcome"
    );
    let (_, outcome) = answer_all_wait(&mut op, &cleanup, 400_100, |_| Reply::Integer(0));
    assert!(
        matches!(outcome, Some(Outcome::NotAcquired(_))),
        "{outcome:?}"
    );
    assert!(!op.listens());

    // One attempt only: nothing may follow its failure, so it never listens.
    let config = Config::builder(3, ms(10_000)).attempts(1).build().unwrap();
    let mut client = Redlock::with_seed(config, [8; 32]);
    let mut op = client.acquire(&["r"], at(0)).unwrap();
    let (sends, _, _) = drain(&mut op);
    let (cleanup, _) = answer(&mut op, &sends, 100, |_| Reply::Nil);
    assert!(!op.listens());
    let _ = answer_all_wait(&mut op, &cleanup, 200, |_| Reply::Integer(0));
    assert!(!op.listens());
}

#[test]
fn extensions_releases_and_inspections_never_listen() {
    let config = Config::builder(3, ms(10_000)).build().unwrap();
    let mut client = Redlock::with_seed(config, [5; 32]);
    let mut op = client.acquire(&["r"], at(0)).unwrap();
    let (sends, _, _) = drain(&mut op);
    let Some(Outcome::Acquired(acquired)) = answer_all(&mut op, &sends, 100, |_| Reply::Ok) else {
        panic!("acquired")
    };
    let lease = acquired.lease;
    assert!(!client.extend(&lease, at(200)).unwrap().listens());
    assert!(!client.release(&lease, at(200)).listens());
    assert!(!client.inspect(&["r"], at(200)).unwrap().listens());
}

#[test]
fn a_clients_waiting_acquisitions_carry_its_listener_id_and_listen_on_its_waiter_channels() {
    let config = Config::builder(3, ms(10_000)).build().unwrap();
    let mut client = Redlock::with_seed(config.clone(), [8; 32]);
    let waiting = redlock_core::AcquireOptions::new().wait(ms(2_000));
    let one = client.acquire_with(&["a", "b"], &waiting, at(0)).unwrap();
    let two = client.acquire_with(&["a", "b"], &waiting, at(0)).unwrap();
    // The waiter id (the first token) begins with the client's listener id, the same for
    // each of its waiting acquisitions; the rest is the acquisition's own.
    let listener = &one.token().as_str()[..redlock_core::LISTENER_ID_CHARS];
    assert!(listener.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(&two.token().as_str()[..16], listener);
    assert_ne!(one.token(), two.token());
    // Per key its notice channel, then the waiter channel of the listener id: what the
    // client names for drivers that subscribe before the acquisition starts.
    let expected: Vec<Vec<u8>> = vec![
        b"redlock:released:a".to_vec(),
        b"redlock:released:b".to_vec(),
        format!("redlock:waiter:{listener}:a").into_bytes(),
        format!("redlock:waiter:{listener}:b").into_bytes(),
    ];
    assert_eq!(one.notice_channels(), expected);
    assert_eq!(client.notice_channels(&["a", "b"]).unwrap(), expected);
    assert_eq!(
        client.notice_channels::<&str>(&[]),
        Err(UsageError::NoResources)
    );
    // An acquisition without a wait limit is no waiter: its token is all its own, and
    // it listens on the notice channels only.
    let mut plain = client.acquire(&["a"], at(0)).unwrap();
    assert_ne!(&plain.token().as_str()[..16], listener);
    let (sends, _, _) = drain(&mut plain);
    let _ = answer(&mut plain, &sends, 100, |_| Reply::Nil);
    assert_eq!(
        plain.notice_channels(),
        vec![b"redlock:released:a".to_vec()]
    );
    // The same seed, the same listener id (simulations replay); another seed, another.
    let mut again = Redlock::with_seed(config.clone(), [8; 32]);
    let replayed = again.acquire_with(&["a"], &waiting, at(0)).unwrap();
    assert_eq!(replayed.token(), one.token());
    let mut other = Redlock::with_seed(config, [9; 32]);
    let theirs = other.acquire_with(&["a"], &waiting, at(0)).unwrap();
    assert_ne!(&theirs.token().as_str()[..16], listener);
}

#[test]
fn the_listener_id_leaves_a_seeded_clients_other_tokens_as_they_were() {
    // The listener id comes from a stream of its own: the tokens of acquisitions without
    // a wait limit are the seed's stream 0, as before listener ids existed.
    let config = Config::builder(3, ms(10_000)).build().unwrap();
    let mut client = Redlock::with_seed(config, [8; 32]);
    let first = client.acquire(&["a"], at(0)).unwrap();
    let mut stream = [0u8; 52];
    use rand_chacha::rand_core::{RngCore, SeedableRng};
    rand_chacha::ChaCha20Rng::from_seed([8; 32]).fill_bytes(&mut stream);
    let hex: String = stream[..20].iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(first.token().as_str(), hex);
}

/// A client of `nodes` nodes (TTL 10 s, its randomness seeded with `seed`), and the
/// options of an acquisition that waits up to 5 s.
fn waiting_client(nodes: usize, seed: u8) -> (Redlock, redlock_core::AcquireOptions) {
    let config = Config::builder(nodes, ms(10_000)).build().unwrap();
    let options = redlock_core::AcquireOptions::new().wait(ms(5_000));
    (Redlock::with_seed(config, [seed; 32]), options)
}

/// A waiting acquisition of "r" ([`waiting_client`]) at 0, and its first attempt's
/// commands.
fn first_attempt(nodes: usize, seed: u8) -> (Operation, Vec<Command>) {
    let (mut client, options) = waiting_client(nodes, seed);
    let mut op = client.acquire_with(&["r"], &options, at(0)).unwrap();
    let (sends, _, _) = drain(&mut op);
    (op, sends)
}

/// A waiter refused by five nodes: second in the queue on nodes 0-2 (the refusals that
/// decide), first on nodes 3 and 4 (whose refusals come after the decision). Returns
/// it delaying its retry, with the time and the retry's instant.
fn refused_behind_on_three_first_on_two() -> (Operation, Vec<u8>, u64, Time) {
    let (mut client, options) = waiting_client(5, 12);
    let mut op = client.acquire_with(&["r"], &options, at(0)).unwrap();
    let waiter = op.token().as_bytes().to_vec();
    let (sends, _, _) = drain(&mut op);
    let (cleanup, _) = answer(&mut op, &sends, 100, |node| {
        Reply::Integer(if node < 3 { -1 } else { 0 })
    });
    assert_eq!(cleanup.len(), 5, "the failed attempt is cleaned up");
    let (retry_at, _) = answer_all_wait(&mut op, &cleanup, 200, |_| Reply::Integer(0));
    let retry_at = retry_at.unwrap();
    assert!(retry_at >= at(100_000), "the retry delay: {retry_at:?}");
    (op, waiter, 200, retry_at)
}

/// Asserts that the last input started nothing and left the retry at `early` (no
/// quorum yet), and that attempt 2 goes to all five nodes at `early`.
fn retries_at(op: &mut Operation, early: Time) {
    let (sends, wait, _) = drain(op);
    assert!(sends.is_empty(), "no quorum: nothing at once");
    assert!(wait.is_none_or(|w| w == early), "{wait:?}");
    op.handle_timeout(early);
    let (sends, _, _) = drain(op);
    assert_eq!(sends.len(), 5, "attempt 2");
    assert_eq!(op.attempt(), 2);
}

#[test]
fn notices_naming_this_waiter_from_too_few_nodes_try_after_the_spread_window() {
    // The nodes' queues disagree: the releases on nodes 3 and 4 name this waiter, those
    // on 0-2 another. Nodes 0-2 are still counted as held, so no quorum is possible,
    // but the lock may well be free: it tries after the whole spread window plus its
    // share of it, not at its retry 100 ms or more later.
    let (mut op, waiter, now, retry_at) = refused_behind_on_three_first_on_two();
    op.handle_notice_message(3, &waiter, at(now + 1_000))
        .unwrap();
    let (sends, wait, _) = drain(&mut op);
    assert!(sends.is_empty(), "not at once: no quorum is possible");
    let early = wait.expect("the retry moves");
    // The window: twice the cleanup round (100 us here), at most a node timeout.
    assert!(early >= at(now + 1_000 + 200), "{early:?}");
    assert!(early <= at(now + 1_000 + 400), "{early:?}");
    assert!(early < retry_at);
    // A second one from node 4 keeps that time.
    op.handle_notice_message(4, &waiter, at(now + 1_100))
        .unwrap();
    retries_at(&mut op, early);
}

#[test]
fn confirmations_as_first_waiter_from_too_few_nodes_try_after_the_spread_window() {
    // Waiters refused at the same moment, in different orders on different nodes: this
    // one is first on nodes 3 and 4 and second on node 2 (nodes 0 and 1 answer after
    // the decision). A fast holder released before the subscriptions took effect, so
    // no notice comes: only the confirmations. Two of them count, too few for a
    // quorum, yet the releases they stand for named this waiter and the lock may be
    // free: it tries after the spread window plus its share of it, not at its retry
    // delay.
    let (mut client, options) = waiting_client(5, 13);
    let mut op = client.acquire_with(&["r"], &options, at(0)).unwrap();
    let (mut sends, _, _) = drain(&mut op);
    sends.reverse();
    let (cleanup, _) = answer(&mut op, &sends, 100, |node| {
        Reply::Integer(if node >= 3 { 0 } else { -1 })
    });
    assert_eq!(cleanup.len(), 5, "the failed attempt is cleaned up");
    let (retry_at, _) = answer_all_wait(&mut op, &cleanup, 200, |_| Reply::Integer(0));
    let retry_at = retry_at.unwrap();
    assert!(retry_at >= at(100_000), "the retry delay: {retry_at:?}");
    // Nodes 0-2 confirm: none of them counts.
    // (From 1 ms after attempt 1 started: never closer than MIN_RETRY_DELAY.)
    keeps_its_retry(&mut op, &[0, 1, 2], 1_300, retry_at);
    op.handle_subscribed(3, at(1_400)).unwrap();
    let (sends, wait, _) = drain(&mut op);
    assert!(sends.is_empty(), "not at once: one confirmation");
    let early = wait.expect("the retry moves");
    assert!(
        early >= at(1_400 + 200) && early <= at(1_400 + 400),
        "{early:?}"
    );
    op.handle_subscribed(4, at(1_500)).unwrap();
    retries_at(&mut op, early);
}

#[test]
fn a_notice_from_a_node_counted_as_held_still_makes_a_quorum_possible_at_once() {
    let (mut op, waiter, now, _) = refused_behind_on_three_first_on_two();
    op.handle_notice_message(3, &waiter, at(now + 1_000))
        .unwrap();
    let _ = drain(&mut op);
    // Node 0 refused the attempt and now announces a release naming this waiter: held
    // are nodes 1 and 2 only, 5 - 2 >= 3.
    op.handle_notice_message(0, &waiter, at(now + 2_000))
        .unwrap();
    let (sends, _, _) = drain(&mut op);
    assert_eq!(sends.len(), 5, "attempt 2 at once");
}

#[test]
fn notices_naming_another_waiter_from_too_few_nodes_keep_the_retry() {
    let (mut op, _, now, retry_at) = refused_behind_on_three_first_on_two();
    op.handle_notice_message(3, b"someone else", at(now + 1_000))
        .unwrap();
    let (sends, wait, _) = drain(&mut op);
    assert!(sends.is_empty());
    assert!(wait.is_none_or(|w| w == retry_at), "{wait:?}");
    assert_eq!(op.attempt(), 1);
}

#[test]
fn a_waiter_that_began_listening_at_a_refusal_counts_confirmations_read_before_refusals() {
    // Its subscription was asked after its attempt went out (at the first refusal), so
    // each node confirmed it after refusing: the driver may read a node's confirmation
    // before that node's refusal, and it still stands for a release unheard there.
    let (mut op, sends) = first_attempt(3, 13);
    op.handle_reply(sends[0].request_id(), Reply::Integer(0), at(100))
        .unwrap();
    assert!(op.listens(), "it listens from this refusal");
    assert!(drain(&mut op).0.is_empty());
    // Node 1 confirms before its refusal is read.
    op.handle_subscribed(1, at(150)).unwrap();
    assert!(drain(&mut op).0.is_empty());
    // Node 1's refusal (first in its queue) fails the attempt and makes its
    // confirmation count; node 0 confirms after its refusal: two of three, a quorum.
    let (cleanup, _) = answer(&mut op, &sends[1..2], 200, |_| Reply::Integer(0));
    assert_eq!(cleanup.len(), 3, "the failed attempt is cleaned up");
    op.handle_subscribed(0, at(250)).unwrap();
    assert!(drain(&mut op).0.is_empty(), "not while cleaning up");
    // The cleanup ends (more than MIN_RETRY_DELAY after attempt 1 started): the
    // confirmations stood for releases naming it, attempt 2 at once.
    let (next, _) = answer(&mut op, &cleanup, 1_300, |_| Reply::Integer(0));
    assert_eq!(next.len(), 3, "attempt 2 at once: {next:?}");
    assert_eq!(op.attempt(), 2);
}

#[test]
fn a_waiter_listening_from_its_start_does_not_count_confirmations_read_before_refusals() {
    // A recent wait for the resource: it listens from its start, its subscription may
    // have taken effect before the nodes refused, and later releases are heard.
    let (mut client, options) = waiting_client(3, 14);
    drop(client.acquire_with(&["r"], &options, at(0)).unwrap());
    let mut op = client.acquire_with(&["r"], &options, at(10)).unwrap();
    assert!(op.listens());
    let (sends, _, _) = drain(&mut op);
    for node in 0..3 {
        op.handle_subscribed(node, at(50)).unwrap();
    }
    let (cleanup, _) = answer(&mut op, &sends, 100, |_| Reply::Integer(0));
    assert_eq!(cleanup.len(), 3);
    let (retry_at, _) = answer_all_wait(&mut op, &cleanup, 200, |_| Reply::Integer(0));
    assert!(retry_at.unwrap() >= at(100_000), "its retry schedule");
    assert_eq!(op.attempt(), 1);
}

#[test]
fn a_waiter_listening_since_an_earlier_attempt_does_not_count_confirmations_read_before_refusals() {
    // Attempt 1 fails on errors: it listens from that failure, before attempt 2 goes
    // out, so a confirmation during attempt 2 may predate the node's refusal.
    let (mut op, sends) = first_attempt(3, 15);
    let (cleanup, _) = answer(&mut op, &sends, 100, |_| Reply::Error("ERR busy".into()));
    assert!(op.listens(), "listens from the failure");
    let (retry_at, _) = answer_all_wait(&mut op, &cleanup, 200, |_| Reply::Integer(0));
    op.handle_timeout(retry_at.unwrap());
    let (sends, _, _) = drain(&mut op);
    assert_eq!(op.attempt(), 2);
    let now = retry_at.unwrap().as_micros();
    for node in 0..3 {
        op.handle_subscribed(node, at(now + 10)).unwrap();
    }
    let (cleanup, _) = answer(&mut op, &sends, now + 100, |_| Reply::Integer(0));
    assert_eq!(cleanup.len(), 3);
    let (next, _) = answer_all_wait(&mut op, &cleanup, now + 200, |_| Reply::Integer(0));
    assert!(next.unwrap() >= at(now + 100_000), "its retry schedule");
    assert_eq!(op.attempt(), 2);
}
