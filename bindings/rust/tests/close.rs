//! Closing a client: every lock of it still held is released on every node, the
//! connections close, and every later use of the client or its locks is the same
//! `used_after_close` error ([`Error::Closed`]), async and blocking alike. Five nodes on
//! base port 7766.

mod common;

use std::time::{Duration, Instant};

use redlock_client::{blocking, Client, Error, ErrorClass, LockOptions, LockState};

fn closed(result: Result<impl std::fmt::Debug, Error>, what: &str) {
    match result {
        Err(error @ Error::Closed) => {
            assert_eq!(error.class(), Some(ErrorClass::UsedAfterClose), "{what}");
        }
        other => panic!("{what}: expected Error::Closed, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_async_client_releases_its_locks_and_refuses_every_later_use() {
    let nodes = common::shared(7766);
    // A node timeout a loaded machine meets: close waits for every node's answer.
    let client = Client::builder(nodes.urls.clone())
        .ttl(Duration::from_secs(20))
        .node_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let lock = client
        .lock("close-async-a", Duration::from_secs(20))
        .await
        .unwrap();
    let kept = client
        .lock_with(&["close-async-b"], LockOptions::new().auto_extend(true))
        .await
        .unwrap();
    let leaked = client
        .lock("close-async-leaked", Duration::from_secs(20))
        .await
        .unwrap();
    let leaked_token = leaked.token().to_string();
    leaked.leak();
    // Every node has it (a slow node's SET may land after the quorum decided).
    assert!(common::Nodes::eventually(Duration::from_secs(2), || nodes
        .values("close-async-a")
        .iter()
        .all(Option::is_some)));

    let started = Instant::now();
    client.close().await;
    assert!(client.is_closed());
    // Bounded: about two node timeouts (generous here for a loaded machine).
    assert!(started.elapsed() < Duration::from_secs(5));
    // Every key of a held lock is gone from every node; a leaked lock is not ours any more.
    assert_eq!(nodes.values("close-async-a"), vec![None; 5]);
    assert_eq!(nodes.values("close-async-b"), vec![None; 5]);
    assert!(common::Nodes::eventually(Duration::from_secs(2), || nodes
        .values("close-async-leaked")
        == vec![Some(leaked_token.clone()); 5]));
    assert_eq!(lock.state(), LockState::Released);

    // The misuse sequence: the same error each time, nothing sent.
    closed(lock.extend().await, "extend");
    closed(lock.extend().await, "extend again");
    closed(lock.extend_for(Duration::from_secs(5)).await, "extend_for");
    closed(lock.is_owned().await, "is_owned");
    closed(kept.release().await, "release");
    closed(lock.release().await, "release of the other lock");
    closed(
        client.lock("close-async-c", Duration::from_secs(5)).await,
        "lock",
    );
    closed(
        client
            .extend_token(
                &["close-async-a"],
                "0123456789abcdef0123456789abcdef",
                Duration::from_secs(5),
            )
            .await,
        "extend_token",
    );
    closed(
        client
            .release_token(&["close-async-a"], "0123456789abcdef0123456789abcdef")
            .await,
        "release_token",
    );
    closed(client.is_locked(&["close-async-a"]).await, "is_locked");
    // A clone is the same client.
    closed(
        client
            .clone()
            .lock("close-async-c", Duration::from_secs(5))
            .await,
        "clone",
    );
    assert_eq!(nodes.values("close-async-c"), vec![None; 5]);
    // Closing again does nothing.
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_that_fails_at_close_does_not_mark_the_lock_released() {
    // Two nodes of three killed after the locks were taken: no release can be confirmed
    // by a quorum, by hand or at close.
    let nodes = common::Nodes::start_with(7795, &["--nodes", "3"]);
    let client = Client::builder(nodes.urls.clone())
        .ttl(Duration::from_secs(20))
        .build()
        .unwrap();
    let by_hand = client
        .lock("close-failing-by-hand", Duration::from_secs(20))
        .await
        .unwrap();
    let lock = client
        .lock("close-failing", Duration::from_secs(20))
        .await
        .unwrap();
    let states = by_hand.subscribe();
    nodes.kill(1);
    nodes.kill(2);
    let error = by_hand.release().await.expect_err("no quorum");
    assert!(matches!(error, Error::NotReleased(_)), "{error}");
    assert!(
        matches!(*states.borrow(), LockState::Held { .. }),
        "a failed release marked the lock {:?}",
        *states.borrow()
    );
    client.close().await;
    // Not confirmed: the lock is not marked released, and it is still unusable.
    assert!(
        matches!(lock.state(), LockState::Held { .. }),
        "{:?}",
        lock.state()
    );
    closed(lock.release().await, "release after a failed close");
    assert_eq!(
        nodes.get(0, "close-failing"),
        None,
        "the live node's key is deleted"
    );
}

#[test]
fn closing_the_blocking_client_releases_its_locks_and_refuses_every_later_use() {
    let nodes = common::shared(7766);
    let client = blocking::Client::from_builder(
        Client::builder(nodes.urls.clone()).node_timeout(Duration::from_secs(1)),
    )
    .unwrap();
    let lock = client
        .lock("close-blocking-a", Duration::from_secs(20))
        .unwrap();
    let other = client
        .lock("close-blocking-b", Duration::from_secs(20))
        .unwrap();
    // Every node has it (a slow node's SET may land after the quorum decided).
    assert!(common::Nodes::eventually(Duration::from_secs(2), || nodes
        .values("close-blocking-a")
        .iter()
        .all(Option::is_some)));
    client.close();
    assert!(client.is_closed());
    assert_eq!(nodes.values("close-blocking-a"), vec![None; 5]);
    assert_eq!(nodes.values("close-blocking-b"), vec![None; 5]);

    closed(lock.extend(), "extend");
    closed(lock.extend(), "extend again");
    closed(lock.is_owned(), "is_owned");
    closed(lock.release(), "release");
    closed(other.release(), "release of the other lock");
    closed(
        client.lock("close-blocking-c", Duration::from_secs(5)),
        "lock",
    );
    closed(
        client.release_token(&["close-blocking-a"], "0123456789abcdef0123456789abcdef"),
        "release_token",
    );
    closed(client.is_locked(&["close-blocking-a"]), "is_locked");
    assert_eq!(nodes.values("close-blocking-c"), vec![None; 5]);
    client.close();
}
