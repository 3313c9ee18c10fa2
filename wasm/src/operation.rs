//! `Operation`: one acquisition, extension or release, driven by replies and time.

use redlock_core::{CommandKind, OperationKind, Outcome, Output, RequestId};
use serde::Serialize;
use wasm_bindgen::prelude::*;

use crate::client::Lease;
use crate::convert::{from_js, time, time_to_js, to_js, BytesRef, NodeResults, ReplyIn};
use crate::error::{self, invalid_argument};
use crate::types::{NodeResultsJs, OutputJs, ReplyJs};

/// One acquisition, extension or release.
///
/// After creating it and after every input (`handleReply`, `handleTimeout`), call
/// `pollOutput()` until it returns `undefined`, acting on each output:
/// - `send`: send `args` to node `node`; hand its reply to `handleReply(requestId, ...)`;
///   stop waiting for it at `deadline`;
/// - `wait`: if no reply arrives before `until`, call `handleTimeout` then (early is
///   harmless);
/// - `outcome`: the operation is finished.
#[wasm_bindgen]
pub struct Operation {
    inner: redlock_core::Operation,
}

#[derive(Serialize)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
enum OutputOut<'a> {
    Send {
        node: usize,
        request_id: f64,
        deadline: f64,
        kind: &'static str,
        is_eval: bool,
        args: Vec<BytesRef<'a>>,
    },
    Wait {
        until: f64,
    },
}

/// An outcome's plain fields; the lease (a class instance) is added afterwards.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OutcomeOut<'a> {
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    validity_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    attempts: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    token: Option<&'a str>,
    /// Only for `not_extended`, where `null` means "do not retry".
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_at: Option<Option<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lost: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    released: Option<usize>,
    nodes: NodeResults<'a>,
}

fn command_kind(kind: CommandKind) -> &'static str {
    match kind {
        CommandKind::Set => "set",
        CommandKind::Acquire => "acquire",
        CommandKind::Release => "release",
        CommandKind::Extend => "extend",
        _ => "unknown",
    }
}

fn set(target: &JsValue, key: &str, value: &JsValue) {
    // Setting a property on a fresh plain object cannot fail.
    let _ = js_sys::Reflect::set(target, &key.into(), value);
}

fn outcome_to_js(outcome: Outcome) -> Result<JsValue, JsValue> {
    let empty = OutcomeOut {
        kind: outcome.code(),
        reason: outcome.reason().map(|r| r.code()),
        validity_us: None,
        attempts: None,
        token: None,
        retry_at: None,
        lost: None,
        released: None,
        nodes: NodeResults(outcome.nodes()),
    };
    let plain = match &outcome {
        Outcome::Acquired(a) => OutcomeOut {
            validity_us: Some(a.validity.as_micros() as f64),
            attempts: Some(a.attempts),
            ..empty
        },
        Outcome::NotAcquired(n) => OutcomeOut {
            attempts: Some(n.attempts),
            token: Some(n.token.as_str()),
            ..empty
        },
        Outcome::Extended(e) => OutcomeOut {
            validity_us: Some(e.validity.as_micros() as f64),
            ..empty
        },
        Outcome::NotExtended(n) => OutcomeOut {
            validity_us: Some(n.validity.as_micros() as f64),
            retry_at: Some(n.retry_at.map(time_to_js)),
            lost: Some(n.is_lost()),
            ..empty
        },
        Outcome::Released(r) => OutcomeOut {
            released: Some(r.released),
            ..empty
        },
        _ => empty,
    };
    let value = to_js(&plain)?;
    if let Some(lease) = outcome.lease() {
        let lease = Lease {
            inner: lease.clone(),
        };
        set(&value, "lease", &JsValue::from(lease));
    }
    Ok(value)
}

impl Operation {
    pub(crate) fn new(inner: redlock_core::Operation) -> Operation {
        Operation { inner }
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
        request_id: f64,
        reply: ReplyJs,
        now_us: f64,
    ) -> Result<(), JsValue> {
        let now = time(now_us, "nowUs")?;
        if !(request_id.is_finite() && request_id >= 0.0 && request_id.fract() == 0.0) {
            return Err(invalid_argument("requestId must be a whole number"));
        }
        let reply: ReplyIn = from_js(reply.into(), "reply")?;
        self.inner
            .handle_reply(RequestId(request_id as u64), reply.into(), now)
            .map_err(error::usage)
    }

    /// Reports that `nowUs` has come: every request whose deadline passed times out,
    /// and a retry delay that ended starts the next attempt. Early is harmless.
    #[wasm_bindgen(js_name = handleTimeout)]
    pub fn handle_timeout(&mut self, now_us: f64) -> Result<(), JsValue> {
        let now = time(now_us, "nowUs")?;
        self.inner.handle_timeout(now);
        Ok(())
    }

    /// The next output, or `undefined` when there is nothing more to do until the
    /// next input. Order: every command to send, then the outcome if the operation just
    /// finished, otherwise one `wait`.
    #[wasm_bindgen(js_name = pollOutput)]
    pub fn poll_output(&mut self) -> Result<Option<OutputJs>, JsValue> {
        let value = match self.inner.poll_output() {
            None => return Ok(None),
            Some(Output::Send(command)) => to_js(&OutputOut::Send {
                node: command.node(),
                request_id: command.request_id().0 as f64,
                deadline: time_to_js(command.deadline()),
                kind: command_kind(command.kind()),
                is_eval: command.is_eval(),
                args: command.args().map(BytesRef).collect(),
            })?,
            Some(Output::Wait(until)) => to_js(&OutputOut::Wait {
                until: time_to_js(until),
            })?,
            Some(Output::Outcome(outcome)) => {
                let value = js_sys::Object::new();
                set(&value, "type", &"outcome".into());
                set(&value, "outcome", &outcome_to_js(outcome)?);
                value.into()
            }
            Some(_) => return Err(error::error("unknown_output", "unknown output kind")),
        };
        Ok(Some(value.unchecked_into()))
    }

    /// When `handleTimeout` is next due (us), or `undefined` once finished.
    #[wasm_bindgen(js_name = pollTimeout)]
    pub fn poll_timeout(&self) -> Option<f64> {
        self.inner.poll_timeout().map(time_to_js)
    }

    /// `acquire`, `extend` or `release`.
    #[wasm_bindgen(getter, unchecked_return_type = "OperationKind")]
    pub fn kind(&self) -> String {
        match self.inner.kind() {
            OperationKind::Acquire => "acquire",
            OperationKind::Extend => "extend",
            OperationKind::Release => "release",
            _ => "unknown",
        }
        .to_string()
    }

    /// True once the outcome has been decided (it may not have been polled yet).
    #[wasm_bindgen(getter, js_name = isFinished)]
    pub fn is_finished(&self) -> bool {
        self.inner.is_finished()
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
