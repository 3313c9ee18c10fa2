//! The async client against five real Redis nodes: acquisition, release, exclusion,
//! extension. The tests share one node set (base port 7100); the even split has its
//! own four nodes (7105).

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Nodes;
use redlock_client::{
    Client, Error, ErrorClass, FailureReason, LockOptions, LockState, Lost, LostReason, NodeResult,
};

/// One attempt, and a node timeout generous enough that healthy nodes on a loaded
/// machine never miss it (these tests check the algorithm, not timeouts).
fn client(nodes: &Nodes) -> Client {
    Client::builder(nodes.urls.clone())
        .attempts(1)
        .node_timeout(Duration::from_millis(100))
        .build()
        .expect("client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_sets_every_node_and_release_deletes_it() {
    let nodes = common::shared(7100);
    let client = client(&nodes);
    let ttl = Duration::from_secs(10);
    let started = Instant::now();
    let lock = client.lock("orders:1", ttl).await.expect("acquired");
    assert_eq!(lock.resources(), ["orders:1"]);
    assert_eq!(lock.token().len(), 40, "160-bit hex token");
    assert_eq!(lock.attempts(), 1);
    assert!(lock.is_held());
    assert!(lock.validity() <= ttl);
    assert!(lock.valid_until() > Instant::now());
    assert!(lock.valid_until() <= started + ttl);
    let successes = lock
        .nodes()
        .iter()
        .filter(|n| n.result == NodeResult::Success)
        .count();
    assert!(successes >= 3, "a quorum said OK: {:?}", lock.nodes());
    // Every node ends up with the token (the rest answer right after the quorum).
    assert!(Nodes::eventually(Duration::from_secs(1), || nodes
        .values("orders:1")
        .iter()
        .all(|v| v.as_deref() == Some(lock.token()))));
    for i in 0..5 {
        let pttl = nodes.pttl(i, "orders:1");
        assert!(pttl > 9_000 && pttl <= 10_000, "PTTL {pttl} on node {i}");
    }
    // The same resource cannot be locked twice.
    let second = client.lock("orders:1", ttl).await.unwrap_err();
    assert!(second.is_held_elsewhere(), "{second}");
    assert_eq!(second.failure_reason(), Some(FailureReason::Conflict));
    assert_eq!(second.nodes().len(), 5);

    // The release decides once a quorum deleted the key; the rest finish in the background.
    let report = lock.release().await.expect("released");
    assert!(report.released >= 3, "{:?}", report.nodes);
    assert!(client.wait_idle(Duration::from_secs(2)).await);
    assert_eq!(nodes.values("orders:1"), vec![None; 5]);
    // Free again.
    client
        .lock("orders:1", ttl)
        .await
        .expect("acquired again")
        .release()
        .await
        .expect("released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_resource_lock_is_all_or_nothing() {
    let nodes = common::shared(7100);
    let client = client(&nodes);
    let ttl = Duration::from_secs(10);
    let a = client.lock("res:a", ttl).await.expect("a");
    // b is free but a is held: the pair is refused and b is left untouched.
    let pair = client
        .lock_many(&["res:b", "res:a"], ttl)
        .await
        .unwrap_err();
    assert!(pair.is_held_elsewhere(), "{pair}");
    assert_eq!(nodes.values("res:b"), vec![None; 5]);
    a.release().await.unwrap();
    let pair = client
        .lock_many(&["res:b", "res:a"], ttl)
        .await
        .expect("pair");
    assert!(Nodes::eventually(Duration::from_secs(1), || {
        nodes
            .values("res:a")
            .iter()
            .all(|v| v.as_deref() == Some(pair.token()))
            && nodes
                .values("res:b")
                .iter()
                .all(|v| v.as_deref() == Some(pair.token()))
    }));
    assert!(pair.release().await.unwrap().released >= 3);
    assert!(client.wait_idle(Duration::from_secs(2)).await);
    assert_eq!(nodes.values("res:a"), vec![None; 5]);
    assert_eq!(nodes.values("res:b"), vec![None; 5]);
    // Bad input is an error, not a panic.
    let empty: [&str; 0] = [];
    assert!(matches!(
        client.lock_many(&empty, ttl).await,
        Err(Error::Usage(_))
    ));
    assert!(matches!(
        client.lock_many(&["x", "x"], ttl).await,
        Err(Error::Usage(_))
    ));
    assert!(matches!(
        client.lock("x", Duration::ZERO).await,
        Err(Error::Config(_))
    ));
}

/// Many clients contend for one resource; each increments a counter with a
/// read-modify-write that loses updates whenever two overlap.
async fn contend(nodes: &Nodes, use_lock: bool, workers: usize, rounds: usize) -> (u64, u64, u64) {
    let counter = Arc::new(AtomicU64::new(0));
    let inside = Arc::new(AtomicBool::new(false));
    let overlaps = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..workers {
        // A generous node timeout: this test checks exclusion, and on a loaded machine a
        // command that times out may still run on its node after the release that
        // followed it (on a new connection), leaving a key until its TTL.
        let client = Client::builder(nodes.urls.clone())
            .node_timeout(Duration::from_millis(500))
            .attempts(10_000)
            .retry_delay(Duration::from_millis(5), Duration::from_millis(4))
            .build()
            .unwrap();
        let (counter, inside, overlaps) = (counter.clone(), inside.clone(), overlaps.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..rounds {
                let lock = if use_lock {
                    Some(
                        client
                            .lock("counter", Duration::from_secs(5))
                            .await
                            .expect("lock"),
                    )
                } else {
                    None
                };
                if inside.swap(true, Ordering::SeqCst) {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                let read = counter.load(Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(1)).await;
                counter.store(read + 1, Ordering::SeqCst);
                inside.store(false, Ordering::SeqCst);
                if let Some(lock) = lock {
                    lock.release().await.expect("release");
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let expected = (workers * rounds) as u64;
    (
        expected,
        counter.load(Ordering::SeqCst),
        overlaps.load(Ordering::SeqCst),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_contenders_exclude_each_other() {
    let nodes = common::shared(7100);
    // The check itself works: without the lock, updates are lost.
    let (expected, counted, overlaps) = contend(&nodes, false, 6, 10).await;
    assert!(
        counted < expected && overlaps > 0,
        "the unlocked run should lose updates ({counted} of {expected})"
    );
    let (expected, counted, overlaps) = contend(&nodes, true, 6, 15).await;
    assert_eq!(overlaps, 0, "two holders at once");
    assert_eq!(counted, expected, "lost updates under the lock");
    assert_eq!(nodes.values("counter"), vec![None; 5], "keys left behind");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_never_deletes_a_key_holding_another_token() {
    let nodes = common::shared(7100);
    let client = client(&nodes);
    let first = client
        .lock("shared", Duration::from_millis(300))
        .await
        .expect("first");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!first.is_held(), "the lease ran out");
    let second = client
        .lock("shared", Duration::from_secs(10))
        .await
        .expect("second, after the first expired");
    let report = first.release().await.unwrap();
    assert_eq!(report.released, 0, "{:?}", report.nodes);
    // A quorum confirmed the key is not ours; the others may still be on their way.
    let conflicts = report
        .nodes
        .iter()
        .filter(|n| n.result == NodeResult::Conflict)
        .count();
    assert!(conflicts >= 3, "{:?}", report.nodes);
    assert!(report
        .nodes
        .iter()
        .all(|n| matches!(n.result, NodeResult::Conflict | NodeResult::Pending)));
    assert!(Nodes::eventually(Duration::from_secs(1), || nodes
        .values("shared")
        .iter()
        .all(|v| v.as_deref() == Some(second.token()))));
    // Releasing by token works the same way.
    let stale = client
        .release_token(&["shared"], "not-the-token")
        .await
        .unwrap();
    assert_eq!(stale.released, 0);
    let released = client
        .release_token(&["shared"], second.token())
        .await
        .unwrap()
        .released;
    assert!(released >= 3, "{released}");
    assert!(client.wait_idle(Duration::from_secs(2)).await);
    second.leak();
    assert_eq!(nodes.values("shared"), vec![None; 5]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extension_moves_the_deadline_and_never_resurrects() {
    let nodes = common::shared(7100);
    let client = client(&nodes);
    let lock = client
        .lock("ext", Duration::from_millis(1000))
        .await
        .unwrap();
    let before = lock.valid_until();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let report = lock.extend().await.expect("extended");
    assert!(lock.valid_until() > before + Duration::from_millis(250));
    assert_eq!(report.valid_until, lock.valid_until());
    assert_eq!(lock.extensions(), 1);
    for i in 0..5 {
        // Nodes that had not answered when the quorum decided follow right after.
        assert!(
            Nodes::eventually(Duration::from_secs(1), || nodes.pttl(i, "ext") > 900),
            "extended on node {i}"
        );
    }
    // A longer TTL for this extension.
    lock.extend_for(Duration::from_secs(20)).await.unwrap();
    assert!(Nodes::eventually(Duration::from_secs(1), || nodes
        .values("ext")
        .iter()
        .enumerate()
        .all(|(i, _)| nodes.pttl(i, "ext") > 19_000)));

    // Keys deleted behind the holder's back: the extension says the lock is lost and
    // re-creates nothing.
    for i in 0..5 {
        nodes.del(i, "ext");
    }
    // Keys gone and nobody else holding them: "not held", not "held by someone else".
    let error = lock.extend().await.unwrap_err();
    assert!(error.is_not_held(), "{error}");
    assert!(!error.is_held_elsewhere(), "{error}");
    assert_eq!(error.class(), Some(ErrorClass::NotHeld));
    assert!(error.to_string().contains("not held"), "{error}");
    assert!(matches!(&error, Error::NotExtended(n) if n.lost));
    assert!(!lock.is_held());
    assert!(matches!(
        lock.state(),
        LockState::Lost(Lost {
            reason: LostReason::NotHeld,
            ..
        })
    ));
    assert_eq!(nodes.values("ext"), vec![None; 5], "no resurrection");
    let again = lock.extend().await.unwrap_err();
    assert!(matches!(&again, Error::LockLost(_)), "{again}");
    assert_eq!(again.class(), Some(ErrorClass::NotHeld));

    // Extending by token an expired lock re-creates nothing either.
    let short = client
        .lock("ext2", Duration::from_millis(300))
        .await
        .unwrap();
    let token = short.token().to_string();
    short.leak();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let error = client
        .extend_token(&["ext2"], &token, Duration::from_secs(10))
        .await
        .unwrap_err();
    assert!(error.is_not_held(), "{error}");
    assert_eq!(nodes.values("ext2"), vec![None; 5]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extending_after_release_reports_not_held() {
    let nodes = common::shared(7100);
    let client = client(&nodes);
    let lock = client
        .lock("released", Duration::from_secs(10))
        .await
        .unwrap();
    let token = lock.token().to_string();
    lock.release().await.unwrap();
    let error = client
        .extend_token(&["released"], &token, Duration::from_secs(10))
        .await
        .unwrap_err();
    // The keys are gone and nobody else holds them: "not held", never "held by
    // someone else".
    assert_eq!(error.class(), Some(ErrorClass::NotHeld), "{error}");
    assert!(!error.is_held_elsewhere(), "{error}");
    assert!(error.to_string().contains("not held"), "{error}");
    assert!(!error.to_string().contains("someone else"), "{error}");
    assert_eq!(error.failure_reason(), Some(FailureReason::NotHeld));
    // Held by another token, it is "lock lost" (taken).
    let other = client
        .lock("released", Duration::from_secs(10))
        .await
        .unwrap();
    let error = client
        .extend_token(&["released"], &token, Duration::from_secs(10))
        .await
        .unwrap_err();
    assert_eq!(error.class(), Some(ErrorClass::LockLost), "{error}");
    other.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_extension_keeps_the_lock_and_reports_its_loss_at_once() {
    let nodes = common::shared(7100);
    let client = client(&nodes);
    let lock = client
        .lock_with(
            &["auto"],
            LockOptions::new()
                .ttl(Duration::from_millis(300))
                .auto_extend(true),
        )
        .await
        .unwrap();
    let mut lost = Box::pin(lock.lost());
    // Several TTLs later the lock is still held, extended many times.
    tokio::select! {
        lost = &mut lost => panic!("lost while nodes are healthy: {lost}"),
        () = tokio::time::sleep(Duration::from_millis(1200)) => {}
    }
    assert!(lock.is_held());
    assert!(lock.extensions() >= 3, "{} extensions", lock.extensions());
    assert!(nodes
        .values("auto")
        .iter()
        .all(|v| v.as_deref() == Some(lock.token())));

    // Deleted behind its back: the next extension finds it gone and the signal fires
    // within one extension period (a third of the TTL), well under a second.
    for i in 0..5 {
        nodes.del(i, "auto");
    }
    let deleted = Instant::now();
    let lost = tokio::time::timeout(Duration::from_secs(1), lost)
        .await
        .expect("the loss was signalled");
    assert_eq!(lost.reason, redlock_client::LostReason::NotHeld, "{lost}");
    assert!(deleted.elapsed() < Duration::from_millis(500));
    assert!(!lock.is_held());
    assert_eq!(nodes.values("auto"), vec![None; 5], "no resurrection");
    lock.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_extension_stops_at_its_bound() {
    let nodes = common::shared(7100);
    let client = Client::builder(nodes.urls.clone())
        .max_extensions(Some(2))
        .build()
        .unwrap();
    let lock = client
        .lock_with(
            &["bounded"],
            LockOptions::new()
                .ttl(Duration::from_millis(300))
                .auto_extend(true),
        )
        .await
        .unwrap();
    let started = Instant::now();
    let lost = tokio::time::timeout(Duration::from_secs(3), lock.lost())
        .await
        .expect("the lock ends after its last extension");
    assert_eq!(lost.reason, redlock_client::LostReason::ExtensionLimit);
    assert_eq!(lock.extensions(), 2);
    // Two extensions at about 200 ms each, then the last lease: roughly 0.7 s.
    assert!(started.elapsed() > Duration::from_millis(450));
    lock.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_expires_while_held_without_extension() {
    let nodes = common::shared(7100);
    let client = client(&nodes);
    let lock = client
        .lock("expiring", Duration::from_millis(300))
        .await
        .unwrap();
    let valid_until = lock.valid_until();
    let lost = tokio::time::timeout(Duration::from_secs(2), lock.lost())
        .await
        .expect("expiry is signalled");
    assert_eq!(lost.reason, redlock_client::LostReason::Expired);
    let now = Instant::now();
    assert!(now >= valid_until, "signalled early");
    assert!(
        now < valid_until + Duration::from_millis(200),
        "signalled late"
    );
    assert!(!lock.is_held());
    assert_eq!(lock.validity(), Duration::ZERO);
    // Redis drops the keys by itself; someone else can lock.
    assert!(Nodes::eventually(Duration::from_secs(1), || nodes
        .values("expiring")
        .iter()
        .all(Option::is_none)));
    let other = client
        .lock("expiring", Duration::from_secs(5))
        .await
        .unwrap();
    drop(lock);
    // Dropping the expired guard released nothing of the new holder's.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(nodes
        .values("expiring")
        .iter()
        .all(|v| v.as_deref() == Some(other.token())));
    other.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_guard_releases_in_the_background() {
    let nodes = common::shared(7100);
    let client = client(&nodes);
    let lock = client
        .lock("dropped", Duration::from_secs(30))
        .await
        .unwrap();
    assert!(Nodes::eventually(Duration::from_secs(1), || nodes
        .values("dropped")
        .iter()
        .all(Option::is_some)));
    drop(lock);
    assert!(
        Nodes::eventually(Duration::from_secs(2), || nodes
            .values("dropped")
            .iter()
            .all(Option::is_none)),
        "keys left after drop"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_missing_from_a_node_fall_back_to_eval() {
    let nodes = common::shared(7100);
    let client = client(&nodes);
    let lock = client
        .lock("flushed", Duration::from_secs(10))
        .await
        .unwrap();
    for i in 0..5 {
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query(&mut nodes.conn(i))
            .unwrap();
    }
    lock.extend().await.expect("extend through EVAL");
    assert!(lock.release().await.unwrap().released >= 3);
    assert!(client.wait_idle(Duration::from_secs(2)).await);
    assert_eq!(nodes.values("flushed"), vec![None; 5]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_even_split_fails_at_once_and_cleans_up() {
    // Four nodes, the key held by someone else on two: no quorum (3) is possible.
    let nodes = Nodes::start_with(7105, &["--nodes", "4"]);
    nodes.set(0, "split", "someone-else", 30_000);
    nodes.set(1, "split", "someone-else", 30_000);
    let client = client(&nodes);
    let started = Instant::now();
    let error = client
        .lock("split", Duration::from_secs(10))
        .await
        .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "took {:?}",
        started.elapsed()
    );
    assert!(error.is_held_elsewhere(), "{error}");
    assert_eq!(
        nodes.values("split"),
        vec![
            Some("someone-else".to_string()),
            Some("someone-else".to_string()),
            None,
            None
        ],
        "our keys on the free nodes were released, theirs kept"
    );
}
