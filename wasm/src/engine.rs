//! `Engine`: a driver's links and operations in one object, for a driver that crosses the
//! boundary as little as it can (the Node.js package's).
//!
//! `Link` and `Operation` hand every output to JavaScript as an object, and JavaScript
//! hands each reply back to the operation it belongs to: several crossings and objects
//! per reply. Here the links and the operations live on this side: a reply goes from its
//! link to its operation, and the operation's commands to their links, without leaving.
//! What crosses is what only the driver can do (write, connect, close, wake up at a time)
//! and each operation's end, as numbers. Every decision is still the core's: this file
//! only routes the core's outputs, as the one output rule says (docs/bindings.md).

use std::collections::VecDeque;

use redlock_core::{Delivery, LinkCause, LinkOutput, OperationKind, Outcome, Output, Reply};
use redlock_core::{Time, WriteId};
use serde::Deserialize;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::client::{Lease, Redlock};
use crate::convert::{
    as_bulk, link_cause, node_index, options_from_js, reply_from_js, time, time_to_js,
};
use crate::error::{self, invalid_argument};
use crate::operation::{event_to_js, outcome_to_js};
use crate::reader::Reader;
use crate::strings;
use crate::types::{AcquireOptionsJs, EventJs, ReplyJs, ResourcesJs};

/// What `poll()` returns, in its low three bits; the rest (`code >> 3`, or
/// `Math.floor(code / 8)`) is the node for the first three, the operation's tag for the
/// others.
const WRITE: f64 = 1.0;
const CONNECT: f64 = 2.0;
const CLOSE: f64 = 3.0;
const DONE: f64 = 4.0;
const FAILED: f64 = 5.0;
const LISTEN: f64 = 6.0;
/// A write whose arguments are those of the write before it (the N writes of a round):
/// the driver writes the array `writeArgs()` gave last.
const WRITE_SAME: f64 = 7.0;

/// In what an input returns: the next wake-up became sooner than `nextWake` last said.
const WAKE_EARLIER: u32 = 1 << 31;
/// In what an input returns: the count of actions waiting.
const COUNT_MASK: u32 = WAKE_EARLIER - 1;

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NodeOptions {
    resp: Option<bool>,
    connect_timeout_ms: Option<f64>,
}

/// A write's command, as the driver reads it.
enum Payload {
    /// For a client library: the arguments, made into a JS array when read.
    Args(redlock_core::Write),
    /// For a socket of the driver's own: the RESP bytes.
    Bytes(Vec<u8>),
}

enum Action {
    Write(u32, WriteId, Payload),
    Connect(u32),
    Close(u32),
    Done(u64),
    Failed(u64),
    Listen(u64),
}

struct Node {
    link: redlock_core::Link,
    resp: bool,
    /// RESP mode: the replies of the current connection.
    reader: Reader,
    /// The link's `poll_timeout` after its last input (every input ends with `pump`).
    wake: Option<Time>,
}

impl Node {
    /// The connection is gone: its decoder and the writes it awaited with it.
    fn closed(&mut self) {
        self.reader.close();
    }

    /// Moves the link's outputs on: deliveries to `deliveries`, the rest to `actions`.
    fn pump(
        &mut self,
        index: u32,
        actions: &mut VecDeque<Action>,
        deliveries: &mut VecDeque<Delivery>,
    ) {
        while let Some(output) = self.link.poll_output() {
            match output {
                LinkOutput::Deliver(delivery) => deliveries.push_back(delivery),
                LinkOutput::Write(write) => {
                    let id = write.id();
                    let payload = if self.resp {
                        self.reader.wrote(id);
                        let mut bytes = Vec::new();
                        write.encode_resp(&mut bytes);
                        Payload::Bytes(bytes)
                    } else {
                        Payload::Args(write)
                    };
                    actions.push_back(Action::Write(index, id, payload));
                }
                LinkOutput::Connect => actions.push_back(Action::Connect(index)),
                // A kind of output this shell does not know yet: the connection can no
                // longer be trusted to follow the link, so it goes.
                _ => {
                    self.closed();
                    actions.push_back(Action::Close(index));
                }
            }
        }
        self.wake = self.link.poll_timeout();
    }
}

/// An operation under way, under its tag.
struct Task {
    op: redlock_core::Operation,
    /// Status replies count as the bulk strings they were (an inspection's `GET`s, from
    /// a client library that gives both as strings).
    bulk: bool,
    /// The end of its wait, while it waits.
    until: Option<Time>,
    /// Whether its `listen` action was given.
    listening: bool,
    outcome: Option<Outcome>,
    error: Option<JsValue>,
}

/// The operations under way by tag, sorted (tags only grow, so a new one goes last): a
/// map that keeps its memory from one operation to the next. A `BTreeMap` allocated a
/// node and freed it each time it went from empty to one entry and back, that is, on
/// every lock call of a client that locks one thing at a time.
#[derive(Default)]
struct Tasks(Vec<(u64, Task)>);

impl Tasks {
    fn position(&self, tag: u64) -> Result<usize, usize> {
        self.0.binary_search_by_key(&tag, |(t, _)| *t)
    }

    fn insert(&mut self, tag: u64, task: Task) {
        match self.position(tag) {
            Ok(at) => self.0[at].1 = task,
            Err(at) => self.0.insert(at, (tag, task)),
        }
    }

    fn get(&self, tag: &u64) -> Option<&Task> {
        self.position(*tag).ok().map(|at| &self.0[at].1)
    }

    fn get_mut(&mut self, tag: &u64) -> Option<&mut Task> {
        match self.position(*tag) {
            Ok(at) => Some(&mut self.0[at].1),
            Err(_) => None,
        }
    }

    fn remove(&mut self, tag: &u64) -> Option<Task> {
        self.position(*tag).ok().map(|at| self.0.remove(at).1)
    }
}

/// The operations' waits as `(until, tag)`, sorted, soonest first: a set that keeps its
/// memory (see `Tasks`).
#[derive(Default)]
struct Waits(Vec<(Time, u64)>);

impl Waits {
    fn insert(&mut self, wait: (Time, u64)) {
        if let Err(at) = self.0.binary_search(&wait) {
            self.0.insert(at, wait);
        }
    }

    fn remove(&mut self, wait: &(Time, u64)) {
        if let Ok(at) = self.0.binary_search(wait) {
            self.0.remove(at);
        }
    }

    fn first(&self) -> Option<&(Time, u64)> {
        self.0.first()
    }

    fn iter(&self) -> impl Iterator<Item = &(Time, u64)> {
        self.0.iter()
    }
}

/// The links of N nodes and the operations that use them, for one driver.
///
/// The loop: start operations with `acquire`, `extend`, `release` or `inspect` (each
/// returns the operation's tag); hand in every event of the nodes' connections
/// (`connected`, `closed`, `replyOk` / `replyInteger` / `reply`, `data`), of time
/// (`timeout`) and of notices (`notice`, `subscribed`); abandon an operation with
/// `abandon`. Each returns how many actions wait (`result & 0x7fffffff`), with bit 31
/// set when the next wake-up became sooner than `nextWake` last said. After each, call
/// `poll()` until it returns 0, doing what each code says (`code % 8`, with
/// `x = Math.floor(code / 8)`):
///
/// - 1, write: write node `x`'s next command on its connection now, in order:
///   `writeArgs()` (a client library; never change the array) or `writeBytes()` (a link
///   made with `resp`), and hand its reply to `replyOk` / `replyInteger` / `reply` under
///   `writeId` (or its bytes to `data`);
/// - 7, write the same: as 1, with the arguments of the write before (the N writes of a
///   round share them): the array `writeArgs()` gave last;
/// - 2, connect: open node `x`'s connection, then call `connected` (or `closed`);
/// - 3, close: close node `x`'s connection, or give up the attempt to open one, and
///   report nothing more for it;
/// - 4, done: operation `x` has its outcome: read it with `outcome(x)` (the operation is
///   forgotten at the next input);
/// - 5, failed: operation `x` cannot go on: `error(x)` says why (the same);
/// - 6, listen: operation `x` listens for release notices from now until it ends.
///
/// Then, after starting an operation, after `timeout`, and after an input that set bit
/// 31, read `nextWake` and call `timeout` then (or sooner: early is harmless; a wake-up
/// that moved later is found when the earlier one comes). Nothing here throws
/// for a value a node's client gave: a reply the core refuses closes that connection.
#[wasm_bindgen]
pub struct Engine {
    nodes: Vec<Node>,
    tasks: Tasks,
    /// The tasks' waits, soonest first.
    waits: Waits,
    next_tag: u64,
    actions: VecDeque<Action>,
    deliveries: VecDeque<Delivery>,
    /// The write `poll()` returned last, for `writeId`, `writeArgs` and `writeBytes`.
    write: Option<(WriteId, Payload)>,
    /// Operations whose end was read (`outcome`, `error`): forgotten at the next input.
    ended: Vec<u64>,
    /// The value `nextWake` gave last.
    reported_wake: Option<Time>,
    /// Whether operations started from now on make events (`recordEvents`).
    record_events: bool,
}

/// The message of an error this shell made (a JS `Error`), for a connection's close.
fn message_of(error: &JsValue) -> String {
    error.dyn_ref::<js_sys::Error>().map_or_else(
        || String::from("a value the core refused"),
        |e| e.message().into(),
    )
}

fn write_id(id: f64) -> Result<WriteId, JsValue> {
    if id.is_finite() && id >= 1.0 && id.fract() == 0.0 {
        Ok(WriteId(id as u64))
    } else {
        Err(invalid_argument("a write id must be a whole number from 1"))
    }
}

fn tag_of(tag: f64) -> u64 {
    if tag.is_finite() && tag >= 1.0 && tag.fract() == 0.0 {
        tag as u64
    } else {
        // No task has it: 0 is never a task's tag.
        0
    }
}

impl Engine {
    fn node(&mut self, node: f64) -> Result<(usize, &mut Node), JsValue> {
        let index = node_index(node)?;
        match self.nodes.get_mut(index) {
            Some(n) => Ok((index, n)),
            None => Err(error::error(
                "unknown_node",
                &format!("node {index} is not one of this engine's"),
            )),
        }
    }

    /// Forgets the operations whose end was read (every input starts with this: their
    /// memory is freed once the driver's caller had its outcome, off its path).
    fn sweep(&mut self) {
        for tag in self.ended.drain(..) {
            if let Some(mut task) = self.tasks.remove(&tag) {
                if let Some(until) = task.until.take() {
                    self.waits.remove(&(until, tag));
                }
            }
        }
    }

    /// A new task for `op`, run until it waits or ends.
    fn start(&mut self, mut op: redlock_core::Operation, bulk: bool, now: Time) -> f64 {
        self.sweep();
        op.record_events(self.record_events);
        let tag = self.next_tag;
        self.next_tag += 1;
        self.tasks.insert(
            tag,
            Task {
                op,
                bulk,
                until: None,
                listening: false,
                outcome: None,
                error: None,
            },
        );
        self.step(tag, now);
        self.settle(now);
        tag as f64
    }

    /// The one output rule for task `tag`, after an input: its commands to their links,
    /// until a wait or its outcome.
    fn step(&mut self, tag: u64, now: Time) {
        let Engine {
            nodes,
            tasks,
            waits,
            actions,
            deliveries,
            ..
        } = self;
        let Some(task) = tasks.get_mut(&tag) else {
            return;
        };
        if task.error.is_some() {
            return;
        }
        // Before its commands go out: the core says when an acquisition listens.
        if !task.listening && task.op.listens() {
            task.listening = true;
            actions.push_back(Action::Listen(tag));
        }
        loop {
            match task.op.poll_output() {
                None => return,
                Some(Output::Send(command)) => {
                    let index = command.node();
                    let Some(node) = nodes.get_mut(index) else {
                        if let Some(previous) = task.until.take() {
                            waits.remove(&(previous, tag));
                        }
                        task.error = Some(invalid_argument(&format!(
                            "the operation sends to node {index}, and this engine has {} nodes: give the Redlock's configuration as many nodes",
                            nodes.len()
                        )));
                        actions.push_back(Action::Failed(tag));
                        return;
                    };
                    node.link.submit(tag, command, now);
                    // An index below `nodes.len()`, which came from a Vec of JS values.
                    node.pump(index as u32, actions, deliveries);
                }
                Some(Output::Wait(until)) => {
                    // Most replies leave the wait as it was.
                    if task.until != Some(until) {
                        if let Some(previous) = task.until.replace(until) {
                            waits.remove(&(previous, tag));
                        }
                        waits.insert((until, tag));
                    }
                    return;
                }
                Some(Output::Outcome(outcome)) => {
                    if let Some(previous) = task.until.take() {
                        waits.remove(&(previous, tag));
                    }
                    task.outcome = Some(outcome);
                    actions.push_back(Action::Done(tag));
                    return;
                }
                Some(_) => {
                    if let Some(previous) = task.until.take() {
                        waits.remove(&(previous, tag));
                    }
                    task.error = Some(error::error("unknown_output", "unknown output kind"));
                    actions.push_back(Action::Failed(tag));
                    return;
                }
            }
        }
    }

    /// Hands the links' deliveries to their tasks until none is left (a task's next
    /// command may be answered at once: a stalled node's).
    fn settle(&mut self, now: Time) {
        while let Some(delivery) = self.deliveries.pop_front() {
            let tag = delivery.tag;
            let Some(task) = self.tasks.get_mut(&tag) else {
                // Abandoned (tag 0) or forgotten: its late replies change nothing.
                continue;
            };
            if task.op.is_finished() || task.error.is_some() {
                continue;
            }
            let reply = if task.bulk {
                as_bulk(delivery.reply)
            } else {
                delivery.reply
            };
            match task.op.handle_reply(delivery.request, reply, now) {
                Ok(()) => self.step(tag, now),
                Err(e) => {
                    if let Some(until) = task.until.take() {
                        self.waits.remove(&(until, tag));
                    }
                    task.error = Some(error::usage(e));
                    self.actions.push_back(Action::Failed(tag));
                }
            }
        }
    }

    /// After an input to node `index`: its outputs, then the deliveries.
    fn after(&mut self, index: usize, now: Time) -> u32 {
        // `index` came from `self.node`, below `nodes.len()`.
        if let Some(node) = self.nodes.get_mut(index) {
            node.pump(index as u32, &mut self.actions, &mut self.deliveries);
        }
        self.settle(now);
        self.pending()
    }

    /// What an input returns: how many actions wait (below 2^31), plus `WAKE_EARLIER`
    /// when the next wake-up is now sooner than the last `nextWake` read (or there was
    /// none): only then does the driver need to read it again.
    fn pending(&self) -> u32 {
        let count = u32::try_from(self.actions.len())
            .unwrap_or(u32::MAX)
            .min(COUNT_MASK);
        let earlier = match (self.wake(), self.reported_wake) {
            (Some(wake), Some(reported)) => wake < reported,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if earlier {
            count | WAKE_EARLIER
        } else {
            count
        }
    }

    /// The soonest of the links' wake-ups and the operations' waits.
    fn wake(&self) -> Option<Time> {
        let links = self.nodes.iter().filter_map(|node| node.wake).min();
        let tasks = self.waits.first().map(|(until, _)| *until);
        match (links, tasks) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// A value the core refused from node `index`'s client: the connection can no
    /// longer be trusted, so the link counts it closed and the driver closes it.
    fn refuse(&mut self, index: usize, why: &JsValue, now: Time) -> u32 {
        if let Some(node) = self.nodes.get_mut(index) {
            node.closed();
            node.link
                .handle_closed(LinkCause::Closed, &message_of(why), now);
            self.actions.push_back(Action::Close(index as u32));
        }
        self.after(index, now)
    }

    /// One reply from node `node`'s client.
    fn take_reply(
        &mut self,
        node: f64,
        id: f64,
        reply: Result<Reply, JsValue>,
        now_us: f64,
    ) -> Result<u32, JsValue> {
        self.sweep();
        let now = time(now_us, "nowUs")?;
        let (index, _) = self.node(node)?;
        let checked = write_id(id).and_then(|id| reply.map(|reply| (id, reply)));
        match checked {
            Ok((id, reply)) => {
                self.nodes[index].link.handle_reply(id, reply, now);
                Ok(self.after(index, now))
            }
            Err(why) => Ok(self.refuse(index, &why, now)),
        }
    }

    /// Task `tag` cannot go on: `why`.
    fn fail(&mut self, tag: u64, why: JsValue) {
        if let Some(task) = self.tasks.get_mut(&tag) {
            if task.op.is_finished() || task.error.is_some() {
                return;
            }
            if let Some(until) = task.until.take() {
                self.waits.remove(&(until, tag));
            }
            task.error = Some(why);
            self.actions.push_back(Action::Failed(tag));
        }
    }

    /// Hands operation `tag` an input (`input`): then its outputs, or its failure when
    /// the core refused the input. A tag that ended changes nothing.
    fn input_to(
        &mut self,
        tag: f64,
        now: Time,
        input: impl FnOnce(&mut redlock_core::Operation) -> Result<(), redlock_core::UsageError>,
    ) -> u32 {
        let tag = tag_of(tag);
        if let Some(task) = self.tasks.get_mut(&tag) {
            match input(&mut task.op) {
                Ok(()) => self.step(tag, now),
                Err(e) => self.fail(tag, error::usage(e)),
            }
            self.settle(now);
        }
        self.pending()
    }

    fn task(&self, tag: f64) -> Result<&Task, JsValue> {
        self.tasks.get(&tag_of(tag)).ok_or_else(|| {
            invalid_argument("no operation has this tag (it ended and was forgotten)")
        })
    }
}

#[wasm_bindgen]
impl Engine {
    /// An engine for N nodes: `nodes` has one entry per node, in the configuration's
    /// order: `{ resp: true }` for a socket of the driver's own (writes come as RESP bytes
    /// and the bytes received go to `data`), and `connectTimeoutMs` as `Link`'s.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(
            unchecked_param_type = "Array<{ resp?: boolean, connectTimeoutMs?: number }>"
        )]
        nodes: js_sys::Array,
    ) -> Result<Engine, JsValue> {
        let mut links = Vec::new();
        for (index, value) in nodes.iter().enumerate() {
            let options: NodeOptions = if value.is_undefined() || value.is_null() {
                NodeOptions::default()
            } else {
                options_from_js(
                    value,
                    &["resp", "connectTimeoutMs"],
                    &format!("node {index}'s options"),
                )?
            };
            let mut link = redlock_core::Link::new();
            if let Some(ms) = options.connect_timeout_ms {
                if !(ms.is_finite() && ms >= 0.0) {
                    return Err(invalid_argument(&format!(
                        "node {index}'s options: connectTimeoutMs must be a non-negative number of milliseconds, got {ms}"
                    )));
                }
                // `as` saturates; the core floors it at 1 ms.
                link.set_connect_timeout(core::time::Duration::from_micros((ms * 1000.0) as u64));
            }
            links.push(Node {
                link,
                resp: options.resp.unwrap_or(false),
                reader: Reader::default(),
                wake: None,
            });
        }
        if links.is_empty() {
            return Err(invalid_argument("an engine needs at least one node"));
        }
        Ok(Engine {
            nodes: links,
            tasks: Tasks::default(),
            waits: Waits::default(),
            next_tag: 1,
            actions: VecDeque::new(),
            deliveries: VecDeque::new(),
            write: None,
            ended: Vec::new(),
            reported_wake: None,
            record_events: true,
        })
    }

    /// Starts `client.acquire(resources, nowUs, options)` here; its tag.
    pub fn acquire(
        &mut self,
        client: &mut Redlock,
        resources: ResourcesJs,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
        options: Option<AcquireOptionsJs>,
    ) -> Result<f64, JsValue> {
        let op = client.start_acquire(&resources, now_us, options)?;
        Ok(self.start(op, false, time(now_us, "nowUs")?))
    }

    /// `acquire` of one resource given as a string (its UTF-8 bytes): the string crosses
    /// as it is, not as an array to read element by element.
    #[wasm_bindgen(js_name = acquireOne)]
    pub fn acquire_one(
        &mut self,
        client: &mut Redlock,
        resource: &str,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
        options: Option<AcquireOptionsJs>,
    ) -> Result<f64, JsValue> {
        let op = client.start_acquire_of(&[resource.as_bytes()], now_us, options)?;
        Ok(self.start(op, false, time(now_us, "nowUs")?))
    }

    /// Starts `client.extend(lease, nowUs, ttlMs)` here; its tag.
    pub fn extend(
        &mut self,
        client: &Redlock,
        lease: &Lease,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
        #[wasm_bindgen(js_name = ttlMs)] ttl_ms: Option<f64>,
    ) -> Result<f64, JsValue> {
        let op = client.start_extend(lease, now_us, ttl_ms)?;
        Ok(self.start(op, false, time(now_us, "nowUs")?))
    }

    /// Starts `client.release(lease, nowUs)` here; its tag.
    pub fn release(
        &mut self,
        client: &Redlock,
        lease: &Lease,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<f64, JsValue> {
        let op = client.start_release(lease, now_us)?;
        Ok(self.start(op, false, time(now_us, "nowUs")?))
    }

    /// Starts `client.inspect(resources, nowUs)` here; its tag. Status replies count as
    /// the bulk strings they were (a client library gives both as strings).
    pub fn inspect(
        &mut self,
        client: &Redlock,
        resources: ResourcesJs,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<f64, JsValue> {
        let op = client.start_inspect(&resources, now_us)?;
        Ok(self.start(op, true, time(now_us, "nowUs")?))
    }

    /// Node `node`'s connection is open (after TLS, AUTH, SELECT).
    pub fn connected(
        &mut self,
        node: f64,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<u32, JsValue> {
        self.sweep();
        let now = time(now_us, "nowUs")?;
        let (index, n) = self.node(node)?;
        n.closed();
        if n.resp {
            n.reader.open();
        }
        n.link.handle_connected(now);
        Ok(self.after(index, now))
    }

    /// Node `node`'s connection closed or could not be opened: `cause` is `refused`,
    /// `auth`, `tls`, `timeout` or `closed`; `text` says how.
    pub fn closed(
        &mut self,
        node: f64,
        cause: &str,
        text: &str,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<u32, JsValue> {
        self.sweep();
        let now = time(now_us, "nowUs")?;
        let cause = link_cause(cause)?;
        let (index, n) = self.node(node)?;
        n.closed();
        n.link.handle_closed(cause, text, now);
        Ok(self.after(index, now))
    }

    /// The reply to node `node`'s write `id` (a client library's result, mapped to a
    /// reply). A reply the core refuses closes the connection (the next action).
    pub fn reply(
        &mut self,
        node: f64,
        id: f64,
        reply: ReplyJs,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<u32, JsValue> {
        self.take_reply(node, id, reply_from_js(&reply), now_us)
    }

    /// `reply(node, id, { type: 'ok' })`, without making the object.
    #[wasm_bindgen(js_name = replyOk)]
    pub fn reply_ok(
        &mut self,
        node: f64,
        id: f64,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<u32, JsValue> {
        self.take_reply(node, id, Ok(Reply::Ok), now_us)
    }

    /// `reply(node, id, { type: 'integer', value })` for a whole `value` within
    /// ±(2^53 - 1), without making the object.
    #[wasm_bindgen(js_name = replyInteger)]
    pub fn reply_integer(
        &mut self,
        node: f64,
        id: f64,
        value: f64,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<u32, JsValue> {
        let reply = if value.fract() == 0.0 && value.abs() <= crate::convert::MAX_SAFE_INTEGER {
            Ok(Reply::Integer(value as i64))
        } else {
            Err(invalid_argument(
                "an `integer` reply needs a whole number within ±(2^53 - 1)",
            ))
        };
        self.take_reply(node, id, reply, now_us)
    }

    /// Links made with `resp`: bytes received on node `node`'s current connection. Each
    /// complete reply answers the oldest write awaiting one. A protocol error (or a reply
    /// nobody asked for) closes the connection (the next action).
    pub fn data(
        &mut self,
        node: f64,
        bytes: &[u8],
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<u32, JsValue> {
        self.sweep();
        let now = time(now_us, "nowUs")?;
        let (index, _) = self.node(node)?;
        let Engine { nodes, actions, .. } = self;
        let n = &mut nodes[index];
        if !n.resp {
            return Err(invalid_argument(
                "data is for nodes made with { resp: true }",
            ));
        }
        if n.reader.feed(&mut n.link, bytes, now) {
            actions.push_back(Action::Close(index as u32));
        }
        Ok(self.after(index, now))
    }

    /// Time has reached `nowUs`: links and operations whose time came act on it.
    pub fn timeout(
        &mut self,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<u32, JsValue> {
        self.sweep();
        let now = time(now_us, "nowUs")?;
        for (index, node) in self.nodes.iter_mut().enumerate() {
            if node.wake.is_some_and(|at| at <= now) {
                node.link.handle_timeout(now);
                node.pump(index as u32, &mut self.actions, &mut self.deliveries);
            }
        }
        let due: Vec<u64> = self
            .waits
            .iter()
            .take_while(|(until, _)| *until <= now)
            .map(|(_, tag)| *tag)
            .collect();
        for tag in due {
            if let Some(task) = self.tasks.get_mut(&tag) {
                if let Some(until) = task.until.take() {
                    self.waits.remove(&(until, tag));
                }
                task.op.handle_timeout(now);
            }
            self.step(tag, now);
        }
        self.settle(now);
        Ok(self.pending())
    }

    /// A release notice for operation `tag` from node `node`, with its message's bytes
    /// (as `Operation.handleNoticeMessage`). A tag that ended changes nothing.
    pub fn notice(
        &mut self,
        tag: f64,
        node: f64,
        #[wasm_bindgen(unchecked_param_type = "Uint8Array")] message: &JsValue,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<u32, JsValue> {
        self.sweep();
        let Some(message) = message.dyn_ref::<js_sys::Uint8Array>() else {
            return Err(invalid_argument(
                "a notice's message must be a Uint8Array (the bytes as received)",
            ));
        };
        let now = time(now_us, "nowUs")?;
        let node = node_index(node)?;
        let message = message.to_vec();
        Ok(self.input_to(tag, now, |op| op.handle_notice_message(node, &message, now)))
    }

    /// Node `node` confirmed a subscription to one of operation `tag`'s notice channels
    /// (as `Operation.handleSubscribed`). A tag that ended changes nothing.
    pub fn subscribed(
        &mut self,
        tag: f64,
        node: f64,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<u32, JsValue> {
        self.sweep();
        let now = time(now_us, "nowUs")?;
        let node = node_index(node)?;
        Ok(self.input_to(tag, now, |op| op.handle_subscribed(node, now)))
    }

    /// Abandons operation `tag` (the caller cancelled it): what it must still send (the
    /// release of an attempt whose commands are out) goes to the links, under no tag,
    /// and the operation is forgotten. A tag that ended changes nothing.
    pub fn abandon(
        &mut self,
        tag: f64,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<u32, JsValue> {
        self.sweep();
        let now = time(now_us, "nowUs")?;
        let tag = tag_of(tag);
        let Some(mut task) = self.tasks.remove(&tag) else {
            return Ok(self.pending());
        };
        if let Some(until) = task.until.take() {
            self.waits.remove(&(until, tag));
        }
        task.op.abandon(now);
        while let Some(output) = task.op.poll_output() {
            if let Output::Send(command) = output {
                let index = command.node();
                if let Some(node) = self.nodes.get_mut(index) {
                    node.link.submit(0, command, now);
                    node.pump(index as u32, &mut self.actions, &mut self.deliveries);
                }
            }
        }
        self.settle(now);
        Ok(self.pending())
    }

    /// The next action's code (see the type's documentation), or 0 when none is left.
    pub fn poll(&mut self) -> f64 {
        let (kind, x) = match self.actions.pop_front() {
            None => return 0.0,
            Some(Action::Write(node, id, payload)) => {
                let same = match (&self.write, &payload) {
                    (Some((_, Payload::Args(previous))), Payload::Args(write)) => {
                        previous.shares_args_with(write)
                    }
                    _ => false,
                };
                self.write = Some((id, payload));
                (if same { WRITE_SAME } else { WRITE }, f64::from(node))
            }
            Some(Action::Connect(node)) => (CONNECT, f64::from(node)),
            Some(Action::Close(node)) => (CLOSE, f64::from(node)),
            Some(Action::Done(tag)) => (DONE, tag as f64),
            Some(Action::Failed(tag)) => (FAILED, tag as f64),
            Some(Action::Listen(tag)) => (LISTEN, tag as f64),
        };
        kind + 8.0 * x
    }

    /// The id of the write `poll()` returned last (0 before any).
    #[wasm_bindgen(getter, js_name = writeId)]
    pub fn write_id(&self) -> f64 {
        self.write.as_ref().map_or(0.0, |(id, _)| id.0 as f64)
    }

    /// The arguments of the write `poll()` returned last, the command's name first:
    /// strings where valid UTF-8, `Uint8Array`s otherwise. The N writes of a round share
    /// one array: never change it. `undefined` for a node made with `resp`.
    #[wasm_bindgen(js_name = writeArgs, unchecked_return_type = "Array<string | Uint8Array> | undefined")]
    pub fn write_args(&self) -> JsValue {
        match &self.write {
            Some((_, Payload::Args(write))) => strings::write_array(write),
            _ => JsValue::UNDEFINED,
        }
    }

    /// The RESP bytes of the write `poll()` returned last, for a node made with `resp`
    /// (`undefined` otherwise, or when already taken).
    #[wasm_bindgen(js_name = writeBytes)]
    pub fn write_bytes(&mut self) -> Option<Vec<u8>> {
        match self.write.take() {
            Some((_, Payload::Bytes(bytes))) => Some(bytes),
            other => {
                self.write = other;
                None
            }
        }
    }

    /// The outcome of operation `tag`, after its `done` action: the same object as
    /// `Operation.pollOutput()`'s `outcome`. The operation is forgotten at the next input
    /// (`isHeldBy`, `pollEvent` and `KeepAlive.handleOutcomeOf` read it until then).
    pub fn outcome(&mut self, tag: f64) -> Result<JsValue, JsValue> {
        let tag = tag_of(tag);
        let Some(task) = self.tasks.get_mut(&tag) else {
            return Err(invalid_argument(
                "no operation has this tag (it ended and was forgotten)",
            ));
        };
        let Some(outcome) = task.outcome.as_ref() else {
            return Err(invalid_argument("the operation has no outcome yet"));
        };
        // An extension's and an inspection's outcome stay for `KeepAlive.handleOutcomeOf`
        // and `isHeldBy`; the others are taken.
        let keep = matches!(
            task.op.kind(),
            OperationKind::Extend | OperationKind::Inspect
        );
        let outcome = if keep {
            outcome.clone()
        } else {
            match task.outcome.take() {
                Some(outcome) => outcome,
                None => return Err(invalid_argument("the operation has no outcome yet")),
            }
        };
        self.ended.push(tag);
        Ok(outcome_to_js(outcome))
    }

    /// Why operation `tag` failed, after its `failed` action: the error to throw. The
    /// operation is forgotten at the next input.
    pub fn error(&mut self, tag: f64) -> Result<JsValue, JsValue> {
        let error = self.task(tag)?.error.clone().unwrap_or(JsValue::UNDEFINED);
        self.ended.push(tag_of(tag));
        Ok(error)
    }

    /// Forgets operation `tag` now (its late replies are dropped): an operation whose end
    /// the driver will not read.
    pub fn forget(&mut self, tag: f64) {
        let tag = tag_of(tag);
        if let Some(mut task) = self.tasks.remove(&tag) {
            if let Some(until) = task.until.take() {
                self.waits.remove(&(until, tag));
            }
        }
    }

    /// The next unread event of operation `tag` (as `Operation.pollEvent`), or
    /// `undefined`.
    #[wasm_bindgen(js_name = pollEvent)]
    pub fn poll_event(&mut self, tag: f64) -> Option<EventJs> {
        let task = self.tasks.get_mut(&tag_of(tag))?;
        task.op
            .poll_event()
            .map(|event| event_to_js(&event).unchecked_into())
    }

    /// Whether `lease` holds the lock at `nowUs` by inspection `tag`'s outcome (as
    /// `Operation.isHeldBy`).
    #[wasm_bindgen(js_name = isHeldBy)]
    pub fn is_held_by(
        &self,
        tag: f64,
        lease: &Lease,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<bool, JsValue> {
        let now = time(now_us, "nowUs")?;
        match &self.task(tag)?.outcome {
            Some(Outcome::Inspected(inspected)) => Ok(inspected.is_held_by(&lease.inner, now)),
            _ => Err(error::error(
                "not_inspected",
                "isHeldBy needs an inspection's `inspected` outcome",
            )),
        }
    }

    /// When `timeout` is next due (us), or -1 when nothing waits on time. Inputs say
    /// (`WAKE_EARLIER`) when it became sooner than the value last read here.
    #[wasm_bindgen(getter, js_name = nextWake)]
    pub fn next_wake(&mut self) -> f64 {
        let wake = self.wake();
        self.reported_wake = wake;
        wake.map_or(-1.0, time_to_js)
    }

    /// -1 when every link is idle (nothing queued or awaiting a reply) or stalled (what
    /// it awaits is past its deadline) at `nowUs`; otherwise when to look again (us):
    /// the soonest wake-up of the busy links.
    #[wasm_bindgen(js_name = idleWake)]
    pub fn idle_wake(&self, #[wasm_bindgen(js_name = nowUs)] now_us: f64) -> Result<f64, JsValue> {
        let now = time(now_us, "nowUs")?;
        let mut busy = false;
        let mut next: Option<Time> = None;
        for node in &self.nodes {
            if node.link.is_idle() || node.link.is_stalled(now) {
                continue;
            }
            busy = true;
            if let Some(at) = node.wake {
                next = Some(next.map_or(at, |n| n.min(at)));
            }
        }
        Ok(match (busy, next) {
            (false, _) => -1.0,
            (true, Some(at)) => time_to_js(at),
            (true, None) => time_to_js(now) + 1000.0,
        })
    }

    /// Whether operations started from now on make events for `pollEvent` (default
    /// true): a driver nobody listens to spares building them.
    #[wasm_bindgen(getter, js_name = recordEvents)]
    pub fn record_events(&self) -> bool {
        self.record_events
    }

    #[wasm_bindgen(setter, js_name = recordEvents)]
    pub fn set_record_events(&mut self, record: bool) {
        self.record_events = record;
    }

    /// Node `node`'s connect timeout in milliseconds.
    #[wasm_bindgen(js_name = connectTimeoutMs)]
    pub fn connect_timeout_ms(&self, node: f64) -> Result<f64, JsValue> {
        let index = node_index(node)?;
        self.nodes
            .get(index)
            .map(|n| n.link.connect_timeout().as_micros() as f64 / 1000.0)
            .ok_or_else(|| {
                error::error(
                    "unknown_node",
                    &format!("node {index} is not one of this engine's"),
                )
            })
    }

    /// Node `node`'s link, for inspection: `[inFlight, queued, owed, isOpen ? 1 : 0]`.
    #[wasm_bindgen(js_name = linkState)]
    pub fn link_state(&self, node: f64) -> Result<Vec<f64>, JsValue> {
        let index = node_index(node)?;
        let n = self.nodes.get(index).ok_or_else(|| {
            error::error(
                "unknown_node",
                &format!("node {index} is not one of this engine's"),
            )
        })?;
        Ok(vec![
            n.link.in_flight() as f64,
            n.link.queued() as f64,
            n.link.owed() as f64,
            if n.link.is_open() { 1.0 } else { 0.0 },
        ])
    }
}

impl Engine {
    /// Operation `tag`'s outcome (an extension's, for `KeepAlive`).
    pub(crate) fn outcome_of(&self, tag: f64) -> Option<&Outcome> {
        self.tasks.get(&tag_of(tag))?.outcome.as_ref()
    }
}
