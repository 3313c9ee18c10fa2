//! Real Redis nodes for the integration tests, started and stopped by
//! `scripts/redis-nodes.sh`. A missing `redis-server` makes the test fail (the script
//! installs it when it can, and says what to install when it cannot).
#![allow(dead_code)]

use std::ops::Deref;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn script() -> PathBuf {
    repo_root().join("scripts/redis-nodes.sh")
}

/// A set of nodes on `base_port..base_port + n`, stopped when dropped (if owned).
pub struct Nodes {
    pub base_port: u16,
    pub urls: Vec<String>,
    owned: bool,
}

impl Nodes {
    pub fn start(base_port: u16) -> Nodes {
        Nodes::start_with(base_port, &[])
    }

    pub fn start_with(base_port: u16, extra: &[&str]) -> Nodes {
        let output = Command::new(script())
            .arg("start")
            .args(["--base-port", &base_port.to_string()])
            .args(extra)
            .output()
            .expect("run scripts/redis-nodes.sh");
        assert!(
            output.status.success(),
            "scripts/redis-nodes.sh start failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let urls = String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(str::to_string)
            .collect::<Vec<_>>();
        assert!(!urls.is_empty(), "no URLs printed");
        Nodes {
            base_port,
            urls,
            owned: true,
        }
    }

    pub fn run(&self, command: &str, index: Option<usize>) -> String {
        let mut cmd = Command::new(script());
        cmd.arg(command);
        if let Some(index) = index {
            cmd.arg(index.to_string());
        }
        let output = cmd
            .args(["--base-port", &self.base_port.to_string()])
            .output()
            .expect("run scripts/redis-nodes.sh");
        assert!(
            output.status.success(),
            "scripts/redis-nodes.sh {command} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    }

    pub fn pause(&self, index: usize) {
        self.run("pause", Some(index));
    }
    pub fn resume(&self, index: usize) {
        self.run("resume", Some(index));
    }
    pub fn kill(&self, index: usize) {
        self.run("kill", Some(index));
    }
    pub fn restart(&self, index: usize) {
        self.run("restart", Some(index));
    }

    pub fn port(&self, index: usize) -> u16 {
        self.base_port + index as u16
    }

    /// A plain connection to node `index`, for looking at keys behind the client's back.
    pub fn conn(&self, index: usize) -> redis::Connection {
        let client = redis::Client::open(self.urls[index].as_str()).expect("URL");
        let conn = client
            .get_connection_with_timeout(Duration::from_secs(2))
            .expect("connect to node");
        conn.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        conn
    }

    pub fn get(&self, index: usize, key: &str) -> Option<String> {
        redis::cmd("GET")
            .arg(key)
            .query(&mut self.conn(index))
            .expect("GET")
    }

    pub fn pttl(&self, index: usize, key: &str) -> i64 {
        redis::cmd("PTTL")
            .arg(key)
            .query(&mut self.conn(index))
            .expect("PTTL")
    }

    pub fn set(&self, index: usize, key: &str, value: &str, ttl_ms: u64) {
        let _: () = redis::cmd("SET")
            .arg(key)
            .arg(value)
            .arg("PX")
            .arg(ttl_ms)
            .query(&mut self.conn(index))
            .expect("SET");
    }

    pub fn del(&self, index: usize, key: &str) {
        let _: i64 = redis::cmd("DEL")
            .arg(key)
            .query(&mut self.conn(index))
            .expect("DEL");
    }

    /// The values of `key` on every node (None where absent).
    pub fn values(&self, key: &str) -> Vec<Option<String>> {
        (0..self.urls.len()).map(|i| self.get(i, key)).collect()
    }

    /// Polls until `check` holds, for at most `limit`.
    pub fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
        let end = Instant::now() + limit;
        loop {
            if check() {
                return true;
            }
            if Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        let _ = Command::new(script())
            .arg("stop")
            .args(["--base-port", &self.base_port.to_string()])
            .status();
    }
}

/// One five-node set shared by the tests of a binary that inject no faults (each uses
/// its own keys). Started by the first test that asks, stopped when the last handle
/// is dropped.
static SHARED: Mutex<(usize, Option<Nodes>)> = Mutex::new((0, None));

pub struct SharedNodes(Nodes);

pub fn shared(base_port: u16) -> SharedNodes {
    let mut shared = SHARED.lock().unwrap_or_else(|p| p.into_inner());
    if shared.1.is_none() {
        shared.1 = Some(Nodes::start(base_port));
    }
    shared.0 += 1;
    let nodes = shared.1.as_ref().unwrap();
    SharedNodes(Nodes {
        base_port: nodes.base_port,
        urls: nodes.urls.clone(),
        owned: false,
    })
}

impl Deref for SharedNodes {
    type Target = Nodes;
    fn deref(&self) -> &Nodes {
        &self.0
    }
}

impl Drop for SharedNodes {
    fn drop(&mut self) {
        let mut shared = SHARED.lock().unwrap_or_else(|p| p.into_inner());
        shared.0 -= 1;
        if shared.0 == 0 {
            // Stops the set.
            shared.1.take();
        }
    }
}

/// An example of this crate, built by `cargo test` next to the test binaries.
pub fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe
        .parent()
        .and_then(|deps| deps.parent())
        .unwrap()
        .join("examples")
        .join(name);
    assert!(
        path.exists(),
        "{} is missing: run `cargo test -p redlock-client` (it builds the examples)",
        path.display()
    );
    path
}

/// One test of a file at a time where tests share their nodes (a test binary's tests
/// run on threads of one process): take this guard first.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner())
}

/// A two-thread Tokio runtime for a test.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A client of `nodes` whose retry delay is `delay` exactly (no jitter): a waiter that
/// gets the lock sooner than that after a failed attempt was woken by a notice.
pub fn client_with_retry_delay(nodes: &Nodes, delay: Duration) -> redlock_client::Client {
    redlock_client::Client::builder(nodes.urls.clone())
        .retry_delay(delay, Duration::ZERO)
        .build()
        .unwrap()
}
