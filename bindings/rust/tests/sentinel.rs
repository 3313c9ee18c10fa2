//! The `sentinel` feature: a single-instance lock on the master a real Redis Sentinel
//! names. Master on port 7760 (scripts/redis-nodes.sh), Sentinel on 7199 (redis-server
//! in sentinel mode, started here). The hanging-Sentinel test: master on 7181, a working
//! Sentinel on 7182, a stopped (SIGSTOP) one on 7183. A master with a password on 7184,
//! its Sentinel on 7195.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::Nodes;
use redlock_client::{Client, ErrorClass};

struct Sentinel(Child);

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A Sentinel stopped with SIGSTOP: its port still accepts connections (the kernel
/// completes the handshake) but nothing is ever answered. Resumed (SIGCONT) before the
/// inner guard kills it.
struct Stopped(Sentinel);

impl Stopped {
    fn new(sentinel: Sentinel) -> Stopped {
        signal(&sentinel, "-STOP");
        Stopped(sentinel)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        signal(&self.0, "-CONT");
    }
}

fn signal(sentinel: &Sentinel, which: &str) {
    let status = Command::new("kill")
        .arg(which)
        .arg(sentinel.0.id().to_string())
        .status();
    assert!(
        matches!(status, Ok(status) if status.success()),
        "kill {which} {}: {status:?}",
        sentinel.0.id()
    );
}

fn start_sentinel(port: u16, master_port: u16) -> Sentinel {
    start_sentinel_with(port, master_port, "")
}

/// A Sentinel on `port` monitoring the master on `master_port`, with `extra` lines of
/// configuration after its `sentinel monitor` line.
fn start_sentinel_with(port: u16, master_port: u16, extra: &str) -> Sentinel {
    let dir = common::repo_root().join(format!(".runtime/sentinel-{port}"));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("sentinel.conf");
    std::fs::write(
        &conf,
        format!(
            "port {port}\nbind 127.0.0.1\ndir {}\nsentinel monitor mymaster 127.0.0.1 \
             {master_port} 1\n{extra}",
            dir.display()
        ),
    )
    .unwrap();
    let child = Command::new("redis-server")
        .arg(&conf)
        .arg("--sentinel")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server --sentinel (install redis-server)");
    let sentinel = Sentinel(child);
    let url = format!("redis://127.0.0.1:{port}");
    let ready = Nodes::eventually(Duration::from_secs(10), || {
        let Ok(client) = redis::Client::open(url.as_str()) else {
            return false;
        };
        let Ok(mut conn) = client.get_connection_with_timeout(Duration::from_millis(200)) else {
            return false;
        };
        let addr: redis::RedisResult<Vec<String>> = redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg("mymaster")
            .query(&mut conn);
        matches!(addr, Ok(addr) if addr == ["127.0.0.1".to_string(), master_port.to_string()])
    });
    assert!(ready, "the Sentinel on {port} did not name the master");
    sentinel
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_on_the_master_a_sentinel_names() {
    let master = Nodes::start_with(7760, &["--nodes", "1"]);
    let _sentinel = start_sentinel(7199, 7760);
    let client = Client::sentinel(["redis://127.0.0.1:7199"], "mymaster")
        .attempts(1)
        .node_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    assert_eq!(client.node_urls(), vec!["sentinel master mymaster"]);
    let lock = client
        .lock("sentinel:a", Duration::from_secs(10))
        .await
        .unwrap();
    // Written on the master the Sentinel named.
    assert_eq!(master.get(0, "sentinel:a").as_deref(), Some(lock.token()));
    assert!(client.is_locked(&["sentinel:a"]).await.unwrap());
    let other = Client::sentinel(["redis://127.0.0.1:7199"], "mymaster")
        .attempts(1)
        .build()
        .unwrap();
    let error = other
        .lock("sentinel:a", Duration::from_secs(10))
        .await
        .unwrap_err();
    assert!(error.is_held_elsewhere(), "{error}");
    lock.release().await.unwrap();
    assert_eq!(master.get(0, "sentinel:a"), None);

    // An unknown service: the Sentinel names no master, and the node fails.
    let unknown = Client::sentinel(["redis://127.0.0.1:7199"], "nosuchmaster")
        .attempts(1)
        .node_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let error = unknown
        .lock("sentinel:b", Duration::from_secs(10))
        .await
        .unwrap_err();
    assert!(error.is_unreachable(), "{error}");

    // The README's sample (`examples/sentinel.rs`).
    let output = Command::new(common::example("sentinel"))
        .env("REDLOCK_SENTINELS", "redis://127.0.0.1:7199")
        .arg("mymaster")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "locked orders:42 on the master"
    );
}

/// Locks `sentinel:hung` once (one attempt, which waits up to 1.5 s for the node's
/// connection) through a client built from `builder`, checks that the key is on the
/// master, releases it, and returns how long the acquisition took.
async fn lock_through(builder: redlock_client::ClientBuilder, master: &Nodes) -> Duration {
    let client = builder
        .attempts(1)
        .node_timeout(Duration::from_millis(1500))
        .build()
        .unwrap();
    let started = Instant::now();
    let lock = client.lock("sentinel:hung", Duration::from_secs(10)).await;
    let elapsed = started.elapsed();
    let lock = lock.unwrap_or_else(|error| panic!("not acquired after {elapsed:?}: {error}"));
    assert_eq!(
        master.get(0, "sentinel:hung").as_deref(),
        Some(lock.token())
    );
    lock.release().await.unwrap();
    elapsed
}

/// A Sentinel that hangs (connects, never answers) is given the core's
/// `SENTINEL_QUERY_TIMEOUT_DEFAULT_MS` and skipped, and the next one names the master: the
/// lock is acquired within that bound plus a connection (under 1 s), not held up for the
/// `redis` crate's own timeouts. The node's connect timeout is the core's
/// `sentinel_connect_timeout_ms`, so a client connect timeout shorter than the Sentinel's
/// bound still reaches the master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_sentinel_is_skipped_for_the_next_one() {
    let master = Nodes::start_with(7181, &["--nodes", "1"]);
    let _working = start_sentinel(7182, 7181);
    let _hanging = Stopped::new(start_sentinel(7183, 7181));
    let sentinels = ["redis://127.0.0.1:7183", "redis://127.0.0.1:7182"];
    let query = Duration::from_millis(redlock_core::SENTINEL_QUERY_TIMEOUT_DEFAULT_MS);

    // One attempt, which waits up to 1.5 s for the node's connection.
    let elapsed = lock_through(Client::sentinel(sentinels, "mymaster"), &master).await;
    assert!(
        elapsed >= query && elapsed < Duration::from_secs(1),
        "acquired after {elapsed:?}: the stopped Sentinel should cost its {query:?}, no more"
    );

    // A connect timeout (the master's) below the Sentinel's bound: the link's is
    // 2 x 500 + 400 ms, so the stopped Sentinel does not use up every attempt.
    let builder =
        Client::sentinel(sentinels, "mymaster").connect_timeout(Duration::from_millis(400));
    let elapsed = lock_through(builder, &master).await;
    assert!(
        elapsed < Duration::from_secs(1),
        "acquired after {elapsed:?}"
    );

    // A bound of the user's own: the stopped Sentinel costs that instead.
    let builder =
        Client::sentinel(sentinels, "mymaster").sentinel_query_timeout(Duration::from_millis(100));
    let elapsed = lock_through(builder, &master).await;
    assert!(
        elapsed >= Duration::from_millis(100) && elapsed < query,
        "acquired after {elapsed:?} with a 100 ms bound per Sentinel"
    );

    // Only the stopped Sentinel: the node fails, and says which Sentinel did not answer.
    let client = Client::sentinel(["redis://127.0.0.1:7183"], "mymaster")
        .attempts(1)
        .node_timeout(Duration::from_millis(1500))
        .build()
        .unwrap();
    let error = client
        .lock("sentinel:hung", Duration::from_secs(10))
        .await
        .unwrap_err();
    assert!(error.is_unreachable(), "{error}");
    let text = error.to_string();
    assert!(
        text.contains("127.0.0.1:7183") && text.contains("timeout"),
        "{text}"
    );
}

#[test]
fn a_zero_sentinel_query_timeout_is_refused() {
    let built = Client::sentinel(["redis://127.0.0.1:7183"], "mymaster")
        .sentinel_query_timeout(Duration::ZERO)
        .build();
    let Err(error) = built else {
        panic!("a zero bound per Sentinel was accepted");
    };
    assert_eq!(error.class(), Some(ErrorClass::InvalidArgument), "{error}");
    assert!(
        error.to_string().contains("sentinel_query_timeout"),
        "{error}"
    );
}

/// A master with `requirepass`, named by a Sentinel that has its password (`sentinel
/// auth-pass`): the client logs in with `sentinel_master_auth` and works in the database
/// `sentinel_master_database` names. Without the password, or with a wrong one, the node
/// fails with the cause `auth`, naming the master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_with_a_password_is_logged_in_to() {
    let _master = Nodes::start_with(7184, &["--nodes", "1", "--requirepass", "master-secret"]);
    let _sentinel = start_sentinel_with(7195, 7184, "sentinel auth-pass mymaster master-secret\n");
    let sentinels = ["redis://127.0.0.1:7195"];
    let client = Client::sentinel(sentinels, "mymaster")
        .sentinel_master_auth(None, "master-secret")
        .sentinel_master_database(3)
        .attempts(1)
        .node_timeout(Duration::from_millis(1500))
        .build()
        .unwrap();
    let lock = client
        .lock("sentinel:auth", Duration::from_secs(10))
        .await
        .unwrap();
    let in_database = |db: u8| -> Option<String> {
        let url = format!("redis://:master-secret@127.0.0.1:7184/{db}");
        let mut conn = redis::Client::open(url.as_str())
            .unwrap()
            .get_connection_with_timeout(Duration::from_secs(2))
            .unwrap();
        redis::cmd("GET")
            .arg("sentinel:auth")
            .query(&mut conn)
            .unwrap()
    };
    assert_eq!(in_database(3).as_deref(), Some(lock.token()));
    assert_eq!(in_database(0), None);
    lock.release().await.unwrap();
    assert_eq!(in_database(3), None);

    for (what, password) in [("no password", None), ("a wrong password", Some("wrong"))] {
        let mut builder = Client::sentinel(sentinels, "mymaster")
            .attempts(1)
            .node_timeout(Duration::from_millis(1500));
        if let Some(password) = password {
            builder = builder.sentinel_master_auth(None, password);
        }
        let error = builder
            .build()
            .unwrap()
            .lock("sentinel:auth", Duration::from_secs(10))
            .await
            .unwrap_err();
        assert!(error.is_unreachable(), "{what}: {error}");
        let text = error.to_string();
        assert!(
            text.contains("master 127.0.0.1:7184: auth"),
            "{what}: {text}"
        );
    }
}

#[test]
fn a_negative_master_database_is_refused() {
    let built = Client::sentinel(["redis://127.0.0.1:7195"], "mymaster")
        .sentinel_master_database(-1)
        .build();
    let Err(error) = built else {
        panic!("a negative database was accepted");
    };
    assert_eq!(error.class(), Some(ErrorClass::InvalidArgument), "{error}");
    assert!(
        error.to_string().contains("sentinel_master_database"),
        "{error}"
    );
}
