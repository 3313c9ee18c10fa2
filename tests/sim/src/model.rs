//! Client models: how each strategy takes and gives back a lock.
//!
//! Every model answers to the same small interface ([`LockModel`]) so that the
//! simulation drives all of them alike. The models of our strategies hold a real
//! [`redlock_core::Redlock`] and run the driver loop the bindings run: start an
//! operation, poll its outputs until none is left, send what it says, hand replies and
//! timeouts back. They decide nothing themselves. The legacy models are small state
//! machines written from the patterns the literature describes.

use redlock_core::{
    Config, KeepAlive, KeepAliveAction, Lease, Operation, Outcome, Output, Redlock, Reply, Time,
    RELEASE_SCRIPT,
};

use crate::rng::Rng;

/// Routes a reply back to the operation (or legacy step) that sent the command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tag {
    /// Which operation, numbered per client.
    pub op: u32,
    /// The request within it.
    pub request: u64,
}

/// What a model asks of the simulation, in order.
#[derive(Debug)]
pub enum Action {
    /// Send this command to node `node`.
    Send {
        /// Destination.
        node: usize,
        /// Given back with the reply.
        tag: Tag,
        /// The command, name first.
        args: Vec<Vec<u8>>,
    },
    /// Call [`LockModel::on_timer`] with `slot` once the client's clock reads `at`
    /// (replacing any earlier timer of that slot).
    Arm {
        /// Which timer.
        slot: usize,
        /// When, on the client's clock.
        at: Time,
    },
    /// The client now believes it holds the lock.
    Acquired {
        /// The value stored under the key (for traces).
        token: String,
        /// Until when the client believes it holds the lock, on its own clock; `None`
        /// for a client that has no notion of validity (it believes it holds the lock
        /// until it releases it).
        valid_until: Option<Time>,
        /// The fencing token to send with writes (the lease's, with fencing on).
        fencing_token: Option<u64>,
        /// Details for the trace.
        note: String,
    },
    /// The acquisition failed.
    NotAcquired {
        /// Details for the trace.
        note: String,
    },
    /// The lock was extended until `valid_until` (client clock).
    Extended {
        /// New end of validity.
        valid_until: Time,
    },
    /// The extension failed; the lock is held until `valid_until` (client clock).
    NotExtended {
        /// End of validity left.
        valid_until: Time,
        /// Details for the trace.
        note: String,
    },
    /// The release finished.
    Released {
        /// Details for the trace.
        note: String,
    },
}

/// A lock client as the simulation drives it. `now` is always the client's own clock.
pub trait LockModel {
    /// Starts acquiring the lock.
    fn acquire(&mut self, now: Time, out: &mut Vec<Action>);
    /// Starts releasing the lock.
    fn release(&mut self, now: Time, out: &mut Vec<Action>);
    /// Starts extending the lock; false if the model cannot extend.
    fn extend(&mut self, now: Time, out: &mut Vec<Action>) -> bool;
    /// When the held lock should next be extended (or retried), if the model extends at
    /// all; polled after every acquisition and extension outcome.
    fn next_extension(&mut self, now: Time) -> Option<Time>;
    /// A reply to a command sent with `tag`.
    fn on_reply(
        &mut self,
        tag: Tag,
        reply: Reply,
        now: Time,
        out: &mut Vec<Action>,
    ) -> Result<(), String>;
    /// Timer `slot` is due.
    fn on_timer(&mut self, slot: usize, now: Time, out: &mut Vec<Action>) -> Result<(), String>;
}

// ---- our strategies: the real core -----------------------------------------------

const LOCK_SLOT: usize = 0;
const EXTEND_SLOT: usize = 1;

/// A client of our strategy: the real core, driven like a binding drives it.
pub struct CoreModel {
    redlock: Redlock,
    resources: [&'static str; 1],
    serial: u32,
    lock: Option<(u32, Operation)>,
    extension: Option<(u32, Operation)>,
    lease: Option<Lease>,
    /// The core's keep-alive for the held lock: when to extend, retry, or give up.
    keep: Option<KeepAlive>,
    /// The keep-alive asked for an extension that has not started yet.
    extend_due: bool,
}

impl CoreModel {
    /// A client with `config` locking `key`, its tokens drawn from a ChaCha20 stream
    /// seeded with `seed`.
    pub fn new(config: Config, key: &'static str, seed: [u8; 32]) -> CoreModel {
        CoreModel {
            redlock: Redlock::with_seed(config, seed),
            resources: [key],
            serial: 0,
            lock: None,
            extension: None,
            lease: None,
            keep: None,
            extend_due: false,
        }
    }

    fn next_serial(&mut self) -> u32 {
        self.serial += 1;
        self.serial
    }

    /// The binding's loop: poll until nothing is left, acting on each output.
    fn drive(&mut self, extension: bool, now: Time, out: &mut Vec<Action>) {
        let slot = if extension { EXTEND_SLOT } else { LOCK_SLOT };
        let entry = if extension {
            self.extension.as_mut()
        } else {
            self.lock.as_mut()
        };
        let Some((serial, op)) = entry else {
            return;
        };
        let serial = *serial;
        let mut outcome = None;
        while let Some(output) = op.poll_output() {
            match output {
                Output::Send(command) => out.push(Action::Send {
                    node: command.node(),
                    tag: Tag {
                        op: serial,
                        request: command.request_id().0,
                    },
                    args: command.args().map(<[u8]>::to_vec).collect(),
                }),
                Output::Wait(at) => out.push(Action::Arm { slot, at }),
                Output::Outcome(done) => outcome = Some(done),
                // Outputs added to the core later would need a driver change; none exist.
                _ => {}
            }
        }
        if let Some(outcome) = outcome {
            self.finish(outcome, now, out);
        }
    }

    fn finish(&mut self, outcome: Outcome, now: Time, out: &mut Vec<Action>) {
        let nodes: Vec<&str> = outcome.nodes().iter().map(|n| n.code()).collect();
        let nodes = nodes.join(" ");
        match outcome {
            Outcome::Acquired(acquired) => {
                let lease = acquired.lease;
                out.push(Action::Acquired {
                    token: lease.token().as_str().to_owned(),
                    valid_until: Some(lease.valid_until()),
                    fencing_token: lease.fencing_token(),
                    note: format!(
                        "validity {}, attempt {}, nodes [{nodes}]",
                        millis(acquired.validity.as_micros()),
                        acquired.attempts
                    ),
                });
                self.keep = Some(KeepAlive::new(self.redlock.config(), lease.clone()));
                self.extend_due = false;
                self.lease = Some(lease);
            }
            Outcome::NotAcquired(failed) => out.push(Action::NotAcquired {
                note: format!(
                    "{} after {} attempt(s), nodes [{nodes}]",
                    failed.reason.code(),
                    failed.attempts
                ),
            }),
            Outcome::Extended(extended) => {
                if let Some(keep) = self.keep.as_mut() {
                    keep.handle_outcome(&Outcome::Extended(extended.clone()), now);
                }
                out.push(Action::Extended {
                    valid_until: extended.lease.valid_until(),
                });
                self.lease = Some(extended.lease);
                self.extension = None;
            }
            Outcome::NotExtended(failed) => {
                if let Some(keep) = self.keep.as_mut() {
                    keep.handle_outcome(&Outcome::NotExtended(failed.clone()), now);
                }
                out.push(Action::NotExtended {
                    valid_until: failed.lease.valid_until(),
                    note: format!("{}, nodes [{nodes}]", failed.reason.code()),
                });
                self.lease = Some(failed.lease);
                self.extension = None;
            }
            Outcome::Released(released) => {
                out.push(Action::Released {
                    note: format!("deleted on {} node(s), nodes [{nodes}]", released.released),
                });
                self.lease = None;
            }
            // Fewer than a quorum confirmed: the client moves on all the same (the keys
            // end with their TTL).
            Outcome::NotReleased(failed) => {
                out.push(Action::Released {
                    note: format!(
                        "not released: deleted on {} node(s), nodes [{nodes}]",
                        failed.released
                    ),
                });
                self.lease = None;
            }
            // Outcomes added to the core later would need a driver change; none exist.
            _ => {}
        }
    }
}

impl LockModel for CoreModel {
    fn acquire(&mut self, now: Time, out: &mut Vec<Action>) {
        let serial = self.next_serial();
        match self.redlock.acquire(&self.resources, now) {
            Ok(op) => {
                self.lock = Some((serial, op));
                self.drive(false, now, out);
            }
            Err(error) => out.push(Action::NotAcquired {
                note: format!("usage error {error:?}"),
            }),
        }
    }

    fn release(&mut self, now: Time, out: &mut Vec<Action>) {
        // An extension still in flight is abandoned: the release supersedes it.
        self.extension = None;
        if let Some(keep) = self.keep.as_mut() {
            keep.stop();
        }
        self.extend_due = false;
        let Some(lease) = self.lease.as_ref() else {
            out.push(Action::Released {
                note: "no lease to release".into(),
            });
            return;
        };
        let op = self.redlock.release(lease, now);
        let serial = self.next_serial();
        self.lock = Some((serial, op));
        self.drive(false, now, out);
    }

    fn extend(&mut self, now: Time, out: &mut Vec<Action>) -> bool {
        if self.extension.is_some() {
            return true;
        }
        let Some(keep) = self.keep.as_mut() else {
            return false;
        };
        // Only when the keep-alive asks for it (now or at its last poll).
        let due = std::mem::take(&mut self.extend_due)
            || matches!(keep.poll(now), KeepAliveAction::Extend);
        if !due {
            return false;
        }
        match self.redlock.extend(keep.lease(), now) {
            Ok(op) => {
                let serial = self.next_serial();
                self.extension = Some((serial, op));
                self.drive(true, now, out);
                true
            }
            Err(_) => {
                keep.handle_failure(now);
                false
            }
        }
    }

    fn next_extension(&mut self, now: Time) -> Option<Time> {
        let keep = self.keep.as_mut()?;
        match keep.poll(now) {
            KeepAliveAction::Extend => {
                self.extend_due = true;
                Some(now)
            }
            KeepAliveAction::WaitUntil(at) => Some(at),
            // Lost or stopped: no more extensions.
            _ => None,
        }
    }

    fn on_reply(
        &mut self,
        tag: Tag,
        reply: Reply,
        now: Time,
        out: &mut Vec<Action>,
    ) -> Result<(), String> {
        let extension = match (&self.lock, &self.extension) {
            (Some((serial, _)), _) if *serial == tag.op => false,
            (_, Some((serial, _))) if *serial == tag.op => true,
            // A reply for an operation the client has moved on from.
            _ => return Ok(()),
        };
        let op = if extension {
            self.extension.as_mut().map(|(_, op)| op)
        } else {
            self.lock.as_mut().map(|(_, op)| op)
        };
        if let Some(op) = op {
            op.handle_reply(redlock_core::RequestId(tag.request), reply, now)
                .map_err(|error| format!("core rejected a reply: {error:?}"))?;
        }
        self.drive(extension, now, out);
        Ok(())
    }

    fn on_timer(&mut self, slot: usize, now: Time, out: &mut Vec<Action>) -> Result<(), String> {
        let extension = slot == EXTEND_SLOT;
        let op = if extension {
            self.extension.as_mut().map(|(_, op)| op)
        } else {
            self.lock.as_mut().map(|(_, op)| op)
        };
        if let Some(op) = op {
            op.handle_timeout(now);
        }
        self.drive(extension, now, out);
        Ok(())
    }
}

/// `micros` as milliseconds with three decimals.
pub fn millis(micros: u128) -> String {
    format!("{}.{:03} ms", micros / 1000, micros % 1000)
}

// ---- the legacy patterns ----------------------------------------------------------

/// Which legacy pattern a [`LegacyModel`] follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Legacy {
    /// `SETNX key token`, then `EXPIRE key secs` as a second command; release by an
    /// atomic compare-and-delete.
    SetnxThenExpire,
    /// `SETNX key <expiry timestamp>`; a waiter that reads an expired timestamp takes
    /// over with `GETSET`; release by `DEL` if the holder's own timestamp has not passed.
    SetnxGetset,
    /// `SET key token NX PX ttl`; release by plain `DEL`.
    PlainDel,
    /// `SET key token NX PX ttl`; release by `GET`, compare, then `DEL`.
    GetThenDel,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Idle,
    Set,
    Setnx,
    TakeoverGet,
    TakeoverGetset { timestamp_ms: u64 },
    ReleaseGet,
    Release,
}

/// What a legacy client does when a command gets no answer within this time (the
/// socket timeout such code sets).
pub const LEGACY_COMMAND_TIMEOUT: u64 = 50_000;

/// A client following one of the legacy patterns on a single node.
pub struct LegacyModel {
    pattern: Legacy,
    key: &'static str,
    ttl_ms: u64,
    /// Client clock origin and the offset of its wall clock (microseconds), for the
    /// timestamp pattern.
    wall: (u64, i64),
    rng: Rng,
    token: String,
    timestamp_ms: u64,
    step: Step,
    serial: u32,
}

/// Wall-clock epoch of the simulation (microseconds), so wall timestamps look real.
const WALL_EPOCH: i64 = 1_700_000_000_000_000;

impl LegacyModel {
    /// A client following `pattern` with `ttl_ms`. `origin` is the reading of its
    /// monotonic clock at global time 0 and `wall_offset` how far its wall clock is off.
    pub fn new(
        pattern: Legacy,
        key: &'static str,
        ttl_ms: u64,
        origin: u64,
        wall_offset: i64,
        rng: Rng,
    ) -> LegacyModel {
        LegacyModel {
            pattern,
            key,
            ttl_ms,
            wall: (origin, wall_offset),
            rng,
            token: String::new(),
            timestamp_ms: 0,
            step: Step::Idle,
            serial: 0,
        }
    }

    fn wall_ms(&self, now: Time) -> u64 {
        let since_origin = now.as_micros() as i64 - self.wall.0 as i64;
        ((WALL_EPOCH + since_origin + self.wall.1) / 1000) as u64
    }

    /// The monotonic reading at which the wall clock shows `ms`.
    fn monotonic_at(&self, ms: u64) -> Time {
        let micros = ms as i64 * 1000 - WALL_EPOCH - self.wall.1 + self.wall.0 as i64;
        Time::from_micros(micros.max(0) as u64)
    }

    fn send(&mut self, step: Step, args: &[&[u8]], now: Time, out: &mut Vec<Action>) {
        self.serial += 1;
        self.step = step;
        out.push(Action::Send {
            node: 0,
            tag: Tag {
                op: self.serial,
                request: 1,
            },
            args: args.iter().map(|a| a.to_vec()).collect(),
        });
        out.push(Action::Arm {
            slot: 0,
            at: Time::from_micros(now.as_micros() + LEGACY_COMMAND_TIMEOUT),
        });
    }

    fn acquired(&mut self, now: Time, out: &mut Vec<Action>) {
        let valid_until =
            (self.pattern == Legacy::SetnxGetset).then(|| self.monotonic_at(self.timestamp_ms));
        self.step = Step::Idle;
        out.push(Action::Acquired {
            token: self.token.clone(),
            valid_until,
            fencing_token: None,
            note: String::new(),
        });
        if self.pattern == Legacy::SetnxThenExpire {
            // The expiry goes as a second command; nobody waits for its reply.
            let seconds = self.ttl_ms.div_ceil(1000).to_string();
            let key = self.key;
            self.send(
                Step::Idle,
                &[b"EXPIRE", key.as_bytes(), seconds.as_bytes()],
                now,
                out,
            );
            self.step = Step::Idle;
        }
    }

    fn failed(&mut self, note: String, out: &mut Vec<Action>) {
        self.step = Step::Idle;
        out.push(Action::NotAcquired { note });
    }

    fn step_with(&mut self, reply: Reply, now: Time, out: &mut Vec<Action>) {
        let key = self.key;
        let wall_now = self.wall_ms(now);
        match (self.step, reply) {
            (Step::Idle, _) => {}
            (Step::Set, Reply::Ok) => self.acquired(now, out),
            (Step::Setnx, Reply::Integer(1)) => self.acquired(now, out),
            (Step::Setnx, Reply::Integer(0)) if self.pattern == Legacy::SetnxGetset => {
                self.send(Step::TakeoverGet, &[b"GET", key.as_bytes()], now, out);
            }
            (Step::TakeoverGet, Reply::Bulk(value)) => {
                let held_until = parse_ms(&value);
                if held_until.is_some_and(|until| until < wall_now) {
                    let timestamp_ms = wall_now + self.ttl_ms + 1;
                    let text = timestamp_ms.to_string();
                    self.send(
                        Step::TakeoverGetset { timestamp_ms },
                        &[b"GETSET", key.as_bytes(), text.as_bytes()],
                        now,
                        out,
                    );
                } else {
                    self.failed("held: its timestamp has not passed".into(), out);
                }
            }
            (Step::TakeoverGetset { timestamp_ms }, Reply::Bulk(old)) => {
                if parse_ms(&old).is_none_or(|until| until < wall_now) {
                    self.timestamp_ms = timestamp_ms;
                    self.token = timestamp_ms.to_string();
                    self.acquired(now, out);
                } else {
                    self.failed("another waiter took over first".into(), out);
                }
            }
            (Step::TakeoverGetset { timestamp_ms }, Reply::Nil) => {
                self.timestamp_ms = timestamp_ms;
                self.token = timestamp_ms.to_string();
                self.acquired(now, out);
            }
            (Step::ReleaseGet, Reply::Bulk(value)) if value == self.token.as_bytes() => {
                self.send(Step::Release, &[b"DEL", key.as_bytes()], now, out);
            }
            (Step::ReleaseGet | Step::Release, reply) => {
                self.step = Step::Idle;
                out.push(Action::Released {
                    note: describe_reply(&reply),
                });
            }
            (_, reply) => self.failed(describe_reply(&reply), out),
        }
    }
}

fn parse_ms(value: &[u8]) -> Option<u64> {
    std::str::from_utf8(value).ok()?.parse().ok()
}

/// A reply in the words of `redis-cli`, for traces.
pub fn describe_reply(reply: &Reply) -> String {
    match reply {
        Reply::Ok => "OK".into(),
        Reply::Status(text) => text.clone(),
        Reply::Nil => "(nil)".into(),
        Reply::Integer(n) => format!("(integer) {n}"),
        Reply::Bulk(bytes) => format!("\"{}\"", crate::trace::short(bytes)),
        Reply::Array(items) if items.len() <= 4 => format!(
            "[{}]",
            items
                .iter()
                .map(describe_reply)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Reply::Array(items) => format!("array of {}", items.len()),
        Reply::Error(text) => format!("(error) {text}"),
        Reply::Timeout => "timeout".into(),
        Reply::ConnectionFailed(text) => format!("connection failed: {text}"),
        _ => "?".into(),
    }
}

impl LockModel for LegacyModel {
    fn acquire(&mut self, now: Time, out: &mut Vec<Action>) {
        let key = self.key;
        match self.pattern {
            Legacy::PlainDel | Legacy::GetThenDel => {
                self.token = self.rng.hex(20);
                let token = self.token.clone();
                let ttl = self.ttl_ms.to_string();
                self.send(
                    Step::Set,
                    &[
                        b"SET",
                        key.as_bytes(),
                        token.as_bytes(),
                        b"NX",
                        b"PX",
                        ttl.as_bytes(),
                    ],
                    now,
                    out,
                );
            }
            Legacy::SetnxThenExpire => {
                self.token = self.rng.hex(20);
                let token = self.token.clone();
                self.send(
                    Step::Setnx,
                    &[b"SETNX", key.as_bytes(), token.as_bytes()],
                    now,
                    out,
                );
            }
            Legacy::SetnxGetset => {
                self.timestamp_ms = self.wall_ms(now) + self.ttl_ms + 1;
                self.token = self.timestamp_ms.to_string();
                let token = self.token.clone();
                self.send(
                    Step::Setnx,
                    &[b"SETNX", key.as_bytes(), token.as_bytes()],
                    now,
                    out,
                );
            }
        }
    }

    fn release(&mut self, now: Time, out: &mut Vec<Action>) {
        let key = self.key;
        match self.pattern {
            Legacy::PlainDel => self.send(Step::Release, &[b"DEL", key.as_bytes()], now, out),
            Legacy::GetThenDel => self.send(Step::ReleaseGet, &[b"GET", key.as_bytes()], now, out),
            Legacy::SetnxThenExpire => {
                let token = self.token.clone();
                self.send(
                    Step::Release,
                    &[
                        b"EVAL",
                        RELEASE_SCRIPT.as_bytes(),
                        b"1",
                        key.as_bytes(),
                        token.as_bytes(),
                    ],
                    now,
                    out,
                );
            }
            Legacy::SetnxGetset => {
                // The recipe: delete only if our own timestamp has not passed.
                if self.wall_ms(now) < self.timestamp_ms {
                    self.send(Step::Release, &[b"DEL", key.as_bytes()], now, out);
                } else {
                    out.push(Action::Released {
                        note: "own timestamp passed: not deleting".into(),
                    });
                }
            }
        }
    }

    fn extend(&mut self, _now: Time, _out: &mut Vec<Action>) -> bool {
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
        if tag.op == self.serial {
            self.step_with(reply, now, out);
        }
        Ok(())
    }

    fn on_timer(&mut self, _slot: usize, now: Time, out: &mut Vec<Action>) -> Result<(), String> {
        if self.step != Step::Idle {
            // The command's answer is abandoned: a later reply no longer matches.
            self.serial += 1;
            self.step_with(Reply::Timeout, now, out);
        }
        Ok(())
    }
}
