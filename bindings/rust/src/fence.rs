//! The resource-side check of a fencing token, on the user's own Redis connection.
//!
//! [`fenced_set`] writes a protected item only if the lock's fencing token is greater than
//! the highest one the item has accepted. The core builds the command and reads the reply
//! ([`redlock_core::FencedSet`]); this module only sends it: `EVALSHA` first and, if the
//! server answers `NOSCRIPT`, once more as `EVAL`, as
//! [`redlock_core::FencedWrite::RetryAsEval`] says.

use redis::Value;
use redlock_core::{FencedSet, Reply};

use crate::error::Error;
use crate::node::{reply_from_value, server_error_text};

/// What became of a fenced write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FencedWrite {
    /// The item now holds the value, and its guard key the token.
    Accepted,
    /// Nothing changed: the item had already accepted `seen`, which is not below this
    /// write's token. The writer's lock was taken over (it paused past its lease), or it
    /// wrote twice with one token.
    Stale {
        /// The highest token the item had accepted.
        seen: u64,
    },
}

/// Writes `value` to the Redis key `item` on `connection` (the resource's own server,
/// which need not be a lock node) only if `token` (a lock's [`crate::Lock::fencing_token`])
/// is greater than every token the item accepted before; the highest accepted token is
/// kept next to it under [`redlock_core::fence_guard_key`], without TTL.
///
/// Errors: [`Error::Usage`] for an empty item or a token of 0 or above
/// [`redlock_core::MAX_FENCING_TOKEN`] (nothing is sent); [`Error::FencedWrite`] when the
/// server fails or answers something else.
pub async fn fenced_set<C: redis::aio::ConnectionLike + Send>(
    connection: &mut C,
    item: impl AsRef<[u8]>,
    value: impl AsRef<[u8]>,
    token: u64,
) -> Result<FencedWrite, Error> {
    let write = FencedSet::new(item.as_ref(), value.as_ref(), token)?;
    let mut eval = false;
    loop {
        let command = command(&write, eval);
        let reply = to_reply(connection.req_packed_command(&command).await);
        if let Some(result) = decide(&write, &reply, &mut eval) {
            return result;
        }
    }
}

/// [`fenced_set`] on a blocking connection.
pub fn fenced_set_blocking<C: redis::ConnectionLike>(
    connection: &mut C,
    item: impl AsRef<[u8]>,
    value: impl AsRef<[u8]>,
    token: u64,
) -> Result<FencedWrite, Error> {
    let write = FencedSet::new(item.as_ref(), value.as_ref(), token)?;
    let mut eval = false;
    loop {
        let command = command(&write, eval);
        let reply = to_reply(connection.req_command(&command));
        if let Some(result) = decide(&write, &reply, &mut eval) {
            return result;
        }
    }
}

fn command(write: &FencedSet, eval: bool) -> redis::Cmd {
    let mut command = redis::Cmd::new();
    for arg in write.args(eval) {
        command.arg(arg);
    }
    command
}

fn to_reply(result: redis::RedisResult<Value>) -> Reply {
    match result {
        Ok(value) => reply_from_value(value),
        Err(error) => match server_error_text(&error) {
            Some(text) => Reply::Error(text),
            None => Reply::ConnectionFailed(error.to_string()),
        },
    }
}

/// The core's reading of `reply`; `None` when the command must go again as `EVAL`.
fn decide(write: &FencedSet, reply: &Reply, eval: &mut bool) -> Option<Result<FencedWrite, Error>> {
    Some(match write.handle_reply(reply) {
        redlock_core::FencedWrite::Accepted => Ok(FencedWrite::Accepted),
        redlock_core::FencedWrite::Stale { seen } => Ok(FencedWrite::Stale { seen }),
        redlock_core::FencedWrite::RetryAsEval if !*eval => {
            *eval = true;
            return None;
        }
        redlock_core::FencedWrite::RetryAsEval => Err(Error::FencedWrite(String::from(
            "the server answered NOSCRIPT to EVAL",
        ))),
        redlock_core::FencedWrite::Failed(text) => Err(Error::FencedWrite(text)),
        _ => Err(Error::Internal("unexpected fenced write result")),
    })
}
