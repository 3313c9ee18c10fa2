//! The exact commands the core asks drivers to send, and the scripts they run.
//!
//! Every binding sends byte-identical commands because the core builds their argv:
//!
//! | purpose | argv |
//! |---|---|
//! | acquire one resource | `SET <key> <token> NX PX <ttl_ms>` |
//! | acquire several | `EVALSHA <ACQUIRE_SHA1> <k> <key>... <token> <ttl_ms>` |
//! | acquire, waiting (a wait limit) | `EVALSHA <QUEUED_ACQUIRE_SHA1> <k+2> <key>... <queue> <queue expiry> <token> <ttl_ms> <waiter> <lifetime_ms>` |
//! | release | `EVALSHA <RELEASE_SHA1> <k> <key>... <token> [<waiter>]` |
//! | extend | `EVALSHA <EXTEND_SHA1> <k> <key>... <token> <ttl_ms>` |
//! | inspect one resource | `GET <key>` |
//! | inspect several | `MGET <key>...` |
//!
//! A node that answers `NOSCRIPT` to an `EVALSHA` gets the same command as `EVAL` with
//! the script's text in place of its SHA-1 (which also loads it into that node's cache).

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;

use crate::time::Time;

/// Sets every key to the token with the TTL if none of them exists; 1 if set, 0 if not.
pub const ACQUIRE_SCRIPT: &str = "for _, key in ipairs(KEYS) do
  if redis.call('EXISTS', key) == 1 then return 0 end
end
for _, key in ipairs(KEYS) do
  redis.call('SET', key, ARGV[1], 'PX', ARGV[2])
end
return 1
";

/// Deletes each key that holds the token and answers how many keys it deleted. It
/// never deletes a key that holds another value. For each key it deletes it publishes a
/// release notice, so that a waiter tries again at once. The notice's message names the
/// waiter first in that key's own queue ([`queue_keys`], kept by
/// [`QUEUED_ACQUIRE_SCRIPT`]; entries past their time, and entries whose expiry was lost
/// (an eviction, a partial restore), are dropped first), so a lock on several resources
/// hands each one to its own first waiter, and goes to that waiter's client alone,
/// on [`waiter_channel`] of the waiter and the key: the others keep their retry
/// schedule, as the named one has the turn. When nobody waits there the message is
/// empty and goes to the key's [`notice_channel`], for every listener. With a second
/// argument, a waiter id, it first takes that waiter out of every key's queue (a held
/// lock's release, or an abandoned acquisition's: its waiting is over). A server that refuses
/// `PUBLISH` (an ACL) still releases.
///
/// When its notice reached a subscriber (of the named waiter's channel), the waiter it
/// names gets **the turn** on that node: `{key}:waiters:turn` holds its id for
/// [`HANDOFF_TURN_MS`]. While that waiter is still queued and its turn runs,
/// [`QUEUED_ACQUIRE_SCRIPT`] grants the free key only to waiters already in the queue,
/// never to a newcomer (such as the releaser coming back at once), which joins the
/// queue's end instead. A turn still running for a waiter still queued is kept (not
/// renewed) and that waiter named again, so every turn ends by its time at the latest
/// (`docs/waiting.md`, "Fairness").
pub const RELEASE_SCRIPT: &str = "local waiter = ARGV[2]
local released = 0
local now = nil
for _, key in ipairs(KEYS) do
  local lock = key
  local open = string.find(lock, '{', 1, true)
  local close = open and string.find(lock, '}', open + 1, true)
  if not (close and close > open + 1) then lock = '{' .. lock .. '}' end
  local order, expiry = lock .. ':waiters', lock .. ':waiters:expiry'
  local turn = order .. ':turn'
  if waiter then
    redis.call('ZREM', order, waiter)
    redis.call('ZREM', expiry, waiter)
    if redis.call('GET', turn) == waiter then redis.call('DEL', turn) end
  end
  if redis.call('GET', key) == ARGV[1] then
    released = released + redis.call('DEL', key)
    local first, give = '', false
    if redis.call('EXISTS', order) == 1 then
      if not now then
        local clock = redis.call('TIME')
        now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
      end
      for _, gone in ipairs(redis.call('ZRANGEBYSCORE', expiry, '-inf', now)) do
        redis.call('ZREM', order, gone)
        redis.call('ZREM', expiry, gone)
      end
      first = redis.call('ZRANGE', order, 0, 0)[1] or ''
      while first ~= '' and not redis.call('ZSCORE', expiry, first) do
        redis.call('ZREM', order, first)
        first = redis.call('ZRANGE', order, 0, 0)[1] or ''
      end
      local current = redis.call('GET', turn)
      if current and redis.call('ZSCORE', order, current) and redis.call('ZSCORE', expiry, current) then
        first = current
      else
        give = first ~= ''
      end
    end
    local channel = 'redlock:released:' .. key
    if first ~= '' then channel = 'redlock:waiter:' .. string.sub(first, 1, 16) .. ':' .. key end
    local heard = redis.pcall('PUBLISH', channel, first)
    if give and type(heard) == 'number' and heard > 0 then redis.call('SET', turn, first, 'PX', 50) end
  end
end
return released";

/// The prefix of every notice channel: a release of key `k` that names no waiter is
/// announced on `redlock:released:k`.
pub const NOTICE_CHANNEL_PREFIX: &str = "redlock:released:";

/// The prefix of every waiter channel ([`waiter_channel`]): a release of key `k` that
/// names a waiter whose id begins with listener id `l` is announced on
/// `redlock:waiter:l:k`, and nowhere else.
pub const WAITER_CHANNEL_PREFIX: &str = "redlock:waiter:";

/// How many random bytes make a client's listener id: a client draws them once, and
/// the first token of each of its waiting acquisitions (the waiter id) begins with
/// their hex.
pub const LISTENER_ID_BYTES: usize = 8;

/// The length of a listener id in a waiter id: the hex of [`LISTENER_ID_BYTES`] bytes.
/// [`RELEASE_SCRIPT`] carries it as a literal; a test checks that they agree.
pub const LISTENER_ID_CHARS: usize = 2 * LISTENER_ID_BYTES;

/// The channel on which releases of `key` that name one of a listener's waiters are
/// announced (see [`RELEASE_SCRIPT`]): `redlock:waiter:<listener>:<key>`, where
/// `<listener>` is the first [`LISTENER_ID_CHARS`] bytes of `waiter` (a waiter id, or a
/// client's listener id). A release that names a waiter publishes there only, so that
/// of all the clients waiting for a lock only the one whose waiter has the turn wakes;
/// a release that names nobody publishes on [`notice_channel`].
pub fn waiter_channel(waiter: &[u8], key: &[u8]) -> Vec<u8> {
    let listener = &waiter[..waiter.len().min(LISTENER_ID_CHARS)];
    let mut channel =
        Vec::with_capacity(WAITER_CHANNEL_PREFIX.len() + listener.len() + 1 + key.len());
    channel.extend_from_slice(WAITER_CHANNEL_PREFIX.as_bytes());
    channel.extend_from_slice(listener);
    channel.push(b':');
    channel.extend_from_slice(key);
    channel
}

/// The channel on which releases of `key` that name no waiter are announced (see
/// [`RELEASE_SCRIPT`]): a listener subscribes to it on every node and hands each message
/// to [`crate::Operation::handle_notice_message`] with the node it came from.
pub fn notice_channel(key: &[u8]) -> Vec<u8> {
    let mut channel = Vec::with_capacity(NOTICE_CHANNEL_PREFIX.len() + key.len());
    channel.extend_from_slice(NOTICE_CHANNEL_PREFIX.as_bytes());
    channel.extend_from_slice(key);
    channel
}

/// The channels a listener subscribes to for `keys`: each key's [`notice_channel`], then,
/// with a listener (or waiter) id, each key's [`waiter_channel`].
pub(crate) fn listening_channels(keys: &[Vec<u8>], listener: Option<&[u8]>) -> Vec<Vec<u8>> {
    let mut channels: Vec<Vec<u8>> = keys.iter().map(|key| notice_channel(key)).collect();
    if let Some(listener) = listener {
        channels.extend(keys.iter().map(|key| waiter_channel(listener, key)));
    }
    channels
}

/// If every key holds the token, sets each key's TTL and returns 1. Otherwise it changes
/// nothing and returns -1 if some key holds another value (someone else may hold the
/// lock), or 0 if some key is missing and none holds another value (the lock is gone:
/// expired or released, and nobody holds it here). It never creates a key, so an expired
/// lock stays expired.
pub const EXTEND_SCRIPT: &str = "local missing = false
for _, key in ipairs(KEYS) do
  local value = redis.call('GET', key)
  if not value then
    missing = true
  elseif value ~= ARGV[1] then
    return -1
  end
end
if missing then return 0 end
for _, key in ipairs(KEYS) do
  redis.call('PEXPIRE', key, ARGV[2])
end
return 1
";

/// Fenced acquisition (see `docs/fencing.md`). `KEYS` are the lock keys followed by as
/// many fence keys; `ARGV` the token and the TTL. If no lock key exists, sets them all
/// and raises every fence key to one more than the largest of them, returning that
/// number (at least 1); otherwise changes nothing and returns 0. Counters stay below
/// 2^53 (Lua numbers are doubles): past that it answers an error and sets nothing.
pub const FENCED_ACQUIRE_SCRIPT: &str = "local n = #KEYS / 2
for i = 1, n do
  if redis.call('EXISTS', KEYS[i]) == 1 then return 0 end
end
local fence = 0
for i = n + 1, 2 * n do
  local value = tonumber(redis.call('GET', KEYS[i]) or '0')
  if not value then return redis.error_reply('ERR fence counter is not a number: ' .. KEYS[i]) end
  if value > fence then fence = value end
end
fence = fence + 1
if fence > 9007199254740991 then return redis.error_reply('ERR fence counter at its limit') end
local text = string.format('%.0f', fence)
for i = 1, n do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
end
for i = n + 1, 2 * n do
  redis.call('SET', KEYS[i], text)
end
return fence
";

/// Fencing write-back (see `docs/fencing.md`). `KEYS` as for the fenced acquisition;
/// `ARGV` the token and the fencing token T. Only a current holder may write back: if
/// every lock key holds the token, raises each fence key to at least T and returns 1;
/// otherwise changes nothing and returns 0.
pub const WRITE_BACK_SCRIPT: &str = "local n = #KEYS / 2
for i = 1, n do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then return 0 end
end
local fence = tonumber(ARGV[2])
local raise = {}
for i = n + 1, 2 * n do
  local value = tonumber(redis.call('GET', KEYS[i]) or '0')
  if not value then return redis.error_reply('ERR fence counter is not a number: ' .. KEYS[i]) end
  if value < fence then raise[#raise + 1] = KEYS[i] end
end
for _, key in ipairs(raise) do
  redis.call('SET', key, ARGV[2])
end
return 1
";

/// A waiting acquisition's attempt (one with a wait limit; see `docs/waiting.md`,
/// "Fairness"). `KEYS` are the lock keys followed by the resource's queue of waiters
/// ([`queue_keys`] of the first lock key: an order set and an expiry set); `ARGV` the
/// token, the TTL, the waiter's id (the same for every attempt of one acquisition) and
/// how long a waiter's entry lives without being renewed (ms).
///
/// Entries past their time are dropped first. If no lock key exists, and either the
/// waiter is already in the queue or no queued waiter has the turn (which
/// [`RELEASE_SCRIPT`] gives the waiter a release names, for [`HANDOFF_TURN_MS`]), sets
/// them all as the acquire script does and returns 1; the waiter stays in the queue, so that an
/// attempt that fails elsewhere keeps its place (the lock's release, which carries the
/// waiter id, takes it out on every node). Otherwise it sets nothing, adds the waiter at
/// the queue's end unless it is already in it (an entry keeps its place), renews the
/// entry's lifetime, and returns minus the waiter's place (0 first). The queue only
/// orders the attempts that release notices bring forward; no reply of it ever counts
/// towards a lock.
pub const QUEUED_ACQUIRE_SCRIPT: &str = "local n = #KEYS - 2
local order, expiry = KEYS[n + 1], KEYS[n + 2]
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
for _, gone in ipairs(redis.call('ZRANGEBYSCORE', expiry, '-inf', now)) do
  redis.call('ZREM', order, gone)
  redis.call('ZREM', expiry, gone)
end
local free = true
for i = 1, n do
  if redis.call('EXISTS', KEYS[i]) == 1 then free = false break end
end
if free and not redis.call('ZSCORE', order, ARGV[3]) then
  local turn = redis.call('GET', order .. ':turn')
  if turn and redis.call('ZSCORE', order, turn) and redis.call('ZSCORE', expiry, turn) then free = false end
end
if free then
  for i = 1, n do
    redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
  end
  return 1
end
local lifetime = tonumber(ARGV[4]) or 1
if lifetime < 1 then lifetime = 1 elseif lifetime > 5000 then lifetime = 5000 end
redis.call('ZADD', order, 'NX', now, ARGV[3])
redis.call('ZADD', expiry, now + lifetime, ARGV[3])
if redis.call('PTTL', order) < lifetime then redis.call('PEXPIRE', order, lifetime) end
if redis.call('PTTL', expiry) < lifetime then redis.call('PEXPIRE', expiry, lifetime) end
return -redis.call('ZRANK', order, ARGV[3])
";

/// The longest a waiter's entry in a queue of waiters lives without being renewed, in
/// milliseconds, whatever the client's configuration: [`QUEUED_ACQUIRE_SCRIPT`] caps the
/// lifetime it is given at this (a literal there; a test checks that they agree), and
/// the core never asks for more. A waiter that died first in line is named by releases
/// (and may be given turns) until its entry expires, so this bounds what a dead waiter
/// costs the others, whatever retry delay its client had. A live waiter whose attempts
/// are further apart than this (a retry delay of seconds) drops out between attempts and
/// queues again at the end: with such delays the queue no longer orders it.
pub const MAX_QUEUE_ENTRY_LIFETIME_MS: u64 = 5_000;

/// How long the turn a release gives the waiter it names lasts on a node
/// ([`RELEASE_SCRIPT`]): long enough for the notice to reach that waiter and its attempt
/// to come back on a healthy network (a few round trips), short enough that a named
/// waiter that is gone keeps newcomers out for little. It equals the default node
/// timeout's cap. The script carries it as a literal; a test checks that they agree.
pub const HANDOFF_TURN_MS: u64 = 50;

/// How long a driver keeps a notice channel ([`notice_channel`]) subscribed after the
/// last acquisition listening on it ended. A client that waits for the same resource
/// again at once (release, then acquire) is then still listening: its next attempt is
/// refused and queued at once (the turn keeps newcomers out), and a release can name it
/// before a new SUBSCRIBE would land; a waiter that misses the notice naming it leaves
/// the lock idle for the turn. Short enough that a client which stopped waiting stops
/// counting as a listener soon.
pub const NOTICE_CHANNEL_LINGER_MS: u64 = 500;

/// How long a driver keeps a notice subscriber connection that failed (it dropped, could
/// not be opened, or the node refused `SUBSCRIBE`) closed before opening it again while
/// acquisitions wait: this long at first, doubling up to [`SUBSCRIBER_REOPEN_MAX_MS`]
/// while it keeps failing, and back to this once a subscription is confirmed. A notice
/// lost meanwhile is caught when the subscription is confirmed again
/// ([`crate::Operation::handle_subscribed`]), so the first pause is short; notices only
/// make waiting faster, so a node that refuses them costs a connection attempt now and
/// then, never a stream of them.
pub const SUBSCRIBER_REOPEN_FIRST_MS: u64 = 100;

/// The longest pause between two openings of a failing notice subscriber connection
/// (see [`SUBSCRIBER_REOPEN_FIRST_MS`]).
pub const SUBSCRIBER_REOPEN_MAX_MS: u64 = 5_000;

/// How long a connection a driver opens may take (TCP, TLS, `AUTH`, `SELECT`), and a
/// notice subscriber connection may take to open and confirm a subscription, when the
/// user's client sets no bound of its own, in milliseconds. Every driver uses it, so an
/// address that never answers (a black-holed host) costs the same in every binding: the
/// attempt is given up after this long and the connection is opened again after its
/// pause ([`crate::RECONNECT_MIN`] for a link, [`SUBSCRIBER_REOPEN_FIRST_MS`] for a
/// subscriber). Long next to a healthy handshake on any network a lock spans, short next
/// to a TCP stack's own minutes.
pub const CONNECT_TIMEOUT_DEFAULT_MS: u64 = 2_000;

/// How long a driver gives one Redis Sentinel to connect (TCP, TLS, `AUTH`) and name the
/// master (`SENTINEL get-master-addr-by-name`, or `SENTINEL MASTER` where the driver also
/// reads the master's flags), when the user sets no bound, in milliseconds. A
/// Sentinel past it is skipped as one that refused the connection is, and the next one is
/// asked: a Sentinel that hangs (a stopped process, a black-holed host) must not keep a
/// node from the master the others name. Every driver uses it, so a lookup through
/// Sentinels costs the same in every binding. Long next to a Sentinel's answer on any
/// network a lock spans; short enough that several can be asked within one connection
/// attempt ([`sentinel_connect_timeout_ms`]).
pub const SENTINEL_QUERY_TIMEOUT_DEFAULT_MS: u64 = 500;

/// The connect timeout of a node reached through `sentinels` Sentinels, in
/// milliseconds: each Sentinel may use its whole `query_ms` in turn before one names the
/// master, whose connection then has `connect_ms` (the node's connect timeout: the user's
/// client's, else [`CONNECT_TIMEOUT_DEFAULT_MS`]). With a shorter bound, one Sentinel that
/// hangs would use up every attempt and the ones after it would never be asked.
/// Saturating; no Sentinels gives `connect_ms`.
pub fn sentinel_connect_timeout_ms(sentinels: usize, query_ms: u64, connect_ms: u64) -> u64 {
    // usize is at most 64 bits on every target Rust supports; saturate if not.
    let sentinels = u64::try_from(sentinels).unwrap_or(u64::MAX);
    sentinels
        .saturating_mul(query_ms)
        .saturating_add(connect_ms)
}

/// SHA-1 of [`ACQUIRE_SCRIPT`], as `EVALSHA` takes it.
pub const ACQUIRE_SHA1: &str = "4df62321cd567593267878acb4c28e1f7a3cc4af";
/// SHA-1 of [`RELEASE_SCRIPT`].
pub const RELEASE_SHA1: &str = "9a4c12ce2a7ef3e2864bdbe648b6d0f0ee05029b";
/// SHA-1 of [`EXTEND_SCRIPT`].
pub const EXTEND_SHA1: &str = "6aec6dabb71e80f87fc28910be87b135f17d85ab";
/// SHA-1 of [`FENCED_ACQUIRE_SCRIPT`].
pub const FENCED_ACQUIRE_SHA1: &str = "34ddf8a6f39c22ff8b1f2ace02f29fa956926673";
/// SHA-1 of [`WRITE_BACK_SCRIPT`].
pub const WRITE_BACK_SHA1: &str = "43a12dfe4e337bab12db319c30992ccd32725275";
/// SHA-1 of [`QUEUED_ACQUIRE_SCRIPT`].
pub const QUEUED_ACQUIRE_SHA1: &str = "c100eb0d669b2c24bf768a7f667d1ad4e93ed9ae";

/// The queue of waiters for lock key `key`, in its Redis Cluster slot: the order set
/// (`{key}:waiters`) and the expiry set (`{key}:waiters:expiry`) that
/// [`QUEUED_ACQUIRE_SCRIPT`] keeps.
pub fn queue_keys(key: &[u8]) -> [Vec<u8>; 2] {
    [
        tagged_key(key, b":waiters"),
        tagged_key(key, b":waiters:expiry"),
    ]
}

/// The fence key of a lock key: in the same Redis Cluster slot. A key with a hash tag
/// (`{...}` with something inside) keeps it: `key:fence`; any other becomes the tag
/// itself: `{key}:fence`.
pub fn fence_key(key: &[u8]) -> Vec<u8> {
    tagged_key(key, b":fence")
}

/// The suffixes of the auxiliary keys the scripts keep beside a lock key: the fence
/// counter ([`fence_key`]) and the queue of waiters with its turn ([`queue_keys`]).
pub const AUXILIARY_SUFFIXES: [&str; 4] =
    [":fence", ":waiters", ":waiters:expiry", ":waiters:turn"];

/// If `key` is an auxiliary key of some lock key ([`AUXILIARY_SUFFIXES`]: the fence
/// counter, the queue of waiters or its turn), that lock key. A resource whose key is
/// one is refused ([`crate::UsageError::ReservedResource`]): the scripts of the lock
/// that owns it write there (the turn is a `SET … PX 50`, the fence a counter with no
/// TTL, the queue sorted sets), so the two locks would overwrite each other's keys.
/// No suffix is a suffix of another, and an auxiliary key is always a key with a hash
/// tag followed by its suffix, so checking the two lock keys it could come from (the
/// part before the suffix, and that part without its outer braces) is exact: every
/// other name, `orders:fence` included, stays usable.
pub fn reserved_key_owner(key: &[u8]) -> Option<Vec<u8>> {
    for suffix in AUXILIARY_SUFFIXES {
        let Some(before) = key.strip_suffix(suffix.as_bytes()) else {
            continue;
        };
        let inner = before
            .strip_prefix(b"{")
            .and_then(|rest| rest.strip_suffix(b"}"));
        for owner in core::iter::once(before).chain(inner) {
            // An empty key is never a lock key (the core refuses it).
            if !owner.is_empty() && tagged_key(owner, suffix.as_bytes()) == key {
                return Some(owner.to_vec());
            }
        }
    }
    None
}

/// `key` followed by `suffix`, in `key`'s Redis Cluster slot: a key with a hash tag (`{...}`
/// with something inside) keeps it; any other becomes the tag itself (`{key}`).
pub(crate) fn tagged_key(key: &[u8], suffix: &[u8]) -> Vec<u8> {
    let has_tag = key.iter().position(|&b| b == b'{').is_some_and(|open| {
        key[open + 1..]
            .iter()
            .position(|&b| b == b'}')
            .is_some_and(|close| close > 0)
    });
    let mut tagged = Vec::with_capacity(key.len() + suffix.len() + 2);
    if has_tag {
        tagged.extend_from_slice(key);
    } else {
        tagged.push(b'{');
        tagged.extend_from_slice(key);
        tagged.push(b'}');
    }
    tagged.extend_from_slice(suffix);
    tagged
}

/// Identifies one request within one operation. Ids start at 1 and increase by one
/// per command the operation emits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId(pub u64);

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// What a command does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CommandKind {
    /// `SET key token NX PX ttl` for one resource.
    Set,
    /// The acquire script for several resources.
    Acquire,
    /// The release script.
    Release,
    /// The extend script.
    Extend,
    /// The fenced acquisition script (lock keys and fence keys).
    FencedAcquire,
    /// The fencing write-back script.
    WriteBack,
    /// Reads the lock's keys: `GET key` for one resource, `MGET key...` for several.
    Inspect,
    /// A waiting acquisition's attempt: the queued acquire script.
    QueuedAcquire,
}

impl CommandKind {
    fn script(self) -> Option<(&'static str, &'static str)> {
        match self {
            CommandKind::Set | CommandKind::Inspect => None,
            CommandKind::Acquire => Some((ACQUIRE_SCRIPT, ACQUIRE_SHA1)),
            CommandKind::Release => Some((RELEASE_SCRIPT, RELEASE_SHA1)),
            CommandKind::Extend => Some((EXTEND_SCRIPT, EXTEND_SHA1)),
            CommandKind::FencedAcquire => Some((FENCED_ACQUIRE_SCRIPT, FENCED_ACQUIRE_SHA1)),
            CommandKind::WriteBack => Some((WRITE_BACK_SCRIPT, WRITE_BACK_SHA1)),
            CommandKind::QueuedAcquire => Some((QUEUED_ACQUIRE_SCRIPT, QUEUED_ACQUIRE_SHA1)),
        }
    }
}

/// A command's arguments, built once per round and shared by the N commands of it.
#[derive(PartialEq, Eq)]
pub(crate) struct Argv {
    bytes: Vec<u8>,
    ends: Vec<usize>,
    /// Index of the token argument, if the command carries one.
    token_arg: Option<usize>,
    /// The TTL the command sets, in milliseconds (0 for a release).
    ttl_ms: u64,
}

impl Argv {
    pub(crate) fn with_capacity(bytes: usize, args: usize) -> Argv {
        Argv {
            bytes: Vec::with_capacity(bytes),
            ends: Vec::with_capacity(args),
            token_arg: None,
            ttl_ms: 0,
        }
    }

    pub(crate) fn push(&mut self, arg: &[u8]) {
        self.bytes.extend_from_slice(arg);
        self.ends.push(self.bytes.len());
    }

    fn push_number(&mut self, n: u64) {
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        let mut rest = n;
        loop {
            at -= 1;
            // `rest % 10 < 10`, so the cast cannot truncate.
            digits[at] = b'0' + (rest % 10) as u8;
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
        self.push(&digits[at..]);
    }

    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    pub(crate) fn get(&self, index: usize) -> Option<&[u8]> {
        let end = *self.ends.get(index)?;
        let start = if index == 0 { 0 } else { self.ends[index - 1] };
        self.bytes.get(start..end)
    }

    /// The argv for `kind`, as `EVAL` (with the script text) when `eval` is true.
    /// `number` is the TTL in milliseconds, or for a write-back the fencing token.
    #[cfg(test)]
    pub(crate) fn build(
        kind: CommandKind,
        eval: bool,
        keys: &[Vec<u8>],
        token: &[u8],
        number: u64,
    ) -> Argv {
        Argv::build_with(kind, eval, keys, token, number, None)
    }

    /// As `build`; a queued acquisition also carries its waiter's id and the lifetime
    /// of its queue entry in milliseconds (`waiter`).
    pub(crate) fn build_with(
        kind: CommandKind,
        eval: bool,
        keys: &[Vec<u8>],
        token: &[u8],
        number: u64,
        waiter: Option<(&[u8], u64)>,
    ) -> Argv {
        let fenced = matches!(kind, CommandKind::FencedAcquire | CommandKind::WriteBack);
        let queued = kind == CommandKind::QueuedAcquire;
        let key_bytes: usize = keys.iter().map(Vec::len).sum();
        let key_count = if fenced {
            2 * keys.len()
        } else if queued {
            keys.len() + 2
        } else {
            keys.len()
        };
        let waiter_bytes = waiter.map_or(0, |(id, _)| id.len() + 24);
        let mut argv = Argv::with_capacity(
            key_bytes * (1 + usize::from(fenced))
                + keys.len() * 10
                + token.len()
                + waiter_bytes
                + 96,
            key_count + 8,
        );
        let ttl_ms = if kind == CommandKind::WriteBack {
            0
        } else {
            number
        };
        match kind.script() {
            None if kind == CommandKind::Inspect => {
                argv.push(if keys.len() == 1 { b"GET" } else { b"MGET" });
                for key in keys {
                    argv.push(key);
                }
            }
            None => {
                argv.push(b"SET");
                // A SET command is only built for exactly one key.
                argv.push(keys.first().map(Vec::as_slice).unwrap_or(&[]));
                argv.token_arg = Some(argv.len());
                argv.push(token);
                argv.push(b"NX");
                argv.push(b"PX");
                argv.push_number(ttl_ms);
            }
            Some((script, sha1)) => {
                if eval {
                    argv.push(b"EVAL");
                    argv.push(script.as_bytes());
                } else {
                    argv.push(b"EVALSHA");
                    argv.push(sha1.as_bytes());
                }
                argv.push_number(key_count as u64);
                for key in keys {
                    argv.push(key);
                }
                if fenced {
                    for key in keys {
                        argv.push(&fence_key(key));
                    }
                }
                if queued {
                    // The queue of the first key orders the waiters for the whole set.
                    for queue_key in queue_keys(keys.first().map(Vec::as_slice).unwrap_or(&[])) {
                        argv.push(&queue_key);
                    }
                }
                argv.token_arg = Some(argv.len());
                argv.push(token);
                if kind != CommandKind::Release {
                    argv.push_number(number);
                }
                match (kind, waiter) {
                    (CommandKind::QueuedAcquire, _) => {
                        let (id, lifetime_ms) = waiter.unwrap_or((token, 0));
                        argv.push(id);
                        argv.push_number(lifetime_ms);
                    }
                    // A release that takes its waiter out of the queue.
                    (CommandKind::Release, Some((id, _))) => argv.push(id),
                    _ => {}
                }
            }
        }
        if !matches!(kind, CommandKind::Release | CommandKind::Inspect) {
            argv.ttl_ms = ttl_ms;
        }
        argv
    }
}

/// One command for one node: send [`Command::args`] to node [`Command::node`] and hand
/// the reply to the operation under [`Command::request_id`]. If no reply has arrived by
/// [`Command::deadline`], stop waiting for it: report [`crate::Reply::Timeout`] or call
/// `handle_timeout`.
#[derive(Clone, PartialEq, Eq)]
pub struct Command {
    node: usize,
    request_id: RequestId,
    deadline: Time,
    kind: CommandKind,
    eval: bool,
    argv: Arc<Argv>,
}

impl Command {
    pub(crate) fn new(
        node: usize,
        request_id: RequestId,
        deadline: Time,
        kind: CommandKind,
        eval: bool,
        argv: Arc<Argv>,
    ) -> Command {
        Command {
            node,
            request_id,
            deadline,
            kind,
            eval,
            argv,
        }
    }

    /// Index of the node to send to, `0..N` in the order the driver gave its nodes.
    pub fn node(&self) -> usize {
        self.node
    }

    /// The id to give back with the reply.
    pub fn request_id(&self) -> RequestId {
        self.request_id
    }

    /// When the driver stops waiting for the reply.
    pub fn deadline(&self) -> Time {
        self.deadline
    }

    /// What the command does.
    pub fn kind(&self) -> CommandKind {
        self.kind
    }

    /// True when the command carries the script's text (`EVAL`) rather than its SHA-1.
    pub fn is_eval(&self) -> bool {
        self.eval
    }

    /// Number of arguments, the command name included.
    pub fn arg_count(&self) -> usize {
        self.argv.ends.len()
    }

    /// Argument `index` (0 is the command name).
    pub fn arg(&self, index: usize) -> Option<&[u8]> {
        self.argv.get(index)
    }

    /// Every argument in order, the command name first.
    pub fn args(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        (0..self.arg_count()).map(|i| self.argv.get(i).unwrap_or(&[]))
    }

    /// Appends the command in RESP (an array of bulk strings, valid in RESP2 and RESP3).
    pub fn encode_resp(&self, out: &mut Vec<u8>) {
        crate::resp::encode_command(self.args(), out);
    }

    /// The token the command carries.
    pub fn token(&self) -> &[u8] {
        self.argv
            .token_arg
            .and_then(|index| self.argv.get(index))
            .unwrap_or(&[])
    }

    /// The TTL the command sets on its keys, in milliseconds (0 for a release).
    pub fn ttl_ms(&self) -> u64 {
        self.argv.ttl_ms
    }

    pub(crate) fn argv(&self) -> &Arc<Argv> {
        &self.argv
    }

    /// The same command as `EVAL` with the script's text, for a node that answered
    /// `NOSCRIPT`; `None` for a `SET` or a command that already is an `EVAL`.
    pub(crate) fn to_eval(&self) -> Option<Command> {
        let (script, _) = self.kind.script()?;
        if self.eval {
            return None;
        }
        let mut argv = Argv::with_capacity(self.argv.bytes.len() + script.len(), self.arg_count());
        argv.push(b"EVAL");
        argv.push(script.as_bytes());
        for index in 2..self.arg_count() {
            argv.push(self.argv.get(index).unwrap_or(&[]));
        }
        argv.token_arg = self.argv.token_arg;
        argv.ttl_ms = self.argv.ttl_ms;
        Some(Command {
            argv: Arc::new(argv),
            eval: true,
            ..self.clone()
        })
    }
}

impl fmt::Debug for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut list = f.debug_list();
        for arg in self.args() {
            match core::str::from_utf8(arg) {
                Ok(text) => list.entry(&text),
                Err(_) => list.entry(&arg),
            };
        }
        list.finish()?;
        write!(
            f,
            " -> node {} as request {} by {:?}",
            self.node, self.request_id, self.deadline
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn args(argv: &Argv) -> Vec<&[u8]> {
        (0..argv.ends.len()).map(|i| argv.get(i).unwrap()).collect()
    }

    #[test]
    fn the_release_script_gives_the_turn_for_handoff_turn_ms() {
        let literal = alloc::format!("redis.call('SET', turn, first, 'PX', {HANDOFF_TURN_MS}) end");
        assert!(RELEASE_SCRIPT.contains(&literal), "{literal}");
        assert_eq!(RELEASE_SCRIPT.matches("'PX'").count(), 1);
    }

    #[test]
    fn the_queued_acquire_script_caps_an_entry_lifetime_at_the_maximum() {
        let literal = alloc::format!(
            "if lifetime < 1 then lifetime = 1 elseif lifetime > {MAX_QUEUE_ENTRY_LIFETIME_MS} then lifetime = {MAX_QUEUE_ENTRY_LIFETIME_MS} end"
        );
        assert!(QUEUED_ACQUIRE_SCRIPT.contains(&literal), "{literal}");
    }

    #[test]
    fn auxiliary_keys_are_reserved_and_nothing_else() {
        for owner in [
            &b"r"[..],
            b"lock:{order}",
            b"{a}b",
            b"x}y",
            b"a{}b",
            b"}x",
            b"orders:fence",
        ] {
            for key in [fence_key(owner)]
                .into_iter()
                .chain(queue_keys(owner))
                .chain([tagged_key(owner, b":waiters:turn")])
            {
                let found = reserved_key_owner(&key);
                assert!(found.is_some(), "{key:?} is an auxiliary key of {owner:?}");
                // The owner found has the same auxiliary key (`{r}` and `r` share theirs).
                let found = found.unwrap();
                let suffix = AUXILIARY_SUFFIXES
                    .iter()
                    .find(|s| key.ends_with(s.as_bytes()))
                    .unwrap();
                assert_eq!(tagged_key(&found, suffix.as_bytes()), key);
            }
        }
        for free in [
            &b"r"[..],
            b"orders:fence",
            b"orders:waiters",
            b"{r}",
            b"{r}:fenced",
            b"{r}:waiters:x",
            b"fence",
            b":fence",
            b"{}:fence",
            b"lock:{order}:fence:1",
        ] {
            assert_eq!(
                reserved_key_owner(free),
                None,
                "{:?}",
                core::str::from_utf8(free)
            );
        }
    }

    #[test]
    fn the_release_script_reads_listener_id_chars_of_a_waiter_id() {
        let literal = alloc::format!(
            "'{WAITER_CHANNEL_PREFIX}' .. string.sub(first, 1, {LISTENER_ID_CHARS}) .. ':' .. key"
        );
        assert!(RELEASE_SCRIPT.contains(&literal), "{literal}");
        assert!(RELEASE_SCRIPT.contains(&alloc::format!("'{NOTICE_CHANNEL_PREFIX}' .. key")));
    }

    #[test]
    fn a_waiter_channel_carries_the_listener_part_of_a_waiter_id() {
        let waiter = b"0123456789abcdef0011223344556677";
        assert_eq!(
            waiter_channel(waiter, b"orders:42"),
            b"redlock:waiter:0123456789abcdef:orders:42".to_vec()
        );
        // A listener id itself names the same channel; a shorter id is taken whole.
        assert_eq!(
            waiter_channel(&waiter[..LISTENER_ID_CHARS], b"orders:42"),
            waiter_channel(waiter, b"orders:42")
        );
        assert_eq!(
            waiter_channel(b"abc", b"k"),
            b"redlock:waiter:abc:k".to_vec()
        );
    }

    #[test]
    fn set_argv() {
        let argv = Argv::build(CommandKind::Set, false, &[b"res".to_vec()], b"tok", 10_000);
        assert_eq!(
            args(&argv),
            vec![&b"SET"[..], b"res", b"tok", b"NX", b"PX", b"10000"]
        );
    }

    #[test]
    fn script_argv() {
        let keys = [b"a".to_vec(), b"b".to_vec()];
        let release = Argv::build(CommandKind::Release, false, &keys, b"t", 5);
        assert_eq!(
            args(&release),
            vec![
                &b"EVALSHA"[..],
                RELEASE_SHA1.as_bytes(),
                b"2",
                b"a",
                b"b",
                b"t"
            ]
        );
        let extend = Argv::build(CommandKind::Extend, true, &keys[..1], b"t", 0);
        assert_eq!(
            args(&extend),
            vec![
                &b"EVAL"[..],
                EXTEND_SCRIPT.as_bytes(),
                b"1",
                b"a",
                b"t",
                b"0"
            ]
        );
        let big = Argv::build(CommandKind::Acquire, false, &keys, b"t", u64::MAX);
        assert_eq!(
            args(&big).last().copied(),
            Some(&b"18446744073709551615"[..])
        );
    }

    #[test]
    fn a_sentinel_lookup_may_ask_every_sentinel_then_connect() {
        assert_eq!(sentinel_connect_timeout_ms(3, 500, 2_000), 3_500);
        assert_eq!(sentinel_connect_timeout_ms(0, 500, 2_000), 2_000);
        assert_eq!(sentinel_connect_timeout_ms(1, 0, 7), 7);
        assert_eq!(
            sentinel_connect_timeout_ms(usize::MAX, 500, 2_000),
            u64::MAX
        );
        assert_eq!(sentinel_connect_timeout_ms(2, u64::MAX / 2, 2), u64::MAX);
    }
}
