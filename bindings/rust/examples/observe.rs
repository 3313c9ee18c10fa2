//! Who holds a lock, event hooks, and a client over your own connections: the README's
//! samples, run by `tests/connections.rs`.
//!
//! `REDLOCK_NODES=redis://127.0.0.1:7000,... cargo run -p redlock-client --example observe`

use std::error::Error;
use std::time::Duration;

use redlock_client::Client;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let nodes = std::env::var("REDLOCK_NODES").unwrap_or("redis://127.0.0.1:6379".into());
    let urls: Vec<String> = nodes.split(',').map(String::from).collect();

    let client = Client::builder(urls.clone())
        .on_event(|event| {
            // event.kind.code(): acquired, not_acquired, retry, extended, not_extended, lost,
            // released, not_released, inspected, not_inspected, node_failed
            eprintln!("redlock {} after {:?}", event.kind.code(), event.elapsed);
        })
        .build()?;

    let lock = client.lock("orders:42", Duration::from_secs(10)).await?;
    if client.is_locked(&["orders:42"]).await? {
        println!("someone holds orders:42");
    }
    if !lock.is_owned().await? {
        println!("stop: a quorum no longer holds our token");
    }
    lock.release().await?;

    let mut connections = Vec::new();
    for url in &urls {
        let node = redis::Client::open(url.as_str())?;
        connections.push(node.get_multiplexed_async_connection().await?);
    }
    let client = Client::from_connections(connections)
        .ttl(Duration::from_secs(10))
        .build()?;

    let lock = client.lock("orders:43", Duration::from_secs(10)).await?;
    println!("locked orders:43 through our own connections");
    lock.release().await?;
    Ok(())
}
