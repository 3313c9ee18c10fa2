//! The loop's native half: the core's node links and the operations they serve, behind
//! one handle, so that one JNI call takes one input (a start, a node's bytes or reply,
//! a connection event, the passing of time) through everything that follows from it.
//!
//! An input goes to its link or operation; then, natively, until nothing moves: each
//! touched operation is polled and its commands go to their links; each link's outputs
//! are taken (a delivery goes straight to its operation, which is then polled again);
//! due timeouts are handled. What the Java side must do comes back in one batch of
//! events written into its own reused arrays (no Java object is made per command or
//! per reply): connect, write (RESP bytes), close, an operation's outcome (numbers and
//! bytes), an operation ended without one. The header says when to call again
//! (`loopTimeout`) if nothing else happens first.
//!
//! Nothing is decided here: the operations and links are the core's; this module only
//! routes their outputs to each other, as `docs/bindings.md`'s loop does.
//!
//! # Events (`long[] records`, `byte[] bytes`)
//!
//! `records[0..4]`: the number of events, the longs used, the bytes used, the next
//! instant to call `loopTimeout` (-1: none). Then, from index 4, one record per event:
//! - `1, node`: open the node's connection;
//! - `2, node, write, length`: write the next `length` bytes (RESP) to the node;
//! - `3, node`: close the node's connection, or give up the attempt to open one (the
//!   link's connect timeout passed): nothing more is reported for it;
//! - `5, tag, count, ...count numbers`: the operation's outcome (see `outcome_record`),
//!   its token and node texts in the bytes;
//! - `6, tag`: the operation ended without an outcome (abandoned, or its acquired
//!   lock given back by `loopDecline` and released);
//! - `7, tag, count, ...count numbers`: one of the core's events (`Operation::poll_event`,
//!   see `event_record`), its node texts in the bytes; only while a listener is on
//!   (`loopListen`), so that a loop nobody listens to pays nothing for them;
//! - `8, tag`: the acquisition listens for its release notices from now on, until it
//!   ends (the core's `Operation::listens` turned true; once per operation).
//!
//! An acquisition's "acquired" outcome is kept with its operation until the Java side
//! says whether it reached a caller: `loopClaimed` (it did: forgotten) or `loopDecline`
//! (the caller had stopped waiting: the core's `Operation::decline`, whose releases go
//! out like any command, then `6, tag`).
//!
//! When the events do not fit, the call returns -1 with the sizes needed in
//! `records[1]` and `records[2]` (if `records` has its 4 header slots); they wait in
//! the handle until `loopEvents` copies them into larger arrays.

use std::collections::{HashMap, VecDeque};

use jni::objects::{JByteArray, JClass, JLongArray, JObjectArray, JString};
use jni::sys::{jboolean, jint, jlong};
use jni::JNIEnv;

use redlock_core::resp::Decoder;
use redlock_core::{
    AcquireOptions, ErrorClass, Event, KeepAlive, Lease, Link, LinkCause, LinkOutput, NodeResult,
    Operation, OperationKind, Outcome, Output, Redlock, Reply, Time, WriteId,
};

use crate::boundary::{guard, handle, into_handle, is_null, Failure, Result};
use crate::convert::{self, reply_from_parts, resources, usage_failure};
use crate::time;

const EVENT_CONNECT: i64 = 1;
const EVENT_WRITE: i64 = 2;
const EVENT_CLOSE: i64 = 3;
const EVENT_OUTCOME: i64 = 5;
const EVENT_ENDED: i64 = 6;
const EVENT_EVENT: i64 = 7;
const EVENT_LISTEN: i64 = 8;

const HEADER: usize = 4;

struct Running {
    operation: Operation,
    /// When `handle_timeout` is next due (the operation's last `Wait`).
    wait: Option<Time>,
    /// Keep the outcome for `loopKeepAliveOutcome` (an extension run by keep-alive).
    keep: bool,
    /// An inspection asked whether this lease holds the lock (`Inspected::is_held_by`).
    owner: Option<Lease>,
    /// `Operation::listens` was true once (the `8, tag` event went out).
    listening: bool,
}

/// One node's reading side, for drivers that hand in raw bytes (`loopFeed`).
struct Reader {
    decoder: Decoder,
    /// Writes sent on the open connection and not answered yet, oldest first (Redis
    /// answers in order on one connection).
    waiting: VecDeque<WriteId>,
}

/// The loop's native half (see the module documentation).
pub struct Engine {
    links: Vec<Link>,
    ops: HashMap<u64, Running>,
    /// Operations handed an input since they were last polled.
    touched: Vec<u64>,
    /// Outcomes kept for keep-alive, by tag.
    kept: HashMap<u64, Outcome>,
    /// Acquisitions whose "acquired" outcome went to Java, until it is claimed or
    /// declined (see the module documentation).
    handed: HashMap<u64, (Operation, Outcome)>,
    /// Per node, when the driver hands in raw bytes; empty for client-library drivers.
    readers: Vec<Reader>,
    records: Vec<i64>,
    bytes: Vec<u8>,
    count: i64,
    /// Outcomes hand their lease to Java as a handle (off only in this crate's benches).
    lease_handles: bool,
    /// The earliest instant any link wants its timeout handled, as of the last input.
    link_wake: Option<Time>,
    /// Per link, its `poll_timeout` as of the last input, and whether an input touched
    /// it since (only those are asked again).
    link_wakes: Vec<(Option<Time>, bool)>,
    /// The operations' events go to Java (a listener is registered).
    listen: bool,
}

impl Engine {
    /// `nodes` links; with `raw`, a decoder per node for the bytes drivers read ([`Engine::received`]).
    pub fn new(nodes: usize, raw: bool) -> Engine {
        let readers = if raw {
            (0..nodes)
                .map(|_| Reader {
                    decoder: Decoder::new(),
                    waiting: VecDeque::new(),
                })
                .collect()
        } else {
            Vec::new()
        };
        Engine {
            links: (0..nodes).map(|_| Link::new()).collect(),
            ops: HashMap::new(),
            touched: Vec::with_capacity(8),
            kept: HashMap::new(),
            handed: HashMap::new(),
            readers,
            // The header's 4 slots first: one array write per call.
            records: {
                let mut records = Vec::with_capacity(256);
                records.extend_from_slice(&[0; HEADER]);
                records
            },
            bytes: Vec::with_capacity(4096),
            count: 0,
            lease_handles: true,
            link_wake: None,
            link_wakes: vec![(None, false); nodes],
            listen: false,
        }
    }

    /// Outcome events carry no lease handle (0): for benchmarks without a JVM, where
    /// nothing would free it.
    pub fn without_lease_handles(mut self) -> Engine {
        self.lease_handles = false;
        self
    }

    /// Starts `operation` under `tag` and settles (for benchmarks of this crate without
    /// a JVM; the loop starts operations through JNI).
    pub fn start_operation(&mut self, tag: u64, operation: Operation, now: Time) -> bool {
        self.start(tag as jlong, operation, false, None).is_ok() && self.settle(now).is_ok()
    }

    /// Node `node`'s connection is open; settles.
    pub fn connected(&mut self, node: usize, now: Time) -> bool {
        self.dirty(node);
        match self.links.get_mut(node) {
            Some(link) => link.handle_connected(now),
            None => return false,
        }
        self.settle(now).is_ok()
    }

    /// Bytes read from node `node`; settles.
    pub fn received(&mut self, node: usize, bytes: &[u8], now: Time) -> bool {
        self.feed(node, bytes, now).is_ok() && self.settle(now).is_ok()
    }

    /// The acquisition `tag` handed its "acquired" outcome to a caller: nothing more can
    /// be given back for it. A tag with nothing waiting is ignored.
    pub fn claimed(&mut self, tag: u64) {
        self.handed.remove(&tag);
    }

    /// Gives the "acquired" outcome of the acquisition `tag` back to its operation
    /// (`Operation::decline`: its caller stopped waiting), which then releases the lock.
    /// Nothing when none is waiting under that tag (claimed already, or not an acquired
    /// lock: nothing to release).
    fn decline(&mut self, tag: u64, now: Time) -> Result<()> {
        let Some((mut operation, outcome)) = self.handed.remove(&tag) else {
            return Ok(());
        };
        operation.decline(outcome, now).map_err(usage_failure)?;
        self.ops.insert(
            tag,
            Running {
                operation,
                wait: None,
                keep: false,
                owner: None,
                listening: true,
            },
        );
        self.touch(tag);
        Ok(())
    }

    /// Whether the operations' events are written too (as when a Java listener is on).
    pub fn listen(&mut self, on: bool) {
        self.listen = on;
    }

    /// The events since they were last taken: their records (from the first event, without
    /// the header) and bytes; then forgets them.
    pub fn take_events(&mut self, into: impl FnOnce(&[i64], &[u8])) {
        into(&self.records[HEADER..], &self.bytes);
        self.records.truncate(HEADER);
        self.bytes.clear();
        self.count = 0;
    }

    fn feed(&mut self, index: usize, chunk: &[u8], now: Time) -> Result<()> {
        let reader = self.readers.get_mut(index).ok_or_else(|| {
            Failure::argument(
                "unknown_node",
                format!("no raw connection for node {index}"),
            )
        })?;
        reader.decoder.feed(chunk);
        loop {
            let reader = &mut self.readers[index];
            let reply = match reader.decoder.next_reply() {
                Ok(Some(reply)) => reply,
                Ok(None) => return Ok(()),
                Err(error) => return Err(convert::protocol_failure(error)),
            };
            let Some(write) = reader.waiting.pop_front() else {
                return Err(Failure::Throw {
                    class: crate::boundary::PROTOCOL,
                    code: "unexpected_reply",
                    message: String::from("the node sent a reply to no command"),
                });
            };
            self.dirty(index);
            self.links[index].handle_reply(write, reply, now);
        }
    }

    fn link(&mut self, node: jint) -> Result<&mut Link> {
        let index = usize::try_from(node)
            .ok()
            .filter(|index| *index < self.links.len())
            .ok_or_else(|| Failure::argument("unknown_node", format!("no node {node}")))?;
        self.dirty(index);
        Ok(&mut self.links[index])
    }

    /// An input reached link `node`: its timeout is asked again when the input settles.
    fn dirty(&mut self, node: usize) {
        if let Some(wake) = self.link_wakes.get_mut(node) {
            wake.1 = true;
        }
    }

    fn touch(&mut self, tag: u64) {
        if !self.touched.contains(&tag) {
            self.touched.push(tag);
        }
    }

    /// Polls one operation until it waits or ends; its commands go to their links.
    fn pump(&mut self, tag: u64, now: Time) -> Result<()> {
        let Some(running) = self.ops.get_mut(&tag) else {
            return Ok(());
        };
        loop {
            // Checked after every input, before its outputs go out (`Operation::listens`,
            // the core's decision): a waiter with a wait limit listens before its first
            // attempt is sent, a retrying one as its failed attempt's cleanup goes out.
            if !running.listening && running.operation.listens() {
                running.listening = true;
                self.records.extend_from_slice(&[EVENT_LISTEN, tag as i64]);
                self.count += 1;
            }
            let output = running.operation.poll_output();
            if self.listen {
                let class = match &output {
                    Some(Output::Outcome(outcome)) => outcome.error_class(),
                    _ => None,
                };
                while let Some(event) = running.operation.poll_event() {
                    event_record(&mut self.records, &mut self.bytes, tag, &event, class);
                    self.count += 1;
                }
            }
            match output {
                None => {
                    if running.operation.is_finished() {
                        self.ops.remove(&tag);
                        self.records.extend_from_slice(&[EVENT_ENDED, tag as i64]);
                        self.count += 1;
                    }
                    return Ok(());
                }
                Some(Output::Send(command)) => {
                    let node = command.node();
                    if let Some(wake) = self.link_wakes.get_mut(node) {
                        wake.1 = true;
                    }
                    if node >= self.links.len() {
                        return Err(Failure::argument(
                            "unknown_node",
                            "the command's node has no link",
                        ));
                    }
                    self.links[node].submit(tag, command, now);
                }
                Some(Output::Wait(until)) => {
                    running.wait = Some(until);
                    return Ok(());
                }
                Some(Output::Outcome(outcome)) => {
                    let keep = running.keep;
                    let held_by = match (&outcome, &running.owner) {
                        (Outcome::Inspected(inspected), Some(lease)) => {
                            Some(inspected.is_held_by(lease, now))
                        }
                        _ => None,
                    };
                    let at = outcome_record(
                        &mut self.records,
                        &mut self.bytes,
                        tag,
                        &outcome,
                        self.lease_handles,
                    );
                    if let Some(running) = self.ops.remove(&tag) {
                        if matches!(outcome, Outcome::Acquired(_)) {
                            self.handed.insert(tag, (running.operation, outcome));
                        } else if keep {
                            self.kept.insert(tag, outcome);
                        }
                    }
                    if let Some(held_by) = held_by {
                        self.records[at + 7] = i64::from(held_by);
                    }
                    self.count += 1;
                    return Ok(());
                }
                Some(_) => {
                    return Err(Failure::state(
                        "unsupported_output",
                        "the core produced an output this binding does not know",
                    ))
                }
            }
        }
    }

    /// Everything that follows from the inputs so far, until nothing moves.
    fn settle(&mut self, now: Time) -> Result<()> {
        let result = self.settle_links(now);
        // Links change only through inputs, each of which ends here.
        let mut next: Option<Time> = None;
        for (link, wake) in self.links.iter().zip(self.link_wakes.iter_mut()) {
            if wake.1 {
                *wake = (link.poll_timeout(), false);
            }
            if let Some(at) = wake.0 {
                next = Some(next.map_or(at, |n| n.min(at)));
            }
        }
        self.link_wake = next;
        result
    }

    fn settle_links(&mut self, now: Time) -> Result<()> {
        // A link whose timeout is due (a connection attempt past its connect timeout, a
        // stall, a reconnect) acts on it with this input.
        if self.link_wake.is_some_and(|at| at <= now) {
            for (link, wake) in self.links.iter_mut().zip(self.link_wakes.iter_mut()) {
                if wake.0.is_some_and(|at| at <= now) {
                    link.handle_timeout(now);
                    wake.1 = true;
                }
            }
        }
        // Each round either polls a touched operation or takes a link output; both are
        // finite after one input. The bound only guards a bug.
        for _ in 0..1_000_000 {
            if let Some(tag) = self.touched.pop() {
                self.pump(tag, now)?;
                continue;
            }
            let mut moved = false;
            for node in 0..self.links.len() {
                while let Some(output) = self.links[node].poll_output() {
                    moved = true;
                    self.link_output(node, output, now)?;
                }
            }
            if !moved && self.touched.is_empty() {
                return Ok(());
            }
        }
        Err(Failure::state(
            "unsupported_output",
            "the core's outputs did not end",
        ))
    }

    fn link_output(&mut self, node: usize, output: LinkOutput, now: Time) -> Result<()> {
        let node_number = node as i64;
        match output {
            LinkOutput::Connect => {
                self.records
                    .extend_from_slice(&[EVENT_CONNECT, node_number]);
            }
            LinkOutput::Close => {
                if let Some(reader) = self.readers.get_mut(node) {
                    reader.decoder = Decoder::new();
                    reader.waiting.clear();
                }
                self.records.extend_from_slice(&[EVENT_CLOSE, node_number]);
            }
            LinkOutput::Write(write) => {
                let start = self.bytes.len();
                write.encode_resp(&mut self.bytes);
                let length = (self.bytes.len() - start) as i64;
                if let Some(reader) = self.readers.get_mut(node) {
                    reader.waiting.push_back(write.id());
                }
                self.records.extend_from_slice(&[
                    EVENT_WRITE,
                    node_number,
                    write.id().0 as i64,
                    length,
                ]);
            }
            LinkOutput::Deliver(delivery) => {
                // A reply for an operation that already ended changes nothing.
                if let Some(running) = self.ops.get_mut(&delivery.tag) {
                    running
                        .operation
                        .handle_reply(delivery.request, delivery.reply, now)
                        .map_err(usage_failure)?;
                    self.touch(delivery.tag);
                }
                return Ok(());
            }
            _ => {
                return Err(Failure::state(
                    "unsupported_output",
                    "the core's link produced an output this binding does not know",
                ))
            }
        }
        self.count += 1;
        Ok(())
    }

    fn next_wake(&self) -> i64 {
        let mut next: Option<Time> = None;
        let mut consider = |at: Time| next = Some(next.map_or(at, |n: Time| n.min(at)));
        for running in self.ops.values() {
            if let Some(at) = running.wait {
                consider(at);
            }
        }
        if let Some(at) = self.link_wake {
            consider(at);
        }
        next.map_or(-1, convert::time_to_java)
    }

    fn start(
        &mut self,
        tag: jlong,
        operation: Operation,
        keep: bool,
        owner: Option<Lease>,
    ) -> Result<()> {
        let tag = tag_of(tag)?;
        if self.ops.contains_key(&tag) {
            return Err(Failure::argument(
                "invalid_argument",
                "an operation with this tag is running",
            ));
        }
        self.ops.insert(
            tag,
            Running {
                operation,
                wait: None,
                keep,
                owner,
                listening: false,
            },
        );
        self.touch(tag);
        Ok(())
    }
}

fn tag_of(tag: jlong) -> Result<u64> {
    u64::try_from(tag).map_err(|_| Failure::argument("invalid_argument", "a tag is not negative"))
}

/// The outcome as numbers: kind, reason (-1), attempts, valid_until (-1), validity (us),
/// retry_at (-1), released, extensions, lease handle (0 if none, the Java side owns it),
/// lease TTL (ms), error class (0 none), fencing token (-1 none), token length, nodes N,
/// 0; then per node its result code, cause and error text length (-1 for none). The
/// token and the texts follow one another in `bytes`. Inspections: the holder is the
/// token, `released` says whether there is one, `extensions` whether the lease the
/// inspection was asked for holds the lock (the core's `is_held_by`). Returns where the
/// numbers start.
fn outcome_record(
    records: &mut Vec<i64>,
    bytes: &mut Vec<u8>,
    tag: u64,
    outcome: &Outcome,
    lease_handle: bool,
) -> usize {
    let nodes = outcome.nodes();
    let count = 15 + 3 * nodes.len();
    records.extend_from_slice(&[EVENT_OUTCOME, tag as i64, count as i64]);
    let at = records.len();
    records.extend_from_slice(&[-1, -1, 0, -1, 0, -1, 0, 0, 0, 0, 0, -1, 0, 0, 0]);
    let fixed = convert::outcome_numbers(outcome);
    records[at..at + 12].copy_from_slice(&fixed.numbers);
    records[at + 13] = nodes.len() as i64;
    let token_start = bytes.len();
    bytes.extend_from_slice(fixed.token.as_bytes());
    records[at + 12] = (bytes.len() - token_start) as i64;
    push_nodes(records, bytes, nodes);
    // The lease handle is made last, once nothing else can fail, so it cannot leak.
    if let Some(lease) = fixed.lease.filter(|_| lease_handle) {
        records[at + 8] = into_handle(lease);
    }
    at
}

/// Numbers of an event (`EventKind::number`), its operation (1 acquire, 2 extend,
/// 3 release, 4 inspect, 0 none), at, elapsed (us), attempt, reason (-1 none), retry_at
/// (-1), node (-1), cause (0 none), error class of the outcome it reports (0 none), nodes
/// N; then per node its result code, cause and error text length (-1 for none), the texts
/// in `bytes`.
pub(crate) const EVENT_NUMBERS: usize = 11;

fn event_record(
    records: &mut Vec<i64>,
    bytes: &mut Vec<u8>,
    tag: u64,
    event: &Event,
    class: Option<ErrorClass>,
) {
    let count = EVENT_NUMBERS + 3 * event.nodes.len();
    let operation = match event.operation {
        Some(OperationKind::Acquire) => 1,
        Some(OperationKind::Extend) => 2,
        Some(OperationKind::Release) => 3,
        Some(OperationKind::Inspect) => 4,
        _ => 0,
    };
    let is_outcome = !matches!(
        event.kind,
        redlock_core::EventKind::Retry | redlock_core::EventKind::NodeFailed
    );
    records.extend_from_slice(&[
        EVENT_EVENT,
        tag as i64,
        count as i64,
        i64::from(event.kind.number()),
        operation,
        convert::time_to_java(event.at),
        convert::duration_micros(event.elapsed),
        i64::from(event.attempt),
        event.reason.map_or(-1, convert::reason_code),
        event.retry_at.map_or(-1, convert::time_to_java),
        event.node.map_or(-1, |n| n as i64),
        i64::from(event.cause.map_or(0, convert::cause_number)),
        class
            .filter(|_| is_outcome)
            .map_or(0, |c| i64::from(c.number())),
        event.nodes.len() as i64,
    ]);
    push_nodes(records, bytes, &event.nodes);
}

/// Writes the pending events into the caller's arrays, or returns -1 with the sizes
/// they need (the events stay for `loopEvents`).
fn flush(
    env: &mut JNIEnv<'_>,
    engine: &mut Engine,
    records: &JLongArray<'_>,
    bytes: &JByteArray<'_>,
    room: (jint, jint),
) -> Result<jint> {
    if is_null(records) || is_null(bytes) {
        return Err(Failure::argument(
            "invalid_argument",
            "the event arrays must not be null",
        ));
    }
    // The caller's array lengths; a wrong one makes the JVM's own bounds check throw.
    let record_room = usize::try_from(room.0).unwrap_or(0);
    let byte_room = usize::try_from(room.1).unwrap_or(0);
    if record_room < HEADER {
        return Err(Failure::argument(
            "invalid_argument",
            "the records need at least 4 slots",
        ));
    }
    let next = engine.next_wake();
    let used = engine.records.len() - HEADER;
    if engine.records.len() > record_room || engine.bytes.len() > byte_room {
        env.set_long_array_region(
            records,
            0,
            &[
                engine.count,
                engine.records.len() as i64,
                engine.bytes.len() as i64,
                next,
            ],
        )?;
        return Ok(-1);
    }
    engine.records[..HEADER].copy_from_slice(&[
        engine.count,
        used as i64,
        engine.bytes.len() as i64,
        next,
    ]);
    env.set_long_array_region(records, 0, &engine.records)?;
    if !engine.bytes.is_empty() {
        env.set_byte_array_region(bytes, 0, crate::boundary::as_signed(&engine.bytes))?;
    }
    let count = engine.count as jint;
    engine.records.truncate(HEADER);
    engine.bytes.clear();
    engine.count = 0;
    Ok(count)
}

/// Runs one input on the engine, settles, and writes the events.
fn input<'local>(
    env: &mut JNIEnv<'local>,
    engine: jlong,
    now: jlong,
    records: &JLongArray<'local>,
    bytes: &JByteArray<'local>,
    room: (jint, jint),
    body: impl FnOnce(&mut JNIEnv<'local>, &mut Engine, Time) -> Result<()>,
) -> Result<jint> {
    let engine: &mut Engine = handle(engine, "loop")?;
    let now = time(now)?;
    body(env, engine, now)?;
    engine.settle(now)?;
    flush(env, engine, records, bytes, room)
}

macro_rules! export_input {
    ($name:ident ( $env:ident, $engine:ident, $now:ident $(, $arg:ident : $ty:ty)* ) $body:block) => {
        #[no_mangle]
        pub extern "system" fn $name<'local>(
            mut env: JNIEnv<'local>,
            _class: JClass<'local>,
            engine_handle: jlong,
            $($arg: $ty,)*
            now_value: jlong,
            records: JLongArray<'local>,
            bytes: JByteArray<'local>,
            records_room: jint,
            bytes_room: jint,
        ) -> jint {
            guard(&mut env, -2, |env| {
                let room = (records_room, bytes_room);
                input(env, engine_handle, now_value, &records, &bytes, room, |$env, $engine, $now| {
                    let _ = &$env;
                    $body
                })
            })
        }
    };
}

export!(Java_io_github_redlockcore_internal_Native_loopNew(env, nodes: jint, raw: jboolean) -> jlong = 0, {
    let _ = env;
    let nodes = usize::try_from(nodes)
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| Failure::argument("invalid_argument", "at least one node"))?;
    Ok(into_handle(Engine::new(nodes, raw != 0)))
});

export!(Java_io_github_redlockcore_internal_Native_loopFree(env, engine: jlong) -> () = (), {
    let _ = env;
    crate::boundary::free::<Engine>(engine);
    Ok(())
});

// Copies the pending events (after an input returned -1) into larger arrays.
export!(Java_io_github_redlockcore_internal_Native_loopEvents(env, engine: jlong, records: JLongArray<'local>, bytes: JByteArray<'local>) -> jint = -2, {
    let engine: &mut Engine = handle(engine, "loop")?;
    let room = (env.get_array_length(&records)?, env.get_array_length(&bytes)?);
    flush(env, engine, &records, &bytes, room)
});

export_input!(Java_io_github_redlockcore_internal_Native_loopAcquire(
    env, engine, now,
    client: jlong,
    tag: jlong,
    resource_list: JObjectArray<'local>,
    ttl_ms: jlong,
    wait_us: jlong
) {
    let client: &mut Redlock = handle(client, "client")?;
    let names = resources(env, &resource_list)?;
    let mut options = AcquireOptions::new();
    if ttl_ms >= 0 {
        options = options.ttl(std::time::Duration::from_millis(ttl_ms as u64));
    }
    if wait_us >= 0 {
        options = options.wait(std::time::Duration::from_micros(wait_us as u64));
    }
    let operation = client.acquire_with(&names, &options, now).map_err(usage_failure)?;
    engine.start(tag, operation, false, None)
});

export_input!(Java_io_github_redlockcore_internal_Native_loopExtend(
    env, engine, now,
    client: jlong,
    lease: jlong,
    ttl_ms: jlong,
    tag: jlong,
    keep: jboolean
) {
    let client: &mut Redlock = handle(client, "client")?;
    let lease: &mut Lease = handle(lease, "lease")?;
    let operation = if ttl_ms >= 0 {
        client.extend_for(lease, std::time::Duration::from_millis(ttl_ms as u64), now)
    } else {
        client.extend(lease, now)
    };
    engine.start(tag, operation.map_err(usage_failure)?, keep != 0, None)
});

export_input!(Java_io_github_redlockcore_internal_Native_loopRelease(
    env, engine, now,
    client: jlong,
    lease: jlong,
    tag: jlong
) {
    let client: &mut Redlock = handle(client, "client")?;
    let lease: &mut Lease = handle(lease, "lease")?;
    let operation = client.release(lease, now);
    engine.start(tag, operation, false, None)
});

// Starts an inspection of `resources` (who holds the lock); with a lease handle (not 0),
// its outcome also says whether that lease holds the lock (the core's `is_held_by`).
export_input!(Java_io_github_redlockcore_internal_Native_loopInspect(
    env, engine, now,
    client: jlong,
    tag: jlong,
    resource_list: JObjectArray<'local>,
    lease: jlong
) {
    let client: &mut Redlock = handle(client, "client")?;
    let names = resources(env, &resource_list)?;
    let owner = if lease == 0 {
        None
    } else {
        let lease: &mut Lease = handle(lease, "lease")?;
        Some(lease.clone())
    };
    let operation = client.inspect(&names, now).map_err(usage_failure)?;
    engine.start(tag, operation, false, owner)
});

// Whether the operations' events come to Java (`7` records): on while a listener is set.
export!(Java_io_github_redlockcore_internal_Native_loopListen(env, engine: jlong, on: jboolean) -> () = (), {
    let _ = env;
    let engine: &mut Engine = handle(engine, "loop")?;
    engine.listen(on != 0);
    Ok(())
});

// Cancels a running operation: the core's abandon, what it emits to the links, and the
// operation forgotten (an `ended` event). Nothing for an unknown tag.
export_input!(Java_io_github_redlockcore_internal_Native_loopAbandon(env, engine, now, tag: jlong) {
    let tag = tag_of(tag)?;
    if let Some(running) = engine.ops.get_mut(&tag) {
        running.operation.abandon(now);
        engine.touch(tag);
    }
    Ok(())
});

// The acquisition `tag` handed its "acquired" outcome to a caller: its operation is
// forgotten (`Engine::claimed`).
export!(Java_io_github_redlockcore_internal_Native_loopClaimed(env, engine: jlong, tag: jlong) -> () = (), {
    let _ = env;
    let engine: &mut Engine = handle(engine, "loop")?;
    engine.claimed(tag_of(tag)?);
    Ok(())
});

// The acquisition `tag`'s "acquired" outcome reached no caller (its future was cancelled
// as it completed): the core's `decline`, whose releases go to the links, then the
// operation ends (an `ended` event). Nothing for a tag with no acquired lock waiting.
export_input!(Java_io_github_redlockcore_internal_Native_loopDecline(env, engine, now, tag: jlong) {
    engine.decline(tag_of(tag)?, now)
});

// A release notice from `node` for the operation `tag`, with the message it carried (the
// pub/sub payload: the id of the waiter first in the node's queue, or empty; null counts
// as empty). Nothing for an unknown tag: it may have ended.
export_input!(Java_io_github_redlockcore_internal_Native_loopNotice(
    env, engine, now,
    tag: jlong,
    node: jint,
    message: JByteArray<'local>
) {
    let tag = tag_of(tag)?;
    let node = usize::try_from(node)
        .map_err(|_| Failure::argument("unknown_node", "a node index is not negative"))?;
    let message = if is_null(&message) { Vec::new() } else { env.convert_byte_array(&message)? };
    if let Some(running) = engine.ops.get_mut(&tag) {
        running
            .operation
            .handle_notice_message(node, &message, now)
            .map_err(usage_failure)?;
        engine.touch(tag);
    }
    Ok(())
});

// Node `node` confirmed the subscription to one of the operation `tag`'s notice channels
// (docs/bindings.md, rule 13): the core decides whether a release may have gone unheard.
// Nothing for an unknown tag: it may have ended.
export_input!(Java_io_github_redlockcore_internal_Native_loopSubscribed(
    env, engine, now,
    tag: jlong,
    node: jint
) {
    let tag = tag_of(tag)?;
    let node = usize::try_from(node)
        .map_err(|_| Failure::argument("unknown_node", "a node index is not negative"))?;
    if let Some(running) = engine.ops.get_mut(&tag) {
        running
            .operation
            .handle_subscribed(node, now)
            .map_err(usage_failure)?;
        engine.touch(tag);
    }
    Ok(())
});

// Time has reached `now`: operations and links that are due handle their timeouts.
export_input!(Java_io_github_redlockcore_internal_Native_loopTimeout(env, engine, now) {
    let due: Vec<u64> = engine
        .ops
        .iter()
        .filter(|(_, r)| r.wait.is_some_and(|at| at <= now))
        .map(|(tag, _)| *tag)
        .collect();
    for tag in due {
        if let Some(running) = engine.ops.get_mut(&tag) {
            running.wait = None;
            running.operation.handle_timeout(now);
            engine.touch(tag);
        }
    }
    Ok(())
});

export_input!(Java_io_github_redlockcore_internal_Native_loopConnected(env, engine, now, node: jint) {
    if let Some(reader) = usize::try_from(node).ok().and_then(|n| engine.readers.get_mut(n)) {
        reader.decoder = Decoder::new();
        reader.waiting.clear();
    }
    engine.link(node)?.handle_connected(now);
    Ok(())
});

// Cause codes as `CloseCause`'s ordinals: refused, auth, tls, timeout, anything else.
fn cause(code: jint) -> LinkCause {
    match code {
        0 => LinkCause::Refused,
        1 => LinkCause::Auth,
        2 => LinkCause::Tls,
        3 => LinkCause::Timeout,
        _ => LinkCause::Closed,
    }
}

export_input!(Java_io_github_redlockcore_internal_Native_loopClosed(
    env, engine, now,
    node: jint,
    cause_code: jint,
    text: JString<'local>
) {
    let text: String = if is_null(&text) { String::new() } else { env.get_string(&text)?.into() };
    if let Some(reader) = usize::try_from(node).ok().and_then(|n| engine.readers.get_mut(n)) {
        reader.decoder = Decoder::new();
        reader.waiting.clear();
    }
    engine.link(node)?.handle_closed(cause(cause_code), &text, now);
    Ok(())
});

// A reply from a client library, by its parts (arrays come as RESP: `loopReplyResp`).
export_input!(Java_io_github_redlockcore_internal_Native_loopReply(
    env, engine, now,
    node: jint,
    write: jlong,
    kind: jint,
    integer: jlong,
    data: JByteArray<'local>
) {
    let data = if is_null(&data) { Vec::new() } else { env.convert_byte_array(&data)? };
    let reply = reply_from_parts(kind, integer, data)?;
    engine.link(node)?.handle_reply(WriteId(write as u64), reply, now);
    Ok(())
});

export_input!(Java_io_github_redlockcore_internal_Native_loopReplyResp(
    env, engine, now,
    node: jint,
    write: jlong,
    resp: JByteArray<'local>
) {
    let reply: Reply = convert::one_reply(env, &resp)?;
    engine.link(node)?.handle_reply(WriteId(write as u64), reply, now);
    Ok(())
});

// Bytes read from a node's connection (drivers that own a socket): decoded by the core's
// decoder, each reply answering the oldest write still waiting on that connection. Bytes
// that are not RESP, or a reply to no write, throw `RedlockProtocolException`: the
// driver then closes the connection and reports it closed.
export_input!(Java_io_github_redlockcore_internal_Native_loopFeed(
    env, engine, now,
    node: jint,
    data: JByteArray<'local>,
    offset: jint,
    length: jint
) {
    let index = usize::try_from(node)
        .map_err(|_| Failure::argument("unknown_node", "a node index is not negative"))?;
    if is_null(&data) || offset < 0 || length < 0 {
        return Err(Failure::argument("invalid_argument", "no bytes in that range"));
    }
    // The JVM checks the range against the array (and throws if it does not fit).
    let mut chunk = vec![0u8; length as usize];
    env.get_byte_array_region(&data, offset, crate::boundary::as_signed_mut(&mut chunk))?;
    engine.feed(index, &chunk, now)
});

// Hands the outcome kept for an extension run by keep-alive to the core's keep-alive.
export!(Java_io_github_redlockcore_internal_Native_loopKeepAliveOutcome(env, engine: jlong, tag: jlong, keep_alive: jlong, now: jlong) -> () = (), {
    let _ = env;
    let engine: &mut Engine = handle(engine, "loop")?;
    let outcome = engine
        .kept
        .remove(&tag_of(tag)?)
        .ok_or_else(|| Failure::state("no_outcome", "no outcome was kept for this operation"))?;
    let keep_alive: &mut KeepAlive = handle(keep_alive, "keep-alive")?;
    keep_alive.handle_outcome(&outcome, time(now)?);
    Ok(())
});

// Drops an outcome kept for keep-alive that will not be handed over.
export!(Java_io_github_redlockcore_internal_Native_loopForget(env, engine: jlong, tag: jlong) -> () = (), {
    let _ = env;
    let engine: &mut Engine = handle(engine, "loop")?;
    engine.kept.remove(&tag_of(tag)?);
    Ok(())
});

// Running operations (diagnostics and the close drain).
export!(Java_io_github_redlockcore_internal_Native_loopRunning(env, engine: jlong) -> jint = -1, {
    let _ = env;
    let engine: &mut Engine = handle(engine, "loop")?;
    Ok(engine.ops.len() as jint)
});

// How long node `node`'s link lets a connection attempt take (`timeout_ms`: the user's
// client's connect timeout, else the core's default, which a new link has) before it gives
// the attempt up: a `3, node` close event, the attempt counted failed with `timeout`. 0
// counts as 1 ms (the core's least); an attempt already under way keeps its limit.
export!(Java_io_github_redlockcore_internal_Native_loopSetConnectTimeout(env, engine: jlong, node: jint, timeout_ms: jlong) -> () = (), {
    let _ = env;
    let engine: &mut Engine = handle(engine, "loop")?;
    let timeout_ms = u64::try_from(timeout_ms).map_err(|_| {
        Failure::argument("invalid_argument", "the connect timeout must not be negative")
    })?;
    engine
        .link(node)?
        .set_connect_timeout(std::time::Duration::from_millis(timeout_ms));
    Ok(())
});

// Node `node`'s link's connect timeout, in whole milliseconds.
export!(Java_io_github_redlockcore_internal_Native_loopConnectTimeoutMs(env, engine: jlong, node: jint) -> jlong = -1, {
    let _ = env;
    let engine: &mut Engine = handle(engine, "loop")?;
    let millis = engine.link(node)?.connect_timeout().as_millis();
    Ok(jlong::try_from(millis).unwrap_or(jlong::MAX))
});

// One node's link: in flight, queued, owed, idle (0/1), stalled at `now` (0/1), open (0/1).
export!(Java_io_github_redlockcore_internal_Native_loopLinkInfo(env, engine: jlong, node: jint, now: jlong) -> jni::sys::jlongArray = std::ptr::null_mut(), {
    let engine: &mut Engine = handle(engine, "loop")?;
    let now = time(now)?;
    let link = engine.link(node)?;
    let values = [
        link.in_flight() as jlong,
        link.queued() as jlong,
        link.owed() as jlong,
        jlong::from(link.is_idle()),
        jlong::from(link.is_stalled(now)),
        jlong::from(link.is_open()),
    ];
    let array = env.new_long_array(values.len() as i32)?;
    env.set_long_array_region(&array, 0, &values)?;
    Ok(array.into_raw())
});

/// Per-node results as the Java side reads them: three numbers per node (its code, its
/// cause, the length of its error text in `bytes`, or -1 without one).
fn push_nodes(records: &mut Vec<i64>, bytes: &mut Vec<u8>, nodes: &[NodeResult]) {
    for node in nodes {
        let text = match node {
            NodeResult::Error(text) => {
                bytes.extend_from_slice(text.as_bytes());
                text.len() as i64
            }
            _ => -1,
        };
        records.extend_from_slice(&[
            i64::from(convert::node_code(node)),
            i64::from(node.cause().map_or(0, convert::cause_number)),
            text,
        ]);
    }
}
