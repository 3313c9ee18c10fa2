//! Release notices: one subscriber connection per node, shared by every waiting
//! acquisition of the client.
//!
//! The release script publishes each key it deletes on the key's notice channel
//! ([`redlock_core::notice_channel`]). An acquisition with a wait limit (from its start)
//! or one that may retry and found its key held ([`Notices::listen`]) subscribes to its keys' channels on every node, and the driver
//! hands each message to [`redlock_core::Operation::handle_notice`] with the node it came
//! from; the core decides whether to try again at once. Nothing here decides anything
//! about the lock: a notice that is lost costs at most the retry delay the core would
//! have waited anyway, and a forged one at most one early attempt.
//!
//! - A node's subscriber connection (`SUBSCRIBE` takes a connection over, so it is not
//!   the node's command connection) is opened when the first waiter needs it and kept
//!   for the next ones; its task subscribes to a channel when the first waiter of that
//!   channel arrives and unsubscribes [`redlock_core::NOTICE_CHANNEL_LINGER_MS`] after the
//!   last one left, unless another came meanwhile: a client that waits for the same
//!   resource again at once is then still listening when a release names it.
//! - A confirmed subscription is handed to the channel's waiters (`docs/bindings.md`,
//!   rule 13): a release the node published before the subscription took effect reached
//!   nobody, and the core decides whether one may have gone unheard.
//! - A subscriber connection that dies (the node restarted, `CLIENT KILL`) is opened again
//!   while some waiter still wants a channel, after [`REOPEN_FIRST`] (doubling up to
//!   [`REOPEN_MAX`] while it keeps failing), subscribed to every channel still wanted: a
//!   notice lost meanwhile costs the time to subscribe again (for the waiter first in
//!   the queue, the confirmations stand for it), or the core's retry schedule if that
//!   comes first. A waiter that arrives
//!   meanwhile opens it at once.
//! - A waiter that goes away (its acquisition finished, or its future was dropped)
//!   leaves nothing behind: dropping its [`Listening`] unsubscribes what nobody else
//!   wants.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::mpsc;

/// How long a node's subscriber connection that failed stays closed, at first and at
/// most (doubling in between, back to the first after a confirmed subscription): the
/// core's [`redlock_core::SUBSCRIBER_REOPEN_FIRST_MS`] and `_MAX_MS`.
const REOPEN_FIRST: Duration = Duration::from_millis(redlock_core::SUBSCRIBER_REOPEN_FIRST_MS);
const REOPEN_MAX: Duration = Duration::from_millis(redlock_core::SUBSCRIBER_REOPEN_MAX_MS);

/// A change of one node's subscriptions, in the order the waiters came and went.
enum Control {
    Subscribe(Vec<u8>),
    Unsubscribe(Vec<u8>),
}

/// One node's live subscriber task.
struct Subscriber {
    control: mpsc::UnboundedSender<Control>,
    /// Tells this task's end from a newer task's.
    generation: u64,
}

#[derive(Default)]
struct State {
    next_waiter: u64,
    next_generation: u64,
    /// Per channel, its waiters: each gets the index of the node a notice came from
    /// and the notice's message.
    channels: HashMap<Vec<u8>, HashMap<u64, mpsc::UnboundedSender<Notice>>>,
    /// Per node, its subscriber task, if one runs.
    subscribers: Vec<Option<Subscriber>>,
    /// The client is gone: no new subscriber starts.
    closed: bool,
}

struct Shared {
    clients: Vec<redis::Client>,
    connect_timeout: Duration,
    state: Mutex<State>,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        // Plain maps, consistent after a panic elsewhere.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The client's release notices: a subscriber per node, started lazily.
pub(crate) struct Notices {
    shared: Arc<Shared>,
}

/// How a subscriber task ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ended {
    /// The connection could not be opened, broke, or refused a subscription.
    Failed,
    /// The client was dropped.
    Closed,
}

impl Notices {
    pub(crate) fn new(clients: Vec<redis::Client>, connect_timeout: Duration) -> Notices {
        let nodes = clients.len();
        let mut state = State::default();
        state.subscribers.resize_with(nodes, || None);
        Notices {
            shared: Arc::new(Shared {
                clients,
                connect_timeout,
                state: Mutex::new(state),
            }),
        }
    }

    /// Starts listening for releases of `keys` on every node. The notices come out of
    /// the returned [`Listening`] as node indexes; dropping it stops listening.
    /// Must run inside a Tokio runtime (a subscriber task may start).
    pub(crate) fn listen(&self, keys: &[Vec<u8>]) -> Listening {
        let (sender, receiver) = mpsc::unbounded_channel();
        let channels: Vec<Vec<u8>> = keys
            .iter()
            .map(|key| redlock_core::notice_channel(key))
            .collect();
        let mut state = self.shared.state();
        let id = state.next_waiter;
        state.next_waiter += 1;
        for channel in &channels {
            let waiters = state.channels.entry(channel.clone()).or_default();
            let first = waiters.is_empty();
            waiters.insert(id, sender.clone());
            if first {
                for subscriber in state.subscribers.iter().flatten() {
                    // A task that ended drops its receiver; the next `start` replaces it.
                    let _ = subscriber.control.send(Control::Subscribe(channel.clone()));
                }
            }
        }
        if !state.closed {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                for node in 0..state.subscribers.len() {
                    // A task whose runtime ended was dropped without freeing its slot.
                    if state.subscribers[node]
                        .as_ref()
                        .is_some_and(|s| s.control.is_closed())
                    {
                        state.subscribers[node] = None;
                    }
                    if state.subscribers[node].is_none() {
                        self.start(&mut state, node, &runtime);
                    }
                }
            }
        }
        Listening {
            shared: Arc::clone(&self.shared),
            id,
            channels,
            receiver,
        }
    }

    /// Starts node `node`'s subscriber task, subscribed to every channel wanted now.
    fn start(&self, state: &mut State, node: usize, runtime: &tokio::runtime::Handle) {
        let (generation, receiver) = install(state, node);
        runtime.spawn(subscriber(
            Arc::clone(&self.shared),
            node,
            generation,
            receiver,
        ));
    }

    /// How many nodes have a live subscriber connection (or one being opened).
    pub(crate) fn subscribers(&self) -> usize {
        self.shared.state().subscribers.iter().flatten().count()
    }

    /// The client is gone: every subscriber task ends, and none starts again.
    pub(crate) fn close(&self) {
        let mut state = self.shared.state();
        state.closed = true;
        for slot in &mut state.subscribers {
            // Dropping the sender ends the task's control stream.
            *slot = None;
        }
    }
}

/// What a node's subscriber hands a waiter of a channel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Notice {
    /// A release notice from node `.0` with its message (who is first in the queue of
    /// waiters there, as [`redlock_core::Operation::handle_notice_message`] reads it).
    Message(usize, Vec<u8>),
    /// Node `.0` confirmed the subscription
    /// ([`redlock_core::Operation::handle_subscribed`], `docs/bindings.md`, rule 13).
    Subscribed(usize),
}

/// One waiter's subscription: notices come out of [`Listening::recv`]; dropped, it
/// unsubscribes the channels no other waiter wants.
pub(crate) struct Listening {
    shared: Arc<Shared>,
    id: u64,
    channels: Vec<Vec<u8>>,
    receiver: mpsc::UnboundedReceiver<Notice>,
}

impl Listening {
    /// The next notice. Never ends while the client lives (a waiter keeps its sender in
    /// the map until dropped).
    pub(crate) async fn recv(&mut self) -> Option<Notice> {
        self.receiver.recv().await
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        let mut state = self.shared.state();
        for channel in &self.channels {
            let Some(waiters) = state.channels.get_mut(channel) else {
                continue;
            };
            waiters.remove(&self.id);
            if waiters.is_empty() {
                state.channels.remove(channel);
                for subscriber in state.subscribers.iter().flatten() {
                    let _ = subscriber
                        .control
                        .send(Control::Unsubscribe(channel.clone()));
                }
            }
        }
    }
}

/// Takes node `node`'s slot for a new subscriber generation, its control stream seeded
/// with every channel wanted now.
fn install(state: &mut State, node: usize) -> (u64, mpsc::UnboundedReceiver<Control>) {
    let (control, receiver) = mpsc::unbounded_channel();
    for channel in state.channels.keys() {
        let _ = control.send(Control::Subscribe(channel.clone()));
    }
    let generation = state.next_generation;
    state.next_generation += 1;
    state.subscribers[node] = Some(Subscriber {
        control,
        generation,
    });
    (generation, receiver)
}

/// Hands `notice` to every waiter of `channel` (none if nobody listens to it any more).
fn deliver(shared: &Shared, channel: &[u8], notice: Notice) {
    let state = shared.state();
    if let Some(waiters) = state.channels.get(channel) {
        for waiter in waiters.values() {
            // A waiter that finished drops its receiver just before leaving.
            let _ = waiter.send(notice.clone());
        }
    }
}

/// One node's subscriber: opens the connection, applies subscription changes in order,
/// and hands each message to the channel's waiters. When the connection fails it frees
/// its slot (the next waiter may start anew at once) and, after a delay, opens it again
/// if some channel is still wanted and no other task took the slot meanwhile. Ends when
/// the client is dropped or nobody wants a channel any more.
async fn subscriber(
    shared: Arc<Shared>,
    node: usize,
    mut generation: u64,
    mut control: mpsc::UnboundedReceiver<Control>,
) -> Ended {
    let mut delay = REOPEN_FIRST;
    loop {
        let ended = serve(&shared, node, &mut control, &mut delay).await;
        {
            let mut state = shared.state();
            if state.subscribers[node]
                .as_ref()
                .is_none_or(|s| s.generation != generation)
            {
                return ended; // closed, or replaced
            }
            state.subscribers[node] = None;
        }
        if ended == Ended::Closed {
            return ended;
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(REOPEN_MAX);
        let mut state = shared.state();
        if state.closed || state.channels.is_empty() || state.subscribers[node].is_some() {
            return ended;
        }
        (generation, control) = install(&mut state, node);
    }
}

/// Serves one connection until it fails or the client is dropped. `delay` goes back to
/// [`REOPEN_FIRST`] once the node confirms a subscription.
async fn serve(
    shared: &Shared,
    node: usize,
    control: &mut mpsc::UnboundedReceiver<Control>,
    delay: &mut Duration,
) -> Ended {
    let client = &shared.clients[node];
    let pubsub = match tokio::time::timeout(shared.connect_timeout, client.get_async_pubsub()).await
    {
        Ok(Ok(pubsub)) => pubsub,
        _ => return Ended::Failed,
    };
    let (mut sink, mut stream) = pubsub.split();
    // Channels nobody waits on any more, still subscribed until their instant.
    let mut lingering: HashMap<Vec<u8>, tokio::time::Instant> = HashMap::new();
    let linger = Duration::from_millis(redlock_core::NOTICE_CHANNEL_LINGER_MS);
    loop {
        let next_due = lingering.values().min().copied();
        tokio::select! {
            change = control.recv() => {
                // A node that does not confirm (frozen) within the connect timeout counts
                // as a dead subscriber, so that changes do not pile up behind it.
                match change {
                    Some(Control::Subscribe(channel)) => {
                        if lingering.remove(&channel).is_some() {
                            continue; // still subscribed
                        }
                        let result = tokio::time::timeout(
                            shared.connect_timeout,
                            sink.subscribe(&channel),
                        )
                        .await;
                        if !matches!(result, Ok(Ok(()))) {
                            return Ended::Failed;
                        }
                        *delay = REOPEN_FIRST;
                        // Confirmed: a release published here before it took effect
                        // reached nobody, so one may have gone unheard.
                        deliver(shared, &channel, Notice::Subscribed(node));
                    }
                    Some(Control::Unsubscribe(channel)) => {
                        lingering.insert(channel, tokio::time::Instant::now() + linger);
                    }
                    None => return Ended::Closed,
                }
            }
            () = async {
                if let Some(at) = next_due {
                    tokio::time::sleep_until(at).await;
                }
            }, if next_due.is_some() => {
                let now = tokio::time::Instant::now();
                let due: Vec<Vec<u8>> = lingering
                    .iter()
                    .filter(|(_, at)| **at <= now)
                    .map(|(channel, _)| channel.clone())
                    .collect();
                for channel in due {
                    lingering.remove(&channel);
                    if shared.state().channels.contains_key(&channel) {
                        continue; // a waiter came back: its Subscribe is on its way
                    }
                    let result =
                        tokio::time::timeout(shared.connect_timeout, sink.unsubscribe(channel))
                            .await;
                    if !matches!(result, Ok(Ok(()))) {
                        return Ended::Failed;
                    }
                }
            }
            message = stream.next() => {
                let Some(message) = message else {
                    return Ended::Failed;
                };
                let Ok(channel) = message.get_channel::<Vec<u8>>() else {
                    continue;
                };
                // A message that is not a byte string names nobody.
                let text = message.get_payload::<Vec<u8>>().unwrap_or_default();
                deliver(shared, &channel, Notice::Message(node, text));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;

    /// One RESP command read from `reader`, or `None` once the connection is closed.
    fn command(reader: &mut impl BufRead) -> Option<Vec<Vec<u8>>> {
        let mut line = String::new();
        reader.read_line(&mut line).ok().filter(|n| *n > 0)?;
        let count: usize = line.trim_end().strip_prefix('*')?.parse().ok()?;
        let mut args = Vec::new();
        for _ in 0..count {
            line.clear();
            reader.read_line(&mut line).ok()?;
            let len: usize = line.trim_end().strip_prefix('$')?.parse().ok()?;
            let mut arg = vec![0; len + 2];
            reader.read_exact(&mut arg).ok()?;
            arg.truncate(len);
            args.push(arg);
        }
        Some(args)
    }

    fn bulk(out: &mut Vec<u8>, bytes: &[u8]) {
        out.extend_from_slice(format!("${}\r\n", bytes.len()).as_bytes());
        out.extend_from_slice(bytes);
        out.extend_from_slice(b"\r\n");
    }

    /// A node that answers `OK` to everything but `SUBSCRIBE`, which it confirms. On its
    /// first connection it then publishes `first` on the channel and closes; its second
    /// connection stays until the client closes it.
    fn fake_node(first: &'static [u8]) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("redis://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for connection in 0..2 {
                let Ok((stream, _)) = listener.accept() else {
                    return;
                };
                let mut writer = stream.try_clone().unwrap();
                let mut reader = BufReader::new(stream);
                while let Some(args) = command(&mut reader) {
                    let mut out = Vec::new();
                    if args[0].eq_ignore_ascii_case(b"SUBSCRIBE") {
                        for (count, channel) in args[1..].iter().enumerate() {
                            out.extend_from_slice(b"*3\r\n");
                            bulk(&mut out, b"subscribe");
                            bulk(&mut out, channel);
                            out.extend_from_slice(format!(":{}\r\n", count + 1).as_bytes());
                        }
                        if connection == 0 {
                            out.extend_from_slice(b"*3\r\n");
                            bulk(&mut out, b"message");
                            bulk(&mut out, &args[1]);
                            bulk(&mut out, first);
                        }
                    } else {
                        out.extend_from_slice(b"+OK\r\n");
                    }
                    if writer.write_all(&out).is_err() {
                        break;
                    }
                    if connection == 0 && args[0].eq_ignore_ascii_case(b"SUBSCRIBE") {
                        break;
                    }
                }
            }
        });
        url
    }

    async fn next(listening: &mut Listening) -> Option<Notice> {
        tokio::time::timeout(Duration::from_secs(2), listening.recv())
            .await
            .expect("a notice within 2 s")
    }

    #[test]
    fn a_confirmed_subscription_is_reported_again_after_the_connection_is_reopened() {
        let url = fake_node(b"waiter-1");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let client = redis::Client::open(url.as_str()).unwrap();
            let notices = Notices::new(vec![client], Duration::from_secs(2));
            let mut listening = notices.listen(&[b"k".to_vec()]);
            // The confirmation is reported (rule 13), then the message.
            assert_eq!(next(&mut listening).await, Some(Notice::Subscribed(0)));
            assert_eq!(
                next(&mut listening).await,
                Some(Notice::Message(0, b"waiter-1".to_vec()))
            );
            // The node closed the connection: opened again for the waiter, whose new
            // confirmation counts again.
            assert_eq!(next(&mut listening).await, Some(Notice::Subscribed(0)));
            assert_eq!(notices.subscribers(), 1);
            notices.close();
        });
    }
}
