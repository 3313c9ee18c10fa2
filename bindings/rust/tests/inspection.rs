//! `Client::is_locked` and `Lock::is_owned` on real nodes: the core's inspection decides.
//! Nodes on base ports 7166 (healthy set) and 7190 (the set whose nodes are killed).

mod common;

use std::time::Duration;

use common::Nodes;
use redlock_client::{blocking, Client, Error, ErrorClass, NodeResult};

const TTL: Duration = Duration::from_secs(20);

fn client(urls: &[String]) -> Client {
    Client::builder(urls.to_vec())
        .attempts(1)
        .node_timeout(Duration::from_millis(200))
        .build()
        .expect("client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_by_us_by_another_free_and_leftovers() {
    let nodes = Nodes::start(7166);
    let ours = client(&nodes.urls);
    let theirs = client(&nodes.urls);

    // Free: nothing anywhere.
    assert!(!ours.is_locked(&["inspect:free"]).await.unwrap());

    // Held by us: locked, and owned.
    let lock = ours.lock("inspect:mine", TTL).await.unwrap();
    assert!(ours.is_locked(&["inspect:mine"]).await.unwrap());
    assert!(theirs.is_locked(&["inspect:mine"]).await.unwrap());
    assert!(lock.is_owned().await.unwrap());

    // Held by another: locked, and not ours. Another token on three of five nodes means
    // our lock is no longer held by a quorum.
    let other = theirs.lock("inspect:theirs", TTL).await.unwrap();
    assert!(ours.is_locked(&["inspect:theirs"]).await.unwrap());
    assert!(other.is_owned().await.unwrap());
    for node in 0..3 {
        nodes.set(node, "inspect:mine", "someone-else", 20_000);
    }
    assert!(
        ours.is_locked(&["inspect:mine"]).await.unwrap(),
        "held by the other token"
    );
    assert!(
        !lock.is_owned().await.unwrap(),
        "a quorum holds another token"
    );

    // Several resources: one lock covers both keys.
    let many = ours
        .lock_many(&["inspect:a", "inspect:b"], TTL)
        .await
        .unwrap();
    assert!(ours.is_locked(&["inspect:a", "inspect:b"]).await.unwrap());
    assert!(many.is_owned().await.unwrap());
    // One of its keys gone on three nodes: no node of those votes for the token. (Once
    // every node has it: a SET still out after the quorum decided must not land after
    // the deletion.)
    assert!(Nodes::eventually(Duration::from_secs(2), || nodes
        .values("inspect:b")
        .iter()
        .all(Option::is_some)));
    for node in 2..5 {
        nodes.del(node, "inspect:b");
    }
    assert!(!ours.is_locked(&["inspect:a", "inspect:b"]).await.unwrap());
    assert!(!many.is_owned().await.unwrap());
    many.release().await.unwrap();

    // Leftovers on fewer than a quorum (two of five, by hand): free.
    nodes.set(0, "inspect:left", "leftover", 20_000);
    nodes.set(3, "inspect:left", "leftover", 20_000);
    assert!(!ours.is_locked(&["inspect:left"]).await.unwrap());
    // Two leftovers of one token and two of another: still nobody has a quorum.
    nodes.set(1, "inspect:left", "another", 20_000);
    nodes.set(2, "inspect:left", "another", 20_000);
    assert!(!ours.is_locked(&["inspect:left"]).await.unwrap());
    // The same token on a third node: a quorum, held.
    nodes.set(4, "inspect:left", "leftover", 20_000);
    assert!(ours.is_locked(&["inspect:left"]).await.unwrap());

    // Released: not owned (no need to ask), and free.
    let report = other.release().await.unwrap();
    assert!(report.released >= 3, "{report:?}");
    assert!(!ours.is_locked(&["inspect:theirs"]).await.unwrap());
    let again = theirs.lock("inspect:theirs", TTL).await.unwrap();
    let token = again.token().to_string();
    again.leak();
    assert!(ours.is_locked(&["inspect:theirs"]).await.unwrap());
    ours.release_token(&["inspect:theirs"], &token)
        .await
        .unwrap();
    assert!(!ours.is_locked(&["inspect:theirs"]).await.unwrap());

    // An invalid resource is a usage error, not an answer.
    let error = ours.is_locked::<&str>(&[]).await.unwrap_err();
    assert_eq!(error.class(), Some(ErrorClass::InvalidArgument), "{error}");

    // The inspection never writes: the values are what they were.
    assert_eq!(
        nodes.values("inspect:left"),
        vec![
            Some("leftover".into()),
            Some("another".into()),
            Some("another".into()),
            Some("leftover".into()),
            Some("leftover".into())
        ]
    );
    drop(lock);
}

#[test]
fn nodes_down_one_still_decides_three_cannot() {
    let nodes = Nodes::start(7190);
    let client = blocking::Client::from_builder(
        Client::builder(nodes.urls.clone())
            .attempts(1)
            .node_timeout(Duration::from_millis(200)),
    )
    .unwrap();
    let lock = client.lock("inspect:down", TTL).unwrap();
    assert!(client.is_locked(&["inspect:down"]).unwrap());
    assert!(lock.is_owned().unwrap());

    nodes.kill(0);
    assert!(client.is_locked(&["inspect:down"]).unwrap(), "4 of 5 nodes");
    assert!(lock.is_owned().unwrap());
    assert!(!client.is_locked(&["inspect:free"]).unwrap());

    nodes.kill(1);
    nodes.kill(2);
    for error in [
        client.is_locked(&["inspect:down"]).unwrap_err(),
        lock.is_owned().unwrap_err(),
        client.is_locked(&["inspect:free"]).unwrap_err(),
    ] {
        assert!(matches!(error, Error::NotInspected(_)), "{error}");
        assert_eq!(error.class(), Some(ErrorClass::NodesFailing));
        assert!(error.is_unreachable());
        let failed = error
            .nodes()
            .iter()
            .filter(|n| matches!(n.result, NodeResult::Error(_) | NodeResult::Timeout))
            .count();
        assert_eq!(failed, 3, "{error}");
        assert!(error.to_string().contains("3 of 5 nodes failed"), "{error}");
    }
    drop(lock);
}
