//! Latency distributions (p50/p99) of acquire + release, with healthy nodes and with one
//! node frozen, and lock hand-offs per second between contending clients, against five
//! local nodes. Criterion reports means; this reports the tails.
//!
//! `cargo bench -p redlock-client --bench handoff`

mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redlock_client::Client;

const CYCLES: usize = 3000;
const FROZEN_CYCLES: usize = 300;
const CONTENDERS: usize = 4;
const CONTENTION_SECONDS: u64 = 5;

struct Stats(Vec<Duration>);

impl Stats {
    fn percentile(&self, p: f64) -> Duration {
        let mut sorted = self.0.clone();
        sorted.sort_unstable();
        let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
        sorted[rank.clamp(1, sorted.len()) - 1]
    }

    fn row(&self, name: &str) {
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        let mean = self.0.iter().sum::<Duration>() / self.0.len().max(1) as u32;
        println!(
            "{:<44} {:>9.0} {:>9.0} {:>9.0} {:>9.0} {:>9.0}",
            name,
            us(mean),
            us(self.percentile(50.0)),
            us(self.percentile(90.0)),
            us(self.percentile(99.0)),
            us(self.percentile(100.0)),
        );
    }
}

fn header(title: &str) {
    println!("\n{title}");
    println!(
        "{:<44} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "microseconds per operation", "mean", "p50", "p90", "p99", "max"
    );
}

/// `gap`: idle time after each cycle (not counted), to compare with the frozen-node
/// run, whose release idles for the node timeout.
async fn client_cycles(client: &Client, cycles: usize, gap: Duration) -> (Stats, Stats, Stats) {
    let (mut acquire, mut release, mut both) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..cycles {
        let started = Instant::now();
        let lock = client
            .lock("bench:handoff", Duration::from_secs(10))
            .await
            .expect("acquired");
        let acquired = Instant::now();
        lock.release().await.expect("released");
        let done = Instant::now();
        acquire.push(acquired - started);
        release.push(done - acquired);
        both.push(done - started);
        if !gap.is_zero() {
            tokio::time::sleep(gap).await;
        }
    }
    (Stats(acquire), Stats(release), Stats(both))
}

async fn raw_cycles(
    connections: &[redis::aio::MultiplexedConnection],
    cycles: usize,
    wait_for: usize,
) -> Stats {
    let mut both = Vec::new();
    for n in 0..cycles {
        let token = format!("{n:040x}");
        let started = Instant::now();
        support::raw_cycle(connections, "bench:raw", &token, wait_for).await;
        both.push(started.elapsed());
    }
    Stats(both)
}

/// Contending clients lock, hold for a moment, release, again, for `seconds`. Counts
/// acquisitions and hand-offs (an acquisition by another client than the last holder),
/// and checks that no two hold at once.
async fn contention(urls: &[String], delay: Duration, jitter: Duration) -> (u64, u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let inside = Arc::new(AtomicBool::new(false));
    let last_holder = Arc::new(AtomicUsize::new(usize::MAX));
    let acquisitions = Arc::new(AtomicU64::new(0));
    let handoffs = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for id in 0..CONTENDERS {
        let client = Client::builder(urls.to_vec())
            .attempts(1_000_000)
            .retry_delay(delay, jitter)
            .build()
            .unwrap();
        let (stop, inside, last_holder, acquisitions, handoffs) = (
            stop.clone(),
            inside.clone(),
            last_holder.clone(),
            acquisitions.clone(),
            handoffs.clone(),
        );
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let lock = client
                    .lock("bench:contended", Duration::from_secs(10))
                    .await
                    .expect("acquired");
                assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
                acquisitions.fetch_add(1, Ordering::Relaxed);
                if last_holder.swap(id, Ordering::Relaxed) != id {
                    handoffs.fetch_add(1, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_micros(100)).await;
                inside.store(false, Ordering::SeqCst);
                lock.release().await.expect("released");
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(CONTENTION_SECONDS)).await;
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.unwrap();
    }
    (
        acquisitions.load(Ordering::Relaxed),
        handoffs.load(Ordering::Relaxed),
    )
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument that names nothing here skips us.
    if std::env::args()
        .skip(1)
        .any(|a| !a.starts_with('-') && !"handoff".contains(a.as_str()))
    {
        return;
    }
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

    // Warm up both paths.
    runtime.block_on(client_cycles(&client, 300, Duration::ZERO));
    runtime.block_on(raw_cycles(&raw, 300, 5));

    header(&format!(
        "5 healthy nodes, {CYCLES} sequential cycles, one client (current-thread runtime)"
    ));
    let (acquire, release, both) = runtime.block_on(client_cycles(&client, CYCLES, Duration::ZERO));
    both.row("redlock-client acquire + release");
    acquire.row("  of which acquire");
    release.row("  of which release");
    runtime
        .block_on(raw_cycles(&raw, CYCLES, 5))
        .row("raw redis: SET NX PX + EVALSHA, wait for all 5");
    runtime
        .block_on(raw_cycles(&raw, CYCLES, 3))
        .row("raw redis: same commands, wait for 3 (quorum)");

    let (acquire, _, _) = runtime.block_on(client_cycles(
        &client,
        FROZEN_CYCLES,
        Duration::from_millis(50),
    ));
    acquire.row("acquire after 50 ms idle (compare below)");

    nodes.signal("pause", 0);
    header(&format!(
        "node 0 frozen (SIGSTOP), {FROZEN_CYCLES} cycles, node timeout 50 ms"
    ));
    let (acquire, release, both) =
        runtime.block_on(client_cycles(&client, FROZEN_CYCLES, Duration::ZERO));
    both.row("redlock-client acquire + release");
    acquire.row("  of which acquire (decides at the quorum)");
    release.row("  of which release (decides at the quorum)");
    runtime
        .block_on(raw_cycles(&raw, FROZEN_CYCLES, 3))
        .row("raw redis: wait for 3 (quorum)");
    nodes.signal("resume", 0);
    runtime.block_on(client.wait_idle(Duration::from_secs(2)));

    let contended = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!(
        "\n{CONTENDERS} contending clients, {CONTENTION_SECONDS} s each (hold 0.1 ms, then release)"
    );
    println!(
        "{:<44} {:>14} {:>14}",
        "retry delay", "acquisitions/s", "hand-offs/s"
    );
    for (delay, jitter) in [
        (Duration::from_millis(2), Duration::from_millis(1)),
        (Duration::from_millis(200), Duration::from_millis(100)),
    ] {
        let (acquisitions, handoffs) = contended.block_on(contention(&nodes.urls, delay, jitter));
        println!(
            "{:<44} {:>14.0} {:>14.0}",
            format!("{} ms ± {} ms", delay.as_millis(), jitter.as_millis()),
            acquisitions as f64 / CONTENTION_SECONDS as f64,
            handoffs as f64 / CONTENTION_SECONDS as f64
        );
    }
}
