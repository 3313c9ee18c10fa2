//! Criterion: one acquire + release against five local nodes, the async driver next to
//! the raw cost of the same commands with the same `redis` client, then the driver with
//! one node frozen.
//!
//! `cargo bench -p redlock-client --bench lock`

mod support;

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
    group.bench_function("redlock_client", |b| {
        b.to_async(&runtime).iter(|| async {
            let lock = client
                .lock("bench:criterion", Duration::from_secs(10))
                .await
                .expect("acquired");
            lock.release().await.expect("released");
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
        b.to_async(&runtime).iter(|| async {
            let lock = client
                .lock("bench:criterion", Duration::from_secs(10))
                .await
                .expect("acquired");
            lock.release().await.expect("released");
        });
    });
    group.finish();
    nodes.signal("resume", 0);
    runtime.block_on(client.wait_idle(Duration::from_secs(2)));
}

criterion_group!(benches, acquire_release);
criterion_main!(benches);
