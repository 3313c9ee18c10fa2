//! Latency distributions (p50/p99) of acquire + release, with and without fencing, with
//! healthy nodes and with one node frozen; then lock hand-offs between contending
//! clients (4 and 16, default settings, with release notices and without): hand-offs
//! per second, release-to-next-holder latency, and how evenly the waiting is shared.
//! Against five local nodes. Criterion reports means; this reports the tails. The
//! floors of an acquisition and of a hand-off (plain sockets, no lock library:
//! support/floor.rs) say what the nodes and the protocol cost on this machine.
//!
//! `cargo bench -p redlock-client --bench handoff`

mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redlock_client::{Client, LockOptions};

const CYCLES: usize = 3000;
const FROZEN_CYCLES: usize = 300;
const CONTENTION_SECONDS: u64 = 5;
/// The start of a contention run left out of the "after warm-up" fairness column: the
/// clients' first waits also open their subscriber connections, in a herd.
const WARM_UP: Duration = Duration::from_millis(500);
/// Long enough that no contender gives up during a run.
const WAIT: Duration = Duration::from_secs(60);

struct Stats(Vec<Duration>);

impl Stats {
    fn percentile(&self, p: f64) -> Duration {
        let mut sorted = self.0.clone();
        if sorted.is_empty() {
            return Duration::ZERO;
        }
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
    let options = LockOptions::new().ttl(Duration::from_secs(10));
    client_cycles_with(client, cycles, gap, options).await
}

async fn client_cycles_with(
    client: &Client,
    cycles: usize,
    gap: Duration,
    options: LockOptions,
) -> (Stats, Stats, Stats) {
    let (mut acquire, mut release, mut both) = (Vec::new(), Vec::new(), Vec::new());
    let mut failed = 0;
    for _ in 0..cycles {
        // On a loaded machine a round can miss the 50 ms node timeout: such a cycle is
        // counted, not fatal, and each cycle locks a resource of its own, so that a key
        // an unconfirmed release left behind stays out of the way.
        let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
        let resource = format!("bench:handoff:{serial}");
        let started = Instant::now();
        let Ok(lock) = client.lock_with(&[&resource], options.clone()).await else {
            failed += 1;
            continue;
        };
        let acquired = Instant::now();
        if lock.release().await.is_err() {
            failed += 1;
            continue;
        }
        let done = Instant::now();
        acquire.push(acquired - started);
        release.push(done - acquired);
        both.push(done - started);
        if !gap.is_zero() {
            tokio::time::sleep(gap).await;
        }
    }
    if failed > 0 {
        println!("({failed} of {cycles} cycles missed a node timeout and are left out)");
    }
    (Stats(acquire), Stats(release), Stats(both))
}

static SERIAL: AtomicU64 = AtomicU64::new(0);

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

/// What one contention run measured.
struct Contention {
    acquisitions: usize,
    handoffs: usize,
    /// Release started (by one client) to acquired (by another).
    release_to_next: Stats,
    /// How long each release took, under the contention (its share of `release_to_next`).
    releases: Stats,
    /// Per client, how long each of its acquisitions waited.
    waits: Vec<Vec<Duration>>,
    /// Every wait asked after the run's first [`WARM_UP`].
    warm_waits: Vec<Duration>,
    failures: usize,
    /// Attempts summed over every acquisition.
    attempts: u64,
}

#[derive(Default)]
struct Shared {
    inside: bool,
    last_holder: Option<usize>,
    released_at: Option<Instant>,
    acquisitions: usize,
    handoffs: usize,
    release_to_next: Vec<Duration>,
    releases: Vec<Duration>,
    /// Acquisitions and releases that missed a node timeout (a loaded machine).
    failures: usize,
    attempts: u64,
}

/// `contenders` clients with default settings lock (waiting up to [`WAIT`]), hold for
/// 0.1 ms, release, and again, for [`CONTENTION_SECONDS`]. Counts acquisitions and
/// hand-offs (an acquisition by another client than the last holder), measures the
/// release-to-next-holder latency of each hand-off and every acquisition's wait, and
/// checks that no two hold at once.
async fn contention(urls: &[String], contenders: usize, notices: bool) -> Contention {
    let stop = Arc::new(AtomicBool::new(false));
    let shared = Arc::new(Mutex::new(Shared::default()));
    let mut tasks = Vec::new();
    let warm_from = Instant::now() + WARM_UP;
    for id in 0..contenders {
        let client = Client::builder(urls.to_vec())
            .release_notices(notices)
            .build()
            .unwrap();
        let (stop, shared) = (stop.clone(), shared.clone());
        tasks.push(tokio::spawn(async move {
            let mut waits = Vec::new();
            let mut warm_waits = Vec::new();
            // A short TTL, so that a key an unconfirmed release left (a round that missed
            // its node timeout on a loaded machine) does not stop the run for long.
            let options = LockOptions::new().wait(WAIT).ttl(Duration::from_secs(1));
            while !stop.load(Ordering::Relaxed) {
                let started = Instant::now();
                let Ok(lock) = client
                    .lock_with(&["bench:contended"], options.clone())
                    .await
                else {
                    shared.lock().unwrap().failures += 1;
                    continue;
                };
                let acquired = Instant::now();
                waits.push(acquired - started);
                if started >= warm_from {
                    warm_waits.push(acquired - started);
                }
                {
                    let mut shared = shared.lock().unwrap();
                    assert!(!shared.inside, "two holders at once");
                    shared.inside = true;
                    shared.acquisitions += 1;
                    shared.attempts += u64::from(lock.attempts());
                    if shared.last_holder.replace(id) != Some(id) {
                        shared.handoffs += 1;
                        if let Some(released) = shared.released_at {
                            shared.release_to_next.push(acquired - released);
                        }
                    }
                }
                tokio::time::sleep(Duration::from_micros(100)).await;
                {
                    let mut shared = shared.lock().unwrap();
                    shared.inside = false;
                    shared.released_at = Some(Instant::now());
                }
                let releasing = Instant::now();
                let released = lock.release().await;
                let mut shared = shared.lock().unwrap();
                shared.releases.push(releasing.elapsed());
                if released.is_err() {
                    shared.failures += 1;
                }
            }
            (waits, warm_waits)
        }));
    }
    tokio::time::sleep(Duration::from_secs(CONTENTION_SECONDS)).await;
    stop.store(true, Ordering::Relaxed);
    let mut waits = Vec::new();
    let mut warm_waits = Vec::new();
    for task in tasks {
        let (client_waits, client_warm) = task.await.unwrap();
        waits.push(client_waits);
        warm_waits.extend(client_warm);
    }
    let shared = Arc::try_unwrap(shared)
        .ok()
        .expect("tasks done")
        .into_inner()
        .unwrap();
    Contention {
        acquisitions: shared.acquisitions,
        handoffs: shared.handoffs,
        release_to_next: Stats(shared.release_to_next),
        releases: Stats(shared.releases),
        waits,
        warm_waits,
        failures: shared.failures,
        attempts: shared.attempts,
    }
}

fn mean(durations: &[Duration]) -> Duration {
    durations.iter().sum::<Duration>() / durations.len().max(1) as u32
}

/// Node 0 frozen (SIGSTOP) for a few hundred cycles, then thawed.
fn frozen_node(
    runtime: &tokio::runtime::Runtime,
    client: &Client,
    raw: &[redis::aio::MultiplexedConnection],
    nodes: &support::Nodes,
) {
    nodes.signal("pause", 0);
    header(&format!(
        "node 0 frozen (SIGSTOP), {FROZEN_CYCLES} cycles, node timeout 50 ms"
    ));
    let (acquire, release, both) =
        runtime.block_on(client_cycles(client, FROZEN_CYCLES, Duration::ZERO));
    both.row("redlock-client acquire + release");
    acquire.row("  of which acquire (decides at the quorum)");
    release.row("  of which release (decides at the quorum)");
    runtime
        .block_on(raw_cycles(raw, FROZEN_CYCLES, 3))
        .row("raw redis: wait for 3 (quorum)");
    nodes.signal("resume", 0);
    runtime.block_on(client.wait_idle(Duration::from_secs(2)));
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
    let alone = acquire.percentile(50.0);
    let fenced = LockOptions::new()
        .ttl(Duration::from_secs(10))
        .fencing(true);
    runtime.block_on(client_cycles_with(
        &client,
        300,
        Duration::ZERO,
        fenced.clone(),
    ));
    let (fenced_acquire, _, fenced_both) =
        runtime.block_on(client_cycles_with(&client, CYCLES, Duration::ZERO, fenced));
    fenced_both.row("with fencing: acquire + release");
    fenced_acquire.row("  of which acquire (with the write-back)");
    // Interleaved again, so that a drift of the machine's load shows.
    let (_, _, both_again) = runtime.block_on(client_cycles(&client, CYCLES, Duration::ZERO));
    both_again.row("redlock-client acquire + release (again)");
    println!(
        "fencing: p50 acquire + release {:.2}x the unfenced one",
        fenced_both.percentile(50.0).as_secs_f64()
            / both
                .percentile(50.0)
                .min(both_again.percentile(50.0))
                .as_secs_f64()
    );
    // A wait limit on a lock nobody holds, a new resource each cycle (as locks per
    // order or per user are): it is taken without subscribing to anything (the core
    // listens from the first refusal by a held key).
    let waiting = LockOptions::new().ttl(Duration::from_secs(10)).wait(WAIT);
    let (waiting_acquire, _, waiting_both) =
        runtime.block_on(client_cycles_with(&client, CYCLES, Duration::ZERO, waiting));
    waiting_both.row("with a wait limit: acquire + release");
    waiting_acquire.row("  of which acquire (nobody holds it)");
    runtime
        .block_on(raw_cycles(&raw, CYCLES, 5))
        .row("raw redis: SET NX PX + EVALSHA, wait for all 5");
    runtime
        .block_on(raw_cycles(&raw, CYCLES, 3))
        .row("raw redis: same commands, wait for 3 (quorum)");

    // The least a hand-off can take on these nodes, against the least an acquisition
    // can: plain sockets, one task, no lock library (support/floor.rs). The hand-off
    // target (release to next holder within 3x one uncontended acquisition) is read
    // against these.
    header("the floor: plain sockets driven by one task, no lock library");
    let floor = runtime.block_on(support::floor::handoff_floor(&nodes.urls, CYCLES));
    let floor_acquire = Stats(floor.acquire);
    floor_acquire.row("SET NX PX to 5, to the 3rd OK (a free key)");
    let queued = |holder_returns| {
        let (handoffs, missed) = runtime.block_on(support::floor::queued_handoff_floor(
            &nodes.urls,
            CYCLES,
            holder_returns,
        ));
        if missed > 0 {
            println!("({missed} of {CYCLES} queued hand-offs missed: the attempt came first)");
        }
        Stats(handoffs)
    };
    let floors = [
        (
            "hand-off: release, notices, SET NX PX",
            Stats(floor.handoff),
        ),
        ("hand-off with the waiters' queue", queued(false)),
        ("the same, the holder back at once", queued(true)),
    ];
    for (name, stats) in &floors {
        stats.row(name);
    }
    for (name, stats) in &floors {
        let p50 = stats.percentile(50.0).as_secs_f64();
        println!(
            "{name:<44} p50 {:.2}x the floor's acquisition, {:.2}x redlock-client's uncontended acquisition",
            p50 / floor_acquire.percentile(50.0).as_secs_f64(),
            p50 / alone.as_secs_f64()
        );
    }

    let (acquire, _, _) = runtime.block_on(client_cycles(
        &client,
        FROZEN_CYCLES,
        Duration::from_millis(50),
    ));
    acquire.row("acquire after 50 ms idle (compare below)");

    if !nodes.own() {
        println!("\n(nodes run elsewhere: the frozen-node runs are left out)");
    } else {
        frozen_node(&runtime, &client, &raw, &nodes);
    }

    let contended = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // The same uncontended cycles on the contenders' runtime: its worker threads wake
    // each other, which costs a single client more than the current-thread runtime above.
    header(&format!(
        "5 healthy nodes, {CYCLES} sequential cycles, one client (the contenders' runtime, 2 worker threads)"
    ));
    let alone_contended = contended.block_on(async {
        let client = Client::builder(nodes.urls.clone())
            .attempts(1)
            .build()
            .unwrap();
        client_cycles(&client, 300, Duration::ZERO).await;
        let (acquire, _, both) = client_cycles(&client, CYCLES, Duration::ZERO).await;
        both.row("redlock-client acquire + release");
        acquire.row("  of which acquire");
        acquire.percentile(50.0)
    });
    println!(
        "\ncontending clients, default settings (retry 200 ms ± 100 ms), waiting up to {} s, \
         {CONTENTION_SECONDS} s each, hold 0.1 ms",
        WAIT.as_secs()
    );
    println!(
        "{:<28} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}",
        "",
        "acquired/s",
        "hand-offs/s",
        "r->n p50 us",
        "r->n p99 us",
        "rel p50 us",
        "max/mean",
        "warm max/m",
        "p99/mean",
        "over 3x",
        "client/mean",
        "attempts",
        "r->n/acq",
        "r->n/acq 2w"
    );
    // `REDLOCK_HANDOFF_CONTENDERS=2,4` runs other counts (the figures are 4 and 16).
    let counts: Vec<usize> = std::env::var("REDLOCK_HANDOFF_CONTENDERS")
        .ok()
        .map(|list| {
            list.split(',')
                .filter_map(|n| n.trim().parse().ok())
                .collect()
        })
        .filter(|counts: &Vec<usize>| !counts.is_empty())
        .unwrap_or_else(|| vec![4, 16]);
    for contenders in counts {
        for notices in [true, false] {
            let run = contended.block_on(contention(&nodes.urls, contenders, notices));
            let all: Vec<Duration> = run.waits.iter().flatten().copied().collect();
            let overall = mean(&all);
            let longest = all.iter().max().copied().unwrap_or_default();
            let warm_longest = run.warm_waits.iter().max().copied().unwrap_or_default();
            let p99_wait = Stats(all.clone()).percentile(99.0);
            let over_3x = all.iter().filter(|wait| **wait > overall * 3).count() as f64
                / all.len().max(1) as f64
                * 100.0;
            // The worst client's mean wait against everyone's mean.
            let worst_client = run
                .waits
                .iter()
                .filter(|waits| !waits.is_empty())
                .map(|waits| mean(waits))
                .max()
                .unwrap_or_default();
            let ratio = |d: Duration| d.as_secs_f64() / overall.as_secs_f64().max(1e-9);
            let (p50, p99) = if run.release_to_next.0.is_empty() {
                (f64::NAN, f64::NAN)
            } else {
                (
                    run.release_to_next.percentile(50.0).as_secs_f64() * 1e6,
                    run.release_to_next.percentile(99.0).as_secs_f64() * 1e6,
                )
            };
            let starved = run.waits.iter().filter(|waits| waits.is_empty()).count();
            let failures = if run.failures > 0 {
                format!(
                    "  ({} acquisitions or releases missed a node timeout)",
                    run.failures
                )
            } else {
                String::new()
            };
            println!(
                "{:<28} {:>11.0} {:>11.0} {:>11.0} {:>11.0} {:>11.0} {:>11.1} {:>11.1} {:>11.1} {:>10.2}% {:>11.1} {:>11.1} {:>11.1} {:>11.1}{}",
                format!(
                    "{contenders} clients, {}",
                    if notices { "notices" } else { "no notices" }
                ),
                run.acquisitions as f64 / CONTENTION_SECONDS as f64,
                run.handoffs as f64 / CONTENTION_SECONDS as f64,
                p50,
                p99,
                run.releases.percentile(50.0).as_secs_f64() * 1e6,
                ratio(longest),
                warm_longest.as_secs_f64() / mean(&run.warm_waits).as_secs_f64().max(1e-9),
                ratio(p99_wait),
                over_3x,
                ratio(worst_client),
                run.attempts as f64 / run.acquisitions.max(1) as f64,
                p50 / (alone.as_secs_f64() * 1e6),
                p50 / (alone_contended.as_secs_f64() * 1e6),
                if starved > 0 {
                    format!("  ({starved} clients never acquired)")
                } else {
                    String::new()
                } + &failures
            );
        }
    }
    println!(
        "r->n: a release started to another client's acquisition; rel: one release, under the contention; max/mean: the longest \
         single wait over the mean wait; warm max/m: the same for the waits asked after the \
         run's first 0.5 s; p99/mean: the 99th percentile single wait over the \
         mean wait; over 3x: the share of waits longer than 3x the mean; client/mean: the \
         worst client's mean wait over the mean wait; attempts: per acquisition; \
         r->n/acq: the r->n p50 over one uncontended acquisition's p50 (current-thread \
         runtime); r->n/acq 2w: the same over the acquisition on the contenders' runtime"
    );
}
