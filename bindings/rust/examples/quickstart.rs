//! Acquire, work, release; then a lock kept alive while the work runs.
//! `REDLOCK_NODES=redis://127.0.0.1:7000,redis://127.0.0.1:7001,redis://127.0.0.1:7002
//! cargo run -p redlock-client --example quickstart`
use std::time::Duration;

use redlock_client::{Client, LockOptions};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // One URL per independent Redis node.
    let nodes = std::env::var("REDLOCK_NODES").unwrap_or("redis://127.0.0.1:6379".into());
    let client = Client::builder(nodes.split(',')).build()?;

    // A lock on one resource for 10 s.
    let lock = client.lock("orders:42", Duration::from_secs(10)).await?;
    println!("token {} valid for {:?}", lock.token(), lock.validity());
    lock.extend().await?; // by its TTL, from now
    let report = lock.release().await?; // compare-and-delete on every node
    println!("released on {} nodes", report.released);

    // Kept alive in the background; told at once if it is lost.
    let options = LockOptions::new()
        .ttl(Duration::from_secs(30))
        .auto_extend(true);
    let lock = client.lock_with(&["nightly-report"], options).await?;
    tokio::select! {
        lost = lock.lost() => eprintln!("stopping: {lost}"),
        () = do_the_work() => println!("work done"),
    }
    lock.release().await?;
    Ok(())
}

async fn do_the_work() {
    tokio::time::sleep(Duration::from_millis(100)).await;
}
