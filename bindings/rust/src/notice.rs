//! Release notices: one subscriber connection per node, shared by every waiting
//! acquisition of the client.
//!
//! The release script publishes each key it deletes: on the waiter channel of the waiter
//! it names ([`redlock_core::waiter_channel`]), or on the key's notice channel
//! ([`redlock_core::notice_channel`]) when it names nobody. An acquisition with a wait
//! limit (once a node refused it because the key is held, or from its start after a
//! recent wait for the resource) or one that may retry and found its key held
//! ([`Notices::listen`]) listens on its channels
//! ([`redlock_core::Operation::notice_channels`]) on every node, and the driver hands
//! each message to [`redlock_core::Operation::handle_notice_message`] with the node it
//! came from; the core decides whether to try again at once. A notice that is lost costs
//! at most the retry delay the core would have waited anyway, and a forged one at most
//! one early attempt.
//!
//! The connections follow the core's [`Subscriptions`] (its docs give the policy: when a
//! node's subscriber connection opens and closes, which channels it subscribes, how long
//! a channel lingers after its last waiter, how long a failed connection stays closed).
//! This module only carries it out: a task per connection reports what happened to it
//! (opened, lost, refused, a subscription confirmed), a timer task calls the core when it
//! is due, and the waiters of each channel get its notices and its counted confirmations
//! (`docs/bindings.md`, rule 13). A waiter that goes away (its acquisition finished, or
//! its future was dropped) tells the core when its [`Listening`] is dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use redlock_core::{SubscriberOutput, Subscriptions, Time};
use tokio::sync::{mpsc, Notify};

/// A change of one node's subscriptions, in the order the core asked for them.
enum Control {
    Subscribe(Vec<u8>),
    Unsubscribe(Vec<u8>),
}

/// One node's live subscriber task (one connection).
struct Subscriber {
    control: mpsc::UnboundedSender<Control>,
    /// Tells this connection's reports from an older one's.
    generation: u64,
    /// The connection's task: aborted when the core closes the connection, which also
    /// gives up an attempt to open it (the core's connect timeout).
    task: tokio::task::AbortHandle,
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct State {
    /// The core's policy for the subscriber connections; `None` without nodes to
    /// subscribe on (a client over given connections, or notices off).
    core: Option<Subscriptions>,
    next_waiter: u64,
    next_generation: u64,
    /// Per channel, its waiters: each gets the index of the node a notice came from
    /// and the notice's message.
    channels: HashMap<Vec<u8>, HashMap<u64, mpsc::UnboundedSender<Notice>>>,
    /// Per node, its subscriber task, if one runs.
    subscribers: Vec<Option<Subscriber>>,
    /// The runtime the tasks run on: the first waiter's.
    runtime: Option<tokio::runtime::Handle>,
    /// The client is gone: no new subscriber starts.
    closed: bool,
}

struct Shared {
    clients: Vec<redis::Client>,
    origin: Instant,
    state: Mutex<State>,
    /// Wakes the timer task: the core's next instant may have changed.
    rearm: Notify,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        // Plain maps, consistent after a panic elsewhere.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn now(&self) -> Time {
        Time::from_micros(u64::try_from(self.origin.elapsed().as_micros()).unwrap_or(u64::MAX))
    }

    fn instant(&self, time: Time) -> tokio::time::Instant {
        let far = self.origin + Duration::from_secs(100 * 365 * 24 * 3600);
        let at = self
            .origin
            .checked_add(Duration::from_micros(time.as_micros()))
            .map_or(far, |instant| instant.min(far));
        tokio::time::Instant::from_std(at)
    }
}

/// The client's release notices: a subscriber per node, opened and closed as the core's
/// [`Subscriptions`] says.
pub(crate) struct Notices {
    shared: Arc<Shared>,
}

/// What a subscriber connection reports to the core.
enum Report {
    Opened,
    Lost,
    Refused,
    Confirmed(Vec<u8>),
}

impl Notices {
    pub(crate) fn new(clients: Vec<redis::Client>, connect_timeout: Duration) -> Notices {
        let nodes = clients.len();
        // No nodes: nothing to subscribe on (the core refuses zero nodes).
        let core = Subscriptions::new(nodes, connect_timeout).ok();
        let mut subscribers = Vec::new();
        subscribers.resize_with(nodes, || None);
        Notices {
            shared: Arc::new(Shared {
                clients,
                origin: Instant::now(),
                state: Mutex::new(State {
                    core,
                    next_waiter: 0,
                    next_generation: 0,
                    channels: HashMap::new(),
                    subscribers,
                    runtime: None,
                    closed: false,
                }),
                rearm: Notify::new(),
            }),
        }
    }

    /// Starts listening on `channels` (an acquisition's
    /// [`redlock_core::Operation::notice_channels`]) on every node. The notices come out
    /// of the returned [`Listening`] with their node's index; dropping it stops listening.
    /// Must run inside a Tokio runtime (subscriber tasks may start).
    pub(crate) fn listen(&self, channels: Vec<Vec<u8>>) -> Listening {
        let (sender, receiver) = mpsc::unbounded_channel();
        let now = self.shared.now();
        let mut state = self.shared.state();
        let id = state.next_waiter;
        state.next_waiter += 1;
        for channel in &channels {
            state
                .channels
                .entry(channel.clone())
                .or_default()
                .insert(id, sender.clone());
        }
        if !state.closed && state.core.is_some() {
            if state.runtime.is_none() {
                if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                    runtime.spawn(timer(Arc::clone(&self.shared)));
                    state.runtime = Some(runtime);
                }
            }
            if let Some(core) = state.core.as_mut() {
                for channel in &channels {
                    core.want(channel, now);
                }
            }
            pump_and_rearm(&self.shared, &mut state);
        }
        Listening {
            shared: Arc::clone(&self.shared),
            id,
            channels,
            receiver,
        }
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
        drop(state);
        self.shared.rearm.notify_one();
    }
}

/// Carries out what the core asks of the subscriber connections after an input, and
/// wakes the timer task to look at the core's next instant again.
fn pump_and_rearm(shared: &Arc<Shared>, state: &mut State) {
    pump(shared, state);
    shared.rearm.notify_one();
}

/// Carries out what the core asks of the subscriber connections.
fn pump(shared: &Arc<Shared>, state: &mut State) {
    while let Some(output) = state.core.as_mut().and_then(Subscriptions::poll_output) {
        match output {
            SubscriberOutput::Open { node } => {
                let Some(runtime) = state.runtime.clone() else {
                    continue; // no runtime yet: the first waiter brings one
                };
                if state.closed {
                    continue;
                }
                let (control, receiver) = mpsc::unbounded_channel();
                let generation = state.next_generation;
                state.next_generation += 1;
                let task = runtime
                    .spawn(subscriber(Arc::clone(shared), node, generation, receiver))
                    .abort_handle();
                state.subscribers[node] = Some(Subscriber {
                    control,
                    generation,
                    task,
                });
            }
            SubscriberOutput::Subscribe { node, channel } => {
                send(state, node, Control::Subscribe(channel))
            }
            SubscriberOutput::Unsubscribe { node, channel } => {
                send(state, node, Control::Unsubscribe(channel));
            }
            // Dropping it aborts the task, which closes its connection (or gives up
            // opening it).
            SubscriberOutput::Close { node } => state.subscribers[node] = None,
        }
    }
}

fn send(state: &State, node: usize, control: Control) {
    if let Some(subscriber) = &state.subscribers[node] {
        // A task that ended drops its receiver; its loss is reported separately.
        let _ = subscriber.control.send(control);
    }
}

/// Hands a connection's report to the core (ignored from a connection the core no
/// longer counts), and a counted confirmation to the channel's waiters.
fn report(shared: &Arc<Shared>, node: usize, generation: u64, report: Report) {
    let now = shared.now();
    let mut state = shared.state();
    if state.subscribers[node]
        .as_ref()
        .is_none_or(|s| s.generation != generation)
    {
        return;
    }
    let Some(core) = state.core.as_mut() else {
        return;
    };
    // `node` is below the node count: the core named it.
    let _ = match report {
        Report::Opened => core.handle_opened(node, now),
        Report::Lost => {
            let result = core.handle_lost(node, now);
            state.subscribers[node] = None;
            result
        }
        Report::Refused => core.handle_refused(node, now),
        Report::Confirmed(channel) => {
            if core.handle_confirmed(node, &channel, now) == Ok(true) {
                // Confirmed: a release published here before it took effect reached
                // nobody, so one may have gone unheard (`docs/bindings.md`, rule 13).
                deliver(&state, &channel, Notice::Subscribed(node));
            }
            Ok(())
        }
    };
    pump_and_rearm(shared, &mut state);
}

/// Hands `notice` to every waiter of `channel` (none if nobody listens to it any more).
fn deliver(state: &State, channel: &[u8], notice: Notice) {
    if let Some(waiters) = state.channels.get(channel) {
        for waiter in waiters.values() {
            // A waiter that finished drops its receiver just before leaving.
            let _ = waiter.send(notice.clone());
        }
    }
}

/// Calls the core's `handle_timeout` when it is due, until the client is closed
/// ([`Notices::close`], which wakes it).
async fn timer(shared: Arc<Shared>) {
    loop {
        let due = {
            let state = shared.state();
            if state.closed {
                return;
            }
            state.core.as_ref().and_then(Subscriptions::poll_timeout)
        };
        let sleep = due.map(|at| shared.instant(at));
        tokio::select! {
            () = shared.rearm.notified() => {}
            () = async {
                match sleep {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            } => {}
        }
        let now = shared.now();
        let mut state = shared.state();
        if let Some(core) = state.core.as_mut() {
            core.handle_timeout(now);
        }
        pump(&shared, &mut state);
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
/// tells the core it listens no more.
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
        let now = self.shared.now();
        let mut state = self.shared.state();
        for channel in &self.channels {
            if let Some(waiters) = state.channels.get_mut(channel) {
                waiters.remove(&self.id);
                if waiters.is_empty() {
                    state.channels.remove(channel);
                }
            }
            if let Some(core) = state.core.as_mut() {
                core.unwant(channel, now);
            }
        }
        pump_and_rearm(&self.shared, &mut state);
    }
}

/// One node's subscriber connection: opens it, reports it to the core, applies the
/// subscription changes the core asks for in order, and hands each message to the
/// channel's waiters. Ends when the connection fails (reported as lost or refused) or
/// the core closes it (its control stream ends).
async fn subscriber(
    shared: Arc<Shared>,
    node: usize,
    generation: u64,
    mut control: mpsc::UnboundedReceiver<Control>,
) {
    let client = &shared.clients[node];
    // No timeouts here: a connection that does not open, or a subscription not confirmed,
    // within the connect timeout is the core's to give up (its `Close` aborts this task).
    let Ok(pubsub) = client.get_async_pubsub().await else {
        return report(&shared, node, generation, Report::Lost);
    };
    report(&shared, node, generation, Report::Opened);
    let (mut sink, mut stream) = pubsub.split();
    loop {
        tokio::select! {
            change = control.recv() => {
                match change {
                    Some(Control::Subscribe(channel)) => match sink.subscribe(&channel).await {
                        Ok(()) => report(&shared, node, generation, Report::Confirmed(channel)),
                        Err(error) if !error.is_io_error() => {
                            return report(&shared, node, generation, Report::Refused);
                        }
                        Err(_) => return report(&shared, node, generation, Report::Lost),
                    },
                    Some(Control::Unsubscribe(channel)) => {
                        if sink.unsubscribe(channel).await.is_err() {
                            return report(&shared, node, generation, Report::Lost);
                        }
                    }
                    None => return, // closed by the core, or the client is gone
                }
            }
            message = stream.next() => {
                let Some(message) = message else {
                    return report(&shared, node, generation, Report::Lost);
                };
                let Ok(channel) = message.get_channel::<Vec<u8>>() else {
                    continue;
                };
                // A message that is not a byte string names nobody.
                let text = message.get_payload::<Vec<u8>>().unwrap_or_default();
                deliver(&shared.state(), &channel, Notice::Message(node, text));
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
            let mut listening = notices.listen(vec![b"k".to_vec()]);
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
