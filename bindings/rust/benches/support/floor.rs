//! The floors of a lock hand-off on these nodes: the fewest messages a hand-off that
//! wakes its waiter with a notice can take, sent and read by one task over plain
//! sockets (the core's RESP encoder and decoder), with no lock library and no task hops.
//!
//! [`handoff_floor`]: the holder sends the release script (`EVALSHA`, the core's script,
//! which publishes the notice) to every node at once; the waiter, subscribed on every
//! node, reads notices until a quorum of nodes have announced the release, then sends
//! `SET key token NX PX ttl` to every node at once and is the holder at the quorum's
//! `OK`. Its time is from the release's first write to that `OK`. The uncontended
//! acquisition it is compared with is the same `SET` round on a free key, measured the
//! same way in the same run.
//!
//! [`queued_handoff_floor`]: the same with the waiters' queue the library keeps for
//! fairness (docs/waiting.md), and optionally the holder coming back at once, as the
//! hand-off benchmark's contenders do.
//!
//! Nothing else a real waiter does (validity, events, a driver's tasks, other waiters)
//! is in them: a library's hand-off cannot be faster than its floor on the same nodes.

use std::time::{Duration, Instant};

use futures_util::stream::{FuturesUnordered, StreamExt};
use redlock_client::core::resp::{encode_command, Decoder};
use redlock_client::core::{
    notice_channel, queue_keys, waiter_channel, Config, Reply, QUEUED_ACQUIRE_SCRIPT,
    QUEUED_ACQUIRE_SHA1, RELEASE_SCRIPT, RELEASE_SHA1,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One node's connection, read and written by the bench's own task.
struct Raw {
    stream: TcpStream,
    decoder: Decoder,
    out: Vec<u8>,
}

impl Raw {
    async fn connect(url: &str) -> Raw {
        // `redis://host:port` as scripts/redis-nodes.sh prints it (no password, no TLS).
        let address = url.trim_start_matches("redis://").trim_end_matches('/');
        let stream = TcpStream::connect(address)
            .await
            .unwrap_or_else(|error| panic!("connect to {address}: {error}"));
        stream.set_nodelay(true).unwrap();
        Raw {
            stream,
            decoder: Decoder::new(),
            out: Vec::new(),
        }
    }

    async fn send(&mut self, args: &[&[u8]]) {
        self.out.clear();
        encode_command(args.iter().copied(), &mut self.out);
        self.stream.write_all(&self.out).await.unwrap();
    }

    /// The next reply (or pushed message). Cancel-safe: bytes read are in the decoder.
    async fn reply(&mut self) -> Reply {
        let mut buf = [0u8; 4096];
        loop {
            if let Some(reply) = self.decoder.next_reply().unwrap() {
                return reply;
            }
            let read = self.stream.read(&mut buf).await.unwrap();
            assert!(read > 0, "a node closed the connection");
            self.decoder.feed(&buf[..read]);
        }
    }

    async fn call(&mut self, args: &[&[u8]]) -> Reply {
        self.send(args).await;
        self.reply().await
    }
}

/// Reads replies from every connection until `done` says the ones read so far decide;
/// returns that instant and which connections answered, or `None` when every
/// connection answered and nothing decided.
async fn until_decided(
    connections: &mut [Raw],
    mut done: impl FnMut(&Reply) -> bool,
) -> Option<(Instant, Vec<bool>)> {
    let mut answered = vec![false; connections.len()];
    let mut replies: FuturesUnordered<_> = connections
        .iter_mut()
        .enumerate()
        .map(|(i, c)| async move { (i, c.reply().await) })
        .collect();
    while let Some((i, reply)) = replies.next().await {
        answered[i] = true;
        if done(&reply) {
            return Some((Instant::now(), answered));
        }
    }
    None
}

/// Reads the reply of every connection that has not answered yet.
async fn drain(connections: &mut [Raw], answered: &[bool]) {
    for (connection, answered) in connections.iter_mut().zip(answered) {
        if !answered {
            connection.reply().await;
        }
    }
}

/// Reads one reply from every connection.
async fn read_each(connections: &mut [Raw]) {
    for connection in connections {
        connection.reply().await;
    }
}

async fn send_all(connections: &mut [Raw], args: &[&[u8]]) {
    for connection in connections.iter_mut() {
        connection.send(args).await;
    }
}

/// A `done` for [`until_decided`]: true at the `quorum`th reply equal to `wanted`.
fn quorum_of(wanted: Reply, quorum: usize) -> impl FnMut(&Reply) -> bool {
    let mut count = 0;
    move |reply| {
        count += usize::from(*reply == wanted);
        count == quorum
    }
}

/// The quorum of `nodes` nodes, as the core's configuration says (the floor does what a
/// lock does, without the library, but does not decide what a quorum is).
fn quorum(nodes: usize) -> usize {
    Config::builder(nodes, Duration::from_millis(10_000))
        .build()
        .expect("a configuration of at least one node and a 10 s TTL")
        .quorum()
}

/// Sends `args` to every connection at once, waits until a quorum answered `wanted`,
/// reads the rest, and returns the instant the quorum was complete (`None`: no quorum).
async fn round(connections: &mut [Raw], args: &[&[u8]], wanted: Reply) -> Option<Instant> {
    let quorum = quorum(connections.len());
    send_all(connections, args).await;
    match until_decided(connections, quorum_of(wanted, quorum)).await {
        Some((at, answered)) => {
            drain(connections, &answered).await;
            Some(at)
        }
        None => None,
    }
}

fn args(argv: &[Vec<u8>]) -> Vec<&[u8]> {
    argv.iter().map(Vec::as_slice).collect()
}

/// The three parties' connections to every node: the holder's (the core's release and
/// queued acquire scripts loaded through them), the waiter's, and the waiter's
/// subscriber connections.
struct Parties {
    holder: Vec<Raw>,
    waiter: Vec<Raw>,
    notices: Vec<Raw>,
}

async fn connect(urls: &[String]) -> Parties {
    let mut parties = Parties {
        holder: Vec::new(),
        waiter: Vec::new(),
        notices: Vec::new(),
    };
    for url in urls {
        let mut holder = Raw::connect(url).await;
        for script in [RELEASE_SCRIPT, QUEUED_ACQUIRE_SCRIPT] {
            let loaded = holder.call(&[b"SCRIPT", b"LOAD", script.as_bytes()]).await;
            assert!(matches!(loaded, Reply::Bulk(_)), "{loaded:?}");
        }
        parties.holder.push(holder);
        parties.waiter.push(Raw::connect(url).await);
        parties.notices.push(Raw::connect(url).await);
    }
    parties
}

async fn subscribe(connections: &mut [Raw], channel: &[u8]) {
    for connection in connections {
        let confirmed = connection.call(&[b"SUBSCRIBE", channel]).await;
        assert!(matches!(confirmed, Reply::Array(_)), "{confirmed:?}");
    }
}

/// What [`handoff_floor`] measured, per cycle.
pub struct Floor {
    /// One `SET NX PX` round on a free key, to a quorum of `OK`s.
    pub acquire: Vec<Duration>,
    /// Release sent to next holder's quorum of `OK`s.
    pub handoff: Vec<Duration>,
}

const TTL_MS: &[u8] = b"10000";

/// `cycles` uncontended acquisitions and `cycles` hand-offs, interleaved, on `urls`.
pub async fn handoff_floor(urls: &[String], cycles: usize) -> Floor {
    let quorum = quorum(urls.len());
    let Parties {
        mut holder,
        mut waiter,
        mut notices,
    } = connect(urls).await;
    let key: &[u8] = b"bench:floor:handoff";
    let free: &[u8] = b"bench:floor:free";
    subscribe(&mut notices, &notice_channel(key)).await;
    let mut floor = Floor {
        acquire: Vec::with_capacity(cycles),
        handoff: Vec::with_capacity(cycles),
    };
    for n in 0..cycles {
        let first = format!("floor-holder-{n:028}");
        let next = format!("floor-waiter-{n:028}");

        // An uncontended acquisition, then its key deleted (not timed).
        let started = Instant::now();
        let set = [b"SET", free, next.as_bytes(), b"NX", b"PX", TTL_MS];
        let acquired = round(&mut waiter, &set, Reply::Ok).await;
        floor.acquire.push(acquired.expect("a free key") - started);
        for connection in &mut waiter {
            connection.call(&[b"DEL", free]).await;
        }

        // The holder takes the key on every node (not timed).
        let take = [b"SET", key, first.as_bytes(), b"NX", b"PX", TTL_MS];
        for connection in &mut holder {
            assert_eq!(connection.call(&take).await, Reply::Ok);
        }

        // The hand-off. The notices name nobody (there is no queue): the waiter goes
        // once a quorum of nodes announced the release, so that a quorum of nodes is
        // free when its SET lands.
        let started = Instant::now();
        let release = [
            b"EVALSHA",
            RELEASE_SHA1.as_bytes(),
            b"1",
            key,
            first.as_bytes(),
        ];
        send_all(&mut holder, &release).await;
        let mut count = 0;
        let (_, heard) = until_decided(&mut notices, |_| {
            count += 1;
            count == quorum
        })
        .await
        .expect("a quorum of notices");
        let set = [b"SET", key, next.as_bytes(), b"NX", b"PX", TTL_MS];
        let acquired = round(&mut waiter, &set, Reply::Ok).await;
        floor
            .handoff
            .push(acquired.expect("a quorum released") - started);

        // Read what is left, and free the key for the next cycle (not timed).
        read_each(&mut holder).await;
        drain(&mut notices, &heard).await;
        for connection in &mut waiter {
            connection.call(&[b"DEL", key]).await;
        }
    }
    floor
}

/// The same hand-off with the waiters' queue the library keeps for fairness, and, with
/// `holder_returns`, the contention of the hand-off benchmark, still with no lock
/// library: the waiter is queued on every node and subscribed to its waiter channel; the
/// holder's release (the core's script, with the holder's waiter id) names it and gives
/// it the turn; the waiter tries with the queued acquire script at the first notice, as
/// the core's waiter does when a release names it. With `holder_returns` the holder
/// comes back at once, as the benchmark's contenders do: when its release has a quorum
/// it tries again (the queued acquire script, refused: the waiter has the turn), then
/// releases that attempt on every node. Holder and waiter are two futures of one task.
/// Returns the hand-offs' times, and how many cycles did not hand off (the waiter's
/// attempt reached a node before the release: counted, not timed).
pub async fn queued_handoff_floor(
    urls: &[String],
    cycles: usize,
    holder_returns: bool,
) -> (Vec<Duration>, usize) {
    let quorum = quorum(urls.len());
    let Parties {
        mut holder,
        mut waiter,
        mut notices,
    } = connect(urls).await;
    let key: &[u8] = b"bench:floor:queued";
    let [order, expiry] = queue_keys(key);
    let mut turn = order.clone();
    turn.extend_from_slice(b":turn");
    let waiter_id = b"aaaaaaaaaaaaaaaa-floor-waiter".to_vec();
    subscribe(&mut notices, &waiter_channel(&waiter_id, key)).await;
    let queued = |token: &[u8], waiter: &[u8]| -> Vec<Vec<u8>> {
        let sha = QUEUED_ACQUIRE_SHA1.as_bytes();
        let lifetime_ms = b"1000".as_slice();
        [
            b"EVALSHA",
            sha,
            b"3",
            key,
            &order,
            &expiry,
            token,
            TTL_MS,
            waiter,
            lifetime_ms,
        ]
        .iter()
        .map(|arg| arg.to_vec())
        .collect()
    };
    let mut handoffs = Vec::with_capacity(cycles);
    let mut missed = 0;
    for n in 0..cycles {
        let first = format!("floor-holder-{n:028}");
        let again = format!("floor-again-{n:029}");
        let holder_id = format!("bbbbbbbbbbbbbbbb-holder-{n}");
        let again_id = format!("bbbbbbbbbbbbbbbb-again-{n}");
        let next = format!("floor-waiter-{n:028}");

        // The holder holds the key; the waiter is refused and queued (not timed).
        let take = queued(first.as_bytes(), holder_id.as_bytes());
        for connection in &mut holder {
            assert_eq!(connection.call(&args(&take)).await, Reply::Integer(1));
        }
        let wait = queued(next.as_bytes(), &waiter_id);
        for connection in &mut waiter {
            assert_eq!(connection.call(&args(&wait)).await, Reply::Integer(0));
        }

        let started = Instant::now();
        let sha = RELEASE_SHA1.as_bytes();
        let release = [
            b"EVALSHA",
            sha,
            b"1",
            key,
            first.as_bytes(),
            holder_id.as_bytes(),
        ];
        send_all(&mut holder, &release).await;
        let holding = async {
            let (_, answered) = until_decided(&mut holder, quorum_of(Reply::Integer(1), quorum))
                .await
                .expect("a quorum released");
            if !holder_returns {
                drain(&mut holder, &answered).await;
                return;
            }
            // Back at once: refused (the waiter has the turn), then released everywhere.
            let retry = queued(again.as_bytes(), again_id.as_bytes());
            send_all(&mut holder, &args(&retry)).await;
            drain(&mut holder, &answered).await;
            read_each(&mut holder).await;
            send_all(&mut holder, &[b"EVALSHA", sha, b"1", key, again.as_bytes()]).await;
            read_each(&mut holder).await;
        };
        let waiting = async {
            let (_, heard) = until_decided(&mut notices, |_| true)
                .await
                .expect("a notice");
            let acquired = round(
                &mut waiter,
                &args(&queued(next.as_bytes(), &waiter_id)),
                Reply::Integer(1),
            )
            .await;
            drain(&mut notices, &heard).await;
            acquired
        };
        let ((), acquired) = tokio::join!(holding, waiting);
        match acquired {
            Some(acquired) => handoffs.push(acquired - started),
            None => missed += 1,
        }

        // Clean every node for the next cycle (not timed).
        for connection in &mut waiter {
            connection
                .call(&[b"DEL", key, &order, &expiry, &turn])
                .await;
        }
    }
    (handoffs, missed)
}
