//! `redlock`: Redlock distributed locks from the shell.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::{Args, Parser, Subcommand};
use redlock_client::{
    Client, Error, ErrorClass, ExtendReport, KeyStatus, Lock, LockOptions, NodeCause, NodeReport,
    NodeResult, ReleaseReport, RetryProgress,
};
use serde_json::{json, Value};

mod signals;

/// Exit statuses. `exit_status` maps every error to one of them; the table in `--help`
/// (AFTER_HELP) lists them, and the tests check both.
mod status {
    /// An extension or release that did not do what was asked.
    pub const FAILED: u8 = 1;
    /// Bad arguments, an invalid configuration, node URL or CA file.
    pub const USAGE: u8 = 2;
    /// Too many nodes failing or unreachable for a quorum (EX_UNAVAILABLE).
    pub const UNAVAILABLE: u8 = 69;
    /// Held by someone else, or exec's lock lost while the command ran (EX_TEMPFAIL).
    pub const HELD_ELSEWHERE: u8 = 75;
    /// A node refused our credentials or its TLS certificate was refused (EX_NOPERM).
    pub const AUTH: u8 = 77;
    /// exec: the command could not be run (not executable).
    pub const CANNOT_EXECUTE: u8 = 126;
    /// exec: the command was not found.
    pub const NOT_FOUND: u8 = 127;
}

const ABOUT: &str = "Redlock distributed locks over independent Redis nodes, from the shell.";

const AFTER_HELP: &str = "\
Nodes come from --nodes or REDLOCK_NODES (comma-separated URLs); the default is
redis://127.0.0.1:6379. URLs take a password (redis://:PASSWORD@host:port) and TLS
(rediss://host:port; --tls-ca-cert for a private CA).

Exit status:
  0    success (exec: the command's own status)
  1    extend: not extended (the lock is lost); release: no node held this token
  2    bad arguments, configuration, node URL or CA file
  69   too many nodes failing or unreachable for a quorum (retrying may help
       once they are back; the message lists each node's error)
  75   held by someone else (every node answered; try again later), or exec's
       lock was lost while the command ran
  77   a node refused the password (NOAUTH, WRONGPASS) or the TLS handshake
       failed (certificate not trusted): fix the configuration, do not retry
  126  exec: the command could not be run; 127: not found
  128+N  redlock or exec's command ended by signal N. exec passes every signal
       that would end redlock on to the command (SIGINT, SIGQUIT and SIGHUP from
       the terminal reach it directly), waits for it and releases the lock; if
       redlock is killed outright (SIGKILL) the command gets SIGKILL too

Waiting: --wait DURATION (like flock -w) keeps trying until then instead of
--retry times, and wakes up as soon as the holder releases (release notices);
giving up exits with 75 as any other \"held elsewhere\". DURATION is seconds
(fractions allowed) or a number with ms, s or m: --wait 10, --wait 1.5s,
--wait 500ms. --wait 0 tries once.

Fencing: --fencing gives the lock a fencing token, a number that strictly
increases with every fenced acquisition of the resource (exec: in
REDLOCK_FENCING_TOKEN; acquire --json: \"fencing_token\"). Pass it to the
protected resource, which refuses writes with a token lower than one it has
seen. Off by default: it costs one more round trip per acquisition and keeps a
counter key per resource on every node forever ({RESOURCE}:fence), and it helps
only a resource that checks it.

Exiting: an operation decides at the quorum, and some nodes' replies may
still be out. Before exiting, redlock waits for them, each until its deadline
(--node-timeout): a release then reports how every node ended (\"released R
on 5 of 5 nodes\" when all five deleted the key; a node silent at its
deadline counts as `timeout`), and the slower nodes get what was sent to
them: an acquisition's key on more nodes than the quorum (it survives more
node failures), a release finished and confirmed on a slow but healthy node.
For a node that does not answer at all (stopped, unreachable) the wait buys
nothing: its key expires with its TTL. So with a node down each run costs
one node timeout more. --exit-at-quorum skips the wait: the report then
counts the nodes that answered before the decision (\"released R (quorum
confirmed: 3 of 5 nodes deleted it; 2 not awaited)\", JSON \"awaited_all\":
false, those nodes `pending`), and what was not yet written to a slower node
ends with the process (a key there expires with its TTL).

Limits: --ttl (acquire, exec, extend) and --retry-delay from 1 ms to 10^12
ms; --retry-jitter and --grace from 0 to 10^12 ms, the jitter less than the
delay; --node-timeout from 1 ms to a third of the TTL; --wait from 0 to 10^12
ms; --retry at most 999999; node URLs redis:// or rediss:// with a port from 1
to 65535. A resource name longer than 64 bytes is cut to its first 64 bytes
and \"…\" in messages (not in JSON).

Examples:
  redlock --nodes redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379 \\
      exec nightly-report --ttl 30000 --auto-extend -- ./make-report.sh
  redlock exec backup --wait 30 -- ./backup.sh
  redlock exec ledger --fencing -- sh -c './append.sh --token \"$REDLOCK_FENCING_TOKEN\"'
  TOKEN=$(redlock acquire deploy --ttl 60000)
  redlock extend deploy \"$TOKEN\" --ttl 60000
  redlock release deploy \"$TOKEN\"
  redlock status deploy --json";

#[derive(Parser)]
#[command(name = "redlock", version, about = ABOUT, after_help = AFTER_HELP)]
struct Cli {
    /// Redis nodes, comma-separated URLs (redis://host:port, redis://:PASSWORD@host:port;
    /// rediss:// for TLS).
    #[arg(
        long,
        global = true,
        env = "REDLOCK_NODES",
        default_value = "redis://127.0.0.1:6379",
        value_delimiter = ','
    )]
    nodes: Vec<String>,

    /// Machine-readable output: one JSON object on stdout (exec: JSON lines on stderr).
    #[arg(long, global = true)]
    json: bool,

    /// No progress line while retrying, no messages except errors.
    #[arg(long, short, global = true)]
    quiet: bool,

    /// How long one node may take to answer one round, in milliseconds (default: the
    /// smaller of 50 ms and a tenth of the TTL).
    #[arg(long, global = true, value_name = "MS", allow_hyphen_values = true,
          value_parser = millis(1, MAX_MS))]
    node_timeout: Option<u64>,

    /// Bytes put in front of the resource name to form the key.
    #[arg(long, global = true, value_name = "PREFIX")]
    key_prefix: Option<String>,

    /// A CA certificate (PEM file) for rediss:// nodes, instead of the system's roots.
    #[arg(long, global = true, value_name = "FILE")]
    tls_ca_cert: Option<std::path::PathBuf>,

    /// Exit as soon as a quorum decided, without waiting for the other nodes' replies
    /// (see "Exiting" below): faster with a node down, but a release's report counts
    /// only the nodes that answered before the decision.
    #[arg(long, global = true)]
    exit_at_quorum: bool,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run COMMAND while holding the lock on RESOURCE, then release it.
    ///
    /// The command sees REDLOCK_RESOURCE, REDLOCK_TOKEN, REDLOCK_VALID_UNTIL_MS (Unix
    /// time in milliseconds when the first lease ends) and, with --fencing,
    /// REDLOCK_FENCING_TOKEN in its environment. With
    /// --auto-extend the lock is extended while the command runs; without it the command
    /// may run for the lock's validity only. If the lock is lost, the command gets
    /// SIGTERM, then SIGKILL after --grace, and redlock exits with 75. Every signal
    /// that would end redlock (SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1, ...) is
    /// passed on to the command (SIGINT, SIGQUIT and SIGHUP from a terminal reach it
    /// directly); redlock waits for it and then releases the lock. If redlock itself
    /// is killed (SIGKILL), the command gets SIGKILL. Otherwise redlock exits with the
    /// command's status.
    Exec {
        /// The resource to lock.
        resource: String,
        #[command(flatten)]
        acquire: AcquireArgs,
        /// Keep extending the lock while the command runs.
        #[arg(long)]
        auto_extend: bool,
        /// At most this many automatic extensions (default: unbounded).
        #[arg(long, value_name = "N", requires = "auto_extend")]
        max_extensions: Option<u32>,
        /// After SIGTERM on loss, wait this long before SIGKILL, in milliseconds.
        #[arg(long, value_name = "MS", default_value_t = 5000, allow_hyphen_values = true,
              value_parser = millis(0, MAX_MS))]
        grace: u64,
        /// The command and its arguments.
        #[arg(required = true, last = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Acquire the lock and print its token (the lock stays until released or expired).
    ///
    /// With --json the object also carries "fencing_token" (a number with --fencing,
    /// null without).
    Acquire {
        /// The resource to lock.
        resource: String,
        #[command(flatten)]
        acquire: AcquireArgs,
    },
    /// Extend a lock held with TOKEN by --ttl from now. Never re-creates an expired lock.
    Extend {
        /// The locked resource.
        resource: String,
        /// The token `acquire` printed.
        token: String,
        /// New time to live, in milliseconds.
        #[arg(long, value_name = "MS", default_value_t = 30_000, allow_hyphen_values = true,
              value_parser = millis(1, MAX_MS))]
        ttl: u64,
    },
    /// Release a lock held with TOKEN. Never deletes a key holding another token.
    Release {
        /// The locked resource.
        resource: String,
        /// The token `acquire` printed.
        token: String,
    },
    /// Show which token each node holds for RESOURCE and for how long (GET and PTTL).
    Status {
        /// The resource to look at.
        resource: String,
    },
}

#[derive(Args, Clone)]
struct AcquireArgs {
    /// Time to live of the lock, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 30_000, allow_hyphen_values = true,
          value_parser = millis(1, MAX_MS))]
    ttl: u64,
    /// Retries after a failed attempt (attempts = N + 1).
    #[arg(long, value_name = "N", default_value_t = redlock_client::core::DEFAULT_ATTEMPTS - 1)]
    retry: u32,
    /// Base delay between attempts, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 200, allow_hyphen_values = true,
          value_parser = millis(1, MAX_MS))]
    retry_delay: u64,
    /// Random jitter around the delay, in milliseconds (at most the delay).
    #[arg(long, value_name = "MS", default_value_t = 100, allow_hyphen_values = true,
          value_parser = millis(0, MAX_MS))]
    retry_jitter: u64,
    /// Wait up to DURATION for the lock (like flock -w), instead of --retry attempts:
    /// seconds (fractions allowed), or a number with ms, s or m (500ms, 1.5s, 2m).
    /// A release by the holder wakes the wait at once. Giving up exits with 75.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, conflicts_with = "retry",
          allow_hyphen_values = true)]
    wait: Option<Duration>,
    /// Take a fencing token with the lock (exec: REDLOCK_FENCING_TOKEN; acquire --json:
    /// "fencing_token"). Off by default: one more round trip, and a counter key per
    /// resource on every node that never expires.
    #[arg(long)]
    fencing: bool,
}

/// The longest duration any option takes, in milliseconds: the core's largest TTL
/// (10^12 ms, about 31 years). Beyond it nothing could be meant.
const MAX_MS: u64 = redlock_client::core::MAX_TTL_MS;

/// A whole number of milliseconds from `min` to `max`; the message names the range.
fn millis(min: u64, max: u64) -> impl Fn(&str) -> Result<u64, String> + Clone + Send + Sync {
    move |text: &str| {
        let range = || format!("a whole number of milliseconds from {min} to {max}");
        let value: u64 = text
            .trim()
            .parse()
            .map_err(|_| format!("{:?} is not {}", clipped(text), range()))?;
        if (min..=max).contains(&value) {
            Ok(value)
        } else {
            Err(format!("{value} is out of range: give {}", range()))
        }
    }
}

/// Text quoted in a message, cut to 64 bytes.
fn clipped(text: &str) -> std::borrow::Cow<'_, str> {
    shown(text)
}

/// `--wait`'s DURATION: seconds as `flock -w` takes them (`10`, `0.5`), or a number with
/// `ms`, `s` or `m`.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| c.is_ascii_alphabetic()) {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let scale = match unit {
        "ms" => 0.001,
        "s" => 1.0,
        "m" => 60.0,
        other => {
            return Err(format!(
                "unknown unit {:?} in {:?}: use ms, s or m",
                clipped(other),
                clipped(text)
            ))
        }
    };
    let shown = clipped(text);
    let value: f64 = number.trim().parse().map_err(|_| {
        format!("{shown:?} is not a duration (e.g. 10, 1.5s, 500ms): from 0 to {MAX_MS} ms")
    })?;
    if !value.is_finite() || value < 0.0 {
        return Err(format!(
            "{shown:?} is not a duration from 0 to {MAX_MS} ms (10^12 ms)"
        ));
    }
    match Duration::try_from_secs_f64(value * scale) {
        Ok(duration) if duration <= Duration::from_millis(MAX_MS) => Ok(duration),
        _ => Err(format!(
            "{shown:?} is too long: a wait is at most {MAX_MS} ms (10^12 ms)"
        )),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("redlock: cannot start: {error}");
            return ExitCode::from(status::FAILED);
        }
    };
    let code = runtime.block_on(run(cli));
    runtime.shutdown_background();
    ExitCode::from(code)
}

struct Output {
    json: bool,
    quiet: bool,
    /// `--exit-at-quorum`: no waiting for replies past a decision.
    exit_at_quorum: bool,
}

impl Output {
    fn error(&self, message: &str) {
        eprintln!("redlock: {message}");
    }

    fn info(&self, message: &str) {
        if !self.quiet && !self.json {
            eprintln!("redlock: {message}");
        }
    }

    /// One JSON line on stderr (exec's events; stdout belongs to the command).
    fn event(&self, value: Value) {
        if self.json {
            let mut stderr = std::io::stderr().lock();
            let _ = writeln!(stderr, "{value}");
        }
    }
}

async fn run(cli: Cli) -> u8 {
    let out = Output {
        json: cli.json,
        quiet: cli.quiet,
        exit_at_quorum: cli.exit_at_quorum,
    };
    let (ttl, acquire) = match &cli.command {
        Command::Exec { acquire, .. } | Command::Acquire { acquire, .. } => {
            (acquire.ttl, Some(acquire.clone()))
        }
        Command::Extend { ttl, .. } => (*ttl, None),
        _ => (30_000, None),
    };
    let client = match build_client(&cli, ttl, acquire.as_ref(), &cli.command) {
        Ok(client) => client,
        Err(message) => {
            out.error(&message);
            return status::USAGE;
        }
    };
    let code = match cli.command {
        Command::Exec {
            resource,
            acquire,
            auto_extend,
            grace,
            command,
            ..
        } => {
            let run = Run {
                resource: &resource,
                acquire: &acquire,
                auto_extend,
                grace_ms: grace,
            };
            exec(&client, &out, &run, &command).await
        }
        Command::Acquire { resource, acquire } => {
            acquire_command(&client, &out, &resource, &acquire).await
        }
        Command::Extend {
            resource,
            token,
            ttl,
        } => extend_command(&client, &out, &resource, &token, ttl).await,
        Command::Release { resource, token } => {
            release_command(&client, &out, &resource, &token).await
        }
        Command::Status { resource } => status_command(&client, &out, &resource).await,
    };
    // Exiting (AFTER_HELP, "Exiting"): commands still out after an early decision get
    // until their deadlines (at most one node timeout from now), unless --exit-at-quorum.
    if !out.exit_at_quorum {
        client.wait_idle(client.config().node_timeout()).await;
    }
    code
}

fn build_client(
    cli: &Cli,
    ttl_ms: u64,
    acquire: Option<&AcquireArgs>,
    command: &Command,
) -> Result<Client, String> {
    let urls: Vec<String> = cli
        .nodes
        .iter()
        .map(|u| u.trim().to_string())
        .filter(|u| !u.is_empty())
        .collect();
    if urls.is_empty() {
        return Err(String::from("no nodes: give --nodes or REDLOCK_NODES"));
    }
    let mut builder = Client::builder(urls).ttl(Duration::from_millis(ttl_ms));
    if let Some(acquire) = acquire {
        builder = builder
            .attempts(acquire.retry.saturating_add(1))
            .retry_delay(
                Duration::from_millis(acquire.retry_delay),
                Duration::from_millis(acquire.retry_jitter),
            );
    }
    if let Command::Exec { max_extensions, .. } = command {
        builder = builder.max_extensions(*max_extensions);
    }
    if let Some(ms) = cli.node_timeout {
        if ms > ttl_ms / 3 {
            return Err(format!(
                "--node-timeout {ms} ms is too long for a TTL of {ttl_ms} ms: it must be from \
                 1 ms to a third of the TTL ({} ms)",
                ttl_ms / 3
            ));
        }
        builder = builder.node_timeout(Duration::from_millis(ms));
    }
    if let Some(prefix) = &cli.key_prefix {
        builder = builder.key_prefix(prefix.as_bytes());
    }
    if let Some(path) = &cli.tls_ca_cert {
        let pem = std::fs::read(path)
            .map_err(|e| format!("cannot read --tls-ca-cert {}: {e}", path.display()))?;
        builder = builder.tls_root_certificate(pem);
    }
    builder.build().map_err(|e| e.to_string())
}

fn node_json(nodes: &[NodeReport]) -> Value {
    Value::Array(
        nodes
            .iter()
            .map(|n| {
                let mut entry = json!({
                    "index": n.index,
                    "url": n.url,
                    "result": n.result.code(),
                });
                if let NodeResult::Error(text) = &n.result {
                    entry["error"] = Value::String(text.clone());
                }
                entry
            })
            .collect(),
    )
}

/// Unix time in milliseconds `validity` from now: what another process can compare.
fn unix_ms_after(validity: Duration) -> u128 {
    SystemTime::now()
        .checked_add(validity)
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis())
}

/// The progress line while waiting on retries: rewritten in place on a terminal (the
/// flag says whether a line is open), at most one line a second otherwise.
fn progress(
    out: &Output,
    resource: &str,
    drawn: Arc<AtomicBool>,
) -> Option<impl Fn(RetryProgress) + Send + Sync + 'static> {
    if out.quiet || out.json {
        return None;
    }
    let terminal = std::io::stderr().is_terminal();
    let last: Mutex<Option<Instant>> = Mutex::new(None);
    let resource = shown(resource).into_owned();
    Some(move |p: RetryProgress| {
        let line = match p.wait {
            Some(wait) => format!(
                "redlock: waiting for {resource}: attempt {}, {:.1} s of {:.1} s",
                p.attempt,
                p.elapsed.as_secs_f64(),
                wait.as_secs_f64()
            ),
            None => format!(
                "redlock: waiting for {resource}: attempt {} of {}, {:.1} s so far",
                p.attempt,
                p.attempts,
                p.elapsed.as_secs_f64()
            ),
        };
        if terminal {
            eprint!("\r{line}\x1b[K");
            drawn.store(true, Ordering::Relaxed);
            return;
        }
        let mut last = last.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_none_or(|at| at.elapsed() >= Duration::from_secs(1)) {
            *last = Some(Instant::now());
            eprintln!("{line}");
        }
    })
}

async fn lock(
    client: &Client,
    out: &Output,
    resource: &str,
    acquire: &AcquireArgs,
    auto_extend: bool,
) -> Result<Lock, Error> {
    let mut options = LockOptions::new()
        .auto_extend(auto_extend)
        .fencing(acquire.fencing);
    if let Some(wait) = acquire.wait {
        options = options.wait(wait);
    }
    let drawn = Arc::new(AtomicBool::new(false));
    if let Some(callback) = progress(out, resource, Arc::clone(&drawn)) {
        options = options.on_retry(callback);
    }
    let result = client.lock_with(&[resource], options).await;
    if drawn.load(Ordering::Relaxed) {
        // Close the in-place progress line.
        eprintln!();
    }
    result
}

fn report_not_acquired(out: &Output, resource: &str, error: &Error) {
    if !out.json {
        out.error(&format!("{}: {error}", shown(resource)));
    }
}

fn failure_json(resource: &str, error: &Error, started: Instant) -> Value {
    let mut value = json!({
        "event": "not_acquired",
        "resource": resource,
        "error": error.to_string(),
        "waited_ms": started.elapsed().as_millis() as u64,
    });
    if let Error::NotAcquired(n) = error {
        value["reason"] = Value::String(n.reason.code().to_string());
        value["attempts"] = json!(n.attempts);
        value["nodes"] = node_json(&n.nodes);
    }
    value
}

/// The exit status for an error: the one mapping from the core's error class (and each
/// node's cause) to the table in `--help`. Held elsewhere (conflicts alone decided) is
/// 75; nodes failing is 77 when a node refused our credentials or its TLS certificate,
/// otherwise 69; a lost or gone lock is 1.
fn exit_status(error: &Error) -> u8 {
    let auth_or_tls = error
        .nodes()
        .iter()
        .any(|node| matches!(node.cause(), Some(NodeCause::Auth | NodeCause::Tls)));
    match error.class() {
        Some(ErrorClass::InvalidArgument) => status::USAGE,
        Some(ErrorClass::HeldElsewhere) => status::HELD_ELSEWHERE,
        Some(ErrorClass::NodesFailing) if auth_or_tls => status::AUTH,
        Some(ErrorClass::NodesFailing) => status::UNAVAILABLE,
        _ => status::FAILED,
    }
}

async fn acquire_command(
    client: &Client,
    out: &Output,
    resource: &str,
    acquire: &AcquireArgs,
) -> u8 {
    // A signal while waiting ends the wait and releases what the attempt set.
    let mut signals = match signals::Signals::install() {
        Ok(signals) => signals,
        Err(error) => {
            out.error(&format!("cannot watch signals: {error}"));
            return status::FAILED;
        }
    };
    let started = Instant::now();
    let acquired = tokio::select! {
        acquired = lock(client, out, resource, acquire, false) => acquired,
        caught = signals.recv() => {
            out.info(&format!("{}: stopped by signal {} while acquiring", shown(resource), caught.signal));
            return signal_status(caught.signal);
        }
    };
    match acquired {
        Ok(lock) => {
            let validity = lock.validity();
            if out.json {
                println!(
                    "{}",
                    json!({
                        "resource": resource,
                        "token": lock.token(),
                        "fencing_token": lock.fencing_token(),
                        "validity_ms": validity.as_millis() as u64,
                        "valid_until_ms": unix_ms_after(validity) as u64,
                        "attempts": lock.attempts(),
                        "acquire_us": started.elapsed().as_micros() as u64,
                        "nodes": node_json(lock.nodes()),
                    })
                );
            } else {
                println!("{}", lock.token());
                let fencing = lock
                    .fencing_token()
                    .map_or_else(String::new, |token| format!(", fencing token {token}"));
                out.info(&format!(
                    "acquired {} for {} ms{fencing}",
                    shown(resource),
                    validity.as_millis()
                ));
            }
            // The lock outlives this process: release it with `redlock release`.
            lock.leak();
            0
        }
        Err(error) => {
            if out.json {
                println!("{}", failure_json(resource, &error, started));
            }
            report_not_acquired(out, resource, &error);
            exit_status(&error)
        }
    }
}

fn extend_json(resource: &str, result: &Result<ExtendReport, Error>) -> Value {
    match result {
        Ok(report) => json!({
            "resource": resource,
            "extended": true,
            "validity_ms": report.validity.as_millis() as u64,
            "valid_until_ms": unix_ms_after(report.validity) as u64,
            "nodes": node_json(&report.nodes),
        }),
        Err(error) => {
            let mut value = json!({
                "resource": resource,
                "extended": false,
                "error": error.to_string(),
            });
            if let Error::NotExtended(n) = error {
                value["reason"] = Value::String(n.reason.code().to_string());
                value["lost"] = Value::Bool(n.lost);
                value["nodes"] = node_json(&n.nodes);
            }
            value
        }
    }
}

async fn extend_command(
    client: &Client,
    out: &Output,
    resource: &str,
    token: &str,
    ttl: u64,
) -> u8 {
    let result = client
        .extend_token(&[resource], token, Duration::from_millis(ttl))
        .await;
    if out.json {
        println!("{}", extend_json(resource, &result));
    }
    match result {
        Ok(report) => {
            if !out.json && !out.quiet {
                println!(
                    "extended {}: valid for {} ms",
                    shown(resource),
                    report.validity.as_millis()
                );
            }
            0
        }
        Err(error) => {
            if !out.json {
                out.error(&format!("{}: {error}", shown(resource)));
            }
            exit_status(&error)
        }
    }
}

fn release_json(resource: &str, report: &ReleaseReport, awaited_all: bool) -> Value {
    json!({
        "resource": resource,
        "released": report.released,
        "nodes": node_json(&report.nodes),
        "awaited_all": awaited_all,
    })
}

/// The release line: how many nodes deleted the key, out of all of them once every
/// reply was awaited; with `--exit-at-quorum`, what the quorum confirmed and how many
/// replies were not awaited.
fn release_line(resource: &str, report: &ReleaseReport) -> String {
    let total = report.nodes.len();
    let pending = report
        .nodes
        .iter()
        .filter(|node| matches!(node.result, NodeResult::Pending | NodeResult::NotAsked))
        .count();
    if pending == 0 {
        format!(
            "released {} on {} of {total} nodes",
            shown(resource),
            report.released
        )
    } else {
        format!(
            "released {} (quorum confirmed: {} of {total} nodes deleted it; {pending} not \
             awaited)",
            shown(resource),
            report.released
        )
    }
}

async fn release_command(client: &Client, out: &Output, resource: &str, token: &str) -> u8 {
    let result = if out.exit_at_quorum {
        client.release_token(&[resource], token).await
    } else {
        client.release_token_settled(&[resource], token).await
    };
    match result {
        Ok(report) => {
            if out.json {
                println!("{}", release_json(resource, &report, !out.exit_at_quorum));
            } else if !out.quiet {
                println!("{}", release_line(resource, &report));
            }
            for node in &report.nodes {
                if matches!(node.result, NodeResult::Error(_) | NodeResult::Timeout) {
                    out.info(&format!("{node}"));
                }
            }
            if report.released == 0 {
                if !out.json {
                    out.error(&format!(
                        "{}: no node held this token (expired, or released already)",
                        shown(resource)
                    ));
                }
                // A quorum answered (an unconfirmed release is an error): nobody held it.
                status::FAILED
            } else {
                0
            }
        }
        Err(error) => {
            if out.json {
                let mut value = json!({
                    "resource": resource,
                    "released": 0,
                    "error": error.to_string(),
                    "awaited_all": !out.exit_at_quorum,
                });
                if let Error::NotReleased(n) = &error {
                    value["released"] = json!(n.released);
                    value["nodes"] = node_json(&n.nodes);
                }
                println!("{value}");
            }
            out.error(&format!("{}: {error}", shown(resource)));
            exit_status(&error)
        }
    }
}

/// A resource name as messages show it: whole up to 64 bytes, else its first 64 bytes
/// (at a character boundary) and "…", so a huge name never floods a message.
fn shown(resource: &str) -> std::borrow::Cow<'_, str> {
    const SHOWN: usize = 64;
    if resource.len() <= SHOWN {
        return std::borrow::Cow::Borrowed(resource);
    }
    let mut end = SHOWN;
    while !resource.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{}… ({} bytes)", &resource[..end], resource.len()))
}

async fn status_command(client: &Client, out: &Output, resource: &str) -> u8 {
    let statuses: Vec<KeyStatus> = client.inspect(resource).await;
    let quorum = client.config().quorum();
    // The token most nodes hold, for the summary line (diagnostics only).
    let mut counts: Vec<(String, usize)> = Vec::new();
    for value in statuses.iter().filter_map(|s| s.value.clone()) {
        match counts.iter_mut().find(|(v, _)| *v == value) {
            Some(entry) => entry.1 += 1,
            None => counts.push((value, 1)),
        }
    }
    counts.sort_by_key(|entry| std::cmp::Reverse(entry.1));
    if out.json {
        let nodes: Vec<Value> = statuses
            .iter()
            .map(|s| {
                json!({
                    "index": s.index,
                    "url": s.url,
                    "value": s.value,
                    "ttl_ms": s.ttl_ms,
                    "error": s.error,
                })
            })
            .collect();
        println!(
            "{}",
            json!({
                "resource": resource,
                "nodes": nodes,
                "quorum": quorum,
                "top": counts.first().map(|(token, n)| json!({"value": token, "nodes": n})),
            })
        );
        return status_exit(&statuses, quorum);
    }
    let width = statuses
        .iter()
        .map(|s| s.url.len())
        .max()
        .unwrap_or(3)
        .max(3);
    println!(
        "{:<4}  {:<width$}  {:<42}  {:>9}",
        "node", "url", "value", "pttl_ms"
    );
    for s in &statuses {
        let value = match (&s.error, &s.value) {
            (Some(error), _) => format!("(error: {error})"),
            (None, Some(value)) => value.clone(),
            (None, None) => String::from("-"),
        };
        let ttl = s
            .ttl_ms
            .map_or_else(|| String::from("-"), |ms| ms.to_string());
        println!(
            "{:<4}  {:<width$}  {:<42}  {:>9}",
            s.index, s.url, value, ttl
        );
    }
    match counts.first() {
        Some((token, n)) => println!(
            "{token} is on {n} of {} nodes (a lock needs {quorum})",
            statuses.len()
        ),
        None => println!("no node holds {}", shown(resource)),
    }
    status_exit(&statuses, quorum)
}

/// `status` succeeds when a quorum of nodes answered; otherwise 77 or 69 as for a
/// failed acquisition.
fn status_exit(statuses: &[KeyStatus], quorum: usize) -> u8 {
    let failed: Vec<&str> = statuses.iter().filter_map(|s| s.error.as_deref()).collect();
    if statuses.len() - failed.len() >= quorum {
        0
    } else if failed.iter().any(|text| {
        // The core reads a node's cause from its text, as for a failed acquisition.
        let cause = NodeResult::Error((*text).to_string()).cause();
        matches!(cause, Some(NodeCause::Auth | NodeCause::Tls))
    }) {
        status::AUTH
    } else {
        status::UNAVAILABLE
    }
}

/// 128 + N, as a shell reports a process ended by signal N.
fn signal_status(signal: i32) -> u8 {
    u8::try_from((128 + signal) & 0xff).unwrap_or(status::FAILED)
}

fn exit_code(exit: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = exit.code() {
        return u8::try_from(code & 0xff).unwrap_or(status::FAILED);
    }
    match exit.signal() {
        Some(signal) => signal_status(signal),
        None => status::FAILED,
    }
}

/// What `exec` was asked to do, besides the command.
struct Run<'a> {
    resource: &'a str,
    acquire: &'a AcquireArgs,
    auto_extend: bool,
    grace_ms: u64,
}

async fn exec(client: &Client, out: &Output, run: &Run<'_>, command: &[String]) -> u8 {
    let Run {
        resource,
        acquire,
        auto_extend,
        grace_ms,
    } = *run;
    // Watch signals from the start: one that arrives while the lock is being acquired
    // ends the wait (what was set is released); one that arrives later is passed on.
    let mut signals = match signals::Signals::install() {
        Ok(signals) => signals,
        Err(error) => {
            out.error(&format!("cannot watch signals: {error}"));
            return status::FAILED;
        }
    };

    let started = Instant::now();
    let acquired = tokio::select! {
        acquired = lock(client, out, resource, acquire, auto_extend) => acquired,
        caught = signals.recv() => {
            out.info(&format!("{}: stopped by signal {} while acquiring", shown(resource), caught.signal));
            return signal_status(caught.signal);
        }
    };
    let lock = match acquired {
        Ok(lock) => lock,
        Err(error) => {
            out.event(failure_json(resource, &error, started));
            report_not_acquired(out, resource, &error);
            return exit_status(&error);
        }
    };
    let acquire_us = started.elapsed().as_micros() as u64;
    let validity = lock.validity();
    out.event(json!({
        "event": "acquired",
        "resource": resource,
        "token": lock.token(),
        "fencing_token": lock.fencing_token(),
        "attempts": lock.attempts(),
        "acquire_us": acquire_us,
        "validity_ms": validity.as_millis() as u64,
        "nodes": node_json(lock.nodes()),
    }));

    let Some((program, args)) = command.split_first() else {
        out.error("no command given");
        let _ = lock.release().await;
        return status::USAGE;
    };
    let mut child_command = tokio::process::Command::new(program);
    child_command
        .args(args)
        .env("REDLOCK_RESOURCE", resource)
        .env("REDLOCK_TOKEN", lock.token())
        .env(
            "REDLOCK_VALID_UNTIL_MS",
            unix_ms_after(validity).to_string(),
        );
    if let Some(token) = lock.fencing_token() {
        child_command.env("REDLOCK_FENCING_TOKEN", token.to_string());
    }
    signals::kill_with_parent(&mut child_command);
    let mut child = match child_command.spawn() {
        Ok(child) => child,
        Err(error) => {
            out.error(&format!("cannot run {program}: {error}"));
            let _ = lock.release().await;
            return if error.kind() == std::io::ErrorKind::NotFound {
                status::NOT_FOUND
            } else {
                status::CANNOT_EXECUTE
            };
        }
    };
    let pid = child.id();
    let lost = lock.lost();
    tokio::pin!(lost);

    let mut lost_lock = None;
    let exit = loop {
        tokio::select! {
            exit = child.wait() => break exit,
            // Passed on (unless the terminal sent it to the command too); redlock goes
            // on waiting for the command and releases the lock once it has exited.
            caught = signals.recv() => {
                if caught.forward() {
                    signals::send(pid, caught.signal);
                }
            }
            lost = &mut lost, if lost_lock.is_none() => {
                out.error(&format!("{}: lock lost: {lost}; stopping the command", shown(resource)));
                out.event(json!({
                    "event": "lost",
                    "resource": resource,
                    "reason": lost.reason.code(),
                    "nodes": node_json(&lost.nodes),
                }));
                lost_lock = Some(lost);
                signals::send(pid, libc::SIGTERM);
                match tokio::time::timeout(Duration::from_millis(grace_ms), child.wait()).await {
                    Ok(exit) => break exit,
                    Err(_) => {
                        signals::send(pid, libc::SIGKILL);
                        break child.wait().await;
                    }
                }
            }
        }
    };
    let extensions = lock.extensions();
    let release = if out.exit_at_quorum {
        lock.release().await
    } else {
        lock.release_settled().await
    };
    let code = match (&exit, &lost_lock) {
        (_, Some(_)) => status::HELD_ELSEWHERE,
        (Ok(exit), None) => exit_code(*exit),
        (Err(_), None) => status::FAILED,
    };
    if let Err(error) = &exit {
        out.error(&format!("waiting for the command failed: {error}"));
    }
    let released = match &release {
        Ok(report) => report.released,
        Err(_) => 0,
    };
    out.event(json!({
        "event": "released",
        "resource": resource,
        "released": released,
        "extensions": extensions,
        "held_ms": started.elapsed().as_millis() as u64,
        "exit_code": code,
    }));
    code
}
