//! A simulated consensus service (a ZooKeeper ensemble or an etcd cluster), as much of
//! it as the lock recipes need: sessions (leases) that the service expires on its own
//! clock, lock entries tied to a session and ordered by a global revision, and
//! notifications when an entry is deleted.
//!
//! The ensemble is one node of the simulation. Its members agree through a replicated
//! log that a write reaches a quorum of disks before it is acknowledged, so no scenario
//! here can make it forget a write: a crash makes it unavailable for the downtime and
//! nothing else. What the scenarios can reach is time: when the service decides that a
//! holder's session is over, and when the holder's client library decides it.
//!
//! Commands (the first argument names them; the recipes in
//! [`crate::coordination_model`] send them):
//!
//! | command | ZooKeeper | etcd |
//! |---|---|---|
//! | `OPEN ttl_us` | connect, new session | `LeaseGrant` |
//! | `PING id` | ping | `LeaseKeepAlive` |
//! | `CREATE id` | create `lock/n-` ephemeral sequential | put `lock/<lease>` with the lease if absent |
//! | `LIST id` | `getChildren lock` | get `lock/` sorted by create revision |
//! | `WAITDEL id name` | `exists name` with a watch | watch `name` for its delete |
//! | `DELETE id name` | delete | delete |
//! | `CLOSE id` | close session | `LeaseRevoke` |
//!
//! Every write takes the next revision (ZooKeeper's zxid, etcd's store revision);
//! `CREATE` answers the entry's name and its creation revision, which is the recipe's
//! natural fencing token (a znode's `czxid`, an etcd key's `create_revision`).

use std::collections::BTreeMap;

use redlock_core::Reply;

use crate::clock::Clock;
use crate::model::Tag;

/// Which service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    /// A ZooKeeper ensemble.
    ZooKeeper,
    /// An etcd cluster.
    Etcd,
}

impl Flavour {
    /// How often the service looks for expired sessions, on its own clock.
    ///
    /// - ZooKeeper's session tracker (`SessionTrackerImpl` over an `ExpiryQueue`) rounds
    ///   every session's expiry up to a multiple of `tickTime` and expires a whole bucket
    ///   at once; the lab and the real check use `tickTime = 100 ms`.
    /// - etcd's lessor revokes expired leases from a loop that runs every 500 ms
    ///   (`lessor.runLoop` in `server/lease/lessor.go`).
    pub fn expiry_period(self) -> u64 {
        match self {
            Flavour::ZooKeeper => 100_000,
            Flavour::Etcd => 500_000,
        }
    }

    /// True if any request on a session keeps it alive (ZooKeeper); etcd renews a lease
    /// only on `LeaseKeepAlive`.
    pub fn any_request_renews(self) -> bool {
        self == Flavour::ZooKeeper
    }

    /// The service's name in traces and pictures.
    pub fn name(self) -> &'static str {
        match self {
            Flavour::ZooKeeper => "ZooKeeper",
            Flavour::Etcd => "etcd",
        }
    }
}

/// The error text for a request on a session the service has ended.
pub const EXPIRED: &str = "SESSIONEXPIRED session or lease is over";

#[derive(Clone, Debug)]
struct SessionState {
    client: usize,
    ttl: u64,
    /// Service clock reading after which the session is over.
    deadline: u64,
}

#[derive(Clone, Debug)]
struct Entry {
    session: u64,
    created: u64,
}

/// A reply the service sends, now or later (a notification).
#[derive(Debug)]
pub struct Delivery {
    /// To whom.
    pub client: usize,
    /// The request it answers.
    pub tag: Tag,
    /// What.
    pub reply: Reply,
}

/// The simulated service.
pub struct Service {
    flavour: Flavour,
    /// Its clock: the members measure session time on a monotonic clock (ZooKeeper
    /// since 3.5, `Time.currentElapsedTime`; etcd through Go's monotonic readings), so a
    /// step of the wall clock does not reach it.
    clock: Clock,
    up: bool,
    revision: u64,
    next_session: u64,
    sessions: BTreeMap<u64, SessionState>,
    entries: BTreeMap<String, Entry>,
    watches: Vec<(String, usize, Tag)>,
}

impl Service {
    /// An empty service whose members' clocks run like `clock`.
    pub fn new(flavour: Flavour, clock: Clock) -> Service {
        Service {
            flavour,
            clock,
            up: true,
            revision: 1,
            next_session: 0x7a00,
            sessions: BTreeMap::new(),
            entries: BTreeMap::new(),
            watches: Vec::new(),
        }
    }

    /// Which service this is.
    pub fn flavour(&self) -> Flavour {
        self.flavour
    }

    /// True while it serves requests.
    pub fn is_up(&self) -> bool {
        self.up
    }

    /// The ensemble stops serving (its data is in the replicated log).
    pub fn crash(&mut self) {
        self.up = false;
    }

    /// It serves again at global time `now`. A new leader gives every session a fresh
    /// timeout (ZooKeeper's leader re-creates its session tracker from the sessions it
    /// knows; etcd's `lessor.Promote` extends every lease by its TTL).
    pub fn restart(&mut self, now: u64) {
        self.up = true;
        let local = self.clock.local(now);
        for session in self.sessions.values_mut() {
            session.deadline = local + session.ttl;
        }
    }

    /// The client whose session owns the entry with the lowest revision: the holder,
    /// as the service sees it.
    pub fn holder(&self) -> Option<usize> {
        self.entries
            .values()
            .min_by_key(|e| e.created)
            .and_then(|e| self.sessions.get(&e.session))
            .map(|s| s.client)
    }

    /// The next global instant at which the service looks for expired sessions, if it
    /// has any session.
    pub fn next_check(&self, now: u64) -> Option<u64> {
        let earliest = self.sessions.values().map(|s| s.deadline).min()?;
        let period = self.flavour.expiry_period();
        // The first tick of the period strictly after the deadline.
        let tick = (earliest / period + 1) * period;
        Some(self.clock.global_at(tick).max(now))
    }

    /// Ends every session whose deadline passed at a check tick at or before `now`;
    /// returns the notifications due and the clients whose sessions ended.
    pub fn expire(&mut self, now: u64, out: &mut Vec<Delivery>) -> Vec<usize> {
        if !self.up {
            return Vec::new();
        }
        let local = self.clock.local(now);
        let period = self.flavour.expiry_period();
        let expired: Vec<u64> = self
            .sessions
            .iter()
            .filter(|(_, s)| (s.deadline / period + 1) * period <= local)
            .map(|(&id, _)| id)
            .collect();
        let mut ended = Vec::new();
        for id in expired {
            if let Some(session) = self.sessions.get(&id) {
                ended.push(session.client);
            }
            self.end_session(id, out);
        }
        ended
    }

    fn end_session(&mut self, id: u64, out: &mut Vec<Delivery>) {
        self.sessions.remove(&id);
        let names: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, e)| e.session == id)
            .map(|(n, _)| n.clone())
            .collect();
        for name in names {
            self.delete(&name, out);
        }
    }

    fn delete(&mut self, name: &str, out: &mut Vec<Delivery>) -> bool {
        if self.entries.remove(name).is_none() {
            return false;
        }
        self.revision += 1;
        let (fired, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.watches)
            .into_iter()
            .partition(|(watched, _, _)| watched == name);
        self.watches = kept;
        for (_, client, tag) in fired {
            out.push(Delivery {
                client,
                tag,
                reply: Reply::Status(format!("DELETED {name}")),
            });
        }
        true
    }

    /// Serves one request from `client` at global time `now`. The answer (if any is due
    /// now) and any notification it causes go to `out`.
    pub fn execute(
        &mut self,
        now: u64,
        client: usize,
        tag: Tag,
        args: &[Vec<u8>],
        out: &mut Vec<Delivery>,
    ) {
        if !self.up {
            out.push(Delivery {
                client,
                tag,
                reply: Reply::ConnectionFailed("connection refused".into()),
            });
            return;
        }
        // A session whose deadline passed is over even if the next check has not run.
        self.expire(now, out);
        let local = self.clock.local(now);
        let text: Vec<String> = args
            .iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let words: Vec<&str> = text.iter().map(String::as_str).collect();
        let session = match words.first() {
            Some(&"OPEN") => None,
            _ => words.get(1).and_then(|w| w.parse::<u64>().ok()),
        };
        if let (Some(id), Some(&name)) = (session, words.first()) {
            let renews = name == "PING" || self.flavour.any_request_renews();
            match self.sessions.get_mut(&id) {
                Some(state) if renews => state.deadline = local + state.ttl,
                Some(_) => {}
                None if name != "CLOSE" => {
                    out.push(Delivery {
                        client,
                        tag,
                        reply: Reply::Error(EXPIRED.into()),
                    });
                    return;
                }
                None => {}
            }
        }
        let reply = match (words.as_slice(), session) {
            (["OPEN", ttl], _) => match ttl.parse::<u64>() {
                Ok(ttl) => {
                    self.next_session += 1;
                    self.revision += 1;
                    let id = self.next_session;
                    self.sessions.insert(
                        id,
                        SessionState {
                            client,
                            ttl,
                            deadline: local + ttl,
                        },
                    );
                    Reply::Integer(id as i64)
                }
                Err(_) => Reply::Error("ERR bad ttl".into()),
            },
            (["PING", _], Some(id)) => {
                let left = self
                    .sessions
                    .get(&id)
                    .map_or(0, |s| s.deadline.saturating_sub(local));
                Reply::Integer(left as i64)
            }
            (["CREATE", _], Some(id)) => {
                // One entry per session: etcd's key is named after the lease, and
                // kazoo's recipe puts a per-lock GUID in the node's name to find the node
                // it created when the answer was lost.
                if let Some((name, entry)) = self.entries.iter().find(|(_, e)| e.session == id) {
                    let reply = Reply::Bulk(format!("{name} {}", entry.created).into_bytes());
                    out.push(Delivery { client, tag, reply });
                    return;
                }
                self.revision += 1;
                let name = match self.flavour {
                    // The sequence suffix ZooKeeper appends; the revision is as good.
                    Flavour::ZooKeeper => format!("lock/n-{:010}", self.revision),
                    Flavour::Etcd => format!("lock/{id:x}"),
                };
                let created = self
                    .entries
                    .entry(name.clone())
                    .or_insert(Entry {
                        session: id,
                        created: self.revision,
                    })
                    .created;
                Reply::Bulk(format!("{name} {created}").into_bytes())
            }
            (["LIST", _], Some(_)) => {
                let mut entries: Vec<(&String, &Entry)> = self.entries.iter().collect();
                entries.sort_by_key(|(_, e)| e.created);
                let listed = entries
                    .iter()
                    .map(|(n, e)| format!("{n} {}", e.created))
                    .collect::<Vec<_>>()
                    .join(",");
                Reply::Bulk(listed.into_bytes())
            }
            (["WAITDEL", _, name], Some(_)) => {
                if self.entries.contains_key(*name) {
                    self.watches.push(((*name).to_string(), client, tag));
                    return;
                }
                Reply::Status(format!("DELETED {name}"))
            }
            (["DELETE", _, name], Some(_)) => {
                let deleted = self.delete(name, out);
                Reply::Integer(i64::from(deleted))
            }
            (["CLOSE", _], Some(id)) => {
                self.end_session(id, out);
                Reply::Ok
            }
            _ => Reply::Error(format!("ERR unknown request {}", text.join(" "))),
        };
        out.push(Delivery { client, tag, reply });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(request: u64) -> Tag {
        Tag { op: 1, request }
    }

    fn args(words: &[&str]) -> Vec<Vec<u8>> {
        words.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    fn reply(service: &mut Service, now: u64, client: usize, words: &[&str]) -> Vec<Delivery> {
        let mut out = Vec::new();
        service.execute(now, client, tag(now), &args(words), &mut out);
        out
    }

    #[test]
    fn an_expired_session_frees_the_lock_and_wakes_the_watcher() {
        let mut service = Service::new(Flavour::ZooKeeper, Clock::new(0, 0));
        let open = reply(&mut service, 0, 0, &["OPEN", "1000000"]);
        assert!(matches!(open[0].reply, Reply::Integer(_)));
        let first = reply(&mut service, 0, 0, &["CREATE", "31233"]);
        assert!(matches!(first[0].reply, Reply::Bulk(_)));
        reply(&mut service, 10, 1, &["OPEN", "1000000"]);
        reply(&mut service, 10, 1, &["CREATE", "31234"]);
        assert_eq!(service.holder(), Some(0));
        let name = match &first[0].reply {
            Reply::Bulk(b) => String::from_utf8_lossy(b)
                .split(' ')
                .next()
                .unwrap_or("")
                .to_string(),
            _ => String::new(),
        };
        assert!(reply(&mut service, 20, 1, &["WAITDEL", "31234", &name]).is_empty());
        // Client 1 keeps its session alive; client 0 goes silent.
        reply(&mut service, 900_000, 1, &["PING", "31234"]);
        let mut out = Vec::new();
        assert!(service.expire(1_050_000, &mut out).is_empty());
        let check = service.next_check(1_050_000).expect("sessions left");
        assert_eq!(check, 1_100_000);
        assert_eq!(service.expire(check, &mut out), vec![0]);
        assert_eq!(out.len(), 1, "the watcher is told");
        assert_eq!(out[0].client, 1);
        assert_eq!(service.holder(), Some(1));
        let late = reply(&mut service, check, 0, &["PING", "31233"]);
        assert_eq!(late[0].reply, Reply::Error(EXPIRED.into()));
    }

    #[test]
    fn etcd_renews_only_on_keep_alive() {
        let mut service = Service::new(Flavour::Etcd, Clock::new(0, 0));
        reply(&mut service, 0, 0, &["OPEN", "1000000"]);
        reply(&mut service, 0, 0, &["CREATE", "31233"]);
        reply(&mut service, 900_000, 0, &["LIST", "31233"]);
        let mut out = Vec::new();
        assert_eq!(service.expire(1_500_000, &mut out), vec![0]);
        assert_eq!(service.holder(), None);
    }
}
