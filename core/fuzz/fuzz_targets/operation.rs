//! Arbitrary sequences of operations and inputs, in any order, with any replies and
//! times: the core must never panic, an acquired lock must never claim more validity
//! than `ttl - drift`, an acquired outcome given back (`decline`) to the operation
//! that handed it out releases its token on every node, and an operation that listens
//! for release notices keeps listening until it finishes.
#![no_main]

use std::time::Duration;

use arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use redlock_core::{
    AcquireOptions, CommandKind, Config, FencedSet, FencedWrite, Lease, Operation, Outcome, Output, Redlock, Reply,
    RequestId, Time,
};

fn reply(u: &mut Unstructured<'_>, depth: u32) -> Result<Reply> {
    let text = |u: &mut Unstructured<'_>| -> Result<String> { Ok(u.arbitrary::<&str>()?.to_string()) };
    Ok(match u.int_in_range(0..=9)? {
        0 => Reply::Ok,
        1 => Reply::Nil,
        2 => Reply::Integer(u.arbitrary()?),
        3 => Reply::Integer(u.int_in_range(-1..=3)?),
        4 => Reply::Error(if u.arbitrary()? { "NOSCRIPT No matching script.".into() } else { text(u)? }),
        5 => Reply::Timeout,
        6 => Reply::ConnectionFailed(text(u)?),
        7 => Reply::Bulk(u.arbitrary()?),
        8 => Reply::Status(text(u)?),
        _ if depth < 3 => {
            let n = u.int_in_range(0..=3)?;
            Reply::Array((0..n).map(|_| reply(u, depth + 1)).collect::<Result<_>>()?)
        }
        _ => Reply::Nil,
    })
}

fn run(u: &mut Unstructured<'_>) -> Result<()> {
    let nodes = u.int_in_range(0..=9)?;
    let ttl = Duration::from_millis(u.int_in_range(0..=120_000)?);
    let config = Config::builder(nodes, ttl)
        .attempts(u.int_in_range(0..=4)?)
        .retry_delay(Duration::from_micros(u.int_in_range(0..=300_000)?))
        .retry_jitter(Duration::from_micros(u.int_in_range(0..=100_000)?))
        .min_validity(Duration::from_micros(u.int_in_range(0..=50_000)?))
        .key_prefix(u.arbitrary::<Vec<u8>>()?)
        .fencing(u.arbitrary()?);
    let config = if u.arbitrary()? {
        config.node_timeout(Duration::from_micros(u.int_in_range(0..=100_000)?))
    } else {
        config
    };
    let Ok(config) = config.build() else { return Ok(()) };
    let lease_us = (config.ttl() - config.drift()).as_micros();
    let mut client = Redlock::with_seed(config.clone(), u.arbitrary()?);
    // Each operation with the instant of its last Wait output (its only wake-up), and
    // whether it said it listens for release notices.
    let mut ops: Vec<(Operation, u64, bool)> = Vec::new();
    let mut leases: Vec<Lease> = Vec::new();
    // Every outcome polled, to give back to any operation (its own or another's).
    let mut outcomes: Vec<Outcome> = Vec::new();
    let mut now: u64 = u.arbitrary::<u32>()?.into();

    while !u.is_empty() && ops.len() < 16 {
        now = now.saturating_add(u.int_in_range(0..=40_000)?);
        let at = Time::from_micros(now);
        match u.int_in_range(0..=12)? {
            10 => {
                let resources: Vec<Vec<u8>> = u.arbitrary()?;
                if let Ok(op) = client.inspect(&resources, at) {
                    ops.push((op, 1, false));
                }
            }
            0 => {
                let resources: Vec<Vec<u8>> = u.arbitrary()?;
                let started = match u.int_in_range(0..=2)? {
                    0 => client.acquire(&resources, at),
                    1 => {
                        let wait = Duration::from_micros(u.int_in_range(0..=2_000_000)?);
                        client.acquire_with(&resources, &AcquireOptions::new().wait(wait), at)
                    }
                    _ => client.acquire_with_random(&resources, u.arbitrary()?, at),
                };
                if let Ok(op) = started {
                    ops.push((op, 1, false));
                }
            }
            1 if !leases.is_empty() => {
                let lease = &leases[u.choose_index(leases.len())?];
                let started = if u.arbitrary()? {
                    client.extend(lease, at)
                } else {
                    client.extend_for(lease, Duration::from_millis(u.int_in_range(0..=10_000)?), at)
                };
                if let Ok(op) = started {
                    ops.push((op, 1, false));
                }
            }
            2 if !leases.is_empty() => {
                let lease = &leases[u.choose_index(leases.len())?];
                ops.push((client.release(lease, at), 1, false));
            }
            3 => {
                if let Ok(lease) = client.lease(&[u.arbitrary::<Vec<u8>>()?], u.arbitrary()?, at) {
                    let _ = config.next_extension(&lease, at);
                    leases.push(lease);
                }
            }
            4 | 5 if !ops.is_empty() => {
                let index = u.choose_index(ops.len())?;
                let (op, _, _) = &mut ops[index];
                let id = RequestId(u.int_in_range(0..=40)?);
                let back = if u.ratio(1, 8)? { u.int_in_range(0..=now)? } else { 0 };
                let _ = op.handle_reply(id, reply(u, 0)?, Time::from_micros(now - back));
            }
            6 if !ops.is_empty() => {
                let index = u.choose_index(ops.len())?;
                let (op, wait, _) = &mut ops[index];
                let at = if u.arbitrary()? {
                    Time::from_micros(*wait).max(at)
                } else {
                    at
                };
                op.handle_timeout(at);
            }
            7 if !ops.is_empty() => {
                let index = u.choose_index(ops.len())?;
                ops[index].0.abandon(at);
            }
            8 if !ops.is_empty() => {
                let index = u.choose_index(ops.len())?;
                let node = u.int_in_range(0..=8)?;
                let message: Vec<u8> = u.arbitrary()?;
                let _ = ops[index].0.handle_notice_message(node, &message, at);
                let _ = ops[index].0.notice_channels();
            }
            11 if !ops.is_empty() && !outcomes.is_empty() => {
                let index = u.choose_index(ops.len())?;
                let outcome = outcomes[u.choose_index(outcomes.len())?].clone();
                let acquired = matches!(outcome, Outcome::Acquired(_));
                let op = &mut ops[index].0;
                if op.decline(outcome, at).is_ok() && acquired {
                    // Nobody holds that lock: its release goes to every node, once.
                    let mut released = vec![0u32; nodes];
                    while let Some(output) = op.poll_output() {
                        match output {
                            Output::Send(command) => {
                                assert_eq!(command.kind(), CommandKind::Release);
                                released[command.node()] += 1;
                            }
                            Output::Outcome(_) => panic!("a declined lock was handed out again"),
                            _ => {}
                        }
                    }
                    assert!(released.iter().all(|&count| count == 1), "{released:?}");
                }
            }
            12 if !ops.is_empty() => {
                let index = u.choose_index(ops.len())?;
                let node = u.int_in_range(0..=10)?;
                let subscribed = ops[index].0.handle_subscribed(node, at);
                assert_eq!(subscribed.is_err(), node >= nodes);
            }
            9 => {
                // The resource-side check: any item, value, token and reply.
                let item: Vec<u8> = u.arbitrary()?;
                let value: Vec<u8> = u.arbitrary()?;
                if let Ok(write) = FencedSet::new(&item, &value, u.arbitrary()?) {
                    assert_eq!(write.args(u.arbitrary()?).len(), 7);
                    if let FencedWrite::Stale { seen } = write.handle_reply(&reply(u, 0)?) {
                        assert!(seen >= write.token());
                    }
                }
            }
            _ => {}
        }
        for (op, wait, listened) in &mut ops {
            // Once an operation listens it listens until it finishes, and nothing
            // finished listens: drivers subscribe when it turns true and stop at the end.
            let listens = op.listens();
            if op.is_finished() {
                assert!(!listens, "a finished operation listens");
            } else if *listened {
                assert!(listens, "stopped listening before it finished");
            }
            *listened |= listens;
            while let Some(event) = op.poll_event() {
                let _ = (event.kind.code(), event.kind.number(), event.nodes.len());
            }
            while let Some(output) = op.poll_output() {
                if let Output::Wait(until) = output {
                    *wait = until.as_micros();
                }
                if let Output::Outcome(outcome) = output {
                    if let Outcome::Acquired(acquired) = &outcome {
                        assert!(acquired.validity.as_micros() <= lease_us);
                        assert!(!acquired.validity.is_zero());
                    }
                    let _ = (outcome.code(), outcome.reason(), outcome.nodes().len());
                    if let Outcome::Inspected(inspected) = &outcome {
                        assert_eq!(inspected.is_locked(), inspected.holder.is_some());
                        for lease in &leases {
                            let _ = inspected.is_held_by(lease, at);
                        }
                    }
                    if let Some(lease) = outcome.lease() {
                        leases.push(lease.clone());
                    }
                    outcomes.push(outcome);
                }
            }
        }
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = run(&mut Unstructured::new(data));
});
