//! The cost of the core's decisions, without any I/O:
//! - one full N = 5 acquire + release cycle with every node answering OK, building
//!   every command and polling every output (what a driver pays per lock, minus I/O);
//! - decoding the RESP replies of such a cycle, and a larger array reply.
//!
//! Run with `cargo bench -p redlock-core --bench cycle`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use redlock_core::resp::Decoder;
use redlock_core::{Command, Config, Operation, Outcome, Output, Redlock, Reply, Time};

/// Polls `op` until empty, collecting commands; returns the outcome if one came.
fn poll(op: &mut Operation, sends: &mut Vec<Command>) -> Option<Outcome> {
    let mut outcome = None;
    while let Some(output) = op.poll_output() {
        match output {
            Output::Send(command) => sends.push(command),
            Output::Outcome(o) => outcome = Some(o),
            _ => {}
        }
    }
    outcome
}

fn cycle(client: &mut Redlock, sends: &mut Vec<Command>) -> usize {
    let mut op = client
        .acquire(&["orders:42"], Time::from_micros(1_000))
        .expect("valid resource");
    sends.clear();
    poll(&mut op, sends);
    let mut acquired = None;
    for command in sends.drain(..) {
        op.handle_reply(command.request_id(), Reply::Ok, Time::from_micros(1_200))
            .expect("issued request");
        if let Some(Outcome::Acquired(a)) = poll(&mut op, &mut Vec::new()) {
            acquired = Some(a);
        }
    }
    let lease = acquired.expect("acquired").lease;
    let mut op = client.release(&lease, Time::from_micros(2_000));
    poll(&mut op, sends);
    let mut released = 0;
    for command in sends.drain(..) {
        op.handle_reply(
            command.request_id(),
            Reply::Integer(1),
            Time::from_micros(2_200),
        )
        .expect("issued request");
        if let Some(Outcome::Released(r)) = poll(&mut op, &mut Vec::new()) {
            released = r.released;
        }
    }
    released
}

fn bench_cycle(c: &mut Criterion) {
    let config = Config::builder(5, Duration::from_millis(10_000))
        .build()
        .expect("valid config");
    let mut group = c.benchmark_group("core");
    let mut seeded = Redlock::with_seed(config.clone(), [42; 32]);
    let mut sends = Vec::with_capacity(8);
    // The release decides at the quorum; the other two replies are fed as late replies.
    assert_eq!(cycle(&mut seeded, &mut sends), 3);
    group.bench_function("acquire_release_n5_seeded", |b| {
        b.iter(|| black_box(cycle(&mut seeded, &mut sends)))
    });
    let mut os = Redlock::new(config);
    group.bench_function("acquire_release_n5_os_random", |b| {
        b.iter(|| black_box(cycle(&mut os, &mut sends)))
    });
    group.finish();
}

fn bench_resp(c: &mut Criterion) {
    // What five nodes answer in one acquire + release cycle.
    let cycle_replies: Vec<u8> = b"+OK\r\n"
        .repeat(5)
        .into_iter()
        .chain(b":1\r\n".repeat(5))
        .collect();
    let mut array = b"*100\r\n".to_vec();
    for i in 0..100 {
        array.extend_from_slice(format!("$10\r\nvalue-{i:04}\r\n").as_bytes());
    }
    let mut group = c.benchmark_group("resp");
    for (name, bytes, expected) in [
        ("cycle_replies", &cycle_replies, 10),
        ("array_of_100_bulks", &array, 1),
    ] {
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut decoder = Decoder::new();
                decoder.feed(black_box(bytes));
                let mut n = 0;
                while let Ok(Some(reply)) = decoder.next_reply() {
                    black_box(reply);
                    n += 1;
                }
                assert_eq!(n, expected);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_cycle, bench_resp);
criterion_main!(benches);
