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
    notice_channel, queue_keys, waiter_channel, Reply, QUEUED_ACQUIRE_SCRIPT, QUEUED_ACQUIRE_SHA1,
    RELEASE_SCRIPT, RELEASE_SHA1,
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

/// Sends `args` to every connection at once and waits until `done` says the replies
/// read so far decide; then reads the rest, so the next round starts clean. Returns the
/// instant the deciding reply was read.
async fn round(
    connections: &mut [Raw],
    args: &[&[u8]],
    mut done: impl FnMut(&Reply) -> bool,
) -> Instant {
    for connection in connections.iter_mut() {
        connection.send(args).await;
    }
    let mut answered = vec![false; connections.len()];
    let mut took = None;
    {
        let mut replies: FuturesUnordered<_> = connections
            .iter_mut()
            .enumerate()
            .map(|(i, c)| async move { (i, c.reply().await) })
            .collect();
        while let Some((i, reply)) = replies.next().await {
            answered[i] = true;
            if took.is_none() && done(&reply) {
                took = Some(Instant::now());
                break;
            }
        }
    }
    for (connection, answered) in connections.iter_mut().zip(answered) {
        if !answered {
            connection.reply().await;
        }
    }
    took.expect("the round decided")
}

/// What [`handoff_floor`] measured, per cycle.
pub struct Floor {
    /// One `SET NX PX` round on a free key, to a quorum of `OK`s.
    pub acquire: Vec<Duration>,
    /// Release sent to next holder's quorum of `OK`s.
    pub handoff: Vec<Duration>,
}

/// `cycles` uncontended acquisitions and `cycles` hand-offs, interleaved, on `urls`.
pub async fn handoff_floor(urls: &[String], cycles: usize) -> Floor {
    let quorum = urls.len() / 2 + 1;
    let mut holder = Vec::new();
    let mut waiter = Vec::new();
    let mut notices = Vec::new();
    for url in urls {
        let mut connection = Raw::connect(url).await;
        let loaded = connection
            .call(&[b"SCRIPT", b"LOAD", RELEASE_SCRIPT.as_bytes()])
            .await;
        assert_eq!(loaded, Reply::Bulk(RELEASE_SHA1.as_bytes().to_vec()));
        holder.push(connection);
        waiter.push(Raw::connect(url).await);
        notices.push(Raw::connect(url).await);
    }
    let key: &[u8] = b"bench:floor:handoff";
    let free: &[u8] = b"bench:floor:free";
    let channel = notice_channel(key);
    for connection in &mut notices {
        let confirmed = connection.call(&[b"SUBSCRIBE", &channel]).await;
        assert!(matches!(confirmed, Reply::Array(_)), "{confirmed:?}");
    }
    let ttl = b"10000";
    let is_ok = |reply: &Reply| *reply == Reply::Ok;
    let mut floor = Floor {
        acquire: Vec::with_capacity(cycles),
        handoff: Vec::with_capacity(cycles),
    };
    for n in 0..cycles {
        let first = format!("floor-holder-{n:028}");
        let next = format!("floor-waiter-{n:028}");

        // An uncontended acquisition, then its key deleted (not timed).
        let mut oks = 0;
        let started = Instant::now();
        let acquired = round(
            &mut waiter,
            &[b"SET", free, next.as_bytes(), b"NX", b"PX", ttl],
            |reply| {
                oks += usize::from(is_ok(reply));
                oks == quorum
            },
        )
        .await;
        floor.acquire.push(acquired - started);
        for connection in &mut waiter {
            connection.call(&[b"DEL", free]).await;
        }

        // The holder takes the key on every node (not timed).
        for connection in &mut holder {
            let set = connection
                .call(&[b"SET", key, first.as_bytes(), b"NX", b"PX", ttl])
                .await;
            assert_eq!(set, Reply::Ok);
        }

        // The hand-off.
        let started = Instant::now();
        for connection in &mut holder {
            connection
                .send(&[
                    b"EVALSHA",
                    RELEASE_SHA1.as_bytes(),
                    b"1",
                    key,
                    first.as_bytes(),
                ])
                .await;
        }
        let mut heard = vec![false; notices.len()];
        {
            let mut messages: FuturesUnordered<_> = notices
                .iter_mut()
                .enumerate()
                .map(|(i, c)| async move { (i, c.reply().await) })
                .collect();
            let mut count = 0;
            while let Some((i, message)) = messages.next().await {
                assert!(matches!(message, Reply::Array(_)), "{message:?}");
                heard[i] = true;
                count += 1;
                if count == quorum {
                    break;
                }
            }
        }
        // The nodes that announced the release have no key: the quorum's `OK`s come from
        // them or from the others, whichever answers first.
        let mut oks = 0;
        let acquired = round(
            &mut waiter,
            &[b"SET", key, next.as_bytes(), b"NX", b"PX", ttl],
            |reply| {
                oks += usize::from(is_ok(reply));
                oks == quorum
            },
        )
        .await;
        floor.handoff.push(acquired - started);

        // Read what is left, and free the key for the next cycle (not timed).
        for connection in &mut holder {
            connection.reply().await;
        }
        for (connection, heard) in notices.iter_mut().zip(heard) {
            if !heard {
                connection.reply().await;
            }
        }
        for connection in &mut waiter {
            connection.call(&[b"DEL", key]).await;
        }
    }
    floor
}

/// Reads replies from every connection until `done` says the ones read so far decide;
/// returns that instant and which connections answered.
async fn until_decided(
    connections: &mut [Raw],
    mut done: impl FnMut(&Reply) -> bool,
) -> (Instant, Vec<bool>) {
    let mut answered = vec![false; connections.len()];
    let mut replies: FuturesUnordered<_> = connections
        .iter_mut()
        .enumerate()
        .map(|(i, c)| async move { (i, c.reply().await) })
        .collect();
    while let Some((i, reply)) = replies.next().await {
        answered[i] = true;
        if done(&reply) {
            return (Instant::now(), answered);
        }
    }
    panic!("every connection answered and nothing decided");
}

/// Reads the reply of every connection that has not answered yet.
async fn drain(connections: &mut [Raw], answered: &[bool]) {
    for (connection, answered) in connections.iter_mut().zip(answered) {
        if !answered {
            connection.reply().await;
        }
    }
}

fn args(argv: &[Vec<u8>]) -> Vec<&[u8]> {
    argv.iter().map(Vec::as_slice).collect()
}

async fn send_all(connections: &mut [Raw], args: &[&[u8]]) {
    for connection in connections.iter_mut() {
        connection.send(args).await;
    }
}

/// The same hand-off with the waiters' protocol the library uses, and the contention of
/// the hand-off benchmark, still with no lock library: the waiter is queued on every
/// node and subscribed to its waiter channel; the holder's release (the core's script,
/// with the holder's waiter id) names it and gives it the turn; the waiter tries with the
/// queued acquire script once a quorum of notices named it; and the holder comes back at
/// once, as the benchmark's contenders do: when its release has a quorum it tries again
/// (the queued acquire script, refused: the waiter has the turn), then releases that
/// attempt on every node. Holder and waiter are two futures of one task.
pub async fn queued_handoff_floor(
    urls: &[String],
    cycles: usize,
    holder_returns: bool,
) -> Vec<Duration> {
    let quorum = urls.len() / 2 + 1;
    let (mut holder, mut waiter, mut notices) = (Vec::new(), Vec::new(), Vec::new());
    let key: &[u8] = b"bench:floor:queued";
    let [order, expiry] = queue_keys(key);
    let mut turn = order.clone();
    turn.extend_from_slice(b":turn");
    let waiter_id = b"aaaaaaaaaaaaaaaa-floor-waiter".to_vec();
    let channel = waiter_channel(&waiter_id, key);
    for url in urls {
        let mut connection = Raw::connect(url).await;
        for script in [RELEASE_SCRIPT, QUEUED_ACQUIRE_SCRIPT] {
            let loaded = connection
                .call(&[b"SCRIPT", b"LOAD", script.as_bytes()])
                .await;
            assert!(matches!(loaded, Reply::Bulk(_)), "{loaded:?}");
        }
        holder.push(connection);
        waiter.push(Raw::connect(url).await);
        let mut listening = Raw::connect(url).await;
        let confirmed = listening.call(&[b"SUBSCRIBE", &channel]).await;
        assert!(matches!(confirmed, Reply::Array(_)), "{confirmed:?}");
        notices.push(listening);
    }
    let (ttl, lifetime) = (b"10000".as_slice(), b"1000".as_slice());
    let queued = |token: &[u8], waiter: &[u8]| -> Vec<Vec<u8>> {
        [
            b"EVALSHA".as_slice(),
            QUEUED_ACQUIRE_SHA1.as_bytes(),
            b"3",
            key,
            &order,
            &expiry,
            token,
            ttl,
            waiter,
            lifetime,
        ]
        .iter()
        .map(|arg| arg.to_vec())
        .collect()
    };
    let mut handoffs = Vec::with_capacity(cycles);
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
        send_all(
            &mut holder,
            &[
                b"EVALSHA",
                RELEASE_SHA1.as_bytes(),
                b"1",
                key,
                first.as_bytes(),
                holder_id.as_bytes(),
            ],
        )
        .await;
        let holding = async {
            let (_, answered) = until_decided(&mut holder, {
                let mut released = 0;
                move |reply| {
                    released += usize::from(*reply == Reply::Integer(1));
                    released == quorum
                }
            })
            .await;
            if !holder_returns {
                drain(&mut holder, &answered).await;
                return;
            }
            // Back at once: refused (the waiter has the turn), then released everywhere.
            let retry = queued(again.as_bytes(), again_id.as_bytes());
            send_all(&mut holder, &args(&retry)).await;
            drain(&mut holder, &answered).await;
            for connection in &mut holder {
                connection.reply().await;
            }
            send_all(
                &mut holder,
                &[
                    b"EVALSHA",
                    RELEASE_SHA1.as_bytes(),
                    b"1",
                    key,
                    again.as_bytes(),
                ],
            )
            .await;
            for connection in &mut holder {
                connection.reply().await;
            }
        };
        let waiting = async {
            let (_, heard) = until_decided(&mut notices, {
                let mut named = 0;
                move |_| {
                    named += 1;
                    named == quorum
                }
            })
            .await;
            send_all(&mut waiter, &args(&queued(next.as_bytes(), &waiter_id))).await;
            let (acquired, answered) = until_decided(&mut waiter, {
                let mut set = 0;
                move |reply| {
                    set += usize::from(*reply == Reply::Integer(1));
                    set == quorum
                }
            })
            .await;
            drain(&mut waiter, &answered).await;
            drain(&mut notices, &heard).await;
            acquired
        };
        let ((), acquired) = tokio::join!(holding, waiting);
        handoffs.push(acquired - started);

        // Clean every node for the next cycle (not timed).
        for connection in &mut waiter {
            connection
                .call(&[b"DEL", key, &order, &expiry, &turn])
                .await;
        }
    }
    handoffs
}
