//! The blocking client: no async runtime of your own.
//! `REDLOCK_NODES=redis://127.0.0.1:7000 cargo run -p redlock-client --example blocking`
fn main() -> Result<(), redlock_client::Error> {
    let nodes = std::env::var("REDLOCK_NODES").unwrap_or("redis://127.0.0.1:6379".into());
    let client = redlock_client::blocking::Client::new(nodes.split(','))?;
    let lock = client.lock("orders:42", std::time::Duration::from_secs(10))?;
    println!("holding orders:42 with token {}", lock.token());
    lock.release()?;
    Ok(())
}
