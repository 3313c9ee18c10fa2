//! Events for observability hooks: what an operation reports, in order, with timings.

use std::time::Duration;

use redlock_core::{
    Config, Event, EventKind, FailureReason, LostReason, NodeCause, NodeResult, Operation,
    OperationKind, Output, Redlock, Reply, Time, MAX_EVENTS,
};

fn at(us: u64) -> Time {
    Time::from_micros(us)
}

fn drain(op: &mut Operation) -> (Vec<redlock_core::Command>, Vec<Event>) {
    let mut sends = Vec::new();
    while let Some(output) = op.poll_output() {
        if let Output::Send(command) = output {
            sends.push(command);
        }
    }
    let mut events = Vec::new();
    while let Some(event) = op.poll_event() {
        events.push(event);
    }
    (sends, events)
}

/// Three nodes, two attempts 100 ms apart (no jitter).
fn two_attempts_100ms_apart() -> Config {
    Config::builder(3, Duration::from_secs(10))
        .attempts(2)
        .retry_delay(Duration::from_millis(100))
        .retry_jitter(Duration::ZERO)
        .build()
        .unwrap()
}

#[test]
fn kinds_have_stable_distinct_codes_and_numbers() {
    let codes: Vec<&str> = EventKind::ALL.iter().map(|k| k.code()).collect();
    let numbers: Vec<u32> = EventKind::ALL.iter().map(|k| k.number()).collect();
    assert_eq!(numbers, (1..=11).collect::<Vec<u32>>());
    let mut unique = codes.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), codes.len());
    assert_eq!(EventKind::Retry.code(), "retry");
    assert_eq!(EventKind::NodeFailed.code(), "node_failed");
}

#[test]
fn an_acquisition_reports_node_failures_its_retry_and_its_outcome() {
    let config = two_attempts_100ms_apart();
    let mut redlock = Redlock::with_seed(config, [1; 32]);
    let mut op = redlock.acquire(&["r"], at(1_000)).unwrap();
    let (sends, events) = drain(&mut op);
    assert!(events.is_empty(), "nothing has happened yet");
    // Attempt 1: one conflict, one refused connection, one timeout.
    op.handle_reply(sends[0].request_id(), Reply::Nil, at(1_100))
        .unwrap();
    op.handle_reply(
        sends[1].request_id(),
        Reply::ConnectionFailed("refused: 127.0.0.1:1".into()),
        at(1_200),
    )
    .unwrap();
    let (cleanup, events) = drain(&mut op);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].kind, EventKind::NodeFailed);
    assert_eq!(events[0].node, Some(1));
    assert_eq!(events[0].cause, Some(NodeCause::Refused));
    assert_eq!(events[0].elapsed, Duration::from_micros(200));
    assert_eq!(events[0].operation, Some(OperationKind::Acquire));
    // The attempt failed: the cleanup release goes to every node; node 2 still pending.
    assert_eq!(cleanup.len(), 3);
    for c in &cleanup {
        op.handle_reply(c.request_id(), Reply::Integer(0), at(1_300))
            .unwrap();
    }
    // Two of three refusing make the quorum impossible: the cleanup answered, the retry
    // is scheduled; node 2's SET is still out.
    let (next, events) = drain(&mut op);
    let kinds: Vec<EventKind> = events.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, vec![EventKind::Retry], "{events:?}");
    let retry = &events[0];
    assert_eq!(retry.attempt, 1);
    assert_eq!(retry.reason, Some(FailureReason::Mixed));
    assert_eq!(retry.retry_at, Some(at(1_300 + 100_000)));
    assert_eq!(retry.nodes[2], NodeResult::Pending);
    assert!(next.is_empty());
    // A late answer of the old round reports nothing.
    let _ = op.handle_reply(sends[2].request_id(), Reply::Timeout, at(1_400));
    assert!(drain(&mut op).1.is_empty());
    // Attempt 2 succeeds on all three.
    op.handle_timeout(at(101_300));
    let (sends, _) = drain(&mut op);
    for c in &sends {
        op.handle_reply(c.request_id(), Reply::Ok, at(101_500))
            .unwrap();
    }
    let (_, events) = drain(&mut op);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].kind, EventKind::Acquired);
    assert_eq!(events[0].attempt, 2);
    assert_eq!(events[0].elapsed, Duration::from_micros(100_500));
    assert!(events[0].nodes.contains(&NodeResult::Success));
}

/// Runs the acquisition of the test above (a failed attempt, a retry, a success), with
/// events recorded or not; returns its events and what it sent and decided.
fn failing_then_succeeding(record: bool) -> (Vec<Event>, Vec<String>) {
    let config = two_attempts_100ms_apart();
    let mut redlock = Redlock::with_seed(config, [1; 32]);
    let mut op = redlock.acquire(&["r"], at(1_000)).unwrap();
    op.record_events(record);
    let mut events = Vec::new();
    let mut seen = Vec::new();
    let mut pending: Vec<redlock_core::Command> = Vec::new();
    let mut now = 1_000;
    for step in 0..8 {
        while let Some(output) = op.poll_output() {
            seen.push(format!("{output:?}"));
            if let Output::Send(command) = output {
                pending.push(command);
            }
        }
        while let Some(event) = op.poll_event() {
            events.push(event);
        }
        now += 100;
        match pending.pop() {
            // The first attempt's SETs are refused, every later command succeeds.
            Some(command) => {
                let reply = if step < 3 && command.kind() == redlock_core::CommandKind::Set {
                    Reply::ConnectionFailed("refused: 127.0.0.1:1".into())
                } else if command.kind() == redlock_core::CommandKind::Set {
                    Reply::Ok
                } else {
                    Reply::Integer(0)
                };
                let _ = op.handle_reply(command.request_id(), reply, at(now));
            }
            None => {
                now += 100_000;
                op.handle_timeout(at(now));
            }
        }
    }
    (events, seen)
}

#[test]
fn an_operation_told_not_to_record_events_makes_none_and_decides_the_same() {
    let (recorded, decided) = failing_then_succeeding(true);
    assert!(
        recorded.iter().any(|e| e.kind == EventKind::NodeFailed),
        "{recorded:?}"
    );
    let (none, same) = failing_then_succeeding(false);
    assert!(none.is_empty(), "{none:?}");
    assert_eq!(same, decided, "events never change what the operation does");
}

#[test]
fn unread_events_stay_bounded() {
    // A release on many nodes, every one failing, nobody reading events.
    let config = Config::builder(255, Duration::from_secs(10))
        .build()
        .unwrap();
    let client = Redlock::with_seed(config, [2; 32]);
    let lease = client.lease(&["r"], "tok", at(0)).unwrap();
    let mut op = client.release(&lease, at(0));
    let mut sends = Vec::new();
    while let Some(output) = op.poll_output() {
        if let Output::Send(c) = output {
            sends.push(c);
        }
    }
    for c in &sends {
        let _ = op.handle_reply(c.request_id(), Reply::Error("ERR x".into()), at(10));
    }
    let mut count = 0;
    let mut last = None;
    while let Some(event) = op.poll_event() {
        count += 1;
        last = Some(event.kind);
    }
    assert_eq!(count, MAX_EVENTS);
    assert_eq!(
        last,
        Some(EventKind::NotReleased),
        "the newest events are kept"
    );
}

#[test]
fn a_lost_lock_is_an_event_too() {
    let event = Event::lost(LostReason::Expired, at(1_000), at(5_000));
    assert_eq!(event.kind, EventKind::Lost);
    assert_eq!(event.lost_reason, Some(LostReason::Expired));
    assert_eq!(event.elapsed, Duration::from_micros(4_000));
    assert_eq!(event.operation, None);
}
