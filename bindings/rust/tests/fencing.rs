//! Fencing tokens against real nodes: tokens from fenced acquisitions, the resource-side
//! check (`fenced_set`) on a real Redis key, and a holder process paused past its lease
//! whose late write the check refuses. The tests share one node set (base port 7166).

mod common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use redlock_client::core::{UsageError, FENCED_SET_SHA1, MAX_FENCING_TOKEN};
use redlock_client::{blocking, Client, Error, ErrorClass, FencedWrite, LockOptions};

const BASE_PORT: u16 = 7166;

use common::runtime;

fn client(nodes: &common::Nodes, fencing: bool) -> Client {
    Client::builder(nodes.urls.clone())
        .fencing(fencing)
        .node_timeout(Duration::from_millis(100))
        .build()
        .unwrap()
}

#[test]
fn fenced_locks_carry_strictly_increasing_tokens() {
    let nodes = common::shared(BASE_PORT);
    let rt = runtime();
    rt.block_on(async {
        let fenced = client(&nodes, true);
        let plain = client(&nodes, false);
        let mut last = 0;
        for _ in 0..5 {
            let lock = fenced
                .lock("fence:increasing", Duration::from_secs(5))
                .await
                .unwrap();
            let token = lock.fencing_token().expect("a fenced lock has a token");
            assert!(token > last, "token {token} after {last}");
            last = token;
            lock.release().await.unwrap();
        }
        // Another client (or an unfenced acquisition in between) never makes it go back.
        let lock = plain
            .lock("fence:increasing", Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(lock.fencing_token(), None, "no fencing, no token");
        lock.release().await.unwrap();
        let lock = plain
            .lock_with(&["fence:increasing"], LockOptions::new().fencing(true))
            .await
            .unwrap();
        let token = lock.fencing_token().expect("fencing asked for this lock");
        assert!(token > last);
        lock.release().await.unwrap();
        let lock = fenced
            .lock_with(&["fence:increasing"], LockOptions::new().fencing(false))
            .await
            .unwrap();
        assert_eq!(
            lock.fencing_token(),
            None,
            "fencing turned off for this lock"
        );
        lock.release().await.unwrap();
        // The counter lives next to the key, on at least the quorum that wrote it back;
        // none is ahead of the last token handed out.
        let counters: Vec<Option<u64>> = (0..5)
            .map(|index| {
                redis::cmd("GET")
                    .arg("{fence:increasing}:fence")
                    .query(&mut nodes.conn(index))
                    .unwrap()
            })
            .collect();
        assert!(
            counters.iter().filter(|c| **c == Some(token)).count() >= 3,
            "{counters:?}"
        );
        assert!(
            counters.iter().all(|c| c.is_none_or(|c| c <= token)),
            "{counters:?}"
        );
    });
}

#[test]
fn fenced_set_accepts_higher_tokens_only() {
    let nodes = common::shared(BASE_PORT);
    let mut storage = nodes.conn(0);
    let (item, guard) = ("fence:item:order", "{fence:item:order}:fence:accepted");
    nodes.del(0, item);
    nodes.del(0, guard);

    let write = |storage: &mut redis::Connection, value: &str, token: u64| {
        blocking::fenced_set(storage, item, value, token)
    };
    assert_eq!(
        write(&mut storage, "five", 5).unwrap(),
        FencedWrite::Accepted
    );
    assert_eq!(nodes.get(0, item).as_deref(), Some("five"));
    assert_eq!(nodes.get(0, guard).as_deref(), Some("5"));
    // Lower: a stale holder, told which token it lost to.
    assert_eq!(
        write(&mut storage, "three", 3).unwrap(),
        FencedWrite::Stale { seen: 5 }
    );
    // Equal: the same token twice is refused too (it may be another process's copy).
    assert_eq!(
        write(&mut storage, "five again", 5).unwrap(),
        FencedWrite::Stale { seen: 5 }
    );
    assert_eq!(nodes.get(0, item).as_deref(), Some("five"));
    assert_eq!(
        write(&mut storage, "six", 6).unwrap(),
        FencedWrite::Accepted
    );
    assert_eq!(nodes.get(0, item).as_deref(), Some("six"));
    assert_eq!(nodes.pttl(0, guard), -1, "the guard key has no TTL");

    // The async helper on a multiplexed connection, the same check.
    runtime().block_on(async {
        let client = redis::Client::open(nodes.urls[0].as_str()).unwrap();
        let mut connection = client.get_multiplexed_async_connection().await.unwrap();
        let stale = redlock_client::fenced_set(&mut connection, item, "four", 4).await;
        assert_eq!(stale.unwrap(), FencedWrite::Stale { seen: 6 });
        let accepted = redlock_client::fenced_set(&mut connection, item, "seven", 7).await;
        assert_eq!(accepted.unwrap(), FencedWrite::Accepted);
    });
    assert_eq!(nodes.get(0, item).as_deref(), Some("seven"));
}

#[test]
fn fenced_set_falls_back_to_eval_after_noscript() {
    let nodes = common::shared(BASE_PORT);
    let port = nodes.port(1);
    let mut storage = nodes.conn(1);
    let item = "fence:item:noscript";
    nodes.del(1, item);
    nodes.del(1, "{fence:item:noscript}:fence:accepted");
    let cached = |storage: &mut redis::Connection| -> bool {
        let exists: Vec<i64> = redis::cmd("SCRIPT")
            .arg("EXISTS")
            .arg(FENCED_SET_SHA1)
            .query(storage)
            .unwrap();
        exists == [1]
    };
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query(&mut storage)
        .unwrap();
    assert!(!cached(&mut storage), "flushed on port {port}");
    // EVALSHA answers NOSCRIPT; the helper sends EVAL, which also caches the script.
    assert_eq!(
        blocking::fenced_set(&mut storage, item, "v", 10).unwrap(),
        FencedWrite::Accepted
    );
    assert!(cached(&mut storage), "the write went as EVAL");
    assert_eq!(nodes.get(1, item).as_deref(), Some("v"));
    // And once cached, EVALSHA alone.
    assert_eq!(
        blocking::fenced_set(&mut storage, item, "w", 9).unwrap(),
        FencedWrite::Stale { seen: 10 }
    );
}

#[test]
fn fenced_set_refuses_bad_input_with_clear_errors() {
    let nodes = common::shared(BASE_PORT);
    let mut storage = nodes.conn(2);
    let item = "fence:item:bad";
    nodes.del(2, item);
    for token in [0, MAX_FENCING_TOKEN + 1, u64::MAX] {
        let error = blocking::fenced_set(&mut storage, item, "v", token).unwrap_err();
        assert!(
            matches!(error, Error::Usage(UsageError::InvalidFencingToken)),
            "{token}: {error:?}"
        );
        assert_eq!(error.class(), Some(ErrorClass::InvalidArgument));
        assert!(error.to_string().contains("fencing token"), "{error}");
    }
    let error = blocking::fenced_set(&mut storage, "", "v", 1).unwrap_err();
    assert!(matches!(error, Error::Usage(UsageError::EmptyResource)));
    assert_eq!(nodes.get(2, item), None, "nothing was written");
    // The largest token works.
    assert_eq!(
        blocking::fenced_set(&mut storage, item, "v", MAX_FENCING_TOKEN).unwrap(),
        FencedWrite::Accepted
    );
    // A guard key of the wrong type: the server's error, word for word.
    let guard = "{fence:item:wrongtype}:fence:accepted";
    nodes.del(2, guard);
    let _: i64 = redis::cmd("LPUSH")
        .arg(guard)
        .arg("x")
        .query(&mut storage)
        .unwrap();
    let error = blocking::fenced_set(&mut storage, "fence:item:wrongtype", "v", 1).unwrap_err();
    assert!(
        matches!(&error, Error::FencedWrite(text) if text.contains("WRONGTYPE")),
        "{error:?}"
    );
    assert_eq!(error.class(), Some(ErrorClass::NodesFailing));
}

/// The `fenced_writer` example, built by `cargo test` next to this test binary.
fn fenced_writer() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe
        .parent()
        .and_then(|deps| deps.parent())
        .unwrap()
        .join("examples/fenced_writer");
    assert!(
        path.exists(),
        "{} is missing: run `cargo test -p redlock-client` (it builds the examples)",
        path.display()
    );
    path
}

#[test]
fn a_holder_paused_past_its_lease_cannot_write_after_the_next_holder() {
    let nodes = common::shared(BASE_PORT);
    let (resource, item) = ("fence:paused", "fence:paused:item");
    nodes.del(3, item);
    nodes.del(3, "{fence:paused:item}:fence:accepted");
    let ttl = Duration::from_millis(800);

    // The first holder: acquires with fencing, prints its token, works 300 ms (less than
    // its lease), then writes.
    let mut first = Command::new(fenced_writer())
        .env("REDLOCK_NODES", nodes.urls.join(","))
        .args([
            resource,
            &ttl.as_millis().to_string(),
            "300",
            &nodes.urls[3],
            item,
            "first",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = first.id().to_string();
    let mut lines = BufReader::new(first.stdout.take().unwrap()).lines();
    let line = lines.next().unwrap().unwrap();
    let first_token: u64 = line
        .strip_prefix("token ")
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("first holder said {line:?}"));
    // Paused mid-work (a GC pause, a stopped VM) until well past its lease.
    let paused_at = Instant::now();
    assert!(Command::new("kill")
        .args(["-STOP", &pid])
        .status()
        .unwrap()
        .success());

    let rt = runtime();
    let second_token = rt.block_on(async {
        let second = client(&nodes, true);
        let options = LockOptions::new()
            .ttl(Duration::from_secs(10))
            .wait(Duration::from_secs(3));
        let lock = second.lock_with(&[resource], options).await.unwrap();
        assert!(
            paused_at.elapsed() >= ttl - Duration::from_millis(50),
            "the second holder got the lock only once the first's lease ran out"
        );
        let token = lock.fencing_token().unwrap();
        let redis = redis::Client::open(nodes.urls[3].as_str()).unwrap();
        let mut storage = redis.get_multiplexed_async_connection().await.unwrap();
        assert_eq!(
            redlock_client::fenced_set(&mut storage, item, "second", token)
                .await
                .unwrap(),
            FencedWrite::Accepted
        );
        lock.release().await.unwrap();
        token
    });
    assert!(
        second_token > first_token,
        "tokens strictly increase: {first_token} then {second_token}"
    );

    // Resumed: the first holder finishes its work and writes late; the item refuses it.
    assert!(Command::new("kill")
        .args(["-CONT", &pid])
        .status()
        .unwrap()
        .success());
    let verdict = lines.next().unwrap().unwrap();
    assert_eq!(verdict, format!("stale {second_token}"));
    assert!(first.wait().unwrap().success());
    assert_eq!(nodes.get(3, item).as_deref(), Some("second"));
}
