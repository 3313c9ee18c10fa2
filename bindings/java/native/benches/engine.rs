//! The loop's native half without a JVM: the N = 5 acquire + release cycle that the Java
//! binding's `CycleBench.acquireReleaseN5ThroughLinks` drives through JNI (start, then
//! each node's reply bytes through the core's decoder, links and operation), so the JNI
//! figure can be read against this one and the core's own (`cargo bench -p redlock-core
//! --bench cycle`), which has no links and no RESP.
//!
//! Run with `cargo bench -p redlock-jni --bench engine`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use redlock_core::{Config, Redlock, Time};
use redlock_jni::engine::Engine;

const OK: &[u8] = b"+OK\r\n";
const RELEASED: &[u8] = b"*2\r\n:1\r\n:0\r\n";

/// The nodes each written command went to, and the outcome's kind and token if one came.
fn written(engine: &mut Engine, nodes: &mut Vec<usize>) -> Option<(i64, String)> {
    let mut outcome = None;
    engine.take_events(|records, bytes| {
        let mut at = 0;
        let mut byte_at = 0;
        while at < records.len() {
            match records[at] {
                2 => {
                    nodes.push(records[at + 1] as usize);
                    byte_at += records[at + 3] as usize;
                    at += 4;
                }
                5 => {
                    let token_length = records[at + 3 + 12] as usize;
                    let token = &bytes[byte_at..byte_at + token_length];
                    outcome = Some((records[at + 3], String::from_utf8_lossy(token).into_owned()));
                    at += 3 + records[at + 2] as usize;
                }
                // An event (with a listener on): numbers, then node texts (none here).
                7 => at += 3 + records[at + 2] as usize,
                _ => at += 2,
            }
        }
    });
    outcome
}

fn round(
    engine: &mut Engine,
    reply: &[u8],
    now: Time,
    nodes: &mut Vec<usize>,
) -> Option<(i64, String)> {
    let mut outcome = written(engine, nodes);
    let sent: Vec<usize> = std::mem::take(nodes);
    for node in sent {
        assert!(engine.received(node, reply, now));
        outcome = outcome.or(written(engine, nodes));
    }
    outcome
}

fn bench_engine(c: &mut Criterion) {
    bench_cycle(c, "jni_engine/acquire_release_n5_through_links", false);
    // The same with the core's events written for a listener (`loopListen`).
    bench_cycle(
        c,
        "jni_engine/acquire_release_n5_through_links_with_events",
        true,
    );
}

fn bench_cycle(c: &mut Criterion, name: &str, listen: bool) {
    let config = Config::builder(5, Duration::from_millis(10_000))
        .build()
        .expect("valid config");
    let mut client = Redlock::with_seed(config, [0; 32]);
    let mut engine = Engine::new(5, true).without_lease_handles();
    engine.listen(listen);
    let mut nodes = Vec::with_capacity(32);
    let mut tag = 0;
    // Connect: a first acquisition asks for the connections; the script loads and its
    // own commands are all answered.
    let now = Time::from_micros(500);
    let op = client.acquire(&["warm-up"], now).expect("valid resource");
    tag += 1;
    assert!(engine.start_operation(tag, op, now));
    written(&mut engine, &mut nodes);
    for node in 0..5 {
        assert!(engine.connected(node, now));
    }
    round(&mut engine, OK, now, &mut nodes);
    engine.claimed(tag);
    c.bench_function(name, |b| {
        b.iter(|| {
            let now = Time::from_micros(1_000);
            let op = client.acquire(&["orders:42"], now).expect("valid resource");
            tag += 1;
            assert!(engine.start_operation(tag, op, now));
            let (kind, token) = round(&mut engine, OK, now, &mut nodes).expect("an outcome");
            assert_eq!(kind, 0, "acquired");
            // As the Java loop does once the acquisition's future took the outcome.
            engine.claimed(tag);
            // The lease as the outcome handed it (its token; validity is not needed to
            // release).
            let lease = client
                .lease(&["orders:42"], &token, Time::from_micros(0))
                .expect("valid lease");
            let now = Time::from_micros(2_000);
            tag += 1;
            assert!(engine.start_operation(tag, client.release(&lease, now), now));
            let (kind, _) = round(&mut engine, RELEASED, now, &mut nodes).expect("an outcome");
            black_box(kind)
        })
    });
}

criterion_group!(benches, bench_engine);
criterion_main!(benches);
