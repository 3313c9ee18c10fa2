//! Faults on real nodes: nodes down, frozen (SIGSTOP), restarted empty or from AOF,
//! AUTH and TLS, and the blocking client. Each test runs its own node set (base ports
//! 7110-7140, 7161-7165).

mod common;

use std::time::{Duration, Instant};

use common::Nodes;
use redlock_client::{Client, Error, FailureReason, NodeResult};

/// One attempt; a node timeout of 150 ms, so that healthy nodes on a loaded machine
/// never miss it while frozen ones still cost little.
fn client(urls: &[String]) -> Client {
    Client::builder(urls.to_vec())
        .attempts(1)
        .node_timeout(Duration::from_millis(150))
        .build()
        .expect("client")
}

fn count(nodes: &[redlock_client::NodeReport], pred: impl Fn(&NodeResult) -> bool) -> usize {
    nodes.iter().filter(|n| pred(&n.result)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_or_two_nodes_down_still_acquire_three_down_fail_cleanly() {
    let nodes = Nodes::start(7110);
    let client = client(&nodes.urls);
    let ttl = Duration::from_secs(10);

    nodes.kill(0);
    let lock = client.lock("down", ttl).await.expect("4 of 5 nodes up");
    lock.release().await.unwrap();

    nodes.kill(1);
    let lock = client.lock("down", ttl).await.expect("3 of 5 nodes up");
    assert_eq!(count(lock.nodes(), |r| *r == NodeResult::Success), 3);
    // The quorum may decide before a dead node's refusal is reported.
    assert_eq!(
        count(lock.nodes(), |r| matches!(
            r,
            NodeResult::Error(_) | NodeResult::Pending
        )),
        2,
        "{:?}",
        lock.nodes()
    );
    let report = lock.release().await.unwrap();
    assert_eq!(report.released, 3);

    nodes.kill(2);
    let started = Instant::now();
    let error = client.lock("down", ttl).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_millis(500));
    assert!(error.is_unreachable(), "{error}");
    assert!(!error.is_held_elsewhere());
    let Error::NotAcquired(failed) = &error else {
        panic!("{error}")
    };
    assert_eq!(failed.reason, FailureReason::NodesFailed);
    for down in 0..3 {
        match &failed.nodes[down].result {
            NodeResult::Error(text) => assert!(text.contains("connection failed"), "{text}"),
            other => panic!("node {down}: {other:?}"),
        }
        assert!(failed.nodes[down]
            .url
            .ends_with(&nodes.port(down).to_string()));
    }
    // The message names every node.
    let message = error.to_string();
    assert!(message.contains("unreachable"), "{message}");
    assert!(message.contains(&nodes.port(0).to_string()), "{message}");
    // The two live nodes may have set the key; the failed attempt released it there.
    assert_eq!(nodes.get(3, "down"), None);
    assert_eq!(nodes.get(4, "down"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_node_does_not_stall_acquisition() {
    let nodes = Nodes::start(7115);
    let client = client(&nodes.urls);
    let ttl = Duration::from_secs(10);
    // Warm connections, so that the frozen node's is an established one.
    client
        .lock("frozen", ttl)
        .await
        .unwrap()
        .release()
        .await
        .unwrap();

    nodes.pause(0);
    let mut slowest_acquire = Duration::ZERO;
    let mut slowest_release = Duration::ZERO;
    for _ in 0..20 {
        let started = Instant::now();
        let lock = client
            .lock("frozen", ttl)
            .await
            .expect("acquired without node 0");
        slowest_acquire = slowest_acquire.max(started.elapsed());
        assert!(matches!(
            lock.nodes()[0].result,
            NodeResult::Pending | NodeResult::Timeout
        ));
        let started = Instant::now();
        let report = lock.release().await.unwrap();
        slowest_release = slowest_release.max(started.elapsed());
        assert!(matches!(
            report.nodes[0].result,
            NodeResult::Pending | NodeResult::Timeout
        ));
        assert!(report.released >= 3, "{:?}", report.nodes);
    }
    // Acquisition and release both decide at the quorum, never waiting for the frozen
    // node (its commands end at their deadlines in the background). Generous bounds.
    assert!(
        slowest_acquire < Duration::from_millis(400),
        "acquire took {slowest_acquire:?}"
    );
    assert!(
        slowest_release < Duration::from_millis(400),
        "release took {slowest_release:?}"
    );

    // Two frozen: the other three must all agree, and do.
    nodes.pause(1);
    let started = Instant::now();
    let lock = client
        .lock("frozen", ttl)
        .await
        .expect("acquired on 3 of 5");
    assert!(started.elapsed() < Duration::from_millis(400));
    lock.release().await.unwrap();

    // Thawed, the nodes serve the same client again (on fresh connections).
    nodes.resume(0);
    nodes.resume(1);
    let mut all_five = false;
    for _ in 0..50 {
        let lock = client.lock("after-thaw", ttl).await.unwrap();
        let token = lock.token().to_string();
        let on_thawed = Nodes::eventually(Duration::from_millis(200), || {
            nodes.get(0, "after-thaw").as_deref() == Some(token.as_str())
                && nodes.get(1, "after-thaw").as_deref() == Some(token.as_str())
        });
        lock.release().await.unwrap();
        if on_thawed {
            all_five = true;
            break;
        }
    }
    assert!(all_five, "the thawed nodes never took part again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_restarted_empty_forgets_and_aof_remembers() {
    let nodes = Nodes::start(7120);
    let first = client(&nodes.urls);
    let second = client(&nodes.urls);
    let ttl = Duration::from_secs(30);
    let lock = first.lock("restart", ttl).await.unwrap();
    assert!(Nodes::eventually(Duration::from_secs(1), || nodes
        .values("restart")
        .iter()
        .all(Option::is_some)));

    nodes.restart(0);
    assert_eq!(nodes.get(0, "restart"), None, "restarted empty");
    let error = second.lock("restart", ttl).await.unwrap_err();
    assert!(error.is_held_elsewhere(), "{error}");
    // The failed attempt took node 0 and released it again; the holder's keys stay.
    assert_eq!(nodes.get(0, "restart"), None);
    for i in 1..5 {
        assert_eq!(nodes.get(i, "restart").as_deref(), Some(lock.token()));
    }
    // Holder's connections to the restarted node recover.
    lock.extend().await.expect("still held on 4 of 5");

    // Three nodes restarted empty: the published algorithm's known hazard (restarts
    // must be delayed by the longest TTL, or use persistence). A second client now
    // gets the lock, and the first holder's next extension reports the loss.
    nodes.restart(1);
    nodes.restart(2);
    let usurper = second
        .lock("restart", ttl)
        .await
        .expect("quorum of empty nodes");
    let error = lock.extend().await.unwrap_err();
    assert!(error.is_held_elsewhere(), "{error}");
    assert!(!lock.is_held());
    assert!(matches!(lock.state(), redlock_client::LockState::Lost(_)));
    // The old holder's release leaves the new holder's keys alone.
    lock.release().await.unwrap();
    for i in 0..3 {
        assert_eq!(nodes.get(i, "restart").as_deref(), Some(usurper.token()));
    }
    usurper.release().await.unwrap();

    // With AOF (fsync always) the keys survive the same restarts.
    let durable = Nodes::start_with(7125, &["--aof"]);
    let first = client(&durable.urls);
    let second = client(&durable.urls);
    let lock = first.lock("restart", ttl).await.unwrap();
    assert!(Nodes::eventually(Duration::from_secs(1), || durable
        .values("restart")
        .iter()
        .all(Option::is_some)));
    for i in 0..3 {
        durable.restart(i);
        assert_eq!(durable.get(i, "restart").as_deref(), Some(lock.token()));
    }
    let error = second.lock("restart", ttl).await.unwrap_err();
    assert!(error.is_held_elsewhere(), "{error}");
    lock.extend().await.expect("still held after the restarts");
    lock.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_through_the_url() {
    let nodes = Nodes::start_with(7130, &["--nodes", "3", "--requirepass", "s3cret"]);
    assert!(nodes.urls[0].starts_with("redis://:s3cret@"));
    let client = client(&nodes.urls);
    let lock = client
        .lock("auth", Duration::from_secs(5))
        .await
        .expect("with the password");
    // Messages never show the password.
    let urls = client.node_urls();
    assert!(
        urls.iter()
            .all(|u| !u.contains("s3cret") && u.contains(":***@")),
        "{urls:?}"
    );
    lock.release().await.unwrap();

    let anonymous: Vec<String> = nodes
        .urls
        .iter()
        .map(|u| u.replace(":s3cret@", ""))
        .collect();
    let error = client_for(&anonymous)
        .lock("auth", Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(error.is_unreachable(), "{error}");
    assert!(error.to_string().contains("NOAUTH"), "{error}");

    let wrong: Vec<String> = nodes
        .urls
        .iter()
        .map(|u| u.replace("s3cret", "wrong"))
        .collect();
    let error = client_for(&wrong)
        .lock("auth", Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(error.is_unreachable(), "{error}");
    assert!(
        !error.to_string().contains("wrong"),
        "password leaked: {error}"
    );
}

fn client_for(urls: &[String]) -> Client {
    client(urls)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_through_rediss_urls() {
    let nodes = Nodes::start_with(7133, &["--nodes", "3", "--tls"]);
    assert!(nodes.urls[0].starts_with("rediss://127.0.0.1:"));
    let ca = nodes.run("ca", None);
    let pem = std::fs::read(&ca).expect("the set's CA certificate");

    // Verified against the set's own CA. Handshakes may take longer than the node
    // timeout; they finish in the background and a retry finds the connections ready.
    let verified = Client::builder(nodes.urls.clone())
        .attempts(10)
        .node_timeout(Duration::from_millis(150))
        .tls_root_certificate(pem)
        .build()
        .unwrap();
    let lock = verified
        .lock("tls", Duration::from_secs(5))
        .await
        .expect("over TLS");
    let report = lock.release().await.unwrap();
    // A node whose handshake had not finished when the quorum decided got no key.
    assert!(report.released >= 2, "{:?}", report.nodes);
    for i in 0..3 {
        assert_eq!(
            redis::cmd("GET")
                .arg("tls")
                .query::<Option<String>>(
                    &mut redis::Client::build_with_tls(
                        nodes.urls[i].as_str(),
                        redis::TlsCertificates {
                            client_tls: None,
                            root_cert: Some(std::fs::read(&ca).unwrap())
                        },
                    )
                    .unwrap()
                    .get_connection()
                    .unwrap(),
                )
                .unwrap(),
            None,
            "node {i} kept the key"
        );
    }

    // Verification skipped by the URL; connections made ahead.
    let insecure: Vec<String> = nodes
        .urls
        .iter()
        .map(|u| format!("{u}/#insecure"))
        .collect();
    let insecure = client(&insecure);
    let connected = insecure.connect(Duration::from_secs(5)).await;
    assert!(connected.iter().all(Result::is_ok), "{connected:?}");
    let lock = insecure
        .lock("tls", Duration::from_secs(5))
        .await
        .expect("insecure");
    lock.release().await.unwrap();

    // The system's roots do not know the test CA; plain TCP is not TLS.
    let error = client(&nodes.urls)
        .lock("tls", Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(error.is_unreachable(), "{error}");
    let plain: Vec<String> = nodes
        .urls
        .iter()
        .map(|u| u.replace("rediss://", "redis://"))
        .collect();
    let error = client(&plain)
        .lock("tls", Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(error.is_unreachable(), "{error}");
}

#[test]
fn the_blocking_client() {
    let nodes = Nodes::start(7136);
    let client = redlock_client::blocking::Client::from_builder(
        Client::builder(nodes.urls.clone())
            .attempts(1)
            .node_timeout(Duration::from_millis(150)),
    )
    .unwrap();
    let lock = client.lock("blocking", Duration::from_secs(10)).unwrap();
    assert!(lock.is_held());
    assert!(Nodes::eventually(Duration::from_secs(1), || nodes
        .values("blocking")
        .iter()
        .all(|v| v.as_deref() == Some(lock.token()))));
    let error = client
        .lock("blocking", Duration::from_secs(10))
        .unwrap_err();
    assert!(error.is_held_elsewhere());
    // Dropping releases synchronously: the keys are gone when drop returns.
    drop(lock);
    assert_eq!(nodes.values("blocking"), vec![None; 5]);

    // Automatic extension runs on the client's own thread while the caller sleeps.
    let lock = client
        .lock_with(
            &["blocking"],
            redlock_client::LockOptions::new()
                .ttl(Duration::from_millis(300))
                .auto_extend(true),
        )
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    assert!(lock.is_held());
    assert!(lock.extensions() >= 2, "{}", lock.extensions());
    assert!(lock.lost().is_none());
    for i in 0..5 {
        nodes.del(i, "blocking");
    }
    let lost = lock
        .wait_lost(Duration::from_secs(1))
        .expect("loss signalled");
    assert_eq!(lost.reason, redlock_client::LostReason::Taken);
    assert!(lock.lost().is_some());
    let report = lock.release().unwrap();
    assert_eq!(report.released, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_acquisition_leaves_no_key() {
    let nodes = Nodes::start(7161);
    let client = client(&nodes.urls);
    client.connect(Duration::from_secs(5)).await;
    // Three nodes frozen: the two others set the key at once, and the quorum waits for
    // the frozen ones' deadline. The caller gives up before that.
    for i in 0..3 {
        nodes.pause(i);
    }
    let gave_up = tokio::time::timeout(
        Duration::from_millis(40),
        client.lock("cancelled", Duration::from_secs(30)),
    )
    .await;
    assert!(gave_up.is_err(), "the acquisition cannot have finished");
    // The dropped acquisition released its token in the background.
    assert!(
        Nodes::eventually(Duration::from_secs(2), || nodes
            .get(3, "cancelled")
            .is_none()
            && nodes.get(4, "cancelled").is_none()),
        "keys left by a cancelled acquisition: {:?} {:?}",
        nodes.get(3, "cancelled"),
        nodes.get(4, "cancelled")
    );
    for i in 0..3 {
        nodes.resume(i);
    }
}
