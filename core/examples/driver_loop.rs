//! The driver loop every binding implements, run against five in-process nodes.
//!
//! A real driver sends each command to a Redis node and waits for replies on its event
//! loop; here the "nodes" are a map per node and a fixed latency, so the example runs
//! anywhere. Two clients contend for one resource: the first acquires, the second is
//! refused (after its retries), then the first releases and the second succeeds.
//!
//! Run it with `cargo run -p redlock-core --example driver_loop`.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use redlock_core::{
    Command, CommandKind, Config, Operation, Outcome, Output, Redlock, Reply, Time,
};

/// One node's keys: key -> (value, expires at in microseconds).
type Keys = HashMap<Vec<u8>, (Vec<u8>, u64)>;

/// Five nodes, answering after `latency_us` times (1 + node index).
struct Nodes {
    data: Vec<Keys>,
    latency_us: u64,
}

impl Nodes {
    fn execute(&mut self, command: &Command, now: u64) -> Reply {
        let args: Vec<&[u8]> = command.args().collect();
        let node = &mut self.data[command.node()];
        node.retain(|_, (_, expires)| *expires > now);
        let token = |at: usize| args[at].to_vec();
        match command.kind() {
            CommandKind::Set => {
                let ttl: u64 = std::str::from_utf8(args[5])
                    .unwrap_or("0")
                    .parse()
                    .unwrap_or(0);
                if node.contains_key(args[1]) {
                    Reply::Nil
                } else {
                    node.insert(args[1].to_vec(), (token(2), now + ttl * 1000));
                    Reply::Ok
                }
            }
            CommandKind::Release => {
                let key = args[3].to_vec();
                let ours = node.get(&key).is_some_and(|(value, _)| *value == token(4));
                if ours {
                    node.remove(&key);
                }
                Reply::Integer(i64::from(ours))
            }
            _ => {
                Reply::Error("ERR this example only handles single-resource SET and release".into())
            }
        }
    }
}

/// Runs `op` to its outcome on virtual time starting at `now`; returns the outcome and
/// the time it ended.
fn drive(op: &mut Operation, nodes: &mut Nodes, mut now: u64) -> (Outcome, u64) {
    let mut replies: BTreeMap<(u64, u64), (redlock_core::RequestId, Reply)> = BTreeMap::new();
    let mut wake = None;
    loop {
        // After every input: poll until there is nothing left.
        while let Some(output) = op.poll_output() {
            match output {
                Output::Send(command) => {
                    let reply = nodes.execute(&command, now);
                    let arrives = now + nodes.latency_us * (1 + command.node() as u64);
                    replies.insert(
                        (arrives, command.request_id().0),
                        (command.request_id(), reply),
                    );
                }
                Output::Wait(until) => wake = Some(until.as_micros()),
                Output::Outcome(outcome) => return (outcome, now),
                _ => {}
            }
        }
        // Wait for whichever comes first: the next reply or the wake-up time.
        let next_reply_at = replies.keys().next().map(|&(at, _)| at);
        if let Some(until) = wake.filter(|&until| next_reply_at.is_none_or(|at| until <= at)) {
            now = until;
            wake = None;
            op.handle_timeout(Time::from_micros(now));
        } else if let Some(((at, _), (request, reply))) = replies.pop_first() {
            now = at;
            op.handle_reply(request, reply, Time::from_micros(now))
                .expect("every reply is for a request the operation issued");
        } else {
            panic!("an unfinished operation always has a reply or a wake-up ahead");
        }
    }
}

fn main() {
    let config = Config::builder(5, Duration::from_millis(10_000))
        .attempts(2)
        .retry_delay(Duration::from_millis(100))
        .retry_jitter(Duration::from_millis(50))
        .build()
        .expect("a valid configuration");
    let mut alice = Redlock::with_seed(config.clone(), [1; 32]);
    let mut bob = Redlock::with_seed(config, [2; 32]);
    let mut nodes = Nodes {
        data: vec![HashMap::new(); 5],
        latency_us: 150,
    };

    let mut op = alice
        .acquire(&["invoices"], Time::from_micros(0))
        .expect("valid resource");
    let (outcome, now) = drive(&mut op, &mut nodes, 0);
    let Outcome::Acquired(held) = outcome else {
        panic!("alice should acquire: {outcome:?}")
    };
    println!(
        "alice acquired at {now} us, valid until {:?}, nodes {:?}",
        held.lease.valid_until(),
        held.nodes
    );

    let mut op = bob
        .acquire(&["invoices"], Time::from_micros(now))
        .expect("valid resource");
    let (outcome, now) = drive(&mut op, &mut nodes, now);
    println!(
        "bob: {} after {:?} attempts ({:?}) at {now} us",
        outcome.code(),
        op.attempt(),
        outcome.reason()
    );

    let mut op = alice.release(&held.lease, Time::from_micros(now));
    let (outcome, now) = drive(&mut op, &mut nodes, now);
    println!(
        "alice: {} at {now} us, nodes {:?}",
        outcome.code(),
        outcome.nodes()
    );

    let mut op = bob
        .acquire(&["invoices"], Time::from_micros(now))
        .expect("valid resource");
    let (outcome, now) = drive(&mut op, &mut nodes, now);
    println!("bob: {} at {now} us", outcome.code());
}
