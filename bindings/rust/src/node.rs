//! One Redis node: its connection, and sending one command under a deadline.
//!
//! The deadline is enforced here, around connecting and waiting alike, whatever the
//! `redis` crate's own timeouts are: a frozen node (its process stopped, its kernel
//! still accepting connections) never answers, and nothing else would stop waiting.
//! A connection whose command timed out or failed is dropped, so the next command to
//! that node starts on a fresh one instead of queueing behind a command that will never
//! return.
//!
//! Connecting runs in a task of its own, bounded by the connect timeout rather than by
//! one command's deadline: a handshake slower than the node timeout (TLS to a distant
//! node) still completes, and the commands after it find the connection ready. A
//! command waits for it only until its own deadline.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Poll;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Value};
use redlock_core::{Command, Reply, ACQUIRE_SCRIPT, EXTEND_SCRIPT, RELEASE_SCRIPT};
use tokio::sync::watch;
use tokio::time::Instant;

enum State {
    /// No connection; the last attempt's error, if it failed.
    Idle(Option<String>),
    Connecting,
    Ready(u64, MultiplexedConnection),
}

/// A node of the client: the `redis` client for its URL, and its current connection.
pub(crate) struct Node {
    /// The URL with any password replaced by `***`, for messages.
    label: String,
    client: redis::Client,
    connect_timeout: Duration,
    state: Mutex<State>,
    /// Bumped whenever a connection attempt ends.
    attempts_ended: watch::Sender<u64>,
    /// Taken in turn by commands until they are queued on the connection.
    order: tokio::sync::Mutex<()>,
    generation: AtomicU64,
}

impl Node {
    pub(crate) fn new(label: String, client: redis::Client, connect_timeout: Duration) -> Node {
        Node {
            label,
            client,
            connect_timeout,
            state: Mutex::new(State::Idle(None)),
            attempts_ended: watch::Sender::new(0),
            order: tokio::sync::Mutex::new(()),
            generation: AtomicU64::new(0),
        }
    }

    /// The node's URL without its password.
    pub(crate) fn label(&self) -> &str {
        &self.label
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // The state is plain data, consistent after any panic elsewhere.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The current connection, or the outcome of the connection attempt this call
    /// starts or joins. Not bounded in time by itself: callers wrap it in their deadline.
    async fn connection(self: &Arc<Self>) -> Result<(u64, MultiplexedConnection), String> {
        let mut ended = self.attempts_ended.subscribe();
        let mut joined = false;
        loop {
            {
                let mut state = self.state();
                match &*state {
                    State::Ready(generation, connection) => {
                        return Ok((*generation, connection.clone()));
                    }
                    State::Idle(Some(error)) if joined => return Err(error.clone()),
                    State::Idle(_) => {
                        *state = State::Connecting;
                        tokio::spawn(Arc::clone(self).connect());
                    }
                    State::Connecting => {}
                }
            }
            joined = true;
            if ended.changed().await.is_err() {
                return Err(String::from("connection attempt abandoned"));
            }
        }
    }

    async fn connect(self: Arc<Self>) {
        // No timeouts of the client's own: ours bound the attempt, deadlines the commands.
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(None)
            .set_response_timeout(None);
        let attempt = tokio::time::timeout(self.connect_timeout, async {
            let mut connection = self
                .client
                .get_multiplexed_async_connection_with_config(&config)
                .await?;
            // Load the scripts up front, so that `EVALSHA` finds them. Otherwise a node's
            // `NOSCRIPT` arriving after the quorum decided gets no `EVAL` fallback, and
            // that node misses the extension. A node that refuses (ACLs) still works
            // through the fallback.
            let mut load = redis::pipe();
            for script in [ACQUIRE_SCRIPT, RELEASE_SCRIPT, EXTEND_SCRIPT] {
                load.cmd("SCRIPT").arg("LOAD").arg(script);
            }
            let _: redis::RedisResult<Value> = load.query_async(&mut connection).await;
            Ok::<_, redis::RedisError>(connection)
        })
        .await;
        let next = match attempt {
            Ok(Ok(connection)) => {
                let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
                State::Ready(generation, connection)
            }
            Ok(Err(error)) => State::Idle(Some(error.to_string())),
            Err(_) => State::Idle(Some(format!(
                "no connection within {} ms",
                self.connect_timeout.as_millis()
            ))),
        };
        *self.state() = next;
        self.attempts_ended.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Drops the connection of `generation` if it is still the current one.
    fn discard(&self, generation: u64) {
        let mut state = self.state();
        if matches!(&*state, State::Ready(current, _) if *current == generation) {
            *state = State::Idle(None);
        }
    }

    /// Connects ahead of the first command; waits until `deadline` at most.
    pub(crate) async fn warm_up(self: &Arc<Self>, deadline: Instant) -> Result<(), String> {
        match tokio::time::timeout_at(deadline, self.connection()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(error)) => Err(error),
            Err(_) => Err(String::from("timed out")),
        }
    }

    /// Sends `cmd` and waits for its reply until `deadline`; never longer.
    ///
    /// A connection that was already open and turns out dead (the node restarted since)
    /// is replaced and the command sent once more on the new one, within the same
    /// deadline. Every command the core emits may be repeated safely: `SET NX` answers
    /// nil the second time (counted as a conflict, and cleaned up like one), the
    /// scripts compare the token first.
    pub(crate) async fn send(self: &Arc<Self>, cmd: &redis::Cmd, deadline: Instant) -> Reply {
        let mut used = None;
        let attempt = tokio::time::timeout_at(deadline, async {
            let mut resent = false;
            loop {
                let result = {
                    // Commands reach the node in the order they were issued, also when
                    // they waited for a connection together: a release must never
                    // overtake the `SET` it cleans up. The lock (fair, first come first
                    // served) is held until the command is queued on the connection.
                    let order = self.order.lock().await;
                    let (generation, mut connection) = match self.connection().await {
                        Ok(found) => found,
                        Err(error) => return Reply::ConnectionFailed(error),
                    };
                    used = Some(generation);
                    let mut request = std::pin::pin!(connection.send_packed_command(cmd));
                    // The first poll hands the command to the connection's writer.
                    let first =
                        std::future::poll_fn(|cx| Poll::Ready(request.as_mut().poll(cx))).await;
                    drop(order);
                    let result = match first {
                        Poll::Ready(result) => result,
                        Poll::Pending => request.await,
                    };
                    (generation, result)
                };
                match result {
                    (_, Ok(value)) => return reply_from_value(value),
                    (generation, Err(error)) => {
                        if let Some(text) = server_error_text(&error) {
                            return Reply::Error(text);
                        }
                        self.discard(generation);
                        if !resent && error.is_connection_dropped() {
                            resent = true;
                            continue;
                        }
                        return Reply::ConnectionFailed(error.to_string());
                    }
                }
            }
        })
        .await;
        match attempt {
            Ok(reply) => reply,
            Err(_elapsed) => {
                if let Some(generation) = used {
                    self.discard(generation);
                }
                Reply::Timeout
            }
        }
    }
}

/// The `redis` command for a core command: its exact argv.
pub(crate) fn redis_cmd(command: &Command) -> redis::Cmd {
    let mut cmd = redis::Cmd::new();
    for arg in command.args() {
        cmd.arg(arg);
    }
    cmd
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
fn server_error_text(error: &redis::RedisError) -> Option<String> {
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

/// Shared handle to a node.
pub(crate) type NodeRef = Arc<Node>;

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
