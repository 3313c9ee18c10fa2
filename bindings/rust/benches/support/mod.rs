//! Shared by the benchmarks: five real nodes from `scripts/redis-nodes.sh`, and the raw
//! floor (the same commands sent with the same `redis` client, no lock logic).
#![allow(dead_code)]

pub mod floor;

use std::path::PathBuf;
use std::process::Command;

use redis::aio::MultiplexedConnection;
use redlock_client::core::{RELEASE_SCRIPT, RELEASE_SHA1};

/// Benchmarks use base port 7185 (7185-7189).
pub const BASE_PORT: u16 = 7185;

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/redis-nodes.sh")
}

/// A node set, stopped when dropped.
pub struct Nodes {
    pub urls: Vec<String>,
    /// Started by someone else: never signalled or stopped here.
    external: bool,
}

impl Nodes {
    /// Five fresh nodes on [`BASE_PORT`]; or, with `REDLOCK_BENCH_URLS` set (comma
    /// separated), nodes that already run and are left running (`scripts/bench-handoff.sh`
    /// runs every language's contenders on one node set so).
    pub fn start() -> Nodes {
        if let Ok(urls) = std::env::var("REDLOCK_BENCH_URLS") {
            return Nodes {
                urls: urls.split(',').map(str::to_string).collect(),
                external: true,
            };
        }
        let output = Command::new(script())
            .args(["start", "--base-port", &BASE_PORT.to_string()])
            .output()
            .expect("run scripts/redis-nodes.sh");
        assert!(
            output.status.success(),
            "starting nodes failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        Nodes {
            urls: String::from_utf8_lossy(&output.stdout)
                .lines()
                .map(str::to_string)
                .collect(),
            external: false,
        }
    }

    /// Whether the nodes may be frozen and thawed (not when someone else runs them).
    pub fn own(&self) -> bool {
        !self.external
    }

    pub fn signal(&self, what: &str, index: usize) {
        assert!(!self.external, "nodes started elsewhere are not signalled");
        let status = Command::new(script())
            .args([
                what,
                &index.to_string(),
                "--base-port",
                &BASE_PORT.to_string(),
            ])
            .status()
            .expect("run scripts/redis-nodes.sh");
        assert!(status.success());
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        if self.external {
            return;
        }
        let _ = Command::new(script())
            .args(["stop", "--base-port", &BASE_PORT.to_string()])
            .status();
    }
}

/// One multiplexed connection per node, the release script loaded.
pub async fn raw_connections(urls: &[String]) -> Vec<MultiplexedConnection> {
    let mut connections = Vec::new();
    for url in urls {
        let client = redis::Client::open(url.as_str()).unwrap();
        let mut connection = client.get_multiplexed_async_connection().await.unwrap();
        let _: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(RELEASE_SCRIPT)
            .query_async(&mut connection)
            .await
            .unwrap();
        connections.push(connection);
    }
    connections
}

/// The physical floor of one acquire + release: `SET key token NX PX ttl` to every
/// node at once, then the release script by `EVALSHA` to every node at once, waiting
/// for `wait_for` replies in each round (all N, or just a quorum).
pub async fn raw_cycle(
    connections: &[MultiplexedConnection],
    key: &str,
    token: &str,
    wait_for: usize,
) {
    use futures_util::stream::{FuturesUnordered, StreamExt};
    let mut sets: FuturesUnordered<_> = connections
        .iter()
        .map(|c| {
            let mut c = c.clone();
            let mut cmd = redis::cmd("SET");
            cmd.arg(key).arg(token).arg("NX").arg("PX").arg(10_000);
            async move { cmd.query_async::<redis::Value>(&mut c).await }
        })
        .collect();
    for _ in 0..wait_for {
        let _ = sets.next().await;
    }
    let mut releases: FuturesUnordered<_> = connections
        .iter()
        .map(|c| {
            let mut c = c.clone();
            let mut cmd = redis::cmd("EVALSHA");
            cmd.arg(RELEASE_SHA1).arg(1).arg(key).arg(token);
            async move { cmd.query_async::<redis::Value>(&mut c).await }
        })
        .collect();
    for _ in 0..wait_for {
        let _ = releases.next().await;
    }
}
