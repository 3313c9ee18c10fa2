//! Criterion: one acquire + release against five local nodes, the async driver (without
//! and with fencing) next to the raw cost of the same commands with the same `redis`
//! client, then the driver with one node frozen.
//!
//! `cargo bench -p redlock-client --bench lock`

mod support;

use std::cell::Cell;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use redlock_client::Client;

fn acquire_release(c: &mut Criterion) {
    let nodes = support::Nodes::start();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = Client::builder(nodes.urls.clone())
        .attempts(1)
        .build()
        .unwrap();
    let connected = runtime.block_on(client.connect(Duration::from_secs(5)));
    assert!(connected.iter().all(Result::is_ok));
    let raw = runtime.block_on(support::raw_connections(&nodes.urls));

    let mut group = c.benchmark_group("acquire_release_5_nodes");
    group.sample_size(50);
    group.measurement_time(Duration::from_secs(5));
    // On a loaded machine a round can miss the 50 ms node timeout: such a cycle is
    // counted, not fatal (a key left by an unconfirmed release ends with its TTL, so
    // each cycle locks a resource of its own).
    let failures = Cell::new((0u64, 0u64));
    let serial = Cell::new(0u64);
    let cycle = || async {
        serial.set(serial.get() + 1);
        let resource = format!("bench:criterion:{}", serial.get());
        match client.lock(&resource, Duration::from_secs(10)).await {
            Ok(lock) => {
                if lock.release().await.is_err() {
                    failures.set((failures.get().0, failures.get().1 + 1));
                }
            }
            Err(_) => failures.set((failures.get().0 + 1, failures.get().1)),
        }
    };
    group.bench_function("redlock_client", |b| {
        b.to_async(&runtime).iter(cycle);
    });
    // The same cycle with fencing (the write-back round on top), same nodes, same run.
    let fenced = Client::builder(nodes.urls.clone())
        .attempts(1)
        .fencing(true)
        .build()
        .unwrap();
    let connected = runtime.block_on(fenced.connect(Duration::from_secs(5)));
    assert!(connected.iter().all(Result::is_ok));
    let fenced_serial = Cell::new(0u64);
    group.bench_function("redlock_client_fenced", |b| {
        b.to_async(&runtime).iter(|| async {
            fenced_serial.set(fenced_serial.get() + 1);
            let resource = format!("bench:criterion:fenced:{}", fenced_serial.get() % 64);
            match fenced.lock(&resource, Duration::from_secs(10)).await {
                Ok(lock) => {
                    if lock.release().await.is_err() {
                        failures.set((failures.get().0, failures.get().1 + 1));
                    }
                }
                Err(_) => failures.set((failures.get().0 + 1, failures.get().1)),
            }
        });
    });
    let mut n = 0u64;
    group.bench_function("raw_redis_wait_all", |b| {
        b.to_async(&runtime).iter(|| {
            n += 1;
            let token = format!("{n:040x}");
            let raw = &raw;
            async move { support::raw_cycle(raw, "bench:raw", &token, 5).await }
        });
    });
    group.bench_function("raw_redis_wait_quorum", |b| {
        b.to_async(&runtime).iter(|| {
            n += 1;
            let token = format!("{n:040x}");
            let raw = &raw;
            async move { support::raw_cycle(raw, "bench:raw", &token, 3).await }
        });
    });
    // One node frozen (SIGSTOP): after its first deadline its link refuses it at once,
    // so a cycle should cost about what a healthy one does.
    nodes.signal("pause", 0);
    group.bench_function("redlock_client_node0_frozen", |b| {
        b.to_async(&runtime).iter(cycle);
    });
    group.finish();
    nodes.signal("resume", 0);
    let (not_acquired, not_released) = failures.get();
    println!(
        "redlock_client cycles: {} ({not_acquired} not acquired, {not_released} releases \
         not confirmed by a quorum)",
        serial.get()
    );
    runtime.block_on(client.wait_idle(Duration::from_secs(2)));
    runtime.block_on(fenced.wait_idle(Duration::from_secs(2)));
}

criterion_group!(benches, acquire_release);
criterion_main!(benches);
