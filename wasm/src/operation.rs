//! `Operation`: one acquisition, extension, release or inspection, driven by replies and time.

use redlock_core::{Command, CommandKind, NodeResult, OperationKind, Outcome, Output, RequestId};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::client::Lease;
use crate::convert::{node_index, reply_from_js, time, time_to_js, to_js, NodeResults};
use crate::error::{self, invalid_argument};
use crate::strings::{self, Plain, Strings};
use crate::types::{EventJs, NodeResultsJs, OutputJs, ReplyJs};

/// One acquisition, extension or release.
///
/// The one output rule: after creating it and after every input (`handleReply`,
/// `handleTimeout`, `abandon`), call `pollOutput()` until it returns a `wait` or the
/// `outcome` (or `undefined`, for an operation already finished or abandoned), acting
/// on each output:
/// - `send`: hand the command to its node's `Link` (`link.submit(tag, operation, now)`
///   right after this poll), or send `args` to node `node` yourself and hand its reply
///   to `handleReply(requestId, ...)`;
/// - `wait`: if no reply arrives before `until`, call `handleTimeout` then (early is
///   harmless). It is the operation's only wake-up;
/// - `outcome`: the operation is finished.
#[wasm_bindgen]
pub struct Operation {
    inner: redlock_core::Operation,
    /// The command of the last `send` output, until a link takes it.
    last_send: Option<Command>,
    /// The outcome of an extension, kept for `KeepAlive.handleOutcome`.
    last_outcome: Option<Outcome>,
}

fn command_kind(strings: &Strings, kind: CommandKind) -> JsValue {
    match kind {
        CommandKind::Set => strings.set.clone(),
        CommandKind::Acquire => strings.acquire.clone(),
        CommandKind::Release => strings.release.clone(),
        CommandKind::Extend => strings.extend.clone(),
        CommandKind::FencedAcquire => strings.fenced_acquire.clone(),
        CommandKind::WriteBack => strings.write_back.clone(),
        CommandKind::QueuedAcquire => strings.queued_acquire.clone(),
        CommandKind::Inspect => JsValue::from_str("inspect"),
        _ => JsValue::from_str("unknown"),
    }
}

/// Per node: its code, or `{ error, cause }`.
pub(crate) fn node_results_to_js(s: &Strings, nodes: &[NodeResult]) -> JsValue {
    if let Some(codes) = strings::node_codes(nodes) {
        return codes;
    }
    let value = |result: &NodeResult| match result {
        NodeResult::Success => s.success.clone(),
        NodeResult::Conflict => s.conflict.clone(),
        NodeResult::Timeout => s.timeout.clone(),
        NodeResult::Pending => s.pending.clone(),
        NodeResult::NotAsked => s.not_asked.clone(),
        NodeResult::Error(text) => {
            let cause = result.cause().map_or("error", |c| c.code());
            strings::node_error(text, &s.code(cause))
        }
        other => s.code(other.code()),
    };
    strings::array(nodes.iter().map(value))
}

fn operation_kind(kind: OperationKind) -> &'static str {
    match kind {
        OperationKind::Acquire => "acquire",
        OperationKind::Extend => "extend",
        OperationKind::Release => "release",
        OperationKind::Inspect => "inspect",
        _ => "unknown",
    }
}

/// The core's event as a plain object (built only when the caller polls events).
pub(crate) fn event_to_js(event: &redlock_core::Event) -> JsValue {
    let value = Plain::new();
    let put = |key: &str, v: JsValue| value.put(&JsValue::from_str(key), &v);
    let text = |t: Option<&str>| t.map_or(JsValue::NULL, JsValue::from_str);
    let number = |n: Option<f64>| n.map_or(JsValue::NULL, JsValue::from_f64);
    put("kind", JsValue::from_str(event.kind.code()));
    put("operation", text(event.operation.map(operation_kind)));
    put("atUs", JsValue::from_f64(time_to_js(event.at)));
    put(
        "elapsedUs",
        JsValue::from_f64(event.elapsed.as_micros() as f64),
    );
    put("attempt", JsValue::from_f64(f64::from(event.attempt)));
    put("reason", text(event.reason.map(|r| r.code())));
    put("retryAtUs", number(event.retry_at.map(time_to_js)));
    put("node", number(event.node.map(|n| n as f64)));
    put("cause", text(event.cause.map(|c| c.code())));
    put("lostReason", text(event.lost_reason.map(|r| r.code())));
    put(
        "nodes",
        strings::with(|s| node_results_to_js(s, &event.nodes)),
    );
    value.into()
}

/// The outcome as a JS object (made in one call: it is on every lock's path).
pub(crate) fn outcome_to_js(outcome: Outcome) -> JsValue {
    let micros = |d: core::time::Duration| d.as_micros() as f64;
    let lease = |lease: redlock_core::Lease| JsValue::from(Lease { inner: lease });
    strings::with(|s| {
        // Acquired and released outcomes make their node results an array when read.
        let nodes = if matches!(outcome, Outcome::Acquired(_) | Outcome::Released(_)) {
            JsValue::UNDEFINED
        } else {
            node_results_to_js(s, outcome.nodes())
        };
        let class = outcome
            .error_class()
            .map_or(JsValue::NULL, |c| s.code(c.code()));
        match outcome {
            Outcome::Acquired(a) => {
                // Fencing tokens stay below 2^53 (`MAX_FENCING_TOKEN`): exact as numbers.
                let fencing_token = a.lease.fencing_token().map(|t| t as f64);
                let (count, packed, nodes) = strings::lazy_nodes(s, &a.nodes);
                strings::acquired(
                    micros(a.validity),
                    a.attempts,
                    count,
                    packed,
                    &nodes,
                    lease(a.lease),
                    fencing_token,
                )
            }
            Outcome::NotAcquired(n) => strings::not_acquired(
                &s.code(n.reason.code()),
                n.attempts,
                n.token.as_str(),
                &nodes,
                &class,
            ),
            Outcome::Extended(e) => strings::extended(micros(e.validity), &nodes, lease(e.lease)),
            Outcome::NotExtended(n) => {
                let lost = n.is_lost();
                strings::not_extended(
                    &s.code(n.reason.code()),
                    micros(n.validity),
                    n.retry_at.map(time_to_js),
                    lost,
                    &nodes,
                    lease(n.lease),
                    &class,
                )
            }
            Outcome::Released(r) => {
                let (count, packed, nodes) = strings::lazy_nodes(s, &r.nodes);
                strings::released(r.released as f64, count, packed, &nodes)
            }
            Outcome::NotReleased(r) => strings::not_released(r.released as f64, &nodes, &class),
            // Inspections are not on the lock's path: built property by property.
            Outcome::Inspected(i) => {
                let value = Plain::new();
                value.put(&s.kind, &JsValue::from_str("inspected"));
                let holder = i.holder.as_deref().map_or(JsValue::NULL, |h| {
                    JsValue::from_str(&String::from_utf8_lossy(h))
                });
                value.put(&JsValue::from_str("holder"), &holder);
                value.put(
                    &JsValue::from_str("locked"),
                    &JsValue::from_bool(i.is_locked()),
                );
                value.put(&s.nodes, &nodes);
                value.put(&JsValue::from_str("errorClass"), &JsValue::NULL);
                value.into()
            }
            Outcome::NotInspected(_) => {
                let value = Plain::new();
                value.put(&s.kind, &JsValue::from_str("not_inspected"));
                value.put(&s.nodes, &nodes);
                value.put(&JsValue::from_str("errorClass"), &class);
                value.into()
            }
            other => {
                // `Outcome` is non-exhaustive: a future kind still reports its code.
                let value = Plain::new();
                value.put(&s.kind, &s.code(other.code()));
                value.put(&s.nodes, &nodes);
                value.into()
            }
        }
    })
}

impl Operation {
    pub(crate) fn new(inner: redlock_core::Operation) -> Operation {
        Operation {
            inner,
            last_send: None,
            last_outcome: None,
        }
    }

    /// The command of the last `send` output, taken once.
    pub(crate) fn take_send(&mut self) -> Option<Command> {
        self.last_send.take()
    }

    /// The last outcome this operation output, if it was an extension's or an
    /// inspection's.
    pub(crate) fn outcome(&self) -> Option<&Outcome> {
        self.last_outcome.as_ref()
    }
}

#[wasm_bindgen]
impl Operation {
    /// Hands in the reply to request `requestId`, received at `nowUs`. Throws (and
    /// changes nothing) for an id never issued (`unknown_request`) or a second reply
    /// (`duplicate_reply`). A reply after the outcome is accepted and changes nothing.
    #[wasm_bindgen(js_name = handleReply)]
    pub fn handle_reply(
        &mut self,
        #[wasm_bindgen(js_name = requestId)] request_id: f64,
        reply: ReplyJs,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<(), JsValue> {
        let now = time(now_us, "nowUs")?;
        if !(request_id.is_finite() && request_id >= 0.0 && request_id.fract() == 0.0) {
            return Err(invalid_argument("requestId must be a whole number"));
        }
        let reply = reply_from_js(&reply)?;
        self.inner
            .handle_reply(RequestId(request_id as u64), reply, now)
            .map_err(error::usage)
    }

    /// Reports that `nowUs` has come: every request whose deadline passed times out,
    /// and a retry delay that ended starts the next attempt. Early is harmless.
    #[wasm_bindgen(js_name = handleTimeout)]
    pub fn handle_timeout(
        &mut self,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<(), JsValue> {
        let now = time(now_us, "nowUs")?;
        self.inner.handle_timeout(now);
        Ok(())
    }

    /// Hands in a release notice for this acquisition's resource from node `node`
    /// (`0..N`), received at `nowUs`: a message on one of `Redlock.noticeChannels` of the
    /// lock's resources, from that node's subscriber connection. A waiting acquisition
    /// may then try again at once (the core decides when); at other times it changes
    /// nothing. A notice only ever starts an attempt sooner, so a lost, duplicated or
    /// forged one changes speed, never safety. Throws `unknown_node` (and changes
    /// nothing) for an index outside `0..N`.
    #[wasm_bindgen(js_name = handleNotice)]
    pub fn handle_notice(
        &mut self,
        node: f64,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<(), JsValue> {
        let now = time(now_us, "nowUs")?;
        let node = node_index(node)?;
        self.inner.handle_notice(node, now).map_err(error::usage)
    }

    /// Hands in, at `nowUs`, that node `node` confirmed the subscriber connection's
    /// subscription to one of this acquisition's notice channels. A release published
    /// there before the subscription took effect reached nobody; the core decides whether
    /// one may have gone unheard: for a waiter that node refused while it was first in
    /// the queue there, once a quorum of such nodes confirmed, they stand for releases
    /// naming it; fewer bring its retry forward (docs/bindings.md, rule 13). Throws `unknown_node` (and changes nothing)
    /// for an index outside `0..N`.
    #[wasm_bindgen(js_name = handleSubscribed)]
    pub fn handle_subscribed(
        &mut self,
        node: f64,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<(), JsValue> {
        let now = time(now_us, "nowUs")?;
        let node = node_index(node)?;
        self.inner
            .handle_subscribed(node, now)
            .map_err(error::usage)
    }

    /// As `handleNotice`, with the notice's message (the bytes the subscriber received):
    /// the id of the waiter first in the resource's queue on that node, or empty. The
    /// core decides from it when the next attempt starts: at once for the waiter it
    /// names; the others keep their retry schedule. Throws `unknown_node` (and changes
    /// nothing) for an index outside `0..N`.
    #[wasm_bindgen(js_name = handleNoticeMessage)]
    pub fn handle_notice_message(
        &mut self,
        node: f64,
        #[wasm_bindgen(unchecked_param_type = "Uint8Array")] message: &JsValue,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<(), JsValue> {
        let Some(message) = message.dyn_ref::<js_sys::Uint8Array>() else {
            return Err(error::invalid_argument(
                "a notice's message must be a Uint8Array (the bytes as received)",
            ));
        };
        let now = time(now_us, "nowUs")?;
        let node = node_index(node)?;
        self.inner
            .handle_notice_message(node, &message.to_vec(), now)
            .map_err(error::usage)
    }

    /// Abandons the operation at `nowUs` (the caller cancelled it). `pollOutput()` then
    /// yields the commands that must still be sent (an acquisition whose commands are
    /// out releases that attempt's token on every node), then `undefined`; no outcome
    /// follows. Hand those sends to the links and forget the operation.
    pub fn abandon(&mut self, #[wasm_bindgen(js_name = nowUs)] now_us: f64) -> Result<(), JsValue> {
        let now = time(now_us, "nowUs")?;
        self.inner.abandon(now);
        Ok(())
    }

    /// The next output, or `undefined` when there is nothing more to do until the
    /// next input. Order: every command to send, then the outcome if the operation just
    /// finished, otherwise one `wait`.
    #[wasm_bindgen(js_name = pollOutput)]
    pub fn poll_output(&mut self) -> Result<Option<OutputJs>, JsValue> {
        self.poll(true)
    }

    /// As `pollOutput`, for a driver that hands every send to a `Link` (`Link.submit`
    /// takes the command from the operation): a send's `args` is left out (`undefined`),
    /// which spares building its strings.
    #[wasm_bindgen(js_name = pollOutputToLink)]
    pub fn poll_output_to_link(&mut self) -> Result<Option<OutputJs>, JsValue> {
        self.poll(false)
    }
}

impl Operation {
    fn poll(&mut self, with_args: bool) -> Result<Option<OutputJs>, JsValue> {
        let value: JsValue = match self.inner.poll_output() {
            None => return Ok(None),
            Some(Output::Send(command)) => {
                let args = if with_args {
                    strings::note_token(command.token());
                    strings::args_array(|| command.args())
                } else {
                    JsValue::UNDEFINED
                };
                let kind = strings::with(|s| command_kind(s, command.kind()));
                let value = strings::send_output(
                    command.node() as f64,
                    command.request_id().0 as f64,
                    time_to_js(command.deadline()),
                    &kind,
                    command.is_eval(),
                    &args,
                );
                self.last_send = Some(command);
                value
            }
            Some(Output::Wait(until)) => strings::wait_output(time_to_js(until)),
            Some(Output::Outcome(outcome)) => {
                if matches!(
                    outcome,
                    Outcome::Extended(_) | Outcome::NotExtended(_) | Outcome::Inspected(_)
                ) {
                    self.last_outcome = Some(outcome.clone());
                }
                strings::outcome_output(&outcome_to_js(outcome))
            }
            Some(_) => return Err(error::error("unknown_output", "unknown output kind")),
        };
        Ok(Some(value.unchecked_into()))
    }
}

#[wasm_bindgen]
impl Operation {
    /// The next event (docs/observability.md), or `undefined` when none is unread. The
    /// core keeps the events of every input (at most 64 unread, the oldest go first);
    /// nothing about the lock depends on whether they are polled, and nothing is built
    /// for JavaScript unless this is called: drain after each input only if someone
    /// listens.
    #[wasm_bindgen(js_name = pollEvent)]
    pub fn poll_event(&mut self) -> Option<EventJs> {
        self.inner
            .poll_event()
            .map(|event| event_to_js(&event).unchecked_into())
    }

    /// Whether `lease` holds the lock at `nowUs`, by this inspection's outcome (the
    /// core's `Inspected::is_held_by`: a quorum of nodes hold its token and its
    /// validity has not run out). Throws `not_inspected` before an `inspected` outcome.
    #[wasm_bindgen(js_name = isHeldBy)]
    pub fn is_held_by(
        &self,
        lease: &Lease,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<bool, JsValue> {
        let now = time(now_us, "nowUs")?;
        match &self.last_outcome {
            Some(Outcome::Inspected(inspected)) => Ok(inspected.is_held_by(&lease.inner, now)),
            _ => Err(error::error(
                "not_inspected",
                "isHeldBy needs an inspection's `inspected` outcome",
            )),
        }
    }

    /// `acquire`, `extend`, `release` or `inspect`.
    #[wasm_bindgen(getter, unchecked_return_type = "OperationKind")]
    pub fn kind(&self) -> String {
        operation_kind(self.inner.kind()).to_string()
    }

    /// True once the outcome has been decided (it may not have been polled yet), or
    /// the operation was abandoned.
    #[wasm_bindgen(getter, js_name = isFinished)]
    pub fn is_finished(&self) -> bool {
        self.inner.is_finished()
    }

    /// Whether the driver should listen for this acquisition's release notices now: with
    /// a wait limit from the first refusal by a held key or a failed attempt, or from its
    /// start when its client waited for one of its resources a moment ago; otherwise once
    /// an attempt failed and another may follow; never for other operations. Once true,
    /// true until it finishes.
    #[wasm_bindgen(getter)]
    pub fn listens(&self) -> bool {
        self.inner.listens()
    }

    /// The attempt under way (or the last one made), from 1.
    #[wasm_bindgen(getter)]
    pub fn attempt(&self) -> u32 {
        self.inner.attempt()
    }

    /// The current round's token.
    #[wasm_bindgen(getter)]
    pub fn token(&self) -> String {
        self.inner.token().as_str().to_string()
    }

    /// The live per-node view of the current (or last) round, late replies included.
    #[wasm_bindgen(js_name = nodeResults)]
    pub fn node_results(&self) -> Result<NodeResultsJs, JsValue> {
        to_js(&NodeResults(&self.inner.node_results())).map(JsValue::unchecked_into)
    }
}
