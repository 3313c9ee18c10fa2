//! A simulated Redis node: a keyspace with expiry on the node's own clock, the commands
//! lock clients send, the project's three scripts, crashes and an asynchronous replica.
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

use redlock_core::{Reply, ACQUIRE_SCRIPT, EXTEND_SCRIPT, RELEASE_SCRIPT};

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
}

impl Script {
    fn from_text(text: &[u8]) -> Option<Script> {
        [
            (ACQUIRE_SCRIPT, Script::Acquire),
            (RELEASE_SCRIPT, Script::Release),
            (EXTEND_SCRIPT, Script::Extend),
        ]
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
    [ACQUIRE_SCRIPT, RELEASE_SCRIPT, EXTEND_SCRIPT]
        .into_iter()
        .find(|script| sha1_hex(script.as_bytes()) == sha)
        .and_then(|script| Script::from_text(script.as_bytes()))
        .map(Script::name)
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
                Reply::Integer(released)
            }
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

fn parse_u64(text: &[u8]) -> Option<u64> {
    std::str::from_utf8(text).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use redlock_core::{ACQUIRE_SHA1, EXTEND_SHA1, RELEASE_SHA1};

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
            Reply::Integer(1)
        );
        assert_eq!(run(&mut node, 0, &release), Reply::Integer(0));
        node.crash(true);
        node.restart();
        assert_eq!(run(&mut node, 0, &release), Reply::Error(NOSCRIPT.into()));
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
            Reply::Integer(0)
        );
        assert_eq!(run(&mut node, 200, &release), Reply::Integer(0));
        assert_eq!(
            run(
                &mut node,
                200,
                &["EVALSHA", RELEASE_SHA1, "2", "a", "b", "t"]
            ),
            Reply::Integer(1)
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
