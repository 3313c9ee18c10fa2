//! The loop's native half never loses a release whose `SET` was still queued in the link
//! when the release arrived (audit item 12): one node, its link's bound in flight full, an
//! acquisition whose `SET` waits in the link's queue and the release of its token right
//! behind it; one reply lets the `SET` out but not the release (the bound is full again),
//! then every deadline passes. The release must still reach the node once it answers.

use std::time::Duration;

use redlock_core::{Config, Redlock, Time, MAX_IN_FLIGHT};
use redlock_jni::engine::Engine;

const OK: &[u8] = b"+OK\r\n";

/// Takes the events so far: (records, bytes) appended to `all`; returns the writes' count.
fn take(engine: &mut Engine, all: &mut Vec<u8>) -> usize {
    let mut writes = 0;
    engine.take_events(|records, bytes| {
        let mut at = 0;
        while at < records.len() {
            match records[at] {
                2 => {
                    writes += 1;
                    at += 4;
                }
                5 | 7 => at += 3 + records[at + 2] as usize,
                _ => at += 2,
            }
        }
        all.extend_from_slice(bytes);
    });
    writes
}

/// True when some command in `bytes` is an `EVALSHA` (the release script) of `token`.
fn released(bytes: &[u8], token: &[u8]) -> bool {
    let mut from = 0;
    while let Some(found) = find(&bytes[from..], token) {
        let at = from + found;
        let start = at.saturating_sub(120);
        if find(&bytes[start..at], b"EVALSHA").is_some() {
            return true;
        }
        from = at + token.len();
    }
    false
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

#[test]
fn a_release_behind_its_queued_set_is_sent_once_the_node_answers() {
    let config = Config::builder(1, Duration::from_millis(10_000))
        .build()
        .expect("valid config");
    let mut client = Redlock::with_seed(config, [7; 32]);
    let mut engine = Engine::new(1, true).without_lease_handles();
    let mut bytes = Vec::new();
    let mut in_flight = 0;
    let now = Time::from_micros(1_000);
    let mut tag = 0;
    // Acquisitions nobody answers: the three script loads, then their SETs, up to the
    // link's bound in flight.
    for i in 0..(MAX_IN_FLIGHT - 3) {
        let op = client
            .acquire(&[format!("r{i}")], now)
            .expect("valid resource");
        tag += 1;
        assert!(engine.start_operation(tag, op, now));
        if i == 0 {
            take(&mut engine, &mut bytes);
            assert!(engine.connected(0, now));
        }
        in_flight += take(&mut engine, &mut bytes);
    }
    assert_eq!(in_flight, MAX_IN_FLIGHT, "the bound in flight is full");
    // The acquisition whose SET waits in the link's queue, and its release behind it.
    let op = client.acquire(&["x"], now).expect("valid resource");
    let token = op.token().as_str().to_owned();
    tag += 1;
    assert!(engine.start_operation(tag, op, now));
    assert_eq!(take(&mut engine, &mut bytes), 0, "queued, not written");
    let lease = client
        .lease(&["x"], &token, Time::from_micros(0))
        .expect("valid lease");
    tag += 1;
    assert!(engine.start_operation(tag, client.release(&lease, now), now));
    take(&mut engine, &mut bytes);
    // One reply (the first script load): the SET goes out, the bound is full again.
    let later = Time::from_micros(2_000);
    assert!(engine.received(0, OK, later));
    take(&mut engine, &mut bytes);
    assert!(
        find(&bytes, token.as_bytes()).is_some(),
        "the SET was written"
    );
    // Every deadline passes; then the node answers everything it was sent, one by one.
    let late = Time::from_micros(200_000);
    for _ in 0..(MAX_IN_FLIGHT * 2) {
        if released(&bytes, token.as_bytes()) {
            break;
        }
        assert!(engine.received(0, OK, late));
        take(&mut engine, &mut bytes);
    }
    assert!(
        released(&bytes, token.as_bytes()),
        "the release of the SET written late never reached the node"
    );
}
