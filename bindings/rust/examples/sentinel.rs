//! A single-instance lock on the master Redis Sentinels name (feature `sentinel`): the
//! README's sample, run by `tests/sentinel.rs`.
//!
//! `REDLOCK_SENTINELS=redis://127.0.0.1:26379 cargo run -p redlock-client --features
//! sentinel --example sentinel -- SERVICE`

use std::error::Error;
use std::time::Duration;

use redlock_client::Client;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let sentinels = std::env::var("REDLOCK_SENTINELS")?;
    let service = std::env::args().nth(1).unwrap_or("mymaster".into());

    // cargo feature `sentinel`
    let client = Client::sentinel(sentinels.split(','), service)
        .ttl(Duration::from_secs(10))
        .build()?;

    let lock = client.lock("orders:42", Duration::from_secs(10)).await?;
    println!("locked orders:42 on the master");
    lock.release().await?;
    Ok(())
}
