//! `scripts/redis-nodes.sh` itself: start, urls, pause/resume, kill/restart, stop, and
//! its refusals. Base ports 7155-7160.

mod common;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::time::Duration;

use common::{repo_root, Nodes};

fn script(args: &[&str]) -> std::process::Output {
    Command::new(repo_root().join("scripts/redis-nodes.sh"))
        .args(args)
        .output()
        .expect("run the script")
}

fn accepts(port: u16) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
}

/// PING with a short read timeout: true for PONG, false for no answer.
fn pings(port: u16) -> bool {
    let Ok(client) = redis::Client::open(format!("redis://127.0.0.1:{port}")) else {
        return false;
    };
    let Ok(mut conn) = client.get_connection_with_timeout(Duration::from_millis(300)) else {
        return false;
    };
    let _ = conn.set_read_timeout(Some(Duration::from_millis(300)));
    redis::cmd("PING")
        .query::<String>(&mut conn)
        .is_ok_and(|r| r == "PONG")
}

#[test]
fn the_node_script_starts_breaks_and_stops_nodes() {
    let nodes = Nodes::start_with(7155, &["--nodes", "3"]);
    assert_eq!(
        nodes.urls,
        [
            "redis://127.0.0.1:7155",
            "redis://127.0.0.1:7156",
            "redis://127.0.0.1:7157"
        ]
    );
    assert_eq!(nodes.run("urls", None), nodes.urls.join(","));
    for i in 0..3 {
        assert!(pings(nodes.port(i)), "node {i}");
        let runtime = std::env::var_os("REDLOCK_RUNTIME")
            .map_or_else(|| repo_root().join(".runtime"), std::path::PathBuf::from);
        let dir = runtime.join(format!("redis-7155/node-{i}"));
        assert!(dir.join("redis.pid").exists() && dir.join("redis.log").exists());
    }

    // Paused: the port still accepts (the kernel does) but nothing answers.
    nodes.pause(1);
    assert!(accepts(7156));
    assert!(!pings(7156));
    nodes.resume(1);
    assert!(pings(7156));

    // Killed: the port is free when the command returns; restarted: empty.
    nodes.set(2, "k", "v", 60_000);
    nodes.kill(2);
    assert!(!accepts(7157));
    nodes.restart(2);
    assert!(pings(7157));
    assert_eq!(nodes.get(2, "k"), None);
    // Restart also works on a node that is running (it is killed first).
    nodes.restart(0);
    assert!(pings(7155));

    // Bad requests fail with a message.
    let output = script(&["pause", "7", "--base-port", "7155"]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("out of range"));
    let output = script(&["urls", "--base-port", "7158"]);
    assert!(!output.status.success());

    // Starting again on the same base port replaces the set.
    let again = script(&["start", "--base-port", "7155", "--nodes", "2"]);
    assert!(again.status.success());
    assert!(!accepts(7157), "the old third node was stopped");
    assert!(pings(7155) && pings(7156));

    // Stop frees every port, and is idempotent.
    nodes.run("stop", None);
    for port in 7155..7158 {
        assert!(!accepts(port), "port {port} still busy");
    }
    nodes.run("stop", None);
}

#[test]
fn the_node_script_refuses_a_busy_port() {
    let _busy = TcpListener::bind(("127.0.0.1", 7160)).expect("bind 7160");
    let output = script(&["start", "--base-port", "7158", "--nodes", "3"]);
    assert!(!output.status.success());
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(
        message.contains("7160") && message.contains("in use"),
        "{message}"
    );
    // Nothing was left running on the free ports.
    assert!(!accepts(7158) && !accepts(7159));
}
