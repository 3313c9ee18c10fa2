//! Bad input to the Rust client: zero and huge TTLs and durations, absurd ports, a
//! 1 MB resource name. Each is a clear error of class `invalid_argument` that names the
//! rule and the allowed range, never a panic, and no message copies a huge input whole.
//! Five nodes on base port 7786.

mod common;

use std::time::Duration;

use redlock_client::{Client, Error, ErrorClass, LockOptions};

/// An `invalid_argument` error whose message contains every one of `words`.
fn invalid<T: std::fmt::Debug>(result: Result<T, Error>, words: &[&str]) {
    let error = result.expect_err("expected an invalid_argument error");
    assert_eq!(
        error.class(),
        Some(ErrorClass::InvalidArgument),
        "{error:?}: {error}"
    );
    let text = error.to_string();
    for word in words {
        assert!(text.contains(word), "{text:?} lacks {word:?}");
    }
    assert!(text.len() < 400, "message too long: {} bytes", text.len());
}

fn builder(urls: &[String]) -> redlock_client::ClientBuilder {
    Client::builder(urls.to_vec())
}

#[test]
fn zero_and_huge_settings_are_refused_with_the_rule_and_range() {
    let urls = vec![String::from("redis://127.0.0.1:7786")];
    invalid(
        builder(&urls).ttl(Duration::ZERO).build(),
        &["TTL", "at least 1 ms"],
    );
    invalid(
        builder(&urls).ttl(Duration::from_secs(u64::MAX)).build(),
        &["TTL", "at most 10^12 ms"],
    );
    // Not whole milliseconds: that rule first (the core's order).
    invalid(
        builder(&urls).ttl(Duration::MAX).build(),
        &["TTL", "milliseconds"],
    );
    invalid(
        builder(&urls)
            .ttl(Duration::from_millis(1_000_000_000_001))
            .build(),
        &["TTL", "10^12"],
    );
    invalid(
        builder(&urls).node_timeout(Duration::ZERO).build(),
        &["node timeout", "at least"],
    );
    invalid(
        builder(&urls).node_timeout(Duration::MAX).build(),
        &["node timeout", "a third of the TTL"],
    );
    invalid(
        builder(&urls)
            .retry_delay(Duration::from_millis(100), Duration::from_millis(500))
            .build(),
        &["jitter"],
    );
    invalid(builder(&urls).attempts(0).build(), &["attempt"]);
    invalid(
        builder(&urls).attempts(u32::MAX).build(),
        &["attempts", "1000000"],
    );
    invalid(
        builder(&urls).connect_timeout(Duration::ZERO).build(),
        &["connect_timeout", "at least 1 ms"],
    );
    invalid(
        builder(&urls).connect_timeout(Duration::MAX).build(),
        &["connect_timeout", "at most"],
    );
}

#[test]
fn absurd_node_urls_are_refused_with_the_rule() {
    for (url, words) in [
        ("redis://127.0.0.1:0", &["port", "1 to 65535"][..]),
        ("redis://127.0.0.1:65536", &["port", "1 to 65535"]),
        ("redis://127.0.0.1:99999", &["port", "1 to 65535"]),
        ("redis://127.0.0.1:-1", &["port", "1 to 65535"]),
        ("redis://:pw@[::1]:70000/0", &["port", "1 to 65535"]),
        ("http://127.0.0.1:6379", &["scheme", "redis://"]),
        ("127.0.0.1:6379", &["redis://"]),
    ] {
        invalid(Client::new([url]), words);
    }
    // A huge URL is quoted cut short.
    let huge = format!("redis://127.0.0.1:{}", "9".repeat(1 << 20));
    invalid(Client::new([huge]), &["port", "…"]);
    // A valid port is fine.
    assert!(Client::new(["redis://127.0.0.1:65535"]).is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_call_durations_and_a_1mb_resource() {
    let nodes = common::shared(7786);
    // A node timeout that a loaded machine moving 1 MB keys five times over still meets.
    let client = Client::builder(nodes.urls.clone())
        .attempts(1)
        .node_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    invalid(
        client.lock("bad-ttl", Duration::ZERO).await,
        &["TTL", "at least 1 ms"],
    );
    invalid(
        client.lock("bad-ttl", Duration::from_secs(u64::MAX)).await,
        &["TTL", "10^12"],
    );
    // A wait limit past any use means "wait for ever" (the core saturates): no error.
    let lock = client
        .lock_with(&["bad-wait"], LockOptions::new().wait(Duration::MAX))
        .await
        .unwrap();
    lock.release().await.unwrap();
    let lock = client
        .lock("bad-extend", Duration::from_secs(10))
        .await
        .unwrap();
    invalid(
        lock.extend_for(Duration::ZERO).await,
        &["TTL", "at least 1 ms"],
    );
    invalid(
        lock.extend_for(Duration::from_secs(u64::MAX)).await,
        &["TTL", "10^12"],
    );
    assert!(lock.is_held(), "a refused extension changes nothing");
    lock.release().await.unwrap();
    invalid(
        client
            .extend_token(
                &["bad-extend"],
                "0123456789abcdef0123456789abcdef",
                Duration::ZERO,
            )
            .await,
        &["TTL"],
    );
    // A 1 MB token is refused and not quoted.
    let token = "a".repeat(1 << 20);
    invalid(
        client.release_token(&["bad-token"], &token).await,
        &["token"],
    );

    // A 1 MB resource name is a valid key: locked, refused to another, released; no
    // message copies it.
    let resource = "r".repeat(1 << 20);
    let lock = client
        .lock(&resource, Duration::from_secs(10))
        .await
        .unwrap();
    let error = client
        .lock(&resource, Duration::from_secs(10))
        .await
        .expect_err("held");
    assert_eq!(error.class(), Some(ErrorClass::HeldElsewhere));
    assert!(
        error.to_string().len() < 2000,
        "{} bytes",
        error.to_string().len()
    );
    let report = lock.release().await.unwrap();
    assert!(report.released >= 3);
}
