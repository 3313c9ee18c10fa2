//! Event hooks on real nodes: the core's events reach `ClientBuilder::on_event` with their
//! timings and causes, a lost lock is reported from the keep-alive, and a hook that
//! panics breaks nothing. Nodes on base port 7745; ports 7196-7198 stay closed.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::Nodes;
use redlock_client::{
    Client, ClientBuilder, Event, EventKind, FailureReason, LockOptions, LostReason, NodeCause,
    OperationKind,
};

type Seen = Arc<Mutex<Vec<Event>>>;

fn recording(builder: ClientBuilder) -> (ClientBuilder, Seen) {
    let seen: Seen = Arc::default();
    let sink = Arc::clone(&seen);
    let builder = builder.on_event(move |event| sink.lock().unwrap().push(event.clone()));
    (builder, seen)
}

fn take(seen: &Seen) -> Vec<Event> {
    std::mem::take(&mut *seen.lock().unwrap())
}

fn kinds(events: &[Event]) -> Vec<EventKind> {
    events.iter().map(|e| e.kind).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_on_real_nodes() {
    let nodes = Nodes::start(7745);
    let panics = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&panics);
    // The first hook panics on every event; the second must still hear every one.
    let builder = Client::builder(nodes.urls.clone())
        .attempts(2)
        .retry_delay(Duration::from_millis(50), Duration::from_millis(10))
        .node_timeout(Duration::from_millis(200))
        .on_event(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
            panic!("a hook that panics");
        });
    let (builder, seen) = recording(builder);
    let client = builder.build().unwrap();

    // Acquired, then released, with timings.
    let before = client.now();
    let lock = client
        .lock("events:a", Duration::from_secs(10))
        .await
        .unwrap();
    let events = take(&seen);
    let acquired = events
        .iter()
        .find(|e| e.kind == EventKind::Acquired)
        .unwrap_or_else(|| panic!("{events:?}"));
    assert_eq!(acquired.operation, Some(OperationKind::Acquire));
    assert_eq!(acquired.attempt, 1);
    assert!(acquired.at >= before && acquired.at <= client.now());
    assert!(acquired.elapsed > Duration::ZERO && acquired.elapsed < Duration::from_secs(2));
    assert_eq!(acquired.nodes.len(), 5);
    assert!(lock.is_held(), "the panicking hook did not break the lock");
    let report = lock.release().await.unwrap();
    assert!(report.released >= 3);
    let events = take(&seen);
    let released = events
        .iter()
        .find(|e| e.kind == EventKind::Released)
        .unwrap_or_else(|| panic!("{events:?}"));
    assert_eq!(released.operation, Some(OperationKind::Release));
    assert!(released.elapsed < Duration::from_secs(2));
    assert!(panics.load(Ordering::SeqCst) >= 2);

    // Held by someone else on every node: one retry, then not acquired.
    for node in 0..5 {
        nodes.set(node, "events:held", "someone-else", 10_000);
    }
    let error = client
        .lock("events:held", Duration::from_secs(10))
        .await
        .unwrap_err();
    assert!(error.is_held_elsewhere(), "{error}");
    let events = take(&seen);
    assert_eq!(
        kinds(&events),
        vec![EventKind::Retry, EventKind::NotAcquired],
        "{events:?}"
    );
    let retry = &events[0];
    assert_eq!(retry.attempt, 1);
    assert_eq!(retry.reason, Some(FailureReason::Conflict));
    let retry_at = retry.retry_at.expect("retry_at");
    assert!(retry_at > retry.at);
    assert!(retry_at.saturating_duration_since(retry.at) <= Duration::from_millis(60));
    assert_eq!(events[1].attempt, 2);
    assert_eq!(events[1].reason, Some(FailureReason::Conflict));

    // Inspections report too.
    assert!(client.is_locked(&["events:held"]).await.unwrap());
    assert_eq!(kinds(&take(&seen)), vec![EventKind::Inspected]);

    // Lost: the keys deleted behind an auto-extending lock's back.
    let lock = client
        .lock_with(
            &["events:lost"],
            LockOptions::new()
                .ttl(Duration::from_millis(600))
                .auto_extend(true),
        )
        .await
        .unwrap();
    take(&seen);
    for node in 0..5 {
        nodes.del(node, "events:lost");
    }
    let lost = tokio::time::timeout(Duration::from_secs(3), lock.lost())
        .await
        .expect("lost within 3 s");
    assert_eq!(lost.reason, LostReason::NotHeld);
    let events = take(&seen);
    let not_extended = events
        .iter()
        .find(|e| e.kind == EventKind::NotExtended)
        .unwrap_or_else(|| panic!("{events:?}"));
    assert_eq!(not_extended.reason, Some(FailureReason::NotHeld));
    let lost_events: Vec<_> = events
        .iter()
        .filter(|e| e.kind == EventKind::Lost)
        .collect();
    assert_eq!(lost_events.len(), 1, "{events:?}");
    assert_eq!(lost_events[0].lost_reason, Some(LostReason::NotHeld));
    assert_eq!(lost_events[0].operation, None);
    assert!(lost_events[0].elapsed > Duration::ZERO);
    drop(lock);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_failed_names_the_refused_nodes() {
    let nodes = Nodes::start_with(7751, &["--nodes", "2"]);
    let mut urls = nodes.urls.clone();
    for port in 7196..=7198 {
        urls.push(format!("redis://127.0.0.1:{port}"));
    }
    let (builder, seen) = recording(
        Client::builder(urls)
            .attempts(1)
            .node_timeout(Duration::from_millis(300)),
    );
    let client = builder.build().unwrap();
    let error = client
        .lock("events:refused", Duration::from_secs(10))
        .await
        .unwrap_err();
    assert!(error.is_unreachable(), "{error}");
    let events = take(&seen);
    let mut failed: Vec<(usize, Option<NodeCause>)> = events
        .iter()
        .filter(|e| e.kind == EventKind::NodeFailed)
        .map(|e| (e.node.expect("node"), e.cause))
        .collect();
    failed.sort_by_key(|(node, _)| *node);
    // Each fails in the attempt's round and again in the release after it.
    failed.dedup();
    assert_eq!(
        failed,
        vec![
            (2, Some(NodeCause::Refused)),
            (3, Some(NodeCause::Refused)),
            (4, Some(NodeCause::Refused))
        ],
        "{events:?}"
    );
    let last = events.last().unwrap();
    assert_eq!(last.kind, EventKind::NotAcquired);
    assert_eq!(last.reason, Some(FailureReason::NodesFailed));
}
