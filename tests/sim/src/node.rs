//! A simulated Redis node: a keyspace with expiry on the node's own clock, the commands
//! lock clients send, the project's scripts (the lock's three, the fenced acquisition and
//! its write-back, and the resource-side fencing check), crashes and an asynchronous
//! replica.
//!
//! Expiry follows Redis: `PX ms` stores `when = mstime() + ms` and the key is gone once
//! `mstime() > when`, where `mstime()` is the node's clock in whole milliseconds. Keys
//! are checked lazily on access, which is what a client can observe.
//!
//! Scripts are recognised by their exact text (the core's constants), which is what the
//! node runs: the semantics are written out in Rust below, as documented on those
//! constants. `EVAL` loads the script's SHA-1 into the node's cache; `EVALSHA` of a
//! SHA-1 not in the cache answers `NOSCRIPT`, as Redis does after a restart.

use std::collections::BTreeMap;

use redlock_core::{
    Reply, ACQUIRE_SCRIPT, EXTEND_SCRIPT, FENCED_ACQUIRE_SCRIPT, FENCED_SET_SCRIPT,
    MAX_FENCING_TOKEN, RELEASE_SCRIPT, WRITE_BACK_SCRIPT,
};

use crate::clock::Clock;

/// The reply Redis gives to an `EVALSHA` of an unknown script.
pub const NOSCRIPT: &str = "NOSCRIPT No matching script. Please use EVAL.";

/// One of the project's scripts, as the node runs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Script {
    /// `ACQUIRE_SCRIPT`.
    Acquire,
    /// `RELEASE_SCRIPT`.
    Release,
    /// `EXTEND_SCRIPT`.
    Extend,
    /// `FENCED_ACQUIRE_SCRIPT`: lock keys and fence keys.
    FencedAcquire,
    /// `WRITE_BACK_SCRIPT`: the fencing write-back.
    WriteBack,
    /// `FENCED_SET_SCRIPT`: the resource-side check of a fencing token.
    FencedSet,
}

/// Every script a node runs, with its text.
const SCRIPTS: [(&str, Script); 6] = [
    (ACQUIRE_SCRIPT, Script::Acquire),
    (RELEASE_SCRIPT, Script::Release),
    (EXTEND_SCRIPT, Script::Extend),
    (FENCED_ACQUIRE_SCRIPT, Script::FencedAcquire),
    (WRITE_BACK_SCRIPT, Script::WriteBack),
    (FENCED_SET_SCRIPT, Script::FencedSet),
];

impl Script {
    fn from_text(text: &[u8]) -> Option<Script> {
        SCRIPTS
            .into_iter()
            .find(|(script, _)| script.as_bytes() == text)
            .map(|(_, kind)| kind)
    }

    /// A short name for traces.
    pub fn name(self) -> &'static str {
        match self {
            Script::Acquire => "acquire",
            Script::Release => "release",
            Script::Extend => "extend",
            Script::FencedAcquire => "fenced-acquire",
            Script::WriteBack => "write-back",
            Script::FencedSet => "fenced-set",
        }
    }
}

/// SHA-1 of `text`, lowercase hex, as Redis names scripts.
pub fn sha1_hex(text: &[u8]) -> String {
    sha1_smol::Sha1::from(text).digest().to_string()
}

/// The name of the script whose SHA-1 is `sha` (any case), for traces.
pub fn script_name_for_sha(sha: &[u8]) -> Option<&'static str> {
    let sha = std::str::from_utf8(sha).ok()?.to_ascii_lowercase();
    SCRIPTS
        .into_iter()
        .find(|(script, _)| sha1_hex(script.as_bytes()) == sha)
        .map(|(_, kind)| kind.name())
}

/// The name of the script whose text is `text`, for traces.
pub fn script_name_for_text(text: &[u8]) -> Option<&'static str> {
    Script::from_text(text).map(Script::name)
}

/// A stored value and its absolute expiry (node milliseconds), if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The value.
    pub value: Vec<u8>,
    /// `mstime()` after which the key is gone; `None` for a key that never expires.
    pub expire_ms: Option<u64>,
}

/// A write, as replicated to a replica (absolute expiries, as Redis 7 propagates them).
#[derive(Clone, Debug)]
pub enum Mutation {
    /// The key now holds this entry.
    Put(Vec<u8>, Entry),
    /// The key was deleted.
    Delete(Vec<u8>),
}

/// Set when a command set a lock key (for scenarios that crash a node right then).
#[derive(Clone, Copy, Debug, Default)]
pub struct Effects {
    /// The command created a key.
    pub created: bool,
}

/// A simulated Redis node.
pub struct Node {
    /// The node's clock.
    pub clock: Clock,
    up: bool,
    data: BTreeMap<Vec<u8>, Entry>,
    scripts: BTreeMap<String, Script>,
    replica: Option<BTreeMap<Vec<u8>, Entry>>,
    /// Bumped at every crash, so that restarts and replication scheduled before it can
    /// be recognised as stale.
    pub generation: u64,
}

impl Node {
    /// A node that is up, empty, with an empty script cache, and a replica if asked.
    pub fn new(clock: Clock, with_replica: bool) -> Node {
        Node {
            clock,
            up: true,
            data: BTreeMap::new(),
            scripts: BTreeMap::new(),
            replica: with_replica.then(BTreeMap::new),
            generation: 0,
        }
    }

    /// True while the node serves commands.
    pub fn is_up(&self) -> bool {
        self.up
    }

    /// True if the node has an asynchronous replica.
    pub fn has_replica(&self) -> bool {
        self.replica.is_some()
    }

    fn mstime(&self, now: u64) -> u64 {
        self.clock.local(now) / 1000
    }

    /// The node stops. Its memory survives only if `keep_data` (persistence that wrote
    /// everything, e.g. AOF with `fsync always`); the script cache never does.
    pub fn crash(&mut self, keep_data: bool) {
        self.up = false;
        self.generation += 1;
        if !keep_data {
            self.data.clear();
        }
        self.scripts.clear();
    }

    /// The node serves again, with whatever `crash` kept.
    pub fn restart(&mut self) {
        self.up = true;
    }

    /// The replica is promoted in the crashed master's place: it serves the writes that
    /// reached it, and nothing else. The new master has no replica of its own.
    pub fn promote_replica(&mut self) {
        if let Some(replica) = self.replica.take() {
            self.data = replica;
        }
        self.scripts.clear();
        self.up = true;
    }

    /// Applies a replicated write to the replica.
    pub fn replicate(&mut self, mutation: Mutation) {
        if let Some(replica) = self.replica.as_mut() {
            match mutation {
                Mutation::Put(key, entry) => {
                    replica.insert(key, entry);
                }
                Mutation::Delete(key) => {
                    replica.remove(&key);
                }
            }
        }
    }

    /// Keys alive at global time `now`, with their milliseconds left (`None`: no expiry).
    pub fn live_keys(&self, now: u64) -> Vec<(Vec<u8>, Vec<u8>, Option<u64>)> {
        let ms = self.mstime(now);
        self.data
            .iter()
            .filter(|(_, entry)| entry.expire_ms.is_none_or(|when| ms <= when))
            .map(|(key, entry)| {
                (
                    key.clone(),
                    entry.value.clone(),
                    entry.expire_ms.map(|when| when + 1 - ms),
                )
            })
            .collect()
    }

    fn get(&mut self, key: &[u8], ms: u64) -> Option<&Entry> {
        let expired = self
            .data
            .get(key)
            .is_some_and(|entry| entry.expire_ms.is_some_and(|when| ms > when));
        if expired {
            self.data.remove(key);
        }
        self.data.get(key)
    }

    fn put(&mut self, key: &[u8], entry: Entry, log: &mut Vec<Mutation>) {
        self.data.insert(key.to_vec(), entry.clone());
        log.push(Mutation::Put(key.to_vec(), entry));
    }

    fn delete(&mut self, key: &[u8], ms: u64, log: &mut Vec<Mutation>) -> bool {
        if self.get(key, ms).is_some() {
            self.data.remove(key);
            log.push(Mutation::Delete(key.to_vec()));
            true
        } else {
            false
        }
    }

    /// Runs one command at global time `now`. Writes are appended to `log` (for the
    /// replica). The node must be up.
    pub fn execute(
        &mut self,
        now: u64,
        args: &[Vec<u8>],
        log: &mut Vec<Mutation>,
        effects: &mut Effects,
    ) -> Reply {
        let ms = self.mstime(now);
        let Some(name) = args.first() else {
            return Reply::Error("ERR empty command".into());
        };
        let name = String::from_utf8_lossy(name).to_ascii_uppercase();
        let rest = &args[1..];
        match (name.as_str(), rest) {
            ("SET", [key, value, options @ ..]) => self.set(key, value, options, ms, log, effects),
            ("SETNX", [key, value]) => {
                if self.get(key, ms).is_some() {
                    Reply::Integer(0)
                } else {
                    let entry = Entry {
                        value: value.clone(),
                        expire_ms: None,
                    };
                    self.put(key, entry, log);
                    effects.created = true;
                    Reply::Integer(1)
                }
            }
            ("GET", [key]) => match self.get(key, ms) {
                Some(entry) => Reply::Bulk(entry.value.clone()),
                None => Reply::Nil,
            },
            ("GETSET", [key, value]) => {
                let old = self.get(key, ms).map(|entry| entry.value.clone());
                // GETSET discards any TTL, as SET without options does.
                let entry = Entry {
                    value: value.clone(),
                    expire_ms: None,
                };
                self.put(key, entry, log);
                effects.created = old.is_none();
                old.map_or(Reply::Nil, Reply::Bulk)
            }
            ("DEL", keys) if !keys.is_empty() => {
                let deleted = keys.iter().filter(|key| self.delete(key, ms, log)).count();
                Reply::Integer(deleted as i64)
            }
            ("EXPIRE" | "PEXPIRE", [key, amount]) => {
                let Some(amount) = parse_u64(amount) else {
                    return Reply::Error("ERR value is not an integer or out of range".into());
                };
                let amount_ms = if name == "EXPIRE" {
                    amount.saturating_mul(1000)
                } else {
                    amount
                };
                self.expire(key, amount_ms, ms, log)
            }
            ("EVALSHA", [sha, tail @ ..]) => {
                let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
                match self.scripts.get(&sha) {
                    Some(&script) => self.run_script(script, tail, ms, log, effects),
                    None => Reply::Error(NOSCRIPT.into()),
                }
            }
            ("EVAL", [text, tail @ ..]) => match Script::from_text(text) {
                Some(script) => {
                    self.scripts.insert(sha1_hex(text), script);
                    self.run_script(script, tail, ms, log, effects)
                }
                None => {
                    Reply::Error("ERR the simulated node runs only the project's scripts".into())
                }
            },
            (
                "SET" | "SETNX" | "GET" | "GETSET" | "DEL" | "EXPIRE" | "PEXPIRE" | "EVAL"
                | "EVALSHA",
                _,
            ) => Reply::Error(format!(
                "ERR wrong number of arguments for '{}' command",
                name.to_ascii_lowercase()
            )),
            _ => Reply::Error(format!("ERR unknown command '{name}'")),
        }
    }

    fn set(
        &mut self,
        key: &[u8],
        value: &[u8],
        options: &[Vec<u8>],
        ms: u64,
        log: &mut Vec<Mutation>,
        effects: &mut Effects,
    ) -> Reply {
        let mut nx = false;
        let mut ttl_ms = None;
        let mut index = 0;
        while index < options.len() {
            let option = String::from_utf8_lossy(&options[index]).to_ascii_uppercase();
            match option.as_str() {
                "NX" => nx = true,
                "PX" | "EX" => {
                    let Some(amount) = options.get(index + 1).and_then(|a| parse_u64(a)) else {
                        return Reply::Error("ERR value is not an integer or out of range".into());
                    };
                    if amount == 0 {
                        return Reply::Error("ERR invalid expire time in 'set' command".into());
                    }
                    ttl_ms = Some(if option == "EX" {
                        amount.saturating_mul(1000)
                    } else {
                        amount
                    });
                    index += 1;
                }
                _ => return Reply::Error("ERR syntax error".into()),
            }
            index += 1;
        }
        if nx && self.get(key, ms).is_some() {
            return Reply::Nil;
        }
        let created = self.get(key, ms).is_none();
        let entry = Entry {
            value: value.to_vec(),
            expire_ms: ttl_ms.map(|ttl| ms.saturating_add(ttl)),
        };
        self.put(key, entry, log);
        effects.created |= created;
        Reply::Ok
    }

    fn expire(&mut self, key: &[u8], amount_ms: u64, ms: u64, log: &mut Vec<Mutation>) -> Reply {
        match self.get(key, ms).cloned() {
            Some(mut entry) => {
                entry.expire_ms = Some(ms.saturating_add(amount_ms));
                self.put(key, entry, log);
                Reply::Integer(1)
            }
            None => Reply::Integer(0),
        }
    }

    /// `numkeys key... arg...`, as `EVAL` and `EVALSHA` take them after the script.
    fn run_script(
        &mut self,
        script: Script,
        tail: &[Vec<u8>],
        ms: u64,
        log: &mut Vec<Mutation>,
        effects: &mut Effects,
    ) -> Reply {
        let Some(count) = tail.first().and_then(|n| parse_u64(n)) else {
            return Reply::Error("ERR value is not an integer or out of range".into());
        };
        let rest = &tail[1..];
        let Some(count) = usize::try_from(count).ok().filter(|&c| c <= rest.len()) else {
            return Reply::Error("ERR Number of keys can't be greater than number of args".into());
        };
        let (keys, argv) = rest.split_at(count);
        let Some(token) = argv.first() else {
            // The script would index a missing ARGV[1] and fail inside Lua.
            return Reply::Error("ERR script error: missing token argument".into());
        };
        match script {
            Script::Acquire => {
                let Some(ttl) = argv.get(1).and_then(|t| parse_u64(t)).filter(|&t| t > 0) else {
                    return Reply::Error("ERR Error running script: invalid expire time".into());
                };
                if keys.iter().any(|key| self.get(key, ms).is_some()) {
                    return Reply::Integer(0);
                }
                for key in keys {
                    let entry = Entry {
                        value: token.clone(),
                        expire_ms: Some(ms.saturating_add(ttl)),
                    };
                    self.put(key, entry, log);
                }
                effects.created = !keys.is_empty();
                Reply::Integer(1)
            }
            Script::Release => {
                let mut released = 0;
                for key in keys {
                    if self.get(key, ms).is_some_and(|entry| &entry.value == token)
                        && self.delete(key, ms, log)
                    {
                        released += 1;
                    }
                }
                // How many keys it deleted (the script also publishes a release notice per
                // key it deleted; nobody in the simulation subscribes).
                Reply::Integer(released)
            }
            Script::FencedAcquire => {
                self.fenced_acquire(keys, token, argv.get(1), ms, log, effects)
            }
            Script::WriteBack => self.write_back(keys, token, argv.get(1), ms, log),
            Script::FencedSet => self.fenced_set(keys, token, argv.get(1), ms, log),
            Script::Extend => {
                let Some(ttl) = argv.get(1).and_then(|t| parse_u64(t)) else {
                    return Reply::Error("ERR Error running script: invalid expire time".into());
                };
                // -1 if a key holds another value, 0 if one is missing, as the script.
                let taken = keys
                    .iter()
                    .any(|key| self.get(key, ms).is_some_and(|entry| &entry.value != token));
                if taken {
                    return Reply::Integer(-1);
                }
                let all_ours = keys
                    .iter()
                    .all(|key| self.get(key, ms).is_some_and(|entry| &entry.value == token));
                if !all_ours {
                    return Reply::Integer(0);
                }
                for key in keys {
                    self.expire(key, ttl, ms, log);
                }
                Reply::Integer(1)
            }
        }
    }
}

impl Node {
    /// `FENCED_ACQUIRE_SCRIPT`: `keys` are the lock keys then as many fence keys. If no
    /// lock key exists, sets them all to the token with the TTL and every fence key to
    /// one more than the largest of them (a fence key that is missing or not a number
    /// counts as 0), answering that number; otherwise 0, changing nothing.
    fn fenced_acquire(
        &mut self,
        keys: &[Vec<u8>],
        token: &[u8],
        ttl: Option<&Vec<u8>>,
        ms: u64,
        log: &mut Vec<Mutation>,
        effects: &mut Effects,
    ) -> Reply {
        let Some((locks, fences)) = split_fenced(keys) else {
            return Reply::Error("ERR Error running script: lock and fence keys differ".into());
        };
        if locks.iter().any(|key| self.get(key, ms).is_some()) {
            return Reply::Integer(0);
        }
        let fence = fences
            .iter()
            .map(|key| self.counter(key, ms))
            .max()
            .unwrap_or(0)
            + 1;
        if fence > MAX_FENCING_TOKEN {
            return Reply::Error("ERR fence counter at its limit".into());
        }
        // The script's `SET key token PX ttl` fails inside Lua on a bad TTL, before any
        // lock key is set.
        let Some(ttl) = ttl.and_then(|t| parse_u64(t)).filter(|&t| t > 0) else {
            return Reply::Error("ERR Error running script: invalid expire time".into());
        };
        for key in locks {
            let entry = Entry {
                value: token.to_vec(),
                expire_ms: Some(ms.saturating_add(ttl)),
            };
            self.put(key, entry, log);
        }
        for key in fences {
            self.put_counter(key, fence, log);
        }
        effects.created = !locks.is_empty();
        Reply::Integer(fence as i64)
    }

    /// `WRITE_BACK_SCRIPT`: only if every lock key holds the token, raises each fence key
    /// to at least the fencing token and answers 1; otherwise 0, changing nothing.
    fn write_back(
        &mut self,
        keys: &[Vec<u8>],
        token: &[u8],
        fence: Option<&Vec<u8>>,
        ms: u64,
        log: &mut Vec<Mutation>,
    ) -> Reply {
        let Some((locks, fences)) = split_fenced(keys) else {
            return Reply::Error("ERR Error running script: lock and fence keys differ".into());
        };
        let holder = locks
            .iter()
            .all(|key| self.get(key, ms).is_some_and(|entry| entry.value == token));
        if !holder {
            return Reply::Integer(0);
        }
        // `tonumber(ARGV[2])` is nil for a non-number, and comparing with nil fails in Lua.
        let Some(fence) = fence.and_then(|f| parse_u64(f)) else {
            return Reply::Error("ERR Error running script: attempt to compare nil".into());
        };
        for key in fences {
            if self.counter(key, ms) < fence {
                self.put_counter(key, fence, log);
            }
        }
        Reply::Integer(1)
    }

    /// `FENCED_SET_SCRIPT`: `keys` are the item and its guard key, `token` the fencing
    /// token, `value` what to write. Sets both and answers `{1, token}` only if the token
    /// is greater than the guard's; otherwise `{0, seen}`, changing nothing.
    fn fenced_set(
        &mut self,
        keys: &[Vec<u8>],
        token: &[u8],
        value: Option<&Vec<u8>>,
        ms: u64,
        log: &mut Vec<Mutation>,
    ) -> Reply {
        let (Some(item), Some(guard)) = (keys.first(), keys.get(1)) else {
            return Reply::Error("ERR Error running script: item and guard keys needed".into());
        };
        let Some(number) = parse_u64(token).filter(|&t| (1..=MAX_FENCING_TOKEN).contains(&t))
        else {
            return Reply::Error("ERR fencing token must be an integer from 1 to 2^53-1".into());
        };
        let seen = self.counter(guard, ms);
        if number <= seen {
            return Reply::Array(vec![Reply::Integer(0), Reply::Integer(seen as i64)]);
        }
        let entry = Entry {
            value: value.cloned().unwrap_or_default(),
            expire_ms: None,
        };
        self.put(item, entry, log);
        self.put_counter(guard, number, log);
        Reply::Array(vec![Reply::Integer(1), Reply::Integer(number as i64)])
    }

    /// A counter key's number, as the scripts read it: `tonumber(GET key or '0') or 0`.
    fn counter(&mut self, key: &[u8], ms: u64) -> u64 {
        self.get(key, ms)
            .and_then(|entry| parse_u64(&entry.value))
            .unwrap_or(0)
    }

    /// `SET key number` (no TTL), as the scripts write counters.
    fn put_counter(&mut self, key: &[u8], number: u64, log: &mut Vec<Mutation>) {
        let entry = Entry {
            value: number.to_string().into_bytes(),
            expire_ms: None,
        };
        self.put(key, entry, log);
    }
}

/// Keys as a script receives them.
type Keys = [Vec<u8>];

/// The lock keys and the fence keys of a fenced script's `KEYS` (two equal halves).
fn split_fenced(keys: &Keys) -> Option<(&Keys, &Keys)> {
    (!keys.is_empty() && keys.len() % 2 == 0).then(|| keys.split_at(keys.len() / 2))
}

fn parse_u64(text: &[u8]) -> Option<u64> {
    std::str::from_utf8(text).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use redlock_core::{
        fence_guard_key, fence_key, FencedSet, FencedWrite, ACQUIRE_SHA1, EXTEND_SHA1,
        FENCED_ACQUIRE_SHA1, FENCED_SET_SHA1, RELEASE_SHA1, WRITE_BACK_SHA1,
    };

    fn args(parts: &[&str]) -> Vec<Vec<u8>> {
        parts.iter().map(|p| p.as_bytes().to_vec()).collect()
    }

    fn run(node: &mut Node, now_ms: u64, parts: &[&str]) -> Reply {
        let mut log = Vec::new();
        node.execute(
            now_ms * 1000,
            &args(parts),
            &mut log,
            &mut Effects::default(),
        )
    }

    #[test]
    fn the_core_names_its_scripts_by_their_sha1() {
        assert_eq!(sha1_hex(ACQUIRE_SCRIPT.as_bytes()), ACQUIRE_SHA1);
        assert_eq!(sha1_hex(RELEASE_SCRIPT.as_bytes()), RELEASE_SHA1);
        assert_eq!(sha1_hex(EXTEND_SCRIPT.as_bytes()), EXTEND_SHA1);
        assert_eq!(
            sha1_hex(FENCED_ACQUIRE_SCRIPT.as_bytes()),
            FENCED_ACQUIRE_SHA1
        );
        assert_eq!(sha1_hex(WRITE_BACK_SCRIPT.as_bytes()), WRITE_BACK_SHA1);
        assert_eq!(sha1_hex(FENCED_SET_SCRIPT.as_bytes()), FENCED_SET_SHA1);
    }

    fn fenced(script: &str, token: &str, number: &str) -> Vec<String> {
        let fence = String::from_utf8(fence_key(b"k")).expect("text");
        ["EVAL", script, "2", "k", &fence, token, number]
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    fn run_owned(node: &mut Node, now_ms: u64, parts: &[String]) -> Reply {
        let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
        run(node, now_ms, &parts)
    }

    #[test]
    fn fenced_acquisition_raises_the_counter_and_only_a_holder_writes_back() {
        let mut node = Node::new(Clock::new(0, 0), false);
        let acquire = |token: &str| fenced(FENCED_ACQUIRE_SCRIPT, token, "100");
        let write_back = |token: &str, t: &str| fenced(WRITE_BACK_SCRIPT, token, t);
        assert_eq!(run_owned(&mut node, 0, &acquire("a")), Reply::Integer(1));
        // Held: nothing changes, not even the counter.
        assert_eq!(run_owned(&mut node, 1, &acquire("b")), Reply::Integer(0));
        assert_eq!(
            run_owned(&mut node, 2, &write_back("b", "50")),
            Reply::Integer(0)
        );
        assert_eq!(
            run_owned(&mut node, 2, &write_back("a", "50")),
            Reply::Integer(1)
        );
        // A lower write-back never lowers the counter.
        assert_eq!(
            run_owned(&mut node, 3, &write_back("a", "7")),
            Reply::Integer(1)
        );
        // The fence key has no TTL: after the lock expired, the next one gets 51.
        assert_eq!(run_owned(&mut node, 200, &acquire("b")), Reply::Integer(51));
        assert_eq!(
            node.live_keys(10_000_000),
            vec![(fence_key(b"k"), b"51".to_vec(), None)]
        );
        assert!(matches!(
            run_owned(&mut node, 300, &write_back("b", "x")),
            Reply::Error(_)
        ));
        // Lock keys without their fence keys are refused.
        let sha = ["EVALSHA", WRITE_BACK_SHA1, "1", "k", "b", "60"];
        assert!(matches!(run(&mut node, 300, &sha), Reply::Error(_)));
        node.crash(true);
        node.restart();
        assert_eq!(run(&mut node, 300, &sha), Reply::Error(NOSCRIPT.into()));
    }

    #[test]
    fn a_restart_without_data_loses_the_counter_and_one_with_data_keeps_it() {
        let mut node = Node::new(Clock::new(0, 0), false);
        let acquire = |token: &str| fenced(FENCED_ACQUIRE_SCRIPT, token, "100");
        assert_eq!(run_owned(&mut node, 0, &acquire("a")), Reply::Integer(1));
        node.crash(true);
        node.restart();
        assert_eq!(run_owned(&mut node, 200, &acquire("b")), Reply::Integer(2));
        node.crash(false);
        node.restart();
        assert_eq!(run_owned(&mut node, 400, &acquire("c")), Reply::Integer(1));
    }

    #[test]
    fn the_resource_check_accepts_only_a_greater_token() {
        let mut node = Node::new(Clock::new(0, 0), false);
        let mut write = |token: u64| {
            let set = FencedSet::new(b"item", b"v", token).expect("a valid token");
            let mut reply = run_owned(&mut node, 0, &strings(&set.args(false)));
            if set.handle_reply(&reply) == FencedWrite::RetryAsEval {
                reply = run_owned(&mut node, 0, &strings(&set.args(true)));
            }
            set.handle_reply(&reply)
        };
        assert_eq!(write(5), FencedWrite::Accepted);
        assert_eq!(write(5), FencedWrite::Stale { seen: 5 });
        assert_eq!(write(4), FencedWrite::Stale { seen: 5 });
        assert_eq!(write(6), FencedWrite::Accepted);
        let guard = fence_guard_key(b"item");
        assert_eq!(
            run(
                &mut node,
                0,
                &["GET", std::str::from_utf8(&guard).expect("text")]
            ),
            Reply::Bulk(b"6".to_vec())
        );
        assert!(matches!(
            run(
                &mut node,
                0,
                &["EVALSHA", FENCED_SET_SHA1, "2", "i", "g", "0", "v"]
            ),
            Reply::Error(_)
        ));
    }

    fn strings(args: &[Vec<u8>]) -> Vec<String> {
        args.iter()
            .map(|a| String::from_utf8(a.clone()).expect("text"))
            .collect()
    }

    #[test]
    fn set_nx_px_expires_after_the_ttl_on_the_node_clock() {
        let mut node = Node::new(Clock::new(0, 0), false);
        assert_eq!(
            run(&mut node, 0, &["SET", "k", "a", "NX", "PX", "100"]),
            Reply::Ok
        );
        assert_eq!(
            run(&mut node, 50, &["SET", "k", "b", "NX", "PX", "100"]),
            Reply::Nil
        );
        // mstime() > when only after 100 ms have fully passed.
        assert_eq!(
            run(&mut node, 100, &["GET", "k"]),
            Reply::Bulk(b"a".to_vec())
        );
        assert_eq!(run(&mut node, 101, &["GET", "k"]), Reply::Nil);
        assert_eq!(
            run(&mut node, 101, &["SET", "k", "b", "NX", "PX", "100"]),
            Reply::Ok
        );
    }

    #[test]
    fn a_forward_jump_expires_keys_early() {
        let mut node = Node::new(Clock::new(0, 0), false);
        assert_eq!(
            run(&mut node, 0, &["SET", "k", "a", "NX", "PX", "1000"]),
            Reply::Ok
        );
        node.clock.jump(10_000, 2_000_000);
        assert_eq!(run(&mut node, 11, &["GET", "k"]), Reply::Nil);
    }

    #[test]
    fn scripts_need_eval_after_a_restart() {
        let mut node = Node::new(Clock::new(0, 0), false);
        let release = ["EVALSHA", RELEASE_SHA1, "1", "k", "t"];
        assert_eq!(run(&mut node, 0, &release), Reply::Error(NOSCRIPT.into()));
        assert_eq!(
            run(&mut node, 0, &["SET", "k", "t", "PX", "100"]),
            Reply::Ok
        );
        assert_eq!(
            run(&mut node, 0, &["EVAL", RELEASE_SCRIPT, "1", "k", "t"]),
            released(1)
        );
        assert_eq!(run(&mut node, 0, &release), released(0));
        node.crash(true);
        node.restart();
        assert_eq!(run(&mut node, 0, &release), Reply::Error(NOSCRIPT.into()));
    }

    fn released(count: i64) -> Reply {
        Reply::Integer(count)
    }

    #[test]
    fn release_and_extend_touch_only_our_token() {
        let mut node = Node::new(Clock::new(0, 0), false);
        let acquire = ["EVAL", ACQUIRE_SCRIPT, "2", "a", "b", "t", "100"];
        assert_eq!(run(&mut node, 0, &acquire), Reply::Integer(1));
        assert_eq!(run(&mut node, 1, &acquire), Reply::Integer(0));
        let extend = ["EVALSHA", EXTEND_SHA1, "2", "a", "b", "other", "500"];
        assert_eq!(
            run(&mut node, 0, &["EVAL", EXTEND_SCRIPT, "1", "a", "t", "500"]),
            Reply::Integer(1)
        );
        // Another token holds the keys: -1, nothing extended.
        assert_eq!(run(&mut node, 0, &extend), Reply::Integer(-1));
        assert_eq!(run(&mut node, 200, &["GET", "b"]), Reply::Nil);
        assert_eq!(
            run(&mut node, 200, &["GET", "a"]),
            Reply::Bulk(b"t".to_vec())
        );
        let release = ["EVALSHA", RELEASE_SHA1, "2", "a", "b", "other"];
        assert_eq!(
            run(&mut node, 200, &["EVAL", RELEASE_SCRIPT, "1", "zz", "x"]),
            released(0)
        );
        assert_eq!(run(&mut node, 200, &release), released(0));
        assert_eq!(
            run(
                &mut node,
                200,
                &["EVALSHA", RELEASE_SHA1, "2", "a", "b", "t"]
            ),
            released(1)
        );
        // Extending a missing key never re-creates it.
        assert_eq!(
            run(
                &mut node,
                200,
                &["EVALSHA", EXTEND_SHA1, "1", "a", "t", "500"]
            ),
            Reply::Integer(0)
        );
        assert_eq!(run(&mut node, 200, &["GET", "a"]), Reply::Nil);
    }

    #[test]
    fn legacy_commands() {
        let mut node = Node::new(Clock::new(0, 0), false);
        assert_eq!(run(&mut node, 0, &["SETNX", "k", "1"]), Reply::Integer(1));
        assert_eq!(run(&mut node, 0, &["SETNX", "k", "2"]), Reply::Integer(0));
        assert_eq!(node.live_keys(1_000_000_000)[0].2, None);
        assert_eq!(run(&mut node, 0, &["EXPIRE", "k", "1"]), Reply::Integer(1));
        assert_eq!(
            run(&mut node, 0, &["GETSET", "k", "3"]),
            Reply::Bulk(b"1".to_vec())
        );
        assert_eq!(
            run(&mut node, 5000, &["GET", "k"]),
            Reply::Bulk(b"3".to_vec())
        );
        assert_eq!(run(&mut node, 5000, &["DEL", "k", "x"]), Reply::Integer(1));
        assert!(matches!(run(&mut node, 0, &["SET", "k"]), Reply::Error(_)));
        assert!(matches!(run(&mut node, 0, &["FLUSHALL"]), Reply::Error(_)));
        assert!(matches!(
            run(&mut node, 0, &["EVAL", "return 1", "0"]),
            Reply::Error(_)
        ));
        assert!(matches!(
            run(&mut node, 0, &["EVAL", RELEASE_SCRIPT, "5", "k"]),
            Reply::Error(_)
        ));
    }

    #[test]
    fn a_promoted_replica_has_only_what_was_replicated() {
        let mut node = Node::new(Clock::new(0, 0), true);
        let mut log = Vec::new();
        let mut effects = Effects::default();
        node.execute(
            0,
            &args(&["SET", "a", "1", "PX", "1000"]),
            &mut log,
            &mut effects,
        );
        assert!(effects.created);
        for mutation in log.drain(..) {
            node.replicate(mutation);
        }
        node.execute(
            0,
            &args(&["SET", "b", "1", "PX", "1000"]),
            &mut log,
            &mut effects,
        );
        node.crash(false);
        node.promote_replica();
        let keys: Vec<_> = node.live_keys(0).into_iter().map(|k| k.0).collect();
        assert_eq!(keys, vec![b"a".to_vec()]);
    }
}
