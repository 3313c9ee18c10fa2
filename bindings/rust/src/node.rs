//! One Redis node: the core's [`Link`] for it, and the connection I/O that does what the
//! link outputs.
//!
//! Every policy about the node's commands (their order, the bound in flight, what a
//! stalled node still gets, owed releases, resending, loading the scripts first,
//! reconnect backoff) is the link's. This module only opens a connection when the link
//! says `Connect`, writes what it says `Write` (in that order), hands each reply back
//! with its write's id, closes when it says `Close`, and routes `Deliver`ed replies to
//! the operation that issued the command.
//!
//! # I/O through the `redis` crate
//!
//! A node's connection is one [`MultiplexedConnection`] of the `redis` crate, kept for
//! what it parses from node URLs and does on connecting: TLS with rustls
//! (`rediss://`, a custom root certificate, `#insecure`), `AUTH` with a password or an
//! ACL user, `SELECT` of a database. It fits the link's contract:
//!
//! - **Order.** The connection writes requests in the order they enter its queue (one
//!   channel, fair when full). Each write's future is polled once, in the link's order,
//!   before the next write is started; that first poll puts the command in the queue.
//! - **Replies by write.** The connection matches replies to requests itself; a write's
//!   future resolves with its own reply, which goes to [`Link::handle_reply`] with the
//!   write's id.
//! - **Nothing decided by the crate.** No response timeout (the link and the operations
//!   keep the deadlines), and a multiplexed connection never reconnects or resends on its
//!   own. A connection attempt is bounded by the client's connect timeout.
//!
//! Errors map once: a server's error reply is [`Reply::Error`] with its full text (code
//! included); any other failure of a write means the connection is gone
//! ([`Link::handle_closed`], cause `closed`). A failed connection attempt is classified
//! as `refused`, `auth`, `tls`, `timeout` or `closed` ([`link_cause`]).
//!
//! # The I/O task
//!
//! Each node has one task, living as long as the client (spawned on the runtime of the
//! first call that needs it, and again if that runtime ended). Operations only submit
//! commands to the link and wake the task; the task drains the link's outputs, and
//! waits for a connection attempt, a reply, the link's [`Link::poll_timeout`], or a
//! wake-up. It ends once the client is dropped and the link has nothing left to write
//! or await (at most [`SHUTDOWN_GRACE`] later).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Poll;
use std::time::{Duration, Instant};

use futures_util::stream::{FuturesUnordered, StreamExt};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisError, RedisResult, Value};
use redlock_core::{
    Command, Delivery, Link, LinkCause, LinkOutput, Reply, RequestId, Time, Write, WriteId,
};
use tokio::sync::{mpsc, watch, Notify};
use tokio::task::JoinHandle;

/// How long a node's task may keep sending after its client was dropped (owed releases
/// to a node that does not answer).
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The tag of commands nobody waits for (releases of dropped guards and cancelled
/// acquisitions): their replies are dropped.
pub(crate) const UNROUTED: u64 = 0;

/// Where the links deliver replies: per operation tag, the operation's channel.
#[derive(Default)]
pub(crate) struct Routes(Mutex<HashMap<u64, mpsc::UnboundedSender<(RequestId, Reply)>>>);

impl Routes {
    fn map(&self) -> MutexGuard<'_, HashMap<u64, mpsc::UnboundedSender<(RequestId, Reply)>>> {
        // Plain data, consistent after a panic elsewhere.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn open(&self, tag: u64) -> mpsc::UnboundedReceiver<(RequestId, Reply)> {
        let (sender, receiver) = mpsc::unbounded_channel();
        self.map().insert(tag, sender);
        receiver
    }

    pub(crate) fn close(&self, tag: u64) {
        self.map().remove(&tag);
    }

    fn deliver(&self, delivery: Delivery) {
        if let Some(sender) = self.map().get(&delivery.tag) {
            // A receiver gone means the operation is finished: the reply is late.
            let _ = sender.send((delivery.request, delivery.reply));
        }
    }
}

/// The client's monotonic clock: every `Time` is microseconds since `origin`.
#[derive(Clone, Copy)]
pub(crate) struct Clock {
    pub(crate) origin: Instant,
}

impl Clock {
    pub(crate) fn now(self) -> Time {
        // Rounded down: a round's start (which fixes valid_until) is never late.
        Time::from_micros(u64::try_from(self.origin.elapsed().as_micros()).unwrap_or(u64::MAX))
    }

    pub(crate) fn instant(self, time: Time) -> Instant {
        let far = self.origin + Duration::from_secs(100 * 365 * 24 * 3600);
        self.origin
            .checked_add(Duration::from_micros(time.as_micros()))
            .map_or(far, |instant| instant.min(far))
    }

    fn tokio_instant(self, time: Time) -> tokio::time::Instant {
        tokio::time::Instant::from_std(self.instant(time))
    }
}

struct State {
    link: Link,
    task: Option<JoinHandle<()>>,
    /// The client was dropped: end the task once the link is idle.
    shutdown: Option<Time>,
}

/// What the link's current state looks like, for diagnostics and tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LinkStats {
    /// True while a connection is open.
    pub open: bool,
    /// Writes awaiting their replies (the three script loads included).
    pub in_flight: usize,
    /// Commands queued, not yet written.
    pub queued: usize,
    /// Tokens whose release the link still owes the node.
    pub owed: usize,
}

/// Where a node's connections come from.
#[derive(Clone)]
pub(crate) enum Source {
    /// The `redis` client for the node's URL: a new connection at each `Connect`.
    Url(redis::Client),
    /// A connection the user opened ([`crate::ClientBuilder::from_connections`]): each
    /// `Connect` hands out a clone of it. A multiplexed connection never reconnects, so
    /// once it breaks every later write fails and the node counts as failing.
    Given(MultiplexedConnection),
    /// The master a Sentinel names, asked again at each `Connect` (so a reconnection
    /// after a failover reaches the new master).
    #[cfg(feature = "sentinel")]
    Sentinel(Arc<crate::sentinel::Sentinels>),
}

/// A node of the client: where its connections come from, and its link.
pub(crate) struct Node {
    /// The URL with any password replaced by `***`, for messages.
    label: String,
    client: Source,
    clock: Clock,
    routes: Arc<Routes>,
    state: Mutex<State>,
    wake: Notify,
    idle: watch::Sender<bool>,
    /// A connection [`Node::probe`] opened ahead, used at the link's next `Connect`.
    prepared: Mutex<Option<MultiplexedConnection>>,
    /// A connection given by the user broke: it never comes back, so later connection
    /// attempts fail at once (and the link's reconnect backoff applies).
    broken: AtomicBool,
}

type Connecting =
    Pin<Box<dyn Future<Output = Result<MultiplexedConnection, (LinkCause, String)>> + Send>>;
type Written = (u64, WriteId, RedisResult<Value>);
type Writing = Pin<Box<dyn Future<Output = Written> + Send>>;

impl Node {
    pub(crate) fn new(
        label: String,
        client: Source,
        connect_timeout: Duration,
        clock: Clock,
        routes: Arc<Routes>,
    ) -> Node {
        Node {
            label,
            client,
            clock,
            routes,
            state: Mutex::new(State {
                // The link gives a connection attempt up at the connect timeout.
                link: Link::with_connect_timeout(connect_timeout),
                task: None,
                shutdown: None,
            }),
            wake: Notify::new(),
            idle: watch::Sender::new(true),
            prepared: Mutex::new(None),
            broken: AtomicBool::new(false),
        }
    }

    /// The node's URL without its password.
    pub(crate) fn label(&self) -> &str {
        &self.label
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // The link keeps itself consistent; a panic elsewhere cannot break it.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Hands an operation's command to the link. Synchronous: usable from `Drop`.
    pub(crate) fn submit(self: &Arc<Self>, tag: u64, command: Command) {
        let mut state = self.state();
        let now = self.clock.now();
        state.link.submit(tag, command, now);
        self.idle.send_replace(false);
        self.ensure_task(&mut state, now);
        drop(state);
        self.wake.notify_one();
    }

    /// Starts the node's task on the current runtime if none runs.
    fn ensure_task(self: &Arc<Self>, state: &mut State, now: Time) {
        if state.task.as_ref().is_some_and(|task| !task.is_finished()) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // No runtime here: the commands wait in the link for the next call that has one.
            return;
        };
        if state.task.take().is_some() {
            // The previous task's runtime ended with its connection (or attempt).
            state
                .link
                .handle_closed(LinkCause::Closed, "the runtime driving the node ended", now);
        }
        state.task = Some(runtime.spawn(Arc::clone(self).run()));
    }

    /// The client is gone: the task ends once the link is idle.
    pub(crate) fn shut_down(&self) {
        self.state().shutdown = Some(self.clock.now());
        self.wake.notify_one();
    }

    pub(crate) fn stats(&self) -> LinkStats {
        let state = self.state();
        LinkStats {
            open: state.link.is_open(),
            in_flight: state.link.in_flight(),
            queued: state.link.queued(),
            owed: state.link.owed(),
        }
    }

    /// Waits until the link has nothing queued or awaiting a reply.
    pub(crate) async fn wait_idle(&self) {
        let mut idle = self.idle.subscribe();
        let _ = idle.wait_for(|idle| *idle).await;
    }

    async fn run(self: Arc<Self>) {
        let mut connection: Option<MultiplexedConnection> = None;
        let mut connecting: Option<Connecting> = None;
        let mut writes: FuturesUnordered<Writing> = FuturesUnordered::new();
        // Results of writes that completed on their first poll.
        let mut ready: Vec<Written> = Vec::new();
        // Bumped on every new connection and every close: replies of older ones are stale.
        let mut generation = 0u64;
        loop {
            let (outputs, timeout, done) = {
                let mut state = self.state();
                let mut outputs = Vec::new();
                while let Some(output) = state.link.poll_output() {
                    outputs.push(output);
                }
                let idle = state.link.is_idle();
                self.idle.send_replace(idle && outputs.is_empty());
                let done = state.shutdown.is_some_and(|since| {
                    (idle && outputs.is_empty())
                        || since.saturating_add(SHUTDOWN_GRACE) <= self.clock.now()
                });
                (outputs, state.link.poll_timeout(), done)
            };
            if done {
                return;
            }
            let acted = !outputs.is_empty();
            let mut closed: Option<String> = None;
            for output in outputs {
                match output {
                    LinkOutput::Connect => {
                        let prepared = self
                            .prepared
                            .lock()
                            .unwrap_or_else(|poisoned| poisoned.into_inner())
                            .take();
                        connecting = Some(match prepared {
                            Some(open) => Box::pin(std::future::ready(Ok(open))),
                            None => Box::pin(self.connect()),
                        });
                    }
                    LinkOutput::Write(write) => match &connection {
                        Some(open) => {
                            let mut future = start_write(open.clone(), generation, write);
                            // The first poll queues the command on the connection, so
                            // writes reach the node in the link's order.
                            let first =
                                std::future::poll_fn(|cx| Poll::Ready(future.as_mut().poll(cx)))
                                    .await;
                            match first {
                                Poll::Ready(result) => ready.push(result),
                                Poll::Pending => writes.push(future),
                            }
                        }
                        None => {
                            closed.get_or_insert_with(|| String::from("no connection to write on"));
                        }
                    },
                    LinkOutput::Close => {
                        // The connection, or the attempt to open one the link gave up
                        // (dropping its future cancels it).
                        connecting = None;
                        connection = None;
                        writes = FuturesUnordered::new();
                        ready.clear();
                        generation += 1;
                    }
                    LinkOutput::Deliver(delivery) => self.routes.deliver(delivery),
                    _ => {}
                }
            }
            if let Some(text) = closed {
                self.state()
                    .link
                    .handle_closed(LinkCause::Closed, &text, self.clock.now());
                continue;
            }
            if !ready.is_empty() {
                for result in std::mem::take(&mut ready) {
                    self.written(result, &mut generation, &mut connection, &mut writes);
                }
                continue;
            }
            if acted {
                // Acting may have changed nothing in the link, but the idle flag is set
                // only from a drain that found no output.
                continue;
            }
            let shutdown_at = {
                let state = self.state();
                state
                    .shutdown
                    .map(|since| since.saturating_add(SHUTDOWN_GRACE))
            };
            let wake_at = match (timeout, shutdown_at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let sleep = async {
                match wake_at {
                    Some(at) => tokio::time::sleep_until(self.clock.tokio_instant(at)).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = self.wake.notified() => {}
                result = async { connecting.as_mut().expect("checked").await }, if connecting.is_some() => {
                    connecting = None;
                    let now = self.clock.now();
                    match result {
                        Ok(open) => {
                            generation += 1;
                            connection = Some(open);
                            writes = FuturesUnordered::new();
                            self.state().link.handle_connected(now);
                        }
                        Err((cause, text)) => self.state().link.handle_closed(cause, &text, now),
                    }
                }
                Some(result) = writes.next(), if !writes.is_empty() => {
                    self.written(result, &mut generation, &mut connection, &mut writes);
                }
                () = sleep => self.state().link.handle_timeout(self.clock.now()),
            }
        }
    }

    /// A write finished: its reply goes to the link, or its failure closes the connection.
    fn written(
        &self,
        (written_on, id, result): Written,
        generation: &mut u64,
        connection: &mut Option<MultiplexedConnection>,
        writes: &mut FuturesUnordered<Writing>,
    ) {
        if written_on != *generation {
            // A write of a connection already counted closed.
            return;
        }
        let now = self.clock.now();
        match result {
            Ok(value) => self
                .state()
                .link
                .handle_reply(id, reply_from_value(value), now),
            Err(error) => match server_error_text(&error) {
                Some(text) => self.state().link.handle_reply(id, Reply::Error(text), now),
                None => {
                    // The connection is gone: every write on it fails with it, and is
                    // reported once.
                    if matches!(self.client, Source::Given(_)) {
                        self.broken.store(true, Ordering::Relaxed);
                    }
                    *connection = None;
                    *writes = FuturesUnordered::new();
                    *generation += 1;
                    self.state()
                        .link
                        .handle_closed(LinkCause::Closed, &error.to_string(), now);
                }
            },
        }
    }

    /// One connection attempt; the link gives it up at the connect timeout (`Close`).
    fn connect(
        &self,
    ) -> impl Future<Output = Result<MultiplexedConnection, (LinkCause, String)>> + Send + 'static
    {
        let client = self.client.clone();
        let broken = self.broken.load(Ordering::Relaxed);
        async move {
            if broken {
                return Err((
                    LinkCause::Closed,
                    String::from(
                        "the connection given to the client is closed (a multiplexed \
                         connection does not reconnect)",
                    ),
                ));
            }
            open(&client).await
        }
    }

    /// Runs `commands` on a connection of its own, each bounded by `deadline`
    /// (diagnostics: never through the link, never part of a lock operation).
    pub(crate) async fn query_once(
        &self,
        commands: Vec<redis::Cmd>,
        deadline: tokio::time::Instant,
    ) -> Vec<Reply> {
        let count = commands.len();
        let failed = |text: String| vec![Reply::ConnectionFailed(text); count];
        let attempt = tokio::time::timeout_at(deadline, async {
            let mut connection = match open(&self.client).await {
                Ok(connection) => connection,
                Err((cause, text)) => return failed(format!("{}: {text}", cause.code())),
            };
            let mut replies = Vec::with_capacity(count);
            for cmd in &commands {
                replies.push(match connection.send_packed_command(cmd).await {
                    Ok(value) => reply_from_value(value),
                    Err(error) => match server_error_text(&error) {
                        Some(text) => Reply::Error(text),
                        None => Reply::ConnectionFailed(error.to_string()),
                    },
                });
            }
            replies
        })
        .await;
        attempt.unwrap_or_else(|_| vec![Reply::Timeout; count])
    }

    /// Opens a connection to check that the node is reachable and accepts the
    /// credentials, waiting at most until `deadline`. The connection is kept for the
    /// link's next `Connect` (unless the link's connection is open already).
    pub(crate) async fn probe(&self, deadline: tokio::time::Instant) -> Result<(), String> {
        match tokio::time::timeout_at(deadline, open(&self.client)).await {
            Ok(Ok(connection)) => {
                if !self.state().link.is_open() {
                    *self
                        .prepared
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(connection);
                }
                Ok(())
            }
            Ok(Err((cause, text))) => Err(format!("{}: {text}", cause.code())),
            Err(_) => Err(String::from("timeout: no connection in time")),
        }
    }
}

/// Opens a connection for `source`; a failure comes with the link's cause.
async fn open(source: &Source) -> Result<MultiplexedConnection, (LinkCause, String)> {
    let client = match source {
        Source::Url(client) => client.clone(),
        Source::Given(connection) => return Ok(connection.clone()),
        #[cfg(feature = "sentinel")]
        Source::Sentinel(sentinels) => return sentinels.open_master().await,
    };
    client
        .get_multiplexed_async_connection_with_config(&connection_config())
        .await
        .map_err(|error| (link_cause(&error), error.to_string()))
}

/// How every connection is opened: no timeouts of the crate's own, the link and the
/// operations keep the deadlines.
pub(crate) fn connection_config() -> AsyncConnectionConfig {
    AsyncConnectionConfig::new()
        .set_connection_timeout(None)
        .set_response_timeout(None)
}

fn start_write(mut connection: MultiplexedConnection, generation: u64, write: Write) -> Writing {
    let mut cmd = redis::Cmd::new();
    for arg in write.args() {
        cmd.arg(arg);
    }
    let id = write.id();
    Box::pin(async move {
        let result = connection.send_packed_command(&cmd).await;
        (generation, id, result)
    })
}

/// Why a connection attempt failed, in the link's words.
pub(crate) fn link_cause(error: &RedisError) -> LinkCause {
    if error.kind() == redis::ErrorKind::AuthenticationFailed
        || matches!(error.code(), Some("NOAUTH" | "WRONGPASS"))
    {
        return LinkCause::Auth;
    }
    if error.is_connection_refusal() {
        return LinkCause::Refused;
    }
    if is_tls_error(error) {
        return LinkCause::Tls;
    }
    if error.is_timeout() {
        return LinkCause::Timeout;
    }
    LinkCause::Closed
}

/// True when the failure came from the TLS handshake (rustls's error, wrapped in I/O).
fn is_tls_error(error: &RedisError) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        if current.is::<rustls::Error>() {
            return true;
        }
        if let Some(io) = current.downcast_ref::<std::io::Error>() {
            if io
                .get_ref()
                .is_some_and(|inner| inner.is::<rustls::Error>())
            {
                return true;
            }
        }
        source = current.source();
    }
    // The `redis` crate may keep only the handshake error's text.
    let text = error.to_string();
    ["certificate", "TLS", "tls", "handshake"]
        .iter()
        .any(|word| text.contains(word))
}

/// Maps a `redis` value to the core's reply, as the core documents it.
pub(crate) fn reply_from_value(value: Value) -> Reply {
    match value {
        Value::Okay => Reply::Ok,
        Value::SimpleString(text) => Reply::status(&text),
        Value::Nil => Reply::Nil,
        Value::Int(n) => Reply::Integer(n),
        Value::BulkString(bytes) => Reply::Bulk(bytes),
        Value::Array(items) | Value::Set(items) => {
            Reply::Array(items.into_iter().map(reply_from_value).collect())
        }
        Value::ServerError(error) => Reply::Error(match error.details() {
            Some(details) => format!("{} {}", error.code(), details),
            None => error.code().to_string(),
        }),
        Value::Boolean(flag) => Reply::Integer(i64::from(flag)),
        Value::Double(number) => Reply::Bulk(number.to_string().into_bytes()),
        Value::VerbatimString { text, .. } => Reply::Bulk(text.into_bytes()),
        Value::Map(pairs) => Reply::Array(
            pairs
                .into_iter()
                .flat_map(|(key, value)| [reply_from_value(key), reply_from_value(value)])
                .collect(),
        ),
        Value::Attribute { data, .. } => reply_from_value(*data),
        Value::Push { data, .. } => Reply::Array(data.into_iter().map(reply_from_value).collect()),
        // RESP2, which the client speaks, has nothing else; the core reports any other
        // type as an unexpected reply.
        other => Reply::Status(format!("{other:?}")),
    }
}

/// The full text (`CODE detail`) of an error the server sent, if `error` is one.
pub(crate) fn server_error_text(error: &RedisError) -> Option<String> {
    if !matches!(error.kind(), redis::ErrorKind::Server(_)) && error.code().is_none() {
        return None;
    }
    let code = error.code()?;
    Some(match error.detail() {
        Some(detail) => format!("{code} {detail}"),
        None => code.to_string(),
    })
}

/// A node's URL with its password (if any) replaced by `***`.
pub(crate) fn redact(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let Some(at) = authority.rfind('@') else {
        return url.to_string();
    };
    let userinfo = &authority[..at];
    let redacted = match userinfo.find(':') {
        Some(colon) => format!("{}:***", &userinfo[..colon]),
        None => String::from("***"),
    };
    format!("{}{}{}", &url[..scheme_end + 3], redacted, &rest[at..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(redact("redis://127.0.0.1:7000"), "redis://127.0.0.1:7000");
        assert_eq!(
            redact("rediss://:secret@127.0.0.1:7000/0"),
            "rediss://:***@127.0.0.1:7000/0"
        );
        assert_eq!(redact("redis://user:pw@host:1"), "redis://user:***@host:1");
        assert_eq!(redact("redis://token@host"), "redis://***@host");
        assert_eq!(redact("not a url"), "not a url");
    }

    #[test]
    fn values_map_to_replies() {
        assert_eq!(reply_from_value(Value::Okay), Reply::Ok);
        assert_eq!(
            reply_from_value(Value::SimpleString("QUEUED".into())),
            Reply::Status("QUEUED".into())
        );
        assert_eq!(reply_from_value(Value::Nil), Reply::Nil);
        assert_eq!(reply_from_value(Value::Int(3)), Reply::Integer(3));
        assert_eq!(
            reply_from_value(Value::BulkString(b"x".to_vec())),
            Reply::Bulk(b"x".to_vec())
        );
    }
}
