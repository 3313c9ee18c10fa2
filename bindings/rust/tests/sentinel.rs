//! The `sentinel` feature: a single-instance lock on the master a real Redis Sentinel
//! names. Master on port 7760 (scripts/redis-nodes.sh), Sentinel on 7199 (redis-server
//! in sentinel mode, started here).

mod common;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::Nodes;
use redlock_client::Client;

struct Sentinel(Child);

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_sentinel(port: u16, master_port: u16) -> Sentinel {
    let dir = common::repo_root().join(format!(".runtime/sentinel-{port}"));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("sentinel.conf");
    std::fs::write(
        &conf,
        format!(
            "port {port}\nbind 127.0.0.1\ndir {}\nsentinel monitor mymaster 127.0.0.1 \
             {master_port} 1\n",
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
