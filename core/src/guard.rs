//! The resource-side check of a fencing token (see `docs/fencing.md`), for a resource
//! that is itself a Redis key.
//!
//! A holder writes the protected item with [`FencedSet`]: one script that sets the item
//! only if the holder's fencing token is greater than the highest token the item has
//! accepted, and records that token. A holder that paused past its lease and writes after
//! a newer holder has written is turned away, and learns which token it lost to.
//!
//! The item and its *guard key* (the highest accepted token, [`fence_guard_key`]) live on
//! the resource's own Redis server, which need not be one of the lock's nodes. The guard
//! key has no TTL: it must live as long as the item.
//!
//! Like every command the core builds, the check is sent as `EVALSHA` first and, if the
//! server answers `NOSCRIPT`, once more as `EVAL` ([`FencedWrite::RetryAsEval`]).

use alloc::string::String;
use alloc::vec::Vec;

use crate::error::UsageError;
use crate::reply::Reply;

/// The largest fencing token the scripts handle exactly: `2^53 - 1` (Lua numbers are
/// doubles).
pub const MAX_FENCING_TOKEN: u64 = (1 << 53) - 1;

/// Sets an item only if the fencing token is greater than the last one it accepted.
/// `KEYS[1]` is the item, `KEYS[2]` its guard key; `ARGV[1]` the token, `ARGV[2]` the
/// value. Answers `{1, token}` after setting both, or `{0, seen}` (the guard's token)
/// without changing anything.
pub const FENCED_SET_SCRIPT: &str = "local token = tonumber(ARGV[1])
if not token or token < 1 or token > 9007199254740991 or token % 1 ~= 0 then
  return redis.error_reply('ERR fencing token must be an integer from 1 to 2^53-1')
end
local seen = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
if token <= seen then return {0, seen} end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('SET', KEYS[2], ARGV[1])
return {1, token}
";

/// SHA-1 of [`FENCED_SET_SCRIPT`].
pub const FENCED_SET_SHA1: &str = "1542e98c72cb7c12250f293b30da65f22b41a885";

/// The guard key of a protected item: the highest fencing token the item accepted, in the
/// item's Redis Cluster slot. An item with a hash tag keeps it (`item:fence:accepted`);
/// any other becomes the tag itself (`{item}:fence:accepted`).
pub fn fence_guard_key(item: &[u8]) -> Vec<u8> {
    crate::command::tagged_key(item, b":fence:accepted")
}

/// What became of a fenced write.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FencedWrite {
    /// The item now holds the value; its guard holds the token.
    Accepted,
    /// Nothing changed: the item had already accepted `seen`, which is not below this
    /// write's token. The writer is a stale holder (or wrote twice with one token).
    Stale {
        /// The highest token the item had accepted.
        seen: u64,
    },
    /// The server does not have the script cached: send [`FencedSet::args`] with
    /// `eval = true` and hand in that reply instead.
    RetryAsEval,
    /// The server answered something else (an error, or a reply of the wrong shape), or
    /// the driver got no answer; the text says what. Whether the write happened is not
    /// known after a timeout or a lost connection.
    Failed(String),
}

/// One fenced write of `value` to `item` with a fencing token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FencedSet {
    item: Vec<u8>,
    value: Vec<u8>,
    token: u64,
}

impl FencedSet {
    /// A write of `value` to `item` under `token` (a lease's
    /// [`crate::Lease::fencing_token`]). [`UsageError::EmptyResource`] for an empty item,
    /// [`UsageError::InvalidFencingToken`] for a token of 0 or above
    /// [`MAX_FENCING_TOKEN`].
    pub fn new(item: &[u8], value: &[u8], token: u64) -> Result<FencedSet, UsageError> {
        if item.is_empty() {
            return Err(UsageError::EmptyResource);
        }
        if token == 0 || token > MAX_FENCING_TOKEN {
            return Err(UsageError::InvalidFencingToken);
        }
        Ok(FencedSet {
            item: item.to_vec(),
            value: value.to_vec(),
            token,
        })
    }

    /// The token this write carries.
    pub fn token(&self) -> u64 {
        self.token
    }

    /// The command to send: `EVALSHA <sha> 2 <item> <guard> <token> <value>`, or with
    /// `eval` the same as `EVAL <script> ...`.
    pub fn args(&self, eval: bool) -> Vec<Vec<u8>> {
        let mut args = Vec::with_capacity(7);
        if eval {
            args.push(b"EVAL".to_vec());
            args.push(FENCED_SET_SCRIPT.as_bytes().to_vec());
        } else {
            args.push(b"EVALSHA".to_vec());
            args.push(FENCED_SET_SHA1.as_bytes().to_vec());
        }
        args.push(b"2".to_vec());
        args.push(self.item.clone());
        args.push(fence_guard_key(&self.item));
        args.push(alloc::format!("{}", self.token).into_bytes());
        args.push(self.value.clone());
        args
    }

    /// Reads the server's reply to [`FencedSet::args`].
    pub fn handle_reply(&self, reply: &Reply) -> FencedWrite {
        if reply.is_noscript() {
            return FencedWrite::RetryAsEval;
        }
        match reply {
            Reply::Array(items) => match items.as_slice() {
                [Reply::Integer(1), Reply::Integer(written)]
                    if u64::try_from(*written).ok() == Some(self.token) =>
                {
                    FencedWrite::Accepted
                }
                [Reply::Integer(0), Reply::Integer(seen)] => match u64::try_from(*seen) {
                    Ok(seen) if seen >= self.token => FencedWrite::Stale { seen },
                    _ => FencedWrite::Failed(alloc::format!(
                        "the fenced write was refused with {seen}, which is below its token {}",
                        self.token
                    )),
                },
                _ => FencedWrite::Failed(String::from(
                    "the fenced write's reply is not {1, token} or {0, seen}",
                )),
            },
            Reply::Error(text) => FencedWrite::Failed(text.clone()),
            Reply::ConnectionFailed(text) => {
                FencedWrite::Failed(alloc::format!("connection failed: {text}"))
            }
            Reply::Timeout => FencedWrite::Failed(String::from(
                "timeout: no reply to the fenced write (it may or may not have happened)",
            )),
            other => FencedWrite::Failed(alloc::format!(
                "the fenced write answered {}, not an array",
                other.describe()
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn guard_key_keeps_the_slot() {
        assert_eq!(fence_guard_key(b"item"), b"{item}:fence:accepted".to_vec());
        assert_eq!(
            fence_guard_key(b"{user1}.row"),
            b"{user1}.row:fence:accepted".to_vec()
        );
    }

    #[test]
    fn bad_writes_are_refused() {
        assert_eq!(FencedSet::new(b"", b"v", 1), Err(UsageError::EmptyResource));
        assert_eq!(
            FencedSet::new(b"i", b"v", 0),
            Err(UsageError::InvalidFencingToken)
        );
        assert_eq!(
            FencedSet::new(b"i", b"v", MAX_FENCING_TOKEN + 1),
            Err(UsageError::InvalidFencingToken)
        );
        assert!(FencedSet::new(b"i", b"", MAX_FENCING_TOKEN).is_ok());
    }

    #[test]
    fn args_are_exact() {
        let write = FencedSet::new(b"item", b"value", 42).unwrap_or_else(|_| unreachable!());
        let args = write.args(false);
        let expected: Vec<&[u8]> = vec![
            b"EVALSHA",
            FENCED_SET_SHA1.as_bytes(),
            b"2",
            b"item",
            b"{item}:fence:accepted",
            b"42",
            b"value",
        ];
        assert_eq!(args, expected);
        assert_eq!(write.args(true)[1], FENCED_SET_SCRIPT.as_bytes());
    }

    #[test]
    fn replies_are_read_strictly() {
        let write = FencedSet::new(b"item", b"v", 7).unwrap_or_else(|_| unreachable!());
        let array = |a: i64, b: i64| Reply::Array(vec![Reply::Integer(a), Reply::Integer(b)]);
        assert_eq!(write.handle_reply(&array(1, 7)), FencedWrite::Accepted);
        assert_eq!(
            write.handle_reply(&array(0, 9)),
            FencedWrite::Stale { seen: 9 }
        );
        assert_eq!(
            write.handle_reply(&array(0, 7)),
            FencedWrite::Stale { seen: 7 }
        );
        // A refusal below our token, or an acceptance of another token, cannot come from
        // the script.
        assert!(matches!(
            write.handle_reply(&array(0, 6)),
            FencedWrite::Failed(_)
        ));
        assert!(matches!(
            write.handle_reply(&array(1, 8)),
            FencedWrite::Failed(_)
        ));
        assert!(matches!(
            write.handle_reply(&array(0, -1)),
            FencedWrite::Failed(_)
        ));
        assert_eq!(
            write.handle_reply(&Reply::Error("NOSCRIPT No matching script.".into())),
            FencedWrite::RetryAsEval
        );
        assert!(matches!(
            write.handle_reply(&Reply::Error("ERR boom".into())),
            FencedWrite::Failed(text) if text == "ERR boom"
        ));
        assert!(matches!(
            write.handle_reply(&Reply::Timeout),
            FencedWrite::Failed(_)
        ));
        assert!(matches!(
            write.handle_reply(&Reply::Integer(1)),
            FencedWrite::Failed(_)
        ));
        assert!(matches!(
            write.handle_reply(&Reply::Array(vec![])),
            FencedWrite::Failed(_)
        ));
    }
}
