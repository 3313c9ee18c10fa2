//! A lock holder that writes under its fencing token: it acquires `RESOURCE` with
//! fencing, prints `token N`, works for `WORK_MS`, then writes `VALUE` to the Redis key
//! `ITEM` on `RESOURCE_URL` with `fenced_set` and prints `accepted` or `stale SEEN`. If it
//! paused past its lease meanwhile and a newer holder wrote, its write is refused.
//!
//! `REDLOCK_NODES=redis://127.0.0.1:7000,... cargo run -p redlock-client --example
//! fenced_writer -- RESOURCE TTL_MS WORK_MS RESOURCE_URL ITEM VALUE`
use std::time::Duration;

use redlock_client::{blocking, FencedWrite, LockOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [resource, ttl_ms, work_ms, resource_url, item, value] = args.as_slice() else {
        return Err("usage: fenced_writer RESOURCE TTL_MS WORK_MS RESOURCE_URL ITEM VALUE".into());
    };
    let nodes = std::env::var("REDLOCK_NODES").unwrap_or("redis://127.0.0.1:6379".into());
    let client = blocking::Client::new(nodes.split(','))?;
    let options = LockOptions::new()
        .ttl(Duration::from_millis(ttl_ms.parse()?))
        .fencing(true);
    let lock = client.lock_with(&[resource], options)?;
    let token = lock.fencing_token().ok_or("no fencing token")?;
    println!("token {token}");

    // The work; a pause here (a GC, a stopped process) may outlast the lease.
    std::thread::sleep(Duration::from_millis(work_ms.parse()?));

    let mut storage = redis::Client::open(resource_url.as_str())?.get_connection()?;
    match blocking::fenced_set(&mut storage, item, value, token)? {
        FencedWrite::Accepted => println!("accepted"),
        FencedWrite::Stale { seen } => println!("stale {seen}"),
        _ => println!("unknown"),
    }
    // A lock that expired meanwhile is not ours to delete: the release only deletes keys
    // that still hold our token.
    let _ = lock.release();
    Ok(())
}
