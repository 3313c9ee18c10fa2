//! Node links: what happens to the commands of one node, decided once for every driver.
//!
//! A driver keeps one [`Link`] per node for as long as its client lives, hands it every
//! [`Command`] an operation emits for that node ([`Link::submit`]) and every event of the
//! node's connection (connected, closed, a reply, time passing), and does what the link
//! outputs: open a connection, write a command, close the connection, or deliver a reply
//! to the operation that issued the command.
//!
//! # The policy
//!
//! - **Order.** Commands are written in the order they were submitted, on one connection
//!   at a time. A failed attempt's release therefore never overtakes the `SET` it cleans
//!   up, which would leave that key to its TTL.
//! - **Scripts first.** On every new or re-opened connection the first three writes are
//!   `SCRIPT LOAD` of the core's scripts, before any `EVALSHA`, whatever the client
//!   library queued meanwhile. Their replies are the link's own (a node that refuses
//!   them still works through the `EVAL` fallback). The two fencing scripts are loaded
//!   the same way right before a connection's first fenced command, and the queued
//!   acquire script before its first waiting attempt, so that a node answering after
//!   its operation decided still has them for the next one.
//! - **A bound in flight.** At most [`MAX_IN_FLIGHT`] writes await their replies; more
//!   wait in the link's queue, at most [`MAX_QUEUED`]; past that a command fails at once.
//! - **Stalled nodes.** A node with a written command unanswered past its deadline is
//!   *stalled* (frozen, or its connection silently dead). It gets nothing new: an
//!   acquisition, extension or release submitted meanwhile fails at once (`stalled`),
//!   so nothing piles up behind it and operations decide without waiting for it. The
//!   exception is a release of a token whose `SET` this link wrote, or still has queued
//!   to write ahead of it (an *owed* release):
//!   that key may be set on the node, so the release is written at once on the
//!   connection the `SET` went out on (within the bound in flight): a frozen node runs
//!   it right after the `SET` when it thaws, whether or not the driver is running then
//!   (a PHP process does I/O only inside its client's calls), and a connection found
//!   dead writes it again on the next one. The link remembers at most
//!   [`MAX_OWED`] such tokens per node, each until its `SET`'s TTL (plus a tenth) has
//!   passed: after that the key is gone anyway. A node stalled for [`STALL_CLOSE`] gets
//!   its connection closed and re-opened.
//! - **Nothing is resent, except releases.** A command is written at most once: a `SET`
//!   written again could meet our own first write and be counted a conflict, and an
//!   extension's effect depends on when it runs. A release is idempotent (it deletes
//!   only keys holding its own token), so a release whose connection closed before its
//!   reply is written again on the next connection (while it is owed or before its
//!   deadline), and one answered `NOSCRIPT` is written again as `EVAL`. Other commands
//!   answered `NOSCRIPT` go to their operation, which falls back to `EVAL` itself.
//! - **Late commands are not written.** A command still queued at its deadline is
//!   dropped unwritten (its operation has counted it as timed out), except an owed
//!   release.
//! - **Reconnecting.** A connection is opened when there is something to write. An
//!   attempt that has not opened within the connect timeout
//!   ([`crate::CONNECT_TIMEOUT_DEFAULT_MS`] unless the driver sets the user's client's,
//!   [`Link::set_connect_timeout`]) is given up: the link outputs `Close` and counts it
//!   failed with `timeout`, so a node that never answers (a black-holed address) costs
//!   the same in every binding, and no driver needs a timer of its own. After a failed
//!   attempt, commands queued for the node fail at once with its cause (so a refused port
//!   costs nothing), and the next attempt waits a backoff from [`RECONNECT_MIN`] doubling
//!   to [`RECONNECT_MAX`]; meanwhile only owed releases wait. A connection that closes
//!   after it was open is re-opened at once if anything is queued.
//!
//! # Driving a link
//!
//! After every input (`submit`, `handle_*`), poll [`Link::poll_output`] until `None`:
//!
//! - [`LinkOutput::Connect`]: open a connection (TLS, `AUTH`, `SELECT` included), then
//!   call [`Link::handle_connected`], or [`Link::handle_closed`] with the cause if it
//!   fails.
//! - [`LinkOutput::Write`]: write it on the current connection now, and hand its reply
//!   to [`Link::handle_reply`] with the write's id.
//! - [`LinkOutput::Close`]: close the current connection, or give up the attempt to open
//!   one that is under way; report nothing more for it (the link already counts it
//!   closed; replies to its writes are ignored).
//! - [`LinkOutput::Deliver`]: hand the reply to the operation the driver tagged.
//!
//! Call [`Link::handle_timeout`] at [`Link::poll_timeout`]. Drivers over a client
//! library that manages its own connection report the library's "ready" event as
//! `handle_connected` and its "disconnected" event as `handle_closed`, and may treat
//! `Connect` and `Close` as hints.

use alloc::collections::{BTreeMap, VecDeque};
use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;
use core::time::Duration;

use crate::command::{
    Argv, Command, CommandKind, RequestId, ACQUIRE_SCRIPT, EXTEND_SCRIPT, FENCED_ACQUIRE_SCRIPT,
    QUEUED_ACQUIRE_SCRIPT, RELEASE_SCRIPT, WRITE_BACK_SCRIPT,
};
use crate::reply::Reply;
use crate::time::{micros_floor, Time};

/// The most writes of one link awaiting their replies.
pub const MAX_IN_FLIGHT: usize = 64;
/// The most commands one link keeps queued (not yet written).
pub const MAX_QUEUED: usize = 1024;
/// The most tokens one link remembers having written a `SET` for (owed releases).
pub const MAX_OWED: usize = 4096;
/// How long a node may stay stalled before its connection is closed and re-opened.
pub const STALL_CLOSE: Duration = Duration::from_secs(10);
/// The first delay before reconnecting after a failed connection attempt.
pub const RECONNECT_MIN: Duration = Duration::from_millis(50);
/// The longest delay between connection attempts.
pub const RECONNECT_MAX: Duration = Duration::from_secs(2);
/// How long an owed release written after its own deadline may take to be answered
/// before the node counts as stalled.
pub const LATE_RELEASE_BUDGET: Duration = Duration::from_secs(1);

/// Identifies one write of one link. Ids start at 1 and increase by one per write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WriteId(pub u64);

/// Why a connection closed or could not be opened, as the driver saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LinkCause {
    /// The connection was refused.
    Refused,
    /// Authentication failed (`AUTH`/`HELLO` refused, `NOAUTH`, `WRONGPASS`).
    Auth,
    /// The TLS handshake failed.
    Tls,
    /// Connecting took too long.
    Timeout,
    /// Any other failure, or the peer closed the connection.
    Closed,
}

impl LinkCause {
    /// The cause word that starts the failure's text: `refused`, `auth`, `tls`,
    /// `timeout`, `closed` (see [`crate::NodeCause`]).
    pub fn code(self) -> &'static str {
        match self {
            LinkCause::Refused => "refused",
            LinkCause::Auth => "auth",
            LinkCause::Tls => "tls",
            LinkCause::Timeout => "timeout",
            LinkCause::Closed => "closed",
        }
    }
}

/// A command to write, from [`LinkOutput::Write`].
#[derive(Clone, PartialEq, Eq)]
pub struct Write {
    id: WriteId,
    argv: Arc<Argv>,
}

impl Write {
    /// The id to give back with the reply.
    pub fn id(&self) -> WriteId {
        self.id
    }

    /// Number of arguments, the command name included.
    pub fn arg_count(&self) -> usize {
        self.argv.len()
    }

    /// Argument `index` (0 is the command name).
    pub fn arg(&self, index: usize) -> Option<&[u8]> {
        self.argv.get(index)
    }

    /// Every argument in order, the command name first.
    pub fn args(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        (0..self.argv.len()).map(|i| self.argv.get(i).unwrap_or(&[]))
    }

    /// True when `other` carries this write's very arguments: the N writes of one round
    /// share them. A driver that converts the arguments (to its language's strings) can
    /// convert them once per round. (Two writes with equal arguments built apart are
    /// not "shared"; compare [`Write::args`] for that.)
    pub fn shares_args_with(&self, other: &Write) -> bool {
        Arc::ptr_eq(&self.argv, &other.argv)
    }

    /// Appends the command in RESP.
    pub fn encode_resp(&self, out: &mut Vec<u8>) {
        crate::resp::encode_command(self.args(), out);
    }
}

impl fmt::Debug for Write {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut list = f.debug_list();
        for arg in self.args() {
            match core::str::from_utf8(arg) {
                Ok(text) if text.len() <= 64 => list.entry(&text),
                Ok(_) => list.entry(&"…"),
                Err(_) => list.entry(&arg),
            };
        }
        list.finish()?;
        write!(f, " as write {}", self.id.0)
    }
}

/// A reply for an operation, from [`LinkOutput::Deliver`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// The tag the driver gave with [`Link::submit`].
    pub tag: u64,
    /// The request id of the operation's command.
    pub request: RequestId,
    /// The reply (or the failure the link decided: `stalled`, a connection's cause).
    pub reply: Reply,
}

/// The next thing the driver does for a link, from [`Link::poll_output`].
#[derive(Debug)]
#[must_use]
#[non_exhaustive]
pub enum LinkOutput {
    /// Open a connection to the node.
    Connect,
    /// Write this command on the current connection.
    Write(Write),
    /// Close the current connection (it is stuck), or give up the attempt to open one
    /// (it took longer than the connect timeout).
    Close,
    /// Hand this reply to the operation tagged [`Delivery::tag`].
    Deliver(Delivery),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Closed,
    /// A `Connect` went out; the attempt is given up at `until`.
    Connecting {
        until: Time,
    },
    Open,
}

struct Entry {
    tag: u64,
    command: Command,
    /// A release of a token whose `SET` this link wrote: kept until written.
    owed: bool,
    /// A release of a token whose `SET` is still queued ahead of it: owed once that
    /// `SET` is written, owed nothing if it is dropped unwritten.
    awaits_set: bool,
}

enum Purpose {
    Script,
    Command(Entry),
}

struct InFlight {
    id: WriteId,
    deadline: Time,
    purpose: Purpose,
}

/// One node's commands and connection policy. See the module documentation.
pub struct Link {
    state: State,
    queue: VecDeque<Entry>,
    in_flight: VecDeque<InFlight>,
    /// Tokens whose `SET` (or acquire script) was written, with when they stop mattering.
    owed: BTreeMap<Vec<u8>, Time>,
    outputs: VecDeque<LinkOutput>,
    next_write: u64,
    latest: Time,
    /// Failed connection attempts in a row.
    failures: u32,
    reconnect_at: Option<Time>,
    last_error: Option<String>,
    /// How long a connection attempt may take, in microseconds (at least 1 ms).
    connect_timeout_us: u64,
    scripts: Arc<[Arc<Argv>; 6]>,
    /// Whether the fencing scripts were loaded on the current connection (they are, on
    /// a connection's first fenced command).
    fencing_loaded: bool,
    /// Whether the queued acquire script was loaded on the current connection (it is,
    /// on a connection's first queued attempt).
    queue_loaded: bool,
}

impl Default for Link {
    fn default() -> Link {
        Link::new()
    }
}

impl Link {
    /// A link with no connection yet.
    pub fn new() -> Link {
        let load = |script: &str| {
            let mut argv = Argv::with_capacity(script.len() + 16, 3);
            argv.push(b"SCRIPT");
            argv.push(b"LOAD");
            argv.push(script.as_bytes());
            Arc::new(argv)
        };
        Link {
            state: State::Closed,
            queue: VecDeque::new(),
            in_flight: VecDeque::new(),
            owed: BTreeMap::new(),
            outputs: VecDeque::new(),
            next_write: 1,
            latest: Time::ZERO,
            failures: 0,
            reconnect_at: None,
            last_error: None,
            connect_timeout_us: crate::command::CONNECT_TIMEOUT_DEFAULT_MS.saturating_mul(1000),
            scripts: Arc::new([
                load(ACQUIRE_SCRIPT),
                load(RELEASE_SCRIPT),
                load(EXTEND_SCRIPT),
                load(FENCED_ACQUIRE_SCRIPT),
                load(WRITE_BACK_SCRIPT),
                load(QUEUED_ACQUIRE_SCRIPT),
            ]),
            fencing_loaded: false,
            queue_loaded: false,
        }
    }

    /// A link whose connection attempts may take `timeout` (see
    /// [`Link::set_connect_timeout`]).
    pub fn with_connect_timeout(timeout: Duration) -> Link {
        let mut link = Link::new();
        link.set_connect_timeout(timeout);
        link
    }

    /// How long a connection attempt may take (TCP, TLS, `AUTH`, `SELECT`) before the
    /// link gives it up with [`LinkOutput::Close`] and counts it failed with `timeout`:
    /// the user's client's connect timeout when it has one, otherwise
    /// [`crate::CONNECT_TIMEOUT_DEFAULT_MS`] (a new link's). At least 1 ms (less is
    /// taken as 1 ms); an attempt already under way keeps its limit.
    pub fn set_connect_timeout(&mut self, timeout: Duration) {
        self.connect_timeout_us = micros_floor(timeout).max(1000);
    }

    /// The connect timeout (see [`Link::set_connect_timeout`]).
    pub fn connect_timeout(&self) -> Duration {
        Duration::from_micros(self.connect_timeout_us)
    }

    // ---- inputs -------------------------------------------------------------------

    /// A command an operation emitted for this link's node; `tag` identifies the
    /// operation to the driver and comes back with the reply.
    pub fn submit(&mut self, tag: u64, command: Command, now: Time) {
        let now = self.observe(now);
        // A release is owed when its token's SET was written here. One whose SET is still
        // queued here waits for it (in order, behind it) and becomes owed when the SET
        // is written: otherwise it could be dropped at its deadline, or refused while the
        // node stalls, after the SET went out, and leave the key to its TTL on a node
        // that answered.
        let release = command.kind() == CommandKind::Release;
        let owed = release && self.owed.remove(command.token()).is_some();
        let awaits_set = release
            && !owed
            && self
                .queue
                .iter()
                .any(|e| sets_key(e.command.kind()) && e.command.token() == command.token());
        let entry = Entry {
            tag,
            command,
            owed,
            awaits_set,
        };
        if !owed && !awaits_set {
            let refusal = if self.is_stalled(now) {
                Some(String::from(
                    "stalled: the node has a command unanswered past its deadline; not sent",
                ))
            } else if self.state == State::Closed && self.reconnect_at.is_some_and(|at| at > now) {
                Some(self.last_error_text())
            } else if self.queue.len() >= MAX_QUEUED {
                Some(String::from(
                    "stalled: too many commands queued for the node; not sent",
                ))
            } else {
                None
            };
            if let Some(text) = refusal {
                self.deliver_failure(entry, text);
                return;
            }
        } else if self.queue.len() >= MAX_QUEUED {
            // Even owed releases are bounded: that key then ends with its TTL.
            self.deliver_failure(
                entry,
                String::from("stalled: too many commands queued for the node; not sent"),
            );
            return;
        }
        self.queue.push_back(entry);
        self.pump(now);
    }

    /// A new or re-opened connection is ready (after TLS, `AUTH`, `SELECT`).
    pub fn handle_connected(&mut self, now: Time) {
        let now = self.observe(now);
        self.state = State::Open;
        self.failures = 0;
        self.reconnect_at = None;
        self.last_error = None;
        self.fencing_loaded = false;
        self.queue_loaded = false;
        for index in 0..3 {
            let argv = Arc::clone(&self.scripts[index]);
            self.write(argv, Time::from_micros(u64::MAX), Purpose::Script);
        }
        self.pump(now);
    }

    /// The connection closed, or could not be opened; `text` says how.
    pub fn handle_closed(&mut self, cause: LinkCause, text: &str, now: Time) {
        let now = self.observe(now);
        let was_open = self.state == State::Open;
        if self.state == State::Closed {
            return;
        }
        self.close(cause, text, now);
        if was_open {
            self.pump(now);
        } else {
            self.attempt_failed(now);
        }
    }

    /// A connection attempt failed (the link is closed now): what is queued fails with
    /// its cause, owed releases wait, and the next attempt waits its backoff.
    fn attempt_failed(&mut self, now: Time) {
        self.failures = self.failures.saturating_add(1);
        let shift = self.failures.saturating_sub(1).min(16);
        let backoff = micros_floor(RECONNECT_MIN)
            .saturating_mul(1u64 << shift)
            .min(micros_floor(RECONNECT_MAX));
        self.reconnect_at = Some(now.plus_micros(backoff));
        let text = self.last_error_text();
        let queued: Vec<Entry> = self.queue.drain(..).collect();
        for entry in queued {
            if entry.owed {
                self.queue.push_back(entry);
            } else {
                self.deliver_failure(entry, text.clone());
            }
        }
    }

    /// The reply to write `write`. A reply to a write of a connection that was closed
    /// since, or to an id never written, is ignored.
    pub fn handle_reply(&mut self, write: WriteId, reply: Reply, now: Time) {
        let now = self.observe(now);
        let Some(position) = self.in_flight.iter().position(|w| w.id == write) else {
            return;
        };
        let Some(done) = self.in_flight.remove(position) else {
            return;
        };
        if let Purpose::Command(entry) = done.purpose {
            let retry_as_eval = entry.command.kind() == CommandKind::Release
                && reply.is_noscript()
                && (entry.owed || now < entry.command.deadline());
            // The `EVAL` form (with the script's text) is built only when it is needed.
            match retry_as_eval.then(|| entry.command.to_eval()).flatten() {
                Some(eval) => self.queue.push_front(Entry {
                    command: eval,
                    ..entry
                }),
                None => self.outputs.push_back(LinkOutput::Deliver(Delivery {
                    tag: entry.tag,
                    request: entry.command.request_id(),
                    reply,
                })),
            }
        }
        self.pump(now);
    }

    /// Time has reached `now`: drops what is past its time, gives up a connection
    /// attempt past its timeout, closes a connection stalled too long, reconnects when
    /// due. Calling it early is harmless.
    pub fn handle_timeout(&mut self, now: Time) {
        let now = self.observe(now);
        self.owed.retain(|_, until| *until > now);
        if let State::Connecting { until } = self.state {
            if until <= now {
                self.outputs.push_back(LinkOutput::Close);
                let text = format!(
                    "no connection within {} ms; given up",
                    self.connect_timeout_us / 1000
                );
                self.close(LinkCause::Timeout, &text, now);
                self.attempt_failed(now);
            }
        }
        if self.state == State::Open {
            if let Some(since) = self.stalled_since() {
                if since.plus_micros(micros_floor(STALL_CLOSE)) <= now {
                    self.outputs.push_back(LinkOutput::Close);
                    self.close(
                        LinkCause::Timeout,
                        "no reply for 10 s past a deadline; connection closed",
                        now,
                    );
                }
            }
        }
        self.pump(now);
    }

    // ---- outputs ------------------------------------------------------------------

    /// The next output, or `None` when there is nothing to do until the next input.
    pub fn poll_output(&mut self) -> Option<LinkOutput> {
        self.outputs.pop_front()
    }

    /// When [`Link::handle_timeout`] is next due, if anything waits on time.
    pub fn poll_timeout(&self) -> Option<Time> {
        let mut next: Option<Time> = None;
        let mut consider = |at: Time| next = Some(next.map_or(at, |n| n.min(at)));
        if let State::Connecting { until } = self.state {
            consider(until);
        }
        if self.state == State::Open {
            // Stalled (the oldest deadline passed): when the connection is closed;
            // otherwise that deadline. One pass over the writes either way.
            if let Some(deadline) = self.oldest_command_deadline() {
                if deadline <= self.latest {
                    consider(deadline.plus_micros(micros_floor(STALL_CLOSE)));
                } else {
                    consider(deadline);
                }
            }
        }
        for entry in &self.queue {
            if !entry.owed {
                consider(entry.command.deadline());
            }
        }
        if let Some(at) = self.owed.values().min() {
            consider(*at);
        }
        if self.state == State::Closed && !self.queue.is_empty() {
            if let Some(at) = self.reconnect_at {
                consider(at);
            }
        }
        next
    }

    // ---- getters ------------------------------------------------------------------

    /// True while a written command is unanswered past its deadline.
    pub fn is_stalled(&self, now: Time) -> bool {
        self.stalled_since().is_some_and(|since| since <= now)
    }

    /// True while a connection is open.
    pub fn is_open(&self) -> bool {
        self.state == State::Open
    }

    /// Writes awaiting their replies (the three script loads included).
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Commands queued, not yet written.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// How many outputs [`Link::poll_output`] gives before `None`, until the next input:
    /// a driver can poll exactly that many.
    pub fn pending_outputs(&self) -> usize {
        self.outputs.len()
    }

    /// Tokens whose release this link still owes.
    pub fn owed(&self) -> usize {
        self.owed.len()
    }

    /// True when nothing is queued or awaiting a reply (safe to close the connection).
    pub fn is_idle(&self) -> bool {
        self.queue.is_empty() && self.in_flight.is_empty()
    }

    // ---- internals ----------------------------------------------------------------

    fn observe(&mut self, now: Time) -> Time {
        self.latest = self.latest.max(now);
        self.latest
    }

    fn last_error_text(&self) -> String {
        match &self.last_error {
            Some(text) => text.clone(),
            None => String::from("closed: no connection"),
        }
    }

    fn oldest_command_deadline(&self) -> Option<Time> {
        self.in_flight
            .iter()
            .filter(|w| matches!(w.purpose, Purpose::Command(_)))
            .map(|w| w.deadline)
            .min()
    }

    /// The earliest deadline among written, unanswered commands, if it has passed
    /// (relative to the latest time seen).
    fn stalled_since(&self) -> Option<Time> {
        self.oldest_command_deadline()
            .filter(|deadline| *deadline <= self.latest)
    }

    fn deliver_failure(&mut self, entry: Entry, text: String) {
        self.outputs.push_back(LinkOutput::Deliver(Delivery {
            tag: entry.tag,
            request: entry.command.request_id(),
            reply: Reply::ConnectionFailed(text),
        }));
    }

    fn write(&mut self, argv: Arc<Argv>, deadline: Time, purpose: Purpose) {
        let id = WriteId(self.next_write);
        self.next_write = self.next_write.saturating_add(1);
        self.outputs
            .push_back(LinkOutput::Write(Write { id, argv }));
        self.in_flight.push_back(InFlight {
            id,
            deadline,
            purpose,
        });
    }

    /// Counts the connection closed: writes awaiting replies fail, except releases,
    /// which go back to the front of the queue to be written on the next connection.
    fn close(&mut self, cause: LinkCause, text: &str, now: Time) {
        self.state = State::Closed;
        let text = format!("{}: {}", cause.code(), text);
        let mut requeue = Vec::new();
        for written in core::mem::take(&mut self.in_flight) {
            let Purpose::Command(entry) = written.purpose else {
                continue;
            };
            let resend = entry.command.kind() == CommandKind::Release
                && (entry.owed || now < entry.command.deadline());
            if resend {
                requeue.push(entry);
            } else {
                self.deliver_failure(entry, text.clone());
            }
        }
        for entry in requeue.into_iter().rev() {
            self.queue.push_front(entry);
        }
        self.last_error = Some(text);
    }

    /// Writes what may be written now; asks for a connection when needed.
    fn pump(&mut self, now: Time) {
        // Queued commands past their deadline are not written (owed releases are, and
        // releases waiting for their SET while it is queued). In place: this runs after
        // every input.
        self.queue
            .retain(|entry| entry.owed || entry.awaits_set || now < entry.command.deadline());
        if self.queue.iter().any(|e| e.awaits_set) {
            // A release whose SET was dropped unwritten is owed nothing.
            let sets: Vec<Vec<u8>> = self
                .queue
                .iter()
                .filter(|e| sets_key(e.command.kind()))
                .map(|e| e.command.token().to_vec())
                .collect();
            for entry in self.queue.iter_mut().filter(|e| e.awaits_set) {
                entry.awaits_set = sets.iter().any(|t| t.as_slice() == entry.command.token());
            }
            self.queue
                .retain(|entry| entry.owed || entry.awaits_set || now < entry.command.deadline());
        }
        match self.state {
            State::Connecting { .. } => {}
            State::Closed => {
                if !self.queue.is_empty() && self.reconnect_at.is_none_or(|at| at <= now) {
                    self.state = State::Connecting {
                        until: now.plus_micros(self.connect_timeout_us),
                    };
                    self.outputs.push_back(LinkOutput::Connect);
                }
            }
            State::Open => {
                while self.in_flight.len() < MAX_IN_FLIGHT {
                    // A stalled node still gets the owed releases at the queue's front
                    // (see the module documentation); nothing else until it answers.
                    if self.is_stalled(now) && !self.queue.front().is_some_and(|e| e.owed) {
                        break;
                    }
                    let Some(entry) = self.queue.pop_front() else {
                        break;
                    };
                    let kind = entry.command.kind();
                    if matches!(kind, CommandKind::FencedAcquire | CommandKind::WriteBack)
                        && !self.fencing_loaded
                    {
                        // Fenced locks' scripts, before this connection's first fenced
                        // command: a node that answers only after the decision would
                        // otherwise never get the EVAL that loads them.
                        self.fencing_loaded = true;
                        for index in 3..5 {
                            let argv = Arc::clone(&self.scripts[index]);
                            self.write(argv, Time::from_micros(u64::MAX), Purpose::Script);
                        }
                    }
                    if kind == CommandKind::QueuedAcquire && !self.queue_loaded {
                        // The same for waiting acquisitions' script.
                        self.queue_loaded = true;
                        let argv = Arc::clone(&self.scripts[5]);
                        self.write(argv, Time::from_micros(u64::MAX), Purpose::Script);
                    }
                    if sets_key(kind) {
                        // A release queued behind it becomes owed now; otherwise the
                        // token is remembered for a release to come.
                        let mut waited = false;
                        for queued in self
                            .queue
                            .iter_mut()
                            .filter(|e| e.awaits_set && e.command.token() == entry.command.token())
                        {
                            queued.awaits_set = false;
                            queued.owed = true;
                            waited = true;
                        }
                        if !waited {
                            self.remember_owed(&entry.command, now);
                        }
                    }
                    let argv = Arc::clone(entry.command.argv());
                    // An owed release written late gets a budget of its own, or the node
                    // would count as stalled the moment it was written.
                    let deadline = if entry.command.deadline() > now {
                        entry.command.deadline()
                    } else {
                        now.plus_micros(micros_floor(LATE_RELEASE_BUDGET))
                    };
                    self.write(argv, deadline, Purpose::Command(entry));
                }
            }
        }
    }

    fn remember_owed(&mut self, command: &Command, now: Time) {
        let ttl_us = command.ttl_ms().saturating_mul(1000);
        let until = now.plus_micros(ttl_us.saturating_add(ttl_us / 10));
        if self.owed.len() >= MAX_OWED && !self.owed.contains_key(command.token()) {
            // Forget the token that stops mattering first.
            if let Some(first) = self
                .owed
                .iter()
                .min_by_key(|(_, until)| **until)
                .map(|(token, _)| token.clone())
            {
                self.owed.remove(&first);
            }
        }
        self.owed.insert(command.token().to_vec(), until);
    }
}

/// Whether a command of this kind sets the lock's keys (so that its token's release is
/// owed once it is written).
fn sets_key(kind: CommandKind) -> bool {
    matches!(
        kind,
        CommandKind::Set
            | CommandKind::Acquire
            | CommandKind::FencedAcquire
            | CommandKind::QueuedAcquire
    )
}

impl fmt::Debug for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Link")
            .field("state", &self.state)
            .field("queued", &self.queue.len())
            .field("in_flight", &self.in_flight.len())
            .field("owed", &self.owed.len())
            .finish_non_exhaustive()
    }
}
