//! One Redis node: its connection, and sending one command under a deadline.
//!
//! The deadline is enforced here, around connecting and waiting alike, whatever the
//! `redis` crate's own timeouts are: a frozen node (its process stopped, its kernel
//! still accepting connections) never answers, and nothing else would stop waiting.
//! A connection that timed out or failed is dropped, so the next command to that node
//! starts on a fresh one instead of queueing behind a command that will never return.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Value};
use redlock_core::{Command, Reply};
use tokio::time::Instant;

/// A node of the client: the `redis` client for its URL, and its current connection.
pub(crate) struct Node {
    /// The URL with any password replaced by `***`, for messages.
    label: String,
    client: redis::Client,
    current: Mutex<Option<(u64, MultiplexedConnection)>>,
    /// Held while connecting, so concurrent commands share one new connection.
    connecting: tokio::sync::Mutex<()>,
    generation: AtomicU64,
}

impl Node {
    pub(crate) fn new(label: String, client: redis::Client) -> Node {
        Node {
            label,
            client,
            current: Mutex::new(None),
            connecting: tokio::sync::Mutex::new(()),
            generation: AtomicU64::new(0),
        }
    }

    /// The node's URL without its password.
    pub(crate) fn label(&self) -> &str {
        &self.label
    }

    fn slot(&self) -> MutexGuard<'_, Option<(u64, MultiplexedConnection)>> {
        // The slot holds plain data, consistent after any panic elsewhere.
        self.current
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn cached(&self) -> Option<(u64, MultiplexedConnection)> {
        self.slot().clone()
    }

    /// The current connection, or a new one. Not bounded in time: callers wrap it.
    async fn connection(&self) -> redis::RedisResult<(u64, MultiplexedConnection)> {
        if let Some(found) = self.cached() {
            return Ok(found);
        }
        let _connecting = self.connecting.lock().await;
        if let Some(found) = self.cached() {
            return Ok(found);
        }
        // No timeouts of the client's own: the caller's deadline bounds everything.
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(None)
            .set_response_timeout(None);
        let connection = self
            .client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        *self.slot() = Some((generation, connection.clone()));
        Ok((generation, connection))
    }

    /// Drops the connection of `generation` if it is still the current one.
    fn discard(&self, generation: u64) {
        let mut slot = self.slot();
        if slot
            .as_ref()
            .is_some_and(|(current, _)| *current == generation)
        {
            *slot = None;
        }
    }

    /// Connects ahead of the first command; bounded by `deadline`.
    pub(crate) async fn warm_up(&self, deadline: Instant) -> Result<(), String> {
        match tokio::time::timeout_at(deadline, self.connection()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(error)) => Err(error.to_string()),
            Err(_) => Err(String::from("timed out")),
        }
    }

    /// Sends `cmd` and waits for its reply until `deadline`; never longer.
    pub(crate) async fn send(&self, cmd: &redis::Cmd, deadline: Instant) -> Reply {
        let mut used = None;
        let attempt = tokio::time::timeout_at(deadline, async {
            let (generation, mut connection) = self.connection().await?;
            used = Some(generation);
            connection.send_packed_command(cmd).await
        })
        .await;
        match attempt {
            Ok(Ok(value)) => reply_from_value(value),
            Ok(Err(error)) => {
                if let Some(text) = server_error_text(&error) {
                    return Reply::Error(text);
                }
                if let Some(generation) = used {
                    self.discard(generation);
                }
                Reply::ConnectionFailed(error.to_string())
            }
            Err(_elapsed) => {
                if let Some(generation) = used {
                    self.discard(generation);
                }
                Reply::Timeout
            }
        }
    }

    /// Sends an arbitrary command (diagnostics such as `GET` and `PTTL`), bounded by
    /// `deadline`, with the same connection handling as lock commands.
    pub(crate) async fn query(&self, cmd: &redis::Cmd, deadline: Instant) -> Reply {
        self.send(cmd, deadline).await
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
