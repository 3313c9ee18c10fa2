//! The lock recipes of ZooKeeper and etcd, as clients of [`crate::coordination`].
//!
//! Both recipes are the same queue: create an entry tied to the client's session,
//! list the entries in revision order, hold the lock if ours is first, otherwise watch
//! the entry just before ours and list again when it is deleted. They differ in how a
//! session stays alive and in when the client stops believing in it:
//!
//! - **ZooKeeper** (kazoo's `Lock` recipe, `kazoo/recipe/lock.py`, over kazoo's
//!   connection, `kazoo/protocol/connection.py`): the session timeout is the TTL; the
//!   connection's read timeout is two thirds of it and a ping goes out after half the
//!   read timeout without traffic (a third of the TTL; kazoo's small random jitter is
//!   left out). A client that hears nothing for the read timeout drops the connection
//!   and reports `SUSPENDED`; kazoo's documentation tells lock users to treat
//!   `SUSPENDED` and `LOST` as a lost lock, which this client does: it believes it
//!   holds the lock until two thirds of the TTL after it last heard from the service.
//! - **etcd** (`concurrency.NewSession` and `Mutex.Lock` from clientv3,
//!   `client/v3/concurrency`, which `etcdctl lock` runs): the lease TTL is the TTL. The
//!   keep-alive loop wakes every 500 ms and renews once a third of the TTL has passed
//!   since the last response; each response sets the client's deadline to its receipt
//!   plus the TTL, and the deadline loop, which wakes every second, closes the session
//!   (`Session.Done()`) once the deadline has passed (`client/v3/lease.go`,
//!   `recvKeepAlive` and `deadlineLoop`). The client believes it holds the lock until
//!   then. Nothing in this deadline allows for the response's time in flight or for
//!   clock rates, and the service revokes on its own 500 ms loop: the two ends decide
//!   independently.
//!
//! With `fenced`, the client sends its entry's creation revision (the znode's `czxid`,
//! the key's `create_revision`, which `etcdctl lock` passes on as `ETCD_LOCK_REV`) with
//! every write, and the resource rejects a lower one than it has seen.
//!
//! Each acquisition opens its own session and its release closes it, so that a client
//! that is done sends nothing more; the scenarios never reuse a session.

use std::collections::BTreeMap;

use redlock_core::{Reply, Time};

use crate::coordination::{Flavour, EXPIRED};
use crate::model::{Action, LockModel, Tag};

const PING_SLOT: usize = 0;
const RETRY_SLOT: usize = 1;

/// etcd's keep-alive loop period (`sendKeepAliveLoop`).
const ETCD_KEEPALIVE_LOOP: u64 = 500_000;
/// etcd's deadline loop period (`deadlineLoop`).
const ETCD_DEADLINE_LOOP: u64 = 1_000_000;
/// How long a request that found the service down waits before it is sent again.
const RESEND_AFTER: u64 = 50_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Request {
    Open,
    Ping,
    Create,
    List,
    WaitDel,
    Delete,
    Close,
}

/// A client following ZooKeeper's or etcd's lock recipe.
pub struct CoordinationModel {
    flavour: Flavour,
    fenced: bool,
    ttl: u64,
    session: Option<u64>,
    /// Our entry and its creation revision.
    entry: Option<(String, u64)>,
    /// Requests awaiting an answer: what, the command, when it was sent.
    in_flight: BTreeMap<u64, (Request, Vec<Vec<u8>>, u64)>,
    next_request: u64,
    holding: bool,
    releasing: bool,
    /// The session is over as far as this client knows.
    lost: bool,
    /// When this client last heard from the service (its own clock).
    heard: u64,
    /// etcd: the last keep-alive (or grant) response's receipt, and when the loops
    /// started.
    renewed: u64,
    loops_from: u64,
    /// Requests to send again once the retry timer fires.
    resend: Vec<(Request, Vec<Vec<u8>>)>,
    /// The client's clock at the last input (for sending).
    now: u64,
}

impl CoordinationModel {
    /// A client of `flavour` with session timeout (lease TTL) `ttl` microseconds.
    pub fn new(flavour: Flavour, fenced: bool, ttl: u64) -> CoordinationModel {
        CoordinationModel {
            flavour,
            fenced,
            ttl,
            session: None,
            entry: None,
            in_flight: BTreeMap::new(),
            next_request: 0,
            holding: false,
            releasing: false,
            lost: false,
            heard: 0,
            renewed: 0,
            loops_from: 0,
            resend: Vec::new(),
            now: 0,
        }
    }

    fn send(&mut self, request: Request, args: Vec<Vec<u8>>, out: &mut Vec<Action>) {
        self.next_request += 1;
        self.in_flight
            .insert(self.next_request, (request, args.clone(), self.now));
        if request != Request::Ping && request != Request::WaitDel {
            // A request that gets no answer within the read timeout is sent again: the
            // client library drops the connection, reconnects and retries.
            out.push(Action::Arm {
                slot: RETRY_SLOT,
                at: Time::from_micros(self.now + self.request_timeout()),
            });
        }
        out.push(Action::Send {
            node: 0,
            tag: Tag {
                op: 1,
                request: self.next_request,
            },
            args,
        });
    }

    fn command(&self, name: &str, extra: &[&str]) -> Vec<Vec<u8>> {
        let mut args = vec![
            name.as_bytes().to_vec(),
            self.session.unwrap_or(0).to_string().into_bytes(),
        ];
        args.extend(extra.iter().map(|e| e.as_bytes().to_vec()));
        args
    }

    /// How long a request may go unanswered before the client gives up on the
    /// connection (kazoo's read timeout, two thirds of the session timeout; the same for
    /// the etcd client, whose gRPC keep-alive plays that part).
    fn request_timeout(&self) -> u64 {
        self.ttl * 2 / 3
    }

    /// Until when (own clock) the client believes its session, hence its lock, lives.
    fn belief_end(&self) -> u64 {
        match self.flavour {
            Flavour::ZooKeeper => self.heard + self.ttl * 2 / 3,
            Flavour::Etcd => {
                let deadline = self.renewed + self.ttl;
                let since = deadline.saturating_sub(self.loops_from);
                self.loops_from + (since / ETCD_DEADLINE_LOOP + 1) * ETCD_DEADLINE_LOOP
            }
        }
    }

    fn next_ping(&self, now: u64) -> u64 {
        match self.flavour {
            Flavour::ZooKeeper => now + self.ttl / 3,
            Flavour::Etcd => {
                let since = now.saturating_sub(self.loops_from);
                self.loops_from + (since / ETCD_KEEPALIVE_LOOP + 1) * ETCD_KEEPALIVE_LOOP
            }
        }
    }

    fn lose(&mut self, now: u64, note: &str, out: &mut Vec<Action>) {
        let was_holding = self.holding;
        self.lost = true;
        self.holding = false;
        if was_holding {
            out.push(Action::NotExtended {
                valid_until: Time::from_micros(now.min(self.belief_end())),
                note: note.into(),
            });
        } else if !self.releasing {
            self.reset();
            out.push(Action::NotAcquired { note: note.into() });
        }
    }

    fn reset(&mut self) {
        self.session = None;
        self.entry = None;
        self.in_flight.clear();
        self.holding = false;
        self.releasing = false;
        self.lost = false;
        self.resend.clear();
    }

    fn on_list(&mut self, listed: &str, out: &mut Vec<Action>) {
        let Some((mine, revision)) = self.entry.clone() else {
            return;
        };
        let names: Vec<&str> = listed
            .split(',')
            .filter_map(|e| e.split(' ').next())
            .filter(|n| !n.is_empty())
            .collect();
        let Some(position) = names.iter().position(|n| *n == mine) else {
            // Our entry is gone: the session ended under us.
            self.lose(0, "our entry vanished", out);
            return;
        };
        if position == 0 {
            self.holding = true;
            out.push(Action::Acquired {
                token: mine.clone(),
                valid_until: Some(Time::from_micros(self.belief_end())),
                fencing_token: self.fenced.then_some(revision),
                note: format!(
                    "{} {mine}, revision {revision}{}",
                    self.flavour.name(),
                    if self.fenced { " (fencing token)" } else { "" }
                ),
            });
        } else {
            let before = names[position - 1].to_string();
            let args = self.command("WAITDEL", &[&before]);
            self.send(Request::WaitDel, args, out);
        }
    }
}

impl LockModel for CoordinationModel {
    fn acquire(&mut self, now: Time, out: &mut Vec<Action>) {
        self.reset();
        self.now = now.as_micros();
        let args = vec![b"OPEN".to_vec(), self.ttl.to_string().into_bytes()];
        self.send(Request::Open, args, out);
    }

    fn release(&mut self, now: Time, out: &mut Vec<Action>) {
        self.now = now.as_micros();
        self.holding = false;
        self.releasing = true;
        if self.session.is_none() {
            self.reset();
            out.push(Action::Released {
                note: "no session".into(),
            });
            return;
        }
        if let Some((name, _)) = self.entry.clone() {
            let args = self.command("DELETE", &[&name]);
            self.send(Request::Delete, args, out);
        }
        let args = self.command("CLOSE", &[]);
        self.send(Request::Close, args, out);
    }

    fn extend(&mut self, _now: Time, _out: &mut Vec<Action>) -> bool {
        // The session's own keep-alive keeps the lock; there is nothing to extend.
        false
    }

    fn next_extension(&mut self, _now: Time) -> Option<Time> {
        None
    }

    fn on_reply(
        &mut self,
        tag: Tag,
        reply: Reply,
        now: Time,
        out: &mut Vec<Action>,
    ) -> Result<(), String> {
        let now = now.as_micros();
        self.now = now;
        let Some((request, args, _)) = self.in_flight.remove(&tag.request) else {
            // A reply for a session this client has moved on from.
            return Ok(());
        };
        if let Reply::ConnectionFailed(_) = reply {
            match request {
                Request::Close => {
                    self.reset();
                    out.push(Action::Released {
                        note: "service unreachable; the session ends on its own".into(),
                    });
                }
                Request::Delete => {}
                Request::Ping => {
                    // Disconnected: the recipe treats the lock as lost for now.
                    if self.holding {
                        self.holding = false;
                        out.push(Action::NotExtended {
                            valid_until: Time::from_micros(now.min(self.belief_end())),
                            note: "disconnected".into(),
                        });
                    }
                }
                _ => {
                    self.resend.push((request, args));
                    out.push(Action::Arm {
                        slot: RETRY_SLOT,
                        at: Time::from_micros(now + RESEND_AFTER),
                    });
                }
            }
            return Ok(());
        }
        if request != Request::Close && request != Request::Delete {
            if let Reply::Error(text) = &reply {
                if text == EXPIRED {
                    self.lose(now, "session expired", out);
                    return Ok(());
                }
                return Err(format!("service answered {text}"));
            }
        }
        self.heard = now;
        match (request, reply) {
            (Request::Open, Reply::Integer(id)) => {
                self.session = Some(id as u64);
                self.renewed = now;
                self.loops_from = now;
                out.push(Action::Arm {
                    slot: PING_SLOT,
                    at: Time::from_micros(self.next_ping(now)),
                });
                let args = self.command("CREATE", &[]);
                self.send(Request::Create, args, out);
            }
            (Request::Create, Reply::Bulk(bytes)) => {
                let text = String::from_utf8_lossy(&bytes).into_owned();
                let mut parts = text.split(' ');
                let name = parts.next().unwrap_or_default().to_string();
                let revision = parts.next().and_then(|r| r.parse().ok()).unwrap_or(0);
                self.entry = Some((name, revision));
                let args = self.command("LIST", &[]);
                self.send(Request::List, args, out);
            }
            (Request::List, Reply::Bulk(bytes)) => {
                if !self.releasing {
                    self.on_list(&String::from_utf8_lossy(&bytes), out);
                }
            }
            (Request::WaitDel, Reply::Status(_)) => {
                if !self.releasing && !self.lost {
                    let args = self.command("LIST", &[]);
                    self.send(Request::List, args, out);
                }
            }
            (Request::Ping, Reply::Integer(left)) => {
                if self.flavour == Flavour::Etcd {
                    if left <= 0 {
                        self.lose(now, "lease expired", out);
                        return Ok(());
                    }
                    self.renewed = now;
                }
                if self.holding && !self.lost {
                    out.push(Action::Extended {
                        valid_until: Time::from_micros(self.belief_end()),
                    });
                }
            }
            (Request::Close, _) => {
                self.reset();
                out.push(Action::Released {
                    note: "session closed".into(),
                });
            }
            (Request::Delete, _) => {}
            (request, reply) => {
                return Err(format!("unexpected answer to {request:?}: {reply:?}"));
            }
        }
        Ok(())
    }

    fn on_timer(&mut self, slot: usize, now: Time, out: &mut Vec<Action>) -> Result<(), String> {
        let now = now.as_micros();
        self.now = now;
        if self.session.is_none() && slot == PING_SLOT {
            return Ok(());
        }
        if slot == RETRY_SLOT {
            let timeout = self.request_timeout();
            let overdue: Vec<u64> = self
                .in_flight
                .iter()
                .filter(|(_, (request, _, sent))| {
                    *request != Request::Ping
                        && *request != Request::WaitDel
                        && sent + timeout <= now
                })
                .map(|(&id, _)| id)
                .collect();
            for id in overdue {
                if let Some((request, args, _)) = self.in_flight.remove(&id) {
                    self.resend.push((request, args));
                }
            }
            for (request, args) in std::mem::take(&mut self.resend) {
                self.send(request, args, out);
            }
            // Re-arm for whatever is still awaited.
            if let Some(sent) = self
                .in_flight
                .values()
                .filter(|(r, _, _)| *r != Request::Ping && *r != Request::WaitDel)
                .map(|(_, _, sent)| *sent)
                .min()
            {
                out.push(Action::Arm {
                    slot: RETRY_SLOT,
                    at: Time::from_micros(sent + timeout),
                });
            }
            return Ok(());
        }
        if self.lost || self.releasing {
            return Ok(());
        }
        // A watch whose notification may have been lost on the way is set again, as the
        // client libraries do when they reconnect (ZooKeeper re-sends its watches; etcd's
        // watch stream resumes from the last revision it saw).
        let timeout = self.request_timeout();
        let stale: Vec<u64> = self
            .in_flight
            .iter()
            .filter(|(_, (r, _, sent))| *r == Request::WaitDel && sent + timeout <= now)
            .map(|(&id, _)| id)
            .collect();
        for id in stale {
            if let Some((request, args, _)) = self.in_flight.remove(&id) {
                self.send(request, args, out);
            }
        }
        match self.flavour {
            Flavour::ZooKeeper => {
                let args = self.command("PING", &[]);
                self.send(Request::Ping, args, out);
            }
            Flavour::Etcd => {
                if now >= self.belief_end() {
                    // The deadline loop closes the session.
                    self.lose(now, "keep-alive deadline passed", out);
                    return Ok(());
                }
                if now >= self.renewed + self.ttl / 3 {
                    let args = self.command("PING", &[]);
                    self.send(Request::Ping, args, out);
                }
            }
        }
        out.push(Action::Arm {
            slot: PING_SLOT,
            at: Time::from_micros(self.next_ping(now)),
        });
        Ok(())
    }
}
