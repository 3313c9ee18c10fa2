//! Waiting for a lock against real nodes: wait limits, release notices that wake a
//! waiter long before its retry delay, notices lost with their subscriber connections,
//! caught again when the subscribers are back or left to the retry schedule when they are
//! not, cancelled waits, fairness while a holder re-acquires in a loop, the turn a
//! release gives the waiter it names (a newcomer cannot take the lock first), a release
//! that names a waiter reaching that waiter's client alone, and
//! subscribers through AUTH and TLS. Nodes on base ports 7176 (shared), 7723 and 7728
//! (the tests that kill subscriber connections), 7733 (password) and 7736 (TLS). The
//! tests measure time, so they run one at a time.

mod common;

use std::time::{Duration, Instant};

use redlock_client::core::{
    notice_channel, queue_keys, waiter_channel, QUEUED_ACQUIRE_SCRIPT, RELEASE_SCRIPT,
};
use redlock_client::{Client, ErrorClass, LockOptions};

use common::Nodes;

use common::{client_with_retry_delay as client, runtime, serial};

/// `waiter` waiting up to 10 s for `resource` on a task of its own: the outcome and when
/// it came.
fn spawn_waiter(
    waiter: &Client,
    resource: &str,
) -> tokio::task::JoinHandle<(Result<redlock_client::Lock, redlock_client::Error>, Instant)> {
    let (waiter, resource) = (waiter.clone(), resource.to_string());
    tokio::spawn(async move {
        let options = LockOptions::new().wait(Duration::from_secs(10));
        let lock = waiter.lock_with(&[resource], options).await;
        (lock, Instant::now())
    })
}

/// Subscribers of `resource`'s channels on each node: of its notice channel, once every
/// waiter channel of it has as many (a waiter subscribes to both), otherwise -1.
fn listeners(nodes: &Nodes, resource: &str) -> Vec<i64> {
    listeners_of(nodes, resource, true)
}

/// As [`listeners`]; without `waiting` (acquisitions without a wait limit are no
/// waiters), of its notice channel.
fn listeners_of(nodes: &Nodes, resource: &str, waiting: bool) -> Vec<i64> {
    let channel = notice_channel(resource.as_bytes());
    let pattern = waiter_channel(b"*", resource.as_bytes());
    (0..nodes.urls.len())
        .map(|i| {
            let mut conn = nodes.conn(i);
            let waiters: Vec<Vec<u8>> = redis::cmd("PUBSUB")
                .arg("CHANNELS")
                .arg(&pattern)
                .query(&mut conn)
                .unwrap();
            let counts: Vec<(Vec<u8>, i64)> = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg(&channel)
                .arg(waiters)
                .query(&mut conn)
                .unwrap();
            let shared = counts[0].1;
            let waiters: i64 = counts[1..].iter().map(|(_, n)| n).sum();
            if !waiting || shared == waiters {
                shared
            } else {
                -1
            }
        })
        .collect()
}

fn eventually(check: impl FnMut() -> bool) -> bool {
    Nodes::eventually(Duration::from_secs(3), check)
}

#[test]
fn a_waiter_acquires_within_a_few_round_trips_of_the_release() {
    let _serial = serial();
    let nodes = common::shared(7176);
    let rt = runtime();
    let holder = client(&nodes, Duration::from_millis(200));
    let waiter = client(&nodes, Duration::from_secs(2));
    rt.block_on(async {
        // One uncontended acquisition, for scale.
        let started = Instant::now();
        let lock = waiter
            .lock("wait:fast", Duration::from_secs(10))
            .await
            .unwrap();
        let uncontended = started.elapsed();
        lock.release().await.unwrap();

        let lock = holder
            .lock("wait:fast", Duration::from_secs(10))
            .await
            .unwrap();
        let waiting = spawn_waiter(&waiter, "wait:fast");
        // The waiter tried once, found the lock held and subscribed on every node.
        assert!(eventually(|| listeners(&nodes, "wait:fast") == vec![1; 5]));
        assert_eq!(waiter.notice_subscribers(), 5);
        let released = Instant::now();
        lock.release().await.unwrap();
        let (lock, acquired) = waiting.await.unwrap();
        let lock = lock.expect("the waiter got the lock");
        let handoff = acquired.duration_since(released);
        println!("release to next holder: {handoff:?} (uncontended acquisition {uncontended:?})");
        // Its retry delay is 2 s: only the notices explain a hand-off this fast.
        assert!(handoff < Duration::from_millis(50), "{handoff:?}");
        // Its first attempt and the one the release started. Two more are legitimate: one
        // its confirmed subscriptions may start (a quorum of them came after the
        // refusals: a release may have come before they took effect), and one a notice of
        // its own earlier release may start, still on its way. Each is one attempt the
        // nodes decide.
        assert!((2..=4).contains(&lock.attempts()), "{}", lock.attempts());
        // Nobody waits any more: once the channel's linger ends it is unsubscribed
        // everywhere, and the core closes the connections nothing needs.
        assert!(eventually(|| listeners(&nodes, "wait:fast") == vec![0; 5]));
        assert!(eventually(|| waiter.notice_subscribers() == 0));
        lock.release().await.unwrap();
    });
}

#[test]
fn a_retrying_acquisition_without_a_wait_limit_listens_once_its_first_attempt_failed() {
    let _serial = serial();
    let nodes = common::shared(7176);
    let rt = runtime();
    let holder = client(&nodes, Duration::from_millis(200));
    // Three attempts 2 s apart, no wait limit: the core has it listen once its first
    // attempt failed (`Operation::listens`).
    let waiter = Client::builder(nodes.urls.clone())
        .attempts(3)
        .retry_delay(Duration::from_secs(2), Duration::ZERO)
        .build()
        .unwrap();
    rt.block_on(async {
        let lock = holder
            .lock("wait:retrying", Duration::from_secs(10))
            .await
            .unwrap();
        let waiting = {
            let waiter = waiter.clone();
            tokio::spawn(async move {
                let lock = waiter.lock("wait:retrying", Duration::from_secs(10)).await;
                (lock, Instant::now())
            })
        };
        assert!(eventually(
            || listeners_of(&nodes, "wait:retrying", false) == vec![1; 5]
        ));
        let released = Instant::now();
        lock.release().await.unwrap();
        let (lock, acquired) = waiting.await.unwrap();
        let lock = lock.expect("the waiter got the lock");
        let handoff = acquired.duration_since(released);
        println!("retrying acquisition, release to next holder: {handoff:?}");
        assert!(handoff < Duration::from_millis(500), "{handoff:?}");
        assert_eq!(lock.attempts(), 2);
        lock.release().await.unwrap();
    });
}

#[test]
fn a_wait_limit_gives_up_at_the_limit_with_held_elsewhere() {
    let _serial = serial();
    let nodes = common::shared(7176);
    let rt = runtime();
    let holder = client(&nodes, Duration::from_millis(200));
    // The core starts the last attempt at the latest one node timeout (and the 1 ms
    // retry floor) before the limit, so that it ends by then: the limit is kept to within
    // a node timeout on either side. 30 ms here (the default, 50 ms, can end 51 ms early).
    let waiter = Client::builder(nodes.urls.clone())
        .node_timeout(Duration::from_millis(30))
        .build()
        .unwrap();
    rt.block_on(async {
        let lock = holder
            .lock("wait:limit", Duration::from_secs(10))
            .await
            .unwrap();
        // The holder's lock is decided at a quorum; its last SETs may still be on their
        // way, and a waiter's attempt that reached a node first would take it there (and
        // give it back), leaving that node empty. Wait for the holder's key everywhere.
        let token = lock.token().to_string();
        let held_everywhere = || {
            nodes
                .values("wait:limit")
                .iter()
                .all(|v| v.as_deref() == Some(token.as_str()))
        };
        assert!(eventually(&held_everywhere));
        for limit in [Duration::from_millis(500), Duration::from_millis(1200)] {
            let started = Instant::now();
            let error = waiter
                .lock_with(&["wait:limit"], LockOptions::new().wait(limit))
                .await
                .unwrap_err();
            let waited = started.elapsed();
            assert_eq!(error.class(), Some(ErrorClass::HeldElsewhere), "{error}");
            assert!(
                waited + Duration::from_millis(50) >= limit
                    && waited <= limit + Duration::from_millis(50),
                "limit {limit:?}, gave up after {waited:?}"
            );
        }
        // A limit of zero tries once.
        let error = waiter
            .lock_with(&["wait:limit"], LockOptions::new().wait(Duration::ZERO))
            .await
            .unwrap_err();
        assert!(matches!(&error, redlock_client::Error::NotAcquired(n) if n.attempts == 1));
        // Nothing left behind: the holder's keys, no subscription.
        assert!(held_everywhere());
        assert!(eventually(|| listeners(&nodes, "wait:limit") == vec![0; 5]));
        lock.release().await.unwrap();
    });
}

#[test]
fn a_cancelled_wait_leaves_nothing_behind() {
    let _serial = serial();
    let nodes = common::shared(7176);
    let rt = runtime();
    let holder = client(&nodes, Duration::from_millis(200));
    let waiter = client(&nodes, Duration::from_millis(20));
    rt.block_on(async {
        let lock = holder
            .lock("wait:cancel", Duration::from_secs(10))
            .await
            .unwrap();
        let options = LockOptions::new().wait(Duration::from_secs(10));
        let wait = waiter.lock_with(&["wait:cancel"], options);
        assert!(tokio::time::timeout(Duration::from_millis(300), wait)
            .await
            .is_err());
        assert!(eventually(|| listeners(&nodes, "wait:cancel") == vec![0; 5]));
        lock.release().await.unwrap();
        assert!(waiter.wait_idle(Duration::from_secs(2)).await);
        assert_eq!(nodes.values("wait:cancel"), vec![None; 5]);
    });
}

/// Kills every subscriber connection of `nodes` (the release notices they would carry
/// are lost).
fn kill_subscribers(nodes: &Nodes) {
    for i in 0..nodes.urls.len() {
        let _: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("pubsub")
            .query(&mut nodes.conn(i))
            .unwrap();
    }
}

/// `ACL SETUSER default <rule>` on every node of `nodes`.
fn acl_default(nodes: &Nodes, rule: &str) -> redis::RedisResult<()> {
    for url in &nodes.urls {
        let mut conn = redis::Client::open(url.as_str())?
            .get_connection_with_timeout(Duration::from_secs(2))?;
        redis::cmd("ACL")
            .arg("SETUSER")
            .arg("default")
            .arg(rule)
            .query::<()>(&mut conn)?;
    }
    Ok(())
}

/// Gives the default user `SUBSCRIBE` back on every node when dropped, even after a
/// failed assertion.
struct SubscribeRestored<'a>(&'a Nodes);

impl Drop for SubscribeRestored<'_> {
    fn drop(&mut self) {
        if let Err(error) = acl_default(self.0, "+subscribe") {
            eprintln!("could not restore SUBSCRIBE: {error}");
        }
    }
}

#[test]
fn lost_notices_are_caught_when_the_subscriber_is_back() {
    let _serial = serial();
    let nodes = Nodes::start(7723);
    let rt = runtime();
    let holder = client(&nodes, Duration::from_millis(200));
    let retry = Duration::from_secs(3);
    let waiter = client(&nodes, retry);
    rt.block_on(async {
        let lock = holder
            .lock("wait:lost", Duration::from_secs(10))
            .await
            .unwrap();
        let waiting = spawn_waiter(&waiter, "wait:lost");
        assert!(eventually(|| listeners(&nodes, "wait:lost") == vec![1; 5]));
        // The attempts its subscriptions started are over: it sleeps out its retry delay.
        tokio::time::sleep(Duration::from_millis(200)).await;
        // Every subscriber connection dies, and the release comes at once: nobody hears it.
        kill_subscribers(&nodes);
        let released = Instant::now();
        lock.release().await.unwrap();
        let (lock, acquired) = waiting.await.unwrap();
        let lock = lock.expect("the waiter got the lock");
        // The subscribers came back, and a quorum of confirmed subscriptions stood for the
        // release (the waiter is first in the queue): it tried again long before its retry
        // delay.
        let after_release = acquired.duration_since(released);
        println!("notices lost: acquired {after_release:?} after the release");
        assert!(
            after_release < Duration::from_millis(1500),
            "{after_release:?}"
        );
        // A subscriber is back (its confirmation started the attempt). Not necessarily a
        // quorum of them: confirmations the waiter counted before the kill, on subscriptions
        // that took effect after a node refused its last attempt, still count as releases
        // it may have missed, so one new confirmation can complete the quorum; the nodes
        // whose pause ends after the waiter got the lock find nobody waiting, and the next
        // waiter opens them.
        assert!(waiter.notice_subscribers() >= 1);
        lock.release().await.unwrap();
    });
}

#[test]
fn notices_that_never_come_fall_back_to_the_retry_schedule() {
    let _serial = serial();
    let nodes = Nodes::start(7728);
    let rt = runtime();
    let holder = client(&nodes, Duration::from_millis(200));
    let retry = Duration::from_millis(600);
    let waiter = client(&nodes, retry);
    let restored = SubscribeRestored(&nodes);
    rt.block_on(async {
        let lock = holder
            .lock("wait:refused", Duration::from_secs(10))
            .await
            .unwrap();
        let started = Instant::now();
        let waiting = spawn_waiter(&waiter, "wait:refused");
        assert!(eventually(
            || listeners(&nodes, "wait:refused") == vec![1; 5]
        ));
        tokio::time::sleep(Duration::from_millis(100)).await;
        // Subscribing again is refused (NOPERM) once every subscriber connection dies:
        // the notices of the release never come.
        acl_default(&nodes, "-subscribe").unwrap();
        kill_subscribers(&nodes);
        let released = Instant::now();
        lock.release().await.unwrap();
        let (lock, acquired) = waiting.await.unwrap();
        let lock = lock.expect("the waiter got the lock at its next retry");
        // Not woken, but not later than its retry delay after its last attempt either.
        let after_release = acquired.duration_since(released);
        let after_start = acquired.duration_since(started);
        println!("without notices: acquired {after_release:?} after the release");
        assert!(
            after_release > Duration::from_millis(200),
            "{after_release:?}"
        );
        assert!(
            after_start < retry + Duration::from_millis(200),
            "{after_start:?}"
        );
        lock.release().await.unwrap();

        // SUBSCRIBE allowed again: the next waiter gets new subscriber connections once
        // the core's pause after the refusals ends, and notices work again.
        acl_default(&nodes, "+subscribe").unwrap();
        let lock = holder
            .lock("wait:refused", Duration::from_secs(10))
            .await
            .unwrap();
        let waiting = spawn_waiter(&waiter, "wait:refused");
        assert!(eventually(
            || listeners(&nodes, "wait:refused") == vec![1; 5]
        ));
        assert_eq!(waiter.notice_subscribers(), 5);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let released = Instant::now();
        lock.release().await.unwrap();
        let (lock, acquired) = waiting.await.unwrap();
        let handoff = acquired.duration_since(released);
        assert!(handoff < Duration::from_millis(50), "{handoff:?}");
        lock.unwrap().release().await.unwrap();
    });
    drop(restored);
}

/// Connections node `i` of `nodes` accepted so far (`INFO stats`); reading it opens one.
fn connections_received(nodes: &Nodes, i: usize) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("stats")
        .query(&mut nodes.conn(i))
        .unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix("total_connections_received:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("INFO stats names total_connections_received")
}

#[test]
fn a_refused_subscription_is_opened_again_at_the_core_pace_not_in_a_loop() {
    let _serial = serial();
    let nodes = Nodes::start(7723);
    let rt = runtime();
    let holder = client(&nodes, Duration::from_millis(200));
    let waiter = client(&nodes, Duration::from_secs(3));
    let restored = SubscribeRestored(&nodes);
    rt.block_on(async {
        let lock = holder
            .lock("wait:paced", Duration::from_secs(10))
            .await
            .unwrap();
        // The waiter's command connections first, so that what follows counts only
        // subscriber connections.
        assert!(waiter
            .connect(Duration::from_secs(2))
            .await
            .iter()
            .all(Result::is_ok));
        acl_default(&nodes, "-subscribe").unwrap();
        let before = connections_received(&nodes, 0);
        let waiting = spawn_waiter(&waiter, "wait:paced");
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        // Opened at once, refused, then again after 100, 200 and 400 ms (the core's
        // pauses, doubling): four subscriber connections in the second, and one more
        // for each INFO read. A driver that reopened at once would open hundreds.
        let opened = connections_received(&nodes, 0) - before - 1;
        println!("subscriber connections opened in 1 s with SUBSCRIBE refused: {opened}");
        assert!((3..=5).contains(&opened), "{opened}");
        lock.release().await.unwrap();
        let (lock, _) = waiting.await.unwrap();
        lock.expect("the waiter got the lock at its retry")
            .release()
            .await
            .unwrap();
    });
    drop(restored);
}

#[test]
fn every_waiter_gets_the_lock_while_a_holder_re_acquires_in_a_loop() {
    let _serial = serial();
    let nodes = common::shared(7176);
    let rt = runtime();
    const WAITERS: usize = 8;
    const HOLD: Duration = Duration::from_millis(10);
    // Every waiter is served within this, from the moment it starts waiting.
    const BOUND: Duration = Duration::from_secs(3);
    rt.block_on(async {
        let holder = Client::new(nodes.urls.clone()).unwrap();
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let looping = tokio::spawn({
            let done = done.clone();
            async move {
                let mut turns = 0u32;
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    let options = LockOptions::new().wait(Duration::from_secs(10));
                    let lock = holder.lock_with(&["wait:fair"], options).await.unwrap();
                    turns += 1;
                    tokio::time::sleep(HOLD).await;
                    lock.release().await.unwrap();
                }
                turns
            }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut waiters = Vec::new();
        for _ in 0..WAITERS {
            let client = Client::new(nodes.urls.clone()).unwrap();
            waiters.push(tokio::spawn(async move {
                let started = Instant::now();
                let options = LockOptions::new().wait(Duration::from_secs(10));
                let lock = client.lock_with(&["wait:fair"], options).await?;
                let waited = started.elapsed();
                tokio::time::sleep(HOLD).await;
                lock.release().await?;
                Ok::<Duration, redlock_client::Error>(waited)
            }));
        }
        let mut waits = Vec::new();
        for waiter in waiters {
            waits.push(waiter.await.unwrap().expect("every waiter gets the lock"));
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        let turns = looping.await.unwrap();
        let max = waits.iter().max().copied().unwrap();
        let mean = waits.iter().sum::<Duration>() / WAITERS as u32;
        println!(
            "8 waiters against a looping holder ({turns} turns): mean wait {mean:?}, max {max:?}"
        );
        assert!(max < BOUND, "a waiter waited {max:?}");
    });
}

#[test]
fn a_newcomer_does_not_take_the_lock_from_the_waiter_a_release_names() {
    let _serial = serial();
    let nodes = common::shared(7176);
    let rt = runtime();
    let waiter = client(&nodes, Duration::from_secs(2));
    let key = "wait:turn";
    let [order, expiry] = queue_keys(key.as_bytes());
    // The holder's key, set on every node as an acquisition sets it.
    for i in 0..5 {
        let set: Option<String> = redis::cmd("SET")
            .arg(key)
            .arg("holder-token")
            .arg("PX")
            .arg(10_000)
            .arg("NX")
            .query(&mut nodes.conn(i))
            .unwrap();
        assert_eq!(set.as_deref(), Some("OK"));
    }
    rt.block_on(async {
        let waiting = spawn_waiter(&waiter, key);
        // The waiter was refused everywhere: queued and listening on every node.
        assert!(eventually(|| listeners(&nodes, key) == vec![1; 5]));
        // On each node, the holder's release and, straight behind it in the same
        // pipeline, a newcomer's waiting attempt: the newcomer reaches the free key
        // before the named waiter can, and is still refused and queued behind it. The
        // release gave the waiter the turn, which it does only when its notice reached
        // a subscriber.
        let released = Instant::now();
        let turn = format!("{{{key}}}:waiters:turn");
        for i in 0..5 {
            let (release, newcomer, holds_turn): (i64, i64, Option<String>) = redis::pipe()
                .cmd("EVAL")
                .arg(RELEASE_SCRIPT)
                .arg(1)
                .arg(key)
                .arg("holder-token")
                .cmd("EVAL")
                .arg(QUEUED_ACQUIRE_SCRIPT)
                .arg(3)
                .arg(key)
                .arg(&order)
                .arg(&expiry)
                .arg("newcomer-token")
                .arg(10_000)
                .arg("newcomer")
                .arg(5_000)
                .cmd("GET")
                .arg(&turn)
                .query(&mut nodes.conn(i))
                .unwrap();
            assert_eq!(release, 1, "node {i}: released");
            assert!(
                holds_turn.is_some_and(|waiter| waiter != "newcomer"),
                "node {i}: the waiter heard it and has the turn"
            );
            assert_eq!(
                newcomer, -1,
                "node {i}: the newcomer is second in the queue"
            );
        }
        let (lock, acquired) = waiting.await.unwrap();
        let lock = lock.expect("the named waiter got the lock");
        let handoff = acquired.duration_since(released);
        assert!(handoff < Duration::from_millis(50), "{handoff:?}");
        for i in 0..5 {
            let queue: Vec<String> = redis::cmd("ZRANGE")
                .arg(&order)
                .arg(0)
                .arg(-1)
                .query(&mut nodes.conn(i))
                .unwrap();
            assert_eq!(
                queue.last().map(String::as_str),
                Some("newcomer"),
                "node {i}"
            );
        }
        lock.release().await.unwrap();
        for i in 0..5 {
            let _: () = redis::cmd("DEL")
                .arg(&order)
                .arg(&expiry)
                .query(&mut nodes.conn(i))
                .unwrap();
        }
    });
}

/// What `subscriber` receives within 200 ms: the channel and the message, if anything.
fn received(subscriber: &mut redis::PubSub) -> Option<(Vec<u8>, Vec<u8>)> {
    let message = subscriber.get_message().ok()?;
    Some((
        message.get_channel_name().as_bytes().to_vec(),
        message.get_payload_bytes().to_vec(),
    ))
}

#[test]
fn a_release_that_names_a_waiter_reaches_that_waiters_client_alone() {
    let _serial = serial();
    let nodes = common::shared(7176);
    let key = "wait:addressed";
    let [order, expiry] = queue_keys(key.as_bytes());
    // Two waiters of two clients (their ids begin with their listener ids), queued in
    // this order behind a holder.
    let (first, second) = ("0123456789abcdef-first", "fedcba9876543210-second");
    let mut conn = nodes.conn(0);
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg("holder")
        .arg("PX")
        .arg(10_000)
        .query(&mut conn)
        .unwrap();
    for (place, waiter) in [first, second].into_iter().enumerate() {
        let refused: i64 = redis::cmd("EVAL")
            .arg(QUEUED_ACQUIRE_SCRIPT)
            .arg(3)
            .arg(key)
            .arg(&order)
            .arg(&expiry)
            .arg(format!("{waiter}-attempt"))
            .arg(10_000)
            .arg(waiter)
            .arg(5_000)
            .query(&mut conn)
            .unwrap();
        assert_eq!(refused, -(place as i64));
    }
    // A listener on the notice channel and one on each waiter's channel.
    let channels = [
        notice_channel(key.as_bytes()),
        waiter_channel(first.as_bytes(), key.as_bytes()),
        waiter_channel(second.as_bytes(), key.as_bytes()),
    ];
    assert_eq!(
        channels[1],
        b"redlock:waiter:0123456789abcdef:wait:addressed"
    );
    let mut connections: Vec<redis::Connection> = channels.iter().map(|_| nodes.conn(0)).collect();
    let mut subscribers: Vec<redis::PubSub> = connections
        .iter_mut()
        .zip(&channels)
        .map(|(connection, channel)| {
            let mut subscriber = connection.as_pubsub();
            subscriber.subscribe(channel).unwrap();
            subscriber
                .set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            subscriber
        })
        .collect();
    let release = |token: &str, leaving: Option<&str>, conn: &mut redis::Connection| {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(RELEASE_SCRIPT).arg(1).arg(key).arg(token);
        if let Some(waiter) = leaving {
            cmd.arg(waiter);
        }
        cmd.query::<i64>(conn).unwrap()
    };
    let turn = format!("{{{key}}}:waiters:turn");
    let holds_turn = |conn: &mut redis::Connection| -> Option<String> {
        redis::cmd("GET").arg(&turn).query(conn).unwrap()
    };
    let take = |token: &str, conn: &mut redis::Connection| {
        let _: () = redis::cmd("SET")
            .arg(key)
            .arg(token)
            .arg("PX")
            .arg(10_000)
            .query(conn)
            .unwrap();
    };
    // The holder's release names the first waiter, on its channel alone: its listener
    // heard it, which gives it the turn.
    assert_eq!(release("holder", None, &mut conn), 1);
    assert_eq!(holds_turn(&mut conn).as_deref(), Some(first));
    assert_eq!(
        received(&mut subscribers[1]),
        Some((channels[1].clone(), first.as_bytes().to_vec()))
    );
    assert_eq!(received(&mut subscribers[0]), None);
    assert_eq!(received(&mut subscribers[2]), None);
    // The first waiter's lock, released as a held lock is (it leaves the queue): names
    // the second.
    take("first-lock", &mut conn);
    assert_eq!(release("first-lock", Some(first), &mut conn), 1);
    assert_eq!(holds_turn(&mut conn).as_deref(), Some(second));
    assert_eq!(
        received(&mut subscribers[2]),
        Some((channels[2].clone(), second.as_bytes().to_vec()))
    );
    assert_eq!(received(&mut subscribers[0]), None);
    assert_eq!(received(&mut subscribers[1]), None);
    // Nobody left: the release names nobody, on the notice channel, for every listener.
    take("second-lock", &mut conn);
    assert_eq!(release("second-lock", Some(second), &mut conn), 1);
    assert_eq!(
        holds_turn(&mut conn),
        None,
        "a release that names nobody gives no turn"
    );
    assert_eq!(
        received(&mut subscribers[0]),
        Some((channels[0].clone(), Vec::new()))
    );
    assert_eq!(received(&mut subscribers[1]), None);
    assert_eq!(received(&mut subscribers[2]), None);
    let _: () = redis::cmd("DEL")
        .arg(&order)
        .arg(&expiry)
        .query(&mut conn)
        .unwrap();
}

/// Hand-off through notices on `nodes` with `waiter`: fast although its retry delay is 2 s.
async fn handoff_through_notices(holder: &Client, waiter: &Client, nodes: usize) -> Duration {
    let lock = holder
        .lock("wait:secured", Duration::from_secs(10))
        .await
        .unwrap();
    let waiting = spawn_waiter(waiter, "wait:secured");
    let subscribed = Instant::now() + Duration::from_secs(5);
    while waiter.notice_subscribers() < nodes && Instant::now() < subscribed {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Time for the SUBSCRIBE commands to land after the connections opened.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released = Instant::now();
    lock.release().await.unwrap();
    let (lock, acquired) = waiting.await.unwrap();
    lock.expect("the waiter got the lock")
        .release()
        .await
        .unwrap();
    acquired.duration_since(released)
}

#[test]
fn subscriber_connections_authenticate_and_use_tls() {
    let _serial = serial();
    let rt = runtime();
    let secured = Nodes::start_with(7733, &["--nodes", "3", "--requirepass", "s3cret"]);
    assert!(secured.urls[0].contains(":s3cret@"));
    let tls = Nodes::start_with(7736, &["--nodes", "3", "--tls"]);
    let pem = std::fs::read(tls.run("ca", None)).expect("the set's CA certificate");
    rt.block_on(async {
        let holder = client(&secured, Duration::from_millis(200));
        let waiter = client(&secured, Duration::from_secs(2));
        let handoff = handoff_through_notices(&holder, &waiter, 3).await;
        assert!(
            handoff < Duration::from_millis(50),
            "with AUTH: {handoff:?}"
        );
        assert_eq!(waiter.notice_subscribers(), 3);

        let tls_client = |delay: Duration| {
            Client::builder(tls.urls.clone())
                .retry_delay(delay, Duration::ZERO)
                .node_timeout(Duration::from_millis(150))
                .tls_root_certificate(pem.clone())
                .build()
                .unwrap()
        };
        let (holder, waiter) = (
            tls_client(Duration::from_millis(200)),
            tls_client(Duration::from_secs(2)),
        );
        // TLS handshakes may outlast a node timeout: connect first.
        assert!(holder
            .connect(Duration::from_secs(5))
            .await
            .iter()
            .all(Result::is_ok));
        assert!(waiter
            .connect(Duration::from_secs(5))
            .await
            .iter()
            .all(Result::is_ok));
        let handoff = handoff_through_notices(&holder, &waiter, 3).await;
        assert!(
            handoff < Duration::from_millis(100),
            "with TLS: {handoff:?}"
        );
        assert_eq!(waiter.notice_subscribers(), 3);
    });
}
