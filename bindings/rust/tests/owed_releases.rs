//! Releases a link owes a frozen node go out in the background once the node thaws,
//! with no further call on the client (docs/bindings.md, rules 2 and 10; the link's
//! owed releases in core/src/link.rs).
//!
//! Three of five nodes frozen (SIGSTOP) while an acquisition's `SET` is in flight to
//! them: the acquisition fails (nodes failing); once they thaw (SIGCONT) they answer
//! the `SET`, which sets the key with its full TTL (30 s here), and the links must then
//! write the releases they owe, without the caller making another call or closing the
//! client. The same for the one frozen node of a successful acquire and release.
//! Closing the client later must leave nothing behind either, and neither must closing
//! it at once right after the thaw instead of waiting.
//!
//! Both the async and the blocking client. Base ports 7950 (async) and 7955 (blocking).

mod common;

use std::time::{Duration, Instant};

use common::Nodes;
use redlock_client::Client;

const TTL: Duration = Duration::from_secs(30);
/// How long the keys may stay after the thaw: far below the 30 s TTL, far above what a
/// loaded machine needs to read a reply and write a release.
const BOUND: Duration = Duration::from_secs(5);

/// Thaws the nodes it froze, whatever happens (a failed assertion included).
struct Frozen<'a> {
    nodes: &'a Nodes,
    indices: Vec<usize>,
}

impl<'a> Frozen<'a> {
    fn freeze(nodes: &'a Nodes, indices: &[usize]) -> Frozen<'a> {
        let mut frozen = Frozen {
            nodes,
            indices: Vec::new(),
        };
        for &i in indices {
            nodes.pause(i);
            frozen.indices.push(i);
        }
        frozen
    }

    fn thaw(&mut self) {
        for i in std::mem::take(&mut self.indices) {
            self.nodes.resume(i);
        }
    }
}

impl Drop for Frozen<'_> {
    fn drop(&mut self) {
        for &i in &self.indices {
            // Never leave a stopped server behind, even while panicking.
            let _ = std::process::Command::new(common::repo_root().join("scripts/redis-nodes.sh"))
                .args(["resume", &i.to_string()])
                .args(["--base-port", &self.nodes.base_port.to_string()])
                .status();
        }
    }
}

fn exists(nodes: &Nodes, index: usize, key: &str) -> bool {
    let n: i64 = redis::cmd("EXISTS")
        .arg(key)
        .query(&mut nodes.conn(index))
        .expect("EXISTS");
    n != 0
}

fn present(nodes: &Nodes, key: &str) -> Vec<usize> {
    (0..nodes.urls.len())
        .filter(|&i| exists(nodes, i, key))
        .collect()
}

/// Polls (every 50 ms, at most [`BOUND`]) until `key` exists on no node: how long it
/// took, or the nodes that still hold it.
fn wait_gone(nodes: &Nodes, key: &str) -> Result<Duration, Vec<usize>> {
    let started = Instant::now();
    loop {
        let left = present(nodes, key);
        if left.is_empty() {
            return Ok(started.elapsed());
        }
        if started.elapsed() >= BOUND {
            return Err(left);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// How many `SET` commands node `index` ran (`INFO commandstats`).
fn set_calls(nodes: &Nodes, index: usize) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut nodes.conn(index))
        .expect("INFO");
    info.lines()
        .find_map(|line| line.strip_prefix("cmdstat_set:calls="))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().expect("a count"))
}

fn set_counts(nodes: &Nodes, indices: &[usize]) -> Vec<(usize, u64)> {
    indices.iter().map(|&i| (i, set_calls(nodes, i))).collect()
}

/// Waits (at most [`BOUND`]) until the thawed nodes ran the acquisition's `SET`: from
/// then on they hold the key until a release removes it, so a key found gone afterwards
/// was released (not merely not set yet).
fn wait_set_ran(nodes: &Nodes, before: &[(usize, u64)], name: &str) {
    let ran = Nodes::eventually(BOUND, || {
        before.iter().all(|&(i, count)| set_calls(nodes, i) > count)
    });
    assert!(
        ran,
        "{name}: the thawed nodes never ran the SET (before {before:?}, now {:?})",
        set_counts(nodes, &before.iter().map(|&(i, _)| i).collect::<Vec<_>>())
    );
}

/// The key's remaining TTL on the nodes that still hold it (for the failure message).
fn ttls(nodes: &Nodes, key: &str, left: &[usize]) -> Vec<(usize, i64)> {
    left.iter().map(|&i| (i, nodes.pttl(i, key))).collect()
}

fn builder(urls: &[String]) -> redlock_client::ClientBuilder {
    // The defaults (three attempts, the default node timeout): a failed acquisition
    // with three frozen nodes takes well under a second.
    Client::builder(urls.to_vec())
}

/// The two scenarios and the close, run by both clients through these closures.
struct Scenario<'a> {
    nodes: &'a Nodes,
    name: &'static str,
}

impl Scenario<'_> {
    fn key(&self, case: &str) -> String {
        format!("owed-{}-{case}", self.name)
    }

    /// Three nodes frozen, a failed acquisition, thaw, the keys gone with no call.
    fn three_frozen(&self, acquire_fails: impl FnOnce(&str), waiting: impl Fn(usize) -> usize) {
        let key = self.key("three");
        let sets = set_counts(self.nodes, &[2, 3, 4]);
        let mut frozen = Frozen::freeze(self.nodes, &[2, 3, 4]);
        acquire_fails(&key);
        // The SET went out to the frozen nodes, so their links hold a release for them
        // (the test would prove nothing otherwise).
        for i in [2, 3, 4] {
            assert!(waiting(i) >= 1, "{}: nothing waits for node {i}", self.name);
        }
        frozen.thaw();
        wait_set_ran(self.nodes, &sets, self.name);
        let gone = wait_gone(self.nodes, &key);
        let gone = gone.unwrap_or_else(|left| {
            panic!(
                "{}: after the thaw and no further call, the key is still on nodes {left:?} \
                 (remaining TTL, ms: {:?})",
                self.name,
                ttls(self.nodes, &key, &left)
            )
        });
        eprintln!(
            "{}: three frozen, failed acquisition: every key gone {gone:?} after the thawed nodes ran the SET",
            self.name
        );
    }

    /// One node frozen, a successful acquisition and release, thaw, the key gone.
    fn one_frozen(&self, acquire_and_release: impl FnOnce(&str), waiting: impl Fn(usize) -> usize) {
        let key = self.key("one");
        let sets = set_counts(self.nodes, &[4]);
        let mut frozen = Frozen::freeze(self.nodes, &[4]);
        acquire_and_release(&key);
        assert!(waiting(4) >= 1, "{}: nothing waits for node 4", self.name);
        frozen.thaw();
        wait_set_ran(self.nodes, &sets, self.name);
        let gone = wait_gone(self.nodes, &key).unwrap_or_else(|left| {
            panic!(
                "{}: after the thaw and no further call, the key is still on nodes {left:?} \
                 (remaining TTL, ms: {:?})",
                self.name,
                ttls(self.nodes, &key, &left)
            )
        });
        eprintln!(
            "{}: one frozen, acquire and release: every key gone {gone:?} after the thawed nodes ran the SET",
            self.name
        );
    }

    /// Three nodes frozen, a failed acquisition, thaw, and the client closed at once
    /// instead of waiting: the close lets what is owed go out.
    fn closed_after_thaw(&self, acquire_fails: impl FnOnce(&str), close: impl FnOnce()) {
        let key = self.key("close");
        let sets = set_counts(self.nodes, &[2, 3, 4]);
        let mut frozen = Frozen::freeze(self.nodes, &[2, 3, 4]);
        acquire_fails(&key);
        frozen.thaw();
        close();
        wait_set_ran(self.nodes, &sets, self.name);
        let gone = wait_gone(self.nodes, &key).unwrap_or_else(|left| {
            panic!(
                "{}: thawed then closed, the key is still on nodes {left:?} \
                 (remaining TTL, ms: {:?})",
                self.name,
                ttls(self.nodes, &key, &left)
            )
        });
        eprintln!(
            "{}: thawed then closed: every key gone {gone:?} after the close",
            self.name
        );
    }

    /// After the client is closed, still nothing left of either case.
    fn after_close(&self) {
        for case in ["three", "one"] {
            let key = self.key(case);
            if let Err(left) = wait_gone(self.nodes, &key) {
                panic!(
                    "{}: after close, {key} is still on nodes {left:?} (TTL ms {:?})",
                    self.name,
                    ttls(self.nodes, &key, &left)
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_client_sends_owed_releases_after_thaw_without_a_call() {
    let nodes = Nodes::start(7950);
    let client = builder(&nodes.urls).build().expect("client");
    // Open connections first, so that the frozen nodes' are established ones and the
    // SET is written to them.
    let connected = client.connect(Duration::from_secs(5)).await;
    assert!(connected.iter().all(Result::is_ok), "{connected:?}");
    let scenario = Scenario {
        nodes: &nodes,
        name: "async",
    };
    let handle = tokio::runtime::Handle::current();
    // What the frozen node's link keeps for it: the release queued behind the SET.
    let waiting = |i: usize| {
        let stats = &client.link_stats()[i];
        stats.queued + stats.in_flight
    };
    // The node checks use blocking connections: off the runtime's workers.
    tokio::task::block_in_place(|| {
        scenario.three_frozen(
            |key| {
                let error = handle
                    .block_on(client.lock(key, TTL))
                    .expect_err("three of five nodes frozen: no quorum");
                assert!(error.is_unreachable(), "{error}");
            },
            waiting,
        );
        scenario.one_frozen(
            |key| {
                let lock = handle.block_on(client.lock(key, TTL)).expect("four nodes");
                handle
                    .block_on(lock.release())
                    .expect("released on a quorum");
            },
            waiting,
        );
    });
    client.close().await;
    tokio::task::block_in_place(|| scenario.after_close());

    let client = builder(&nodes.urls).build().expect("client");
    let connected = client.connect(Duration::from_secs(5)).await;
    assert!(connected.iter().all(Result::is_ok), "{connected:?}");
    tokio::task::block_in_place(|| {
        scenario.closed_after_thaw(
            |key| {
                let error = handle
                    .block_on(client.lock(key, TTL))
                    .expect_err("three of five nodes frozen: no quorum");
                assert!(error.is_unreachable(), "{error}");
            },
            || handle.block_on(client.close()),
        );
    });
}

#[test]
fn blocking_client_sends_owed_releases_after_thaw_without_a_call() {
    let nodes = Nodes::start(7955);
    let client =
        redlock_client::blocking::Client::from_builder(builder(&nodes.urls)).expect("client");
    let connected = client.connect(Duration::from_secs(5));
    assert!(connected.iter().all(Result::is_ok), "{connected:?}");
    let scenario = Scenario {
        nodes: &nodes,
        name: "blocking",
    };
    let waiting = |i: usize| {
        let stats = &client.as_async().link_stats()[i];
        stats.queued + stats.in_flight
    };
    scenario.three_frozen(
        |key| {
            let error = client
                .lock(key, TTL)
                .expect_err("three of five nodes frozen: no quorum");
            assert!(error.is_unreachable(), "{error}");
        },
        waiting,
    );
    scenario.one_frozen(
        |key| {
            let lock = client.lock(key, TTL).expect("four nodes");
            lock.release().expect("released on a quorum");
        },
        waiting,
    );
    client.close();
    scenario.after_close();

    let client =
        redlock_client::blocking::Client::from_builder(builder(&nodes.urls)).expect("client");
    let connected = client.connect(Duration::from_secs(5));
    assert!(connected.iter().all(Result::is_ok), "{connected:?}");
    scenario.closed_after_thaw(
        |key| {
            let error = client
                .lock(key, TTL)
                .expect_err("three of five nodes frozen: no quorum");
            assert!(error.is_unreachable(), "{error}");
        },
        || client.close(),
    );
}
