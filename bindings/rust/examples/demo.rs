//! The Rust side of `make demo` (scripts/demo.sh).
//!
//! `demo worker`: async tasks that each increment a shared counter file under the lock,
//! with a read-modify-write that loses updates whenever two overlap. Every acquisition
//! is appended to the stats file as one JSON line, the format `redlock exec --json`
//! prints (`{"event":"acquired","attempts":N,"acquire_us":T}`).
//!
//! With `--fence FILE` the worker takes fencing tokens and the counter checks them: under
//! the lock, a write goes through only if the lock's token is above the last one recorded
//! in FILE (which it then records); a stale token fails the worker. Its stats lines carry
//! `"fencing_token":N`, as `redlock exec --json --fencing` prints them.
//!
//! `demo summary`: reads every worker's stats file and the counter, prints the table and
//! the highest fencing token reported, and exits non-zero if an update was lost.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redlock_client::{Client, LockOptions};

fn usage() -> ExitCode {
    eprintln!(
        "usage: demo worker --name NAME --tasks N --rounds N --counter FILE --stats FILE [--resource R] [--fence FILE]\n\
         \x20      demo unlocked --tasks N --rounds N --counter FILE\n\
         \x20      demo summary --counter FILE STATS_FILE...\n\
         Nodes come from REDLOCK_NODES (comma-separated URLs)."
    );
    ExitCode::from(2)
}

struct Args {
    name: String,
    tasks: usize,
    rounds: usize,
    counter: PathBuf,
    stats: PathBuf,
    resource: String,
    fence: Option<PathBuf>,
    rest: Vec<PathBuf>,
}

fn parse(args: &[String]) -> Option<Args> {
    let mut parsed = Args {
        name: String::from("rust-async"),
        tasks: 4,
        rounds: 25,
        counter: PathBuf::new(),
        stats: PathBuf::new(),
        resource: String::from("demo:counter"),
        fence: None,
        rest: Vec::new(),
    };
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "--name" => parsed.name = iter.next()?.clone(),
            "--tasks" => parsed.tasks = iter.next()?.parse().ok()?,
            "--rounds" => parsed.rounds = iter.next()?.parse().ok()?,
            "--counter" => parsed.counter = iter.next()?.into(),
            "--stats" => parsed.stats = iter.next()?.into(),
            "--resource" => parsed.resource = iter.next()?.clone(),
            "--fence" => parsed.fence = Some(iter.next()?.into()),
            other if !other.starts_with("--") => parsed.rest.push(other.into()),
            _ => return None,
        }
    }
    Some(parsed)
}

/// The unprotected critical section: read, pause, write back plus one.
async fn increment(counter: &Path) -> std::io::Result<()> {
    let text = std::fs::read_to_string(counter)?;
    let value: u64 = text.trim().parse().unwrap_or(0);
    tokio::time::sleep(Duration::from_millis(5)).await;
    std::fs::write(counter, format!("{}\n", value + 1))
}

/// The counter's fencing check: refuses `token` unless it is above the last one recorded
/// in `fence`, then the increment, then records `token`.
async fn fenced_increment(counter: &Path, fence: &Path, token: u64) -> Result<(), String> {
    let seen: u64 = std::fs::read_to_string(fence)
        .map_err(|e| e.to_string())?
        .trim()
        .parse()
        .unwrap_or(0);
    if token <= seen {
        return Err(format!(
            "stale fencing token {token}: the counter has seen {seen}"
        ));
    }
    increment(counter).await.map_err(|e| e.to_string())?;
    std::fs::write(fence, format!("{token}\n")).map_err(|e| e.to_string())
}

async fn worker(args: Args) -> Result<(), String> {
    let nodes = std::env::var("REDLOCK_NODES").map_err(|_| "REDLOCK_NODES is not set")?;
    let client = Client::builder(nodes.split(',').map(str::to_string))
        .ttl(Duration::from_secs(5))
        .attempts(100_000)
        .retry_delay(Duration::from_millis(10), Duration::from_millis(8))
        .fencing(args.fence.is_some())
        .build()
        .map_err(|e| e.to_string())?;
    let stats = Arc::new(tokio::sync::Mutex::new(Vec::<String>::new()));
    let mut tasks = Vec::new();
    for _ in 0..args.tasks {
        let (client, stats) = (client.clone(), stats.clone());
        let (counter, resource, rounds, fence) = (
            args.counter.clone(),
            args.resource.clone(),
            args.rounds,
            args.fence.clone(),
        );
        tasks.push(tokio::spawn(async move {
            for _ in 0..rounds {
                let started = Instant::now();
                let lock = client
                    .lock_with(&[&resource], LockOptions::new())
                    .await
                    .map_err(|e| e.to_string())?;
                let fencing = lock
                    .fencing_token()
                    .map_or_else(String::new, |t| format!(",\"fencing_token\":{t}"));
                let line = format!(
                    "{{\"event\":\"acquired\",\"attempts\":{},\"acquire_us\":{}{fencing}}}",
                    lock.attempts(),
                    started.elapsed().as_micros()
                );
                match (&fence, lock.fencing_token()) {
                    (Some(fence), Some(token)) => fenced_increment(&counter, fence, token).await?,
                    _ => increment(&counter).await.map_err(|e| e.to_string())?,
                }
                lock.release().await.map_err(|e| e.to_string())?;
                stats.lock().await.push(line);
            }
            Ok::<(), String>(())
        }));
    }
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    client.wait_idle(Duration::from_secs(2)).await;
    let lines = stats.lock().await.join("\n");
    std::fs::write(&args.stats, format!("{lines}\n")).map_err(|e| e.to_string())
}

async fn unlocked(args: Args) -> Result<(), String> {
    let mut tasks = Vec::new();
    for _ in 0..args.tasks {
        let (counter, rounds) = (args.counter.clone(), args.rounds);
        tasks.push(tokio::spawn(async move {
            for _ in 0..rounds {
                increment(&counter).await?;
            }
            Ok::<(), std::io::Error>(())
        }));
    }
    for task in tasks {
        task.await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(us: u64) -> String {
    format!("{:.2} ms", us as f64 / 1000.0)
}

/// A number in a flat JSON object line, e.g. `"attempts":3`.
fn field(line: &str, name: &str) -> Option<u64> {
    let key = format!("\"{name}\":");
    let start = line.find(&key)? + key.len();
    let digits: String = line[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn summary(args: Args) -> Result<bool, String> {
    let mut rows = Vec::new();
    let mut all = Vec::new();
    let (mut acquisitions, mut retries) = (0u64, 0u64);
    // The highest fencing token any worker reported, and how many acquisitions had one.
    let (mut highest_token, mut fenced) = (None::<u64>, 0u64);
    for path in &args.rest {
        let name = path
            .file_stem()
            .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut latencies = Vec::new();
        let mut worker_retries = 0;
        for line in text.lines().filter(|l| l.starts_with('{')) {
            if !line.contains("\"event\":\"acquired\"") {
                continue;
            }
            let attempts = field(line, "attempts").unwrap_or(1);
            worker_retries += attempts.saturating_sub(1);
            latencies.push(field(line, "acquire_us").unwrap_or(0));
            if let Some(token) = field(line, "fencing_token") {
                fenced += 1;
                highest_token = highest_token.max(Some(token));
            }
        }
        latencies.sort_unstable();
        acquisitions += latencies.len() as u64;
        retries += worker_retries;
        all.extend_from_slice(&latencies);
        rows.push((name, latencies, worker_retries));
    }
    all.sort_unstable();
    let counter: u64 = std::fs::read_to_string(&args.counter)
        .map_err(|e| format!("{}: {e}", args.counter.display()))?
        .trim()
        .parse()
        .map_err(|e| format!("the counter is not a number: {e}"))?;
    println!();
    println!(
        "{:<16} {:>12} {:>18} {:>12} {:>12}",
        "worker", "acquisitions", "contention retries", "p50 acquire", "p99 acquire"
    );
    println!("{}", "-".repeat(74));
    for (name, latencies, worker_retries) in &rows {
        println!(
            "{:<16} {:>12} {:>18} {:>12} {:>12}",
            name,
            latencies.len(),
            worker_retries,
            ms(percentile(latencies, 50.0)),
            ms(percentile(latencies, 99.0))
        );
    }
    println!("{}", "-".repeat(74));
    println!(
        "{:<16} {:>12} {:>18} {:>12} {:>12}",
        "all",
        acquisitions,
        retries,
        ms(percentile(&all, 50.0)),
        ms(percentile(&all, 99.0))
    );
    let lost = acquisitions as i64 - counter as i64;
    println!();
    println!("counter: expected {acquisitions}, final {counter}, lost updates {lost}");
    match highest_token {
        Some(token) => println!(
            "fencing: {fenced} of {acquisitions} acquisitions carried a token (the workers \
             that report one), highest {token}"
        ),
        None => println!("fencing: no worker reported a fencing token"),
    }
    Ok(lost == 0 && acquisitions > 0)
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let Some((command, rest)) = argv.split_first() else {
        return usage();
    };
    let Some(args) = parse(rest) else {
        return usage();
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("demo: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match command.as_str() {
        "worker" => runtime.block_on(worker(args)).map(|()| true),
        "unlocked" => runtime.block_on(unlocked(args)).map(|()| true),
        "summary" => summary(args),
        _ => return usage(),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("demo: {e}");
            ExitCode::FAILURE
        }
    }
}
