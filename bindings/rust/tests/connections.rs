//! A client over the user's own `redis` connections (`Client::from_connections`): the
//! same core decisions, writes through each node's link. Nodes on base ports 7171 and 7166.

mod common;

use std::time::Duration;

use common::Nodes;
use redlock_client::{Client, NodeResult};

async fn connections(urls: &[String]) -> Vec<redis::aio::MultiplexedConnection> {
    let mut connections = Vec::new();
    for url in urls {
        let client = redis::Client::open(url.as_str()).unwrap();
        connections.push(client.get_multiplexed_async_connection().await.unwrap());
    }
    connections
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_through_the_users_connections() {
    let nodes = Nodes::start(7171);
    let client = Client::from_connections(connections(&nodes.urls).await)
        .attempts(1)
        .node_timeout(Duration::from_millis(200))
        .fencing(true)
        .build()
        .unwrap();
    assert_eq!(client.node_urls()[3], "connection #3");
    let by_url = Client::builder(nodes.urls.clone())
        .attempts(1)
        .build()
        .unwrap();

    let lock = client
        .lock("conn:a", Duration::from_secs(10))
        .await
        .unwrap();
    assert!(lock.fencing_token().is_some());
    // Written through our connections: a quorum holds the token.
    let token = Some(lock.token().to_string());
    let holding = nodes
        .values("conn:a")
        .iter()
        .filter(|value| **value == token)
        .count();
    assert!(holding >= 3, "{:?}", nodes.values("conn:a"));
    // A client over URLs sees it held, and cannot take it.
    assert!(by_url.is_locked(&["conn:a"]).await.unwrap());
    let error = by_url
        .lock("conn:a", Duration::from_secs(10))
        .await
        .unwrap_err();
    assert!(error.is_held_elsewhere(), "{error}");
    assert!(lock.is_owned().await.unwrap());
    lock.extend_for(Duration::from_secs(20)).await.unwrap();
    let extended = (0..5).filter(|&i| nodes.pttl(i, "conn:a") > 10_000).count();
    assert!(extended >= 3, "{extended} nodes extended");
    // Ok is a quorum confirming the keys gone (deleted, or never written).
    let report = lock.release().await.unwrap();
    assert!(report.released >= 1, "{report:?}");
    assert!(Nodes::eventually(Duration::from_secs(2), || nodes
        .values("conn:a")
        .iter()
        .all(Option::is_none)));

    // One node gone: its connection breaks and stays broken, and the quorum still
    // decides without it.
    nodes.kill(4);
    let lock = client
        .lock("conn:b", Duration::from_secs(10))
        .await
        .unwrap();
    lock.release().await.unwrap();
    let lock = client
        .lock("conn:c", Duration::from_secs(10))
        .await
        .unwrap();
    let error = lock.release().await;
    let reports = match &error {
        Ok(report) => report.nodes.clone(),
        Err(error) => panic!("{error}"),
    };
    assert!(
        matches!(
            reports[4].result,
            NodeResult::Error(_) | NodeResult::Pending
        ),
        "{reports:?}"
    );
    nodes.kill(3);
    nodes.kill(2);
    let error = client
        .lock("conn:d", Duration::from_secs(10))
        .await
        .unwrap_err();
    assert!(error.is_unreachable(), "{error}");
}

/// The README's samples (`examples/observe.rs`): inspection, a hook, and a client over
/// the example's own connections, against real nodes.
#[test]
fn the_observe_example_runs() {
    let nodes = Nodes::start_with(7166, &["--nodes", "3"]);
    let output = std::process::Command::new(common::example("observe"))
        .env("REDLOCK_NODES", nodes.urls.join(","))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        vec![
            "someone holds orders:42",
            "locked orders:43 through our own connections"
        ],
        "{stderr}"
    );
    for event in ["acquired", "inspected", "released"] {
        assert!(
            stderr.contains(&format!("redlock {event} after")),
            "{stderr}"
        );
    }
}
