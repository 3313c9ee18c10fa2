//! The five audit fixes of the core (commits e7765d0 and b849529), on five real nodes,
//! through the client's public API: a shortening extension ends the lease sooner (and
//! the keep-alive follows it), reserved auxiliary key names are refused before anything
//! is sent, a waiting acquisition dropped between attempts leaves the queue, a queue
//! entry lives at most 5 s whatever the retry delay, and the release of a lock on
//! several resources names each resource's own first waiter. Each test fails on the
//! core before the fixes. Nodes on base port 7850 (shared by the tests, which use
//! their own keys and run one at a time, as they measure time).

mod common;

use std::time::{Duration, Instant};

use redlock_client::{Client, Error, ErrorClass, LockOptions};

use common::Nodes;

const BASE_PORT: u16 = 7850;

use common::{client_with_retry_delay as client, runtime, serial};

fn zrange(nodes: &Nodes, index: usize, key: &str) -> Vec<String> {
    redis::cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .query(&mut nodes.conn(index))
        .unwrap()
}

/// The members of `key` (a sorted set) on every node.
fn queues(nodes: &Nodes, key: &str) -> Vec<Vec<String>> {
    (0..nodes.urls.len())
        .map(|i| zrange(nodes, i, key))
        .collect()
}

/// Queued on 3 nodes or more: a node whose SET of the holder's acquisition was still on
/// its way (the acquisition decided at the quorum) may have granted the waiter's first
/// attempt instead of queuing it.
fn queued_on_a_quorum(nodes: &Nodes, key: &str) -> bool {
    queues(nodes, key).iter().filter(|q| !q.is_empty()).count() >= 3
}

fn exists(nodes: &Nodes, index: usize, key: &str) -> bool {
    let n: i64 = redis::cmd("EXISTS")
        .arg(key)
        .query(&mut nodes.conn(index))
        .unwrap();
    n == 1
}

/// The node's clock, in milliseconds.
fn node_time_ms(nodes: &Nodes, index: usize) -> i64 {
    let (seconds, micros): (i64, i64) = redis::cmd("TIME").query(&mut nodes.conn(index)).unwrap();
    seconds * 1000 + micros / 1000
}

fn eventually(limit: Duration, check: impl FnMut() -> bool) -> bool {
    Nodes::eventually(limit, check)
}

// ---- 1. A shortening extension ----------------------------------------------------

#[test]
fn extending_a_10s_lock_to_1s_leaves_about_1s() {
    let _serial = serial();
    let nodes = common::shared(BASE_PORT);
    let rt = runtime();
    let client = client(&nodes, Duration::from_millis(200));
    let key = "audit:shorten";
    let lock = rt
        .block_on(client.lock(key, Duration::from_secs(10)))
        .unwrap();
    assert!(
        lock.validity() > Duration::from_secs(9),
        "{:?}",
        lock.validity()
    );
    let started = Instant::now();
    let report = rt
        .block_on(lock.extend_for(Duration::from_secs(1)))
        .unwrap();
    assert!(
        report.validity <= Duration::from_secs(1),
        "{:?}",
        report.validity
    );
    // The lock reads its validity from the new lease (before the fix: about 9.9 s).
    let validity = lock.validity();
    assert!(
        validity <= Duration::from_secs(1) && validity > Duration::from_millis(500),
        "validity after extending to 1 s: {validity:?}"
    );
    assert!(lock.valid_until() <= started + Duration::from_secs(1));
    assert!(lock.is_held());
    // The nodes agree: every key expires within 1 s (the quorum decided; the last nodes'
    // PEXPIRE may still be on its way; a key may be gone if this thread was kept waiting
    // on a loaded machine).
    let pttls = || {
        (0..nodes.urls.len())
            .map(|i| nodes.pttl(i, key))
            .collect::<Vec<_>>()
    };
    assert!(
        eventually(Duration::from_secs(1), || pttls()
            .iter()
            .all(|&pttl| pttl == -2 || (pttl > 0 && pttl <= 1000))),
        "PTTL {:?}",
        pttls()
    );
    // No longer held 1.2 s after the extension started (read from the clock, so a
    // descheduled test thread cannot make it pass or fail).
    std::thread::sleep(
        (started + Duration::from_millis(1200)).saturating_duration_since(Instant::now()),
    );
    assert!(!lock.is_held(), "still held 1.2 s after extending to 1 s");
    assert_eq!(lock.validity(), Duration::ZERO);
    assert!(eventually(Duration::from_millis(500), || (0..nodes
        .urls
        .len())
        .all(|i| !exists(&nodes, i, key))));
    drop(lock);
}

#[test]
fn the_keep_alive_follows_a_shortening_extension() {
    let _serial = serial();
    let nodes = common::shared(BASE_PORT);
    let rt = runtime();
    let client = client(&nodes, Duration::from_millis(200));
    let key = "audit:shorten:kept";
    let lock = rt
        .block_on(
            client.lock_with(
                &[key],
                LockOptions::new()
                    .ttl(Duration::from_secs(10))
                    .auto_extend(true),
            ),
        )
        .unwrap();
    let started = Instant::now();
    rt.block_on(lock.extend_for(Duration::from_secs(1)))
        .unwrap();
    assert!(
        lock.validity() <= Duration::from_secs(1),
        "{:?}",
        lock.validity()
    );
    // For 2.5 s (two and a half of the new leases) the lock stays held and every key
    // exists with at most 1 s left: the keep-alive extends by 1 s on the new lease's
    // schedule. Before the fix it kept the 10 s lease's schedule and the keys expired.
    while started.elapsed() < Duration::from_millis(2500) {
        assert!(
            lock.is_held(),
            "lost {:?} after the extension",
            started.elapsed()
        );
        let validity = lock.validity();
        assert!(validity <= Duration::from_secs(1), "validity {validity:?}");
        let held = (0..nodes.urls.len())
            .filter(|&i| {
                let pttl = nodes.pttl(i, key);
                assert!(pttl <= 1000, "node {i}: PTTL {pttl}");
                pttl > 0
            })
            .count();
        assert!(
            held >= 3,
            "{held} nodes hold the key {:?} after the extension",
            started.elapsed()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(lock.extensions() >= 2, "{} extensions", lock.extensions());
    rt.block_on(lock.release()).unwrap();
}

// ---- 2. Reserved names ------------------------------------------------------------

fn assert_reserved(result: Result<redlock_client::Lock, Error>, resource: &str) {
    match result {
        Err(Error::Usage(usage)) => {
            assert_eq!(usage.code(), "reserved_resource", "{resource}");
        }
        Err(other) => panic!("{resource}: {other:?}"),
        Ok(lock) => {
            drop(lock);
            panic!("{resource} was locked");
        }
    }
}

#[test]
fn auxiliary_key_names_are_refused_and_nothing_is_sent() {
    let _serial = serial();
    let nodes = common::shared(BASE_PORT);
    let rt = runtime();
    let plain = client(&nodes, Duration::from_millis(100));
    let prefixed = Client::builder(nodes.urls.clone())
        .key_prefix("app:")
        .build()
        .unwrap();
    let ttl = Duration::from_secs(5);
    for resource in [
        "{r}:waiters:turn",
        "{r}:fence",
        "lock:{order}:fence",
        "{r}:waiters",
    ] {
        let result = rt.block_on(plain.lock(resource, ttl));
        if let Err(error) = &result {
            assert_eq!(error.class(), Some(ErrorClass::InvalidArgument), "{error}");
        }
        assert_reserved(result, resource);
        // With a wait limit too (a queued acquisition).
        let waited = rt.block_on(plain.lock_with(
            &[resource],
            LockOptions::new().ttl(ttl).wait(Duration::from_secs(1)),
        ));
        assert_reserved(waited, resource);
        for i in 0..nodes.urls.len() {
            assert!(!exists(&nodes, i, resource), "node {i} has {resource}");
        }
    }
    let result = rt.block_on(prefixed.lock("{r}:fence", ttl));
    assert_reserved(result, "app:{r}:fence");
    for i in 0..nodes.urls.len() {
        assert!(!exists(&nodes, i, "app:{r}:fence"), "node {i}");
    }
    // Names that only look alike stay usable.
    for resource in ["r:fence", "orders:fence"] {
        let lock = rt.block_on(plain.lock(resource, ttl)).unwrap();
        assert!(nodes.values(resource).iter().flatten().count() >= 3);
        rt.block_on(lock.release()).unwrap();
    }
}

#[test]
fn a_lock_named_after_a_waiters_turn_key_is_refused_while_r_is_waited_for() {
    let _serial = serial();
    let nodes = common::shared(BASE_PORT);
    let rt = runtime();
    let holder = client(&nodes, Duration::from_millis(100));
    let waiter = client(&nodes, Duration::from_secs(3));
    let other = client(&nodes, Duration::from_millis(100));
    let held = rt
        .block_on(holder.lock("r", Duration::from_secs(10)))
        .unwrap();
    let waiting = {
        let waiter = waiter.clone();
        rt.spawn(async move {
            waiter
                .lock_with(&["r"], LockOptions::new().wait(Duration::from_secs(10)))
                .await
        })
    };
    assert!(
        eventually(Duration::from_secs(8), || queued_on_a_quorum(
            &nodes,
            "{r}:waiters"
        )),
        "{:?}",
        queues(&nodes, "{r}:waiters")
    );
    // The release of r would give its waiter the turn with SET {r}:waiters:turn PX 50,
    // over a lock of that name: such a lock is refused.
    let result = rt.block_on(other.lock("{r}:waiters:turn", Duration::from_secs(10)));
    assert_reserved(result, "{r}:waiters:turn");
    rt.block_on(held.release()).unwrap();
    let lock = rt.block_on(waiting).unwrap().unwrap();
    rt.block_on(lock.release()).unwrap();
}

// ---- 3. A waiting acquisition dropped between attempts leaves the queue ------------

fn abandon_leaves_the_queue(resource: &str, by_timeout: bool) {
    let nodes = common::shared(BASE_PORT);
    let rt = runtime();
    let holder = client(&nodes, Duration::from_millis(100));
    // A retry delay of 4 s: the waiter's entry lives about 5 s (the cap) after its refusal.
    let waiter = client(&nodes, Duration::from_secs(4));
    let order = format!("{{{resource}}}:waiters");
    let expiry = format!("{{{resource}}}:waiters:expiry");
    let held = rt
        .block_on(holder.lock(resource, Duration::from_secs(30)))
        .unwrap();
    let options = LockOptions::new().wait(Duration::from_secs(20));
    let task = {
        let (waiter, resource) = (waiter.clone(), resource.to_string());
        rt.spawn(async move {
            let resources = [resource];
            let acquisition = waiter.lock_with(&resources, options);
            if by_timeout {
                tokio::time::timeout(Duration::from_millis(2000), acquisition).await
            } else {
                Ok(acquisition.await)
            }
        })
    };
    assert!(
        eventually(Duration::from_secs(8), || queued_on_a_quorum(
            &nodes, &order
        )),
        "the waiter is not queued: {:?}",
        queues(&nodes, &order)
    );
    let queued = Instant::now();
    std::thread::sleep(Duration::from_millis(300));
    // It waits between attempts (its retry delay is 4 s).
    assert!(queued_on_a_quorum(&nodes, &order));
    if by_timeout {
        // The timeout drops the acquisition at 2 s, between its attempts.
        let outcome = rt.block_on(task).unwrap();
        assert!(outcome.is_err(), "the acquisition ended before its timeout");
    } else {
        task.abort();
        assert!(rt.block_on(task).unwrap_err().is_cancelled());
    }
    // Gone from both sets on every node, before the entry's lifetime (5 s from its
    // refusal) could end.
    let gone = eventually(Duration::from_millis(2500), || {
        queues(&nodes, &order).iter().all(Vec::is_empty)
            && queues(&nodes, &expiry).iter().all(Vec::is_empty)
    });
    assert!(
        gone,
        "{:?} after queuing, still queued: {:?} / {:?}",
        queued.elapsed(),
        queues(&nodes, &order),
        queues(&nodes, &expiry)
    );
    assert!(queued.elapsed() < Duration::from_millis(4500));
    // The holder is untouched.
    assert!(held.is_held());
    assert!(nodes.values(resource).iter().flatten().count() >= 3);
    rt.block_on(held.release()).unwrap();
}

#[test]
fn a_waiting_acquisition_aborted_between_attempts_leaves_the_queue() {
    let _serial = serial();
    abandon_leaves_the_queue("audit:abandon:abort", false);
}

#[test]
fn a_waiting_acquisition_timed_out_between_attempts_leaves_the_queue() {
    let _serial = serial();
    abandon_leaves_the_queue("audit:abandon:timeout", true);
}

// ---- 4. A queue entry lives at most 5 s -------------------------------------------

#[test]
fn a_queue_entry_lives_at_most_5s_whatever_the_retry_delay() {
    let _serial = serial();
    let nodes = common::shared(BASE_PORT);
    let rt = runtime();
    let resource = "audit:lifetime";
    let expiry = "{audit:lifetime}:waiters:expiry";
    let holder = client(&nodes, Duration::from_millis(100));
    let waiter = client(&nodes, Duration::from_secs(60));
    let held = rt
        .block_on(holder.lock(resource, Duration::from_secs(30)))
        .unwrap();
    let task = {
        let waiter = waiter.clone();
        rt.spawn(async move {
            waiter
                .lock_with(
                    &[resource],
                    LockOptions::new().wait(Duration::from_secs(120)),
                )
                .await
        })
    };
    assert!(eventually(Duration::from_secs(8), || queued_on_a_quorum(
        &nodes, expiry
    )));
    let mut checked = 0;
    for i in 0..nodes.urls.len() {
        // A node that granted the attempt (its SET of the holder still on its way), or
        // never had it, has no entry.
        let Some(member) = zrange(&nodes, i, expiry).pop() else {
            continue;
        };
        checked += 1;
        let score: f64 = redis::cmd("ZSCORE")
            .arg(expiry)
            .arg(&member)
            .query(&mut nodes.conn(i))
            .unwrap();
        let left = score as i64 - node_time_ms(&nodes, i);
        assert!(
            left <= 5000,
            "node {i}: the entry lives {left} ms more (retry delay 60 s)"
        );
        assert!(left > 0, "node {i}: {left}");
        let pttl = nodes.pttl(i, expiry);
        assert!(pttl <= 5000, "node {i}: the queue's PTTL {pttl}");
    }
    assert!(checked >= 3, "{checked} nodes queue the waiter");
    task.abort();
    let _ = rt.block_on(task);
    rt.block_on(held.release()).unwrap();
}

// ---- 5. The release of {a, b} names b's own first waiter --------------------------

#[test]
fn releasing_a_and_b_wakes_the_waiter_of_b_alone() {
    let _serial = serial();
    let nodes = common::shared(BASE_PORT);
    let rt = runtime();
    let a_holder = client(&nodes, Duration::from_millis(100));
    // Both waiters retry every 5 s: only a notice explains a quick acquisition.
    let b_waiter = client(&nodes, Duration::from_secs(5));
    let a_waiter = client(&nodes, Duration::from_secs(5));
    let held = rt
        .block_on(a_holder.lock_many(&["a", "b"], Duration::from_secs(30)))
        .unwrap();
    let spawn = |client: &Client, resource: &'static str| {
        let client = client.clone();
        rt.spawn(async move {
            let lock = client
                .lock_with(
                    &[resource],
                    LockOptions::new().wait(Duration::from_secs(10)),
                )
                .await;
            (lock, Instant::now())
        })
    };
    // A waiter of a first in a's queue: before the fix the release named it for b too.
    let waiting_a = spawn(&a_waiter, "a");
    assert!(
        eventually(Duration::from_secs(8), || queued_on_a_quorum(
            &nodes,
            "{a}:waiters"
        )),
        "{:?}",
        queues(&nodes, "{a}:waiters")
    );
    let waiting_b = spawn(&b_waiter, "b");
    assert!(
        eventually(Duration::from_secs(8), || queued_on_a_quorum(
            &nodes,
            "{b}:waiters"
        )),
        "{:?}",
        queues(&nodes, "{b}:waiters")
    );
    // Let the waiters' subscriptions settle (they are confirmed within a few round trips).
    std::thread::sleep(Duration::from_millis(300));
    let released = Instant::now();
    rt.block_on(held.release()).unwrap();
    let (lock_b, at_b) = rt.block_on(waiting_b).unwrap();
    let lock_b = lock_b.unwrap();
    let waited_b = at_b.duration_since(released);
    let (lock_a, at_a) = rt.block_on(waiting_a).unwrap();
    let lock_a = lock_a.unwrap();
    let waited_a = at_a.duration_since(released);
    assert!(
        waited_b < Duration::from_millis(2500),
        "the waiter of b acquired {waited_b:?} after the release (retry delay 5 s)"
    );
    assert!(
        waited_a < Duration::from_millis(2500),
        "the waiter of a acquired {waited_a:?} after the release (retry delay 5 s)"
    );
    rt.block_on(lock_b.release()).unwrap();
    rt.block_on(lock_a.release()).unwrap();
}

// ---- 6. A corrupt fence counter, and queue entries whose expiry was lost -------------

#[test]
fn a_fence_counter_that_is_not_a_number_fails_the_acquisition_and_sets_nothing() {
    // Before, `tonumber(...) or 0` counted it as 0: the counter started again from 1 and
    // fencing tokens went backwards. Now each node answers an error and sets nothing.
    let _serial = serial();
    let nodes = common::shared(BASE_PORT);
    let rt = runtime();
    let client = Client::builder(nodes.urls.clone())
        .fencing(true)
        .build()
        .unwrap();
    let key = "audit:corrupt-fence";
    let fence = "{audit:corrupt-fence}:fence";
    for i in 0..nodes.urls.len() {
        nodes.set(i, fence, "not-a-number", 60_000);
    }
    let error = rt
        .block_on(client.lock(key, Duration::from_secs(10)))
        .unwrap_err();
    assert_eq!(error.class(), Some(ErrorClass::NodesFailing), "{error}");
    let reported = error
        .nodes()
        .iter()
        .filter(|node| {
            matches!(&node.result, redlock_client::NodeResult::Error(text)
                if text.contains("fence counter is not a number"))
        })
        .count();
    assert!(reported >= 3, "{error}");
    for i in 0..nodes.urls.len() {
        assert_eq!(nodes.get(i, fence).as_deref(), Some("not-a-number"));
        assert!(!exists(&nodes, i, key), "node {i} kept the lock key");
        nodes.del(i, fence);
    }
}

#[test]
fn a_queue_entry_whose_expiry_was_lost_is_dropped_by_the_next_release() {
    // An entry in the order set with no score in the expiry set (an eviction, a partial
    // restore) never expired: every release named it. The release script drops it.
    let _serial = serial();
    let nodes = common::shared(BASE_PORT);
    let rt = runtime();
    let client = client(&nodes, Duration::from_millis(200));
    let key = "audit:ghost";
    let ghost = "0123456789abcdef0123456789abcdef01234567";
    for i in 0..nodes.urls.len() {
        let _: () = redis::cmd("ZADD")
            .arg("{audit:ghost}:waiters")
            .arg(0)
            .arg(ghost)
            .query(&mut nodes.conn(i))
            .unwrap();
    }
    let lock = rt
        .block_on(client.lock(key, Duration::from_secs(10)))
        .unwrap();
    rt.block_on(lock.release()).unwrap();
    assert!(
        eventually(Duration::from_secs(5), || queues(
            &nodes,
            "{audit:ghost}:waiters"
        )
        .iter()
        .all(|queue| !queue.iter().any(|entry| entry == ghost))),
        "{:?}",
        queues(&nodes, "{audit:ghost}:waiters")
    );
}
