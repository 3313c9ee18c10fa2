//! `Link`: one node's command policy (order, the bound in flight, stalled nodes, owed
//! releases, scripts first on every connection, resends, reconnect backoff), decided by
//! the core; the driver only does the I/O it outputs.

use std::collections::VecDeque;

use redlock_core::{LinkOutput, Reply, WriteId};
use serde::Deserialize;
use wasm_bindgen::prelude::*;

use crate::convert::{link_cause, options_from_js, reply_from_js, reply_to_js, time, time_to_js};
use crate::error::{self, invalid_argument};
use crate::operation::Operation;
use crate::reader::Reader;
use crate::strings;
use crate::types::{LinkCauseJs, LinkOptionsJs, ReplyJs};

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Options {
    resp: Option<bool>,
    connect_timeout_ms: Option<f64>,
}

/// One node's link. Keep one per node for as long as the client lives.
///
/// After every input (`submit`, `handle*`), call `pollOutput()` until `undefined` (each
/// input returns how many outputs wait: polling exactly that many is the same):
/// - `connect`: open a connection (TLS, AUTH, SELECT included), then call
///   `handleConnected`, or `handleClosed(cause, text)` if it fails;
/// - `write`: write it now on the current connection, in order: `args` (the command's
///   name first; the writes of one round to N links share one array: never change it),
///   or, for a link made with `{ resp: true }`, the RESP `bytes`; hand its reply to
///   `handleReply(id, reply)` (or feed the bytes received to `handleData`);
/// - `close`: close the current connection, or give up the attempt to open one that is
///   under way (it took longer than the connect timeout), and report nothing more for it;
/// - `deliver`: hand `reply` to the operation tagged `tag`:
///   `operation.handleReply(request, reply, now)`.
///
/// Call `handleTimeout` at `pollTimeout()`. A client library that manages its own
/// connection reports its "ready" event as `handleConnected` and its "disconnected"
/// event as `handleClosed`, and may treat `connect` and `close` as hints.
#[wasm_bindgen]
pub struct Link {
    inner: redlock_core::Link,
    resp: bool,
    /// Outputs of this shell placed before the core's (a `close` after a protocol error).
    front: VecDeque<JsValue>,
    /// RESP mode: the replies of the current connection.
    reader: Reader,
    scratch: Vec<u8>,
}

fn id_from_js(id: f64) -> Result<WriteId, JsValue> {
    if id.is_finite() && id >= 1.0 && id.fract() == 0.0 {
        Ok(WriteId(id as u64))
    } else {
        Err(invalid_argument("a write id must be a whole number from 1"))
    }
}

/// An integer reply from a JS number: whole, within ±(2^53 - 1).
fn safe_integer(value: f64) -> Result<Reply, JsValue> {
    if value.fract() == 0.0 && value.abs() <= crate::convert::MAX_SAFE_INTEGER {
        Ok(Reply::Integer(value as i64))
    } else {
        Err(invalid_argument(
            "an `integer` reply needs a whole number within ±(2^53 - 1)",
        ))
    }
}

impl Link {
    fn closed(&mut self) {
        self.reader.close();
    }

    /// One reply in (every `handleReply*`): the arguments checked in the order the
    /// caller gave them, then the outputs waiting.
    fn take_reply(
        &mut self,
        id: f64,
        reply: Result<Reply, JsValue>,
        now_us: f64,
    ) -> Result<u32, JsValue> {
        let now = time(now_us, "nowUs")?;
        let id = id_from_js(id)?;
        self.inner.handle_reply(id, reply?, now);
        Ok(self.pending())
    }

    /// How many outputs `pollOutput` gives before `undefined`, until the next input.
    fn pending(&self) -> u32 {
        u32::try_from(self.front.len() + self.inner.pending_outputs()).unwrap_or(u32::MAX)
    }
}

#[wasm_bindgen]
impl Link {
    /// A link with no connection yet. `{ resp: true }`: writes come as RESP bytes, and
    /// the bytes received go to `handleData` (raw sockets). `{ connectTimeoutMs }`: how
    /// long a connection attempt may take before the link gives it up (`close`) and
    /// counts it failed with `timeout`: the user's client's connect timeout when it has
    /// one, otherwise the core's (`defaults().connectTimeoutDefaultMs`); below 1 ms
    /// counts as 1 ms.
    #[wasm_bindgen(constructor)]
    pub fn new(options: Option<LinkOptionsJs>) -> Result<Link, JsValue> {
        let options: Options = match options {
            Some(options) if !options.is_undefined() && !options.is_null() => options_from_js(
                options.into(),
                &["resp", "connectTimeoutMs"],
                "link options",
            )?,
            _ => Options::default(),
        };
        let mut inner = redlock_core::Link::new();
        if let Some(ms) = options.connect_timeout_ms {
            if !(ms.is_finite() && ms >= 0.0) {
                return Err(invalid_argument(&format!(
                    "link options: connectTimeoutMs must be a non-negative number of milliseconds, got {ms}"
                )));
            }
            // `as` saturates; the core floors it at 1 ms.
            inner.set_connect_timeout(core::time::Duration::from_micros((ms * 1000.0) as u64));
        }
        Ok(Link {
            inner,
            resp: options.resp.unwrap_or(false),
            front: VecDeque::new(),
            reader: Reader::default(),
            scratch: Vec::new(),
        })
    }

    /// Submits the command of `operation`'s last `send` output (poll it, then submit it
    /// at once), tagged `tag` (a number that names the operation to the driver).
    /// Throws `invalid_argument` when that output was not a `send` or was submitted.
    pub fn submit(
        &mut self,
        tag: f64,
        operation: &mut Operation,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<u32, JsValue> {
        let now = time(now_us, "nowUs")?;
        if !(tag.is_finite() && tag >= 0.0 && tag.fract() == 0.0) {
            return Err(invalid_argument(
                "a tag must be a non-negative whole number",
            ));
        }
        let Some(command) = operation.take_send() else {
            return Err(invalid_argument(
                "the operation has no polled `send` output left to submit",
            ));
        };
        self.inner.submit(tag as u64, command, now);
        Ok(self.pending())
    }

    /// The connection is open (after TLS, AUTH, SELECT).
    #[wasm_bindgen(js_name = handleConnected)]
    pub fn handle_connected(
        &mut self,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<u32, JsValue> {
        let now = time(now_us, "nowUs")?;
        self.closed();
        if self.resp {
            self.reader.open();
        }
        self.inner.handle_connected(now);
        Ok(self.pending())
    }

    /// The connection closed or could not be opened: `cause` is `refused`, `auth`,
    /// `tls`, `timeout` or `closed`; `text` says how.
    #[wasm_bindgen(js_name = handleClosed)]
    pub fn handle_closed(
        &mut self,
        cause: LinkCauseJs,
        text: &str,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<u32, JsValue> {
        let now = time(now_us, "nowUs")?;
        let Some(cause) = cause.as_string() else {
            return Err(invalid_argument("a link cause must be a string"));
        };
        let cause = link_cause(&cause)?;
        self.closed();
        self.inner.handle_closed(cause, text, now);
        Ok(self.pending())
    }

    /// The reply to write `id` (a client library's result, mapped to a reply).
    #[wasm_bindgen(js_name = handleReply)]
    pub fn handle_reply(
        &mut self,
        id: f64,
        reply: ReplyJs,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<u32, JsValue> {
        self.take_reply(id, reply_from_js(&reply), now_us)
    }

    /// `handleReply(id, { type: 'ok' })`, without making the object.
    #[wasm_bindgen(js_name = handleReplyOk)]
    pub fn handle_reply_ok(
        &mut self,
        id: f64,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<u32, JsValue> {
        self.take_reply(id, Ok(Reply::Ok), now_us)
    }

    /// `handleReply(id, { type: 'integer', value })` for a whole `value` within
    /// ±(2^53 - 1), without making the object.
    #[wasm_bindgen(js_name = handleReplyInteger)]
    pub fn handle_reply_integer(
        &mut self,
        id: f64,
        value: f64,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<u32, JsValue> {
        self.take_reply(id, safe_integer(value), now_us)
    }

    /// RESP links: bytes received on the current connection. Each complete reply
    /// answers the oldest write awaiting one. A protocol error (or a reply nobody asked
    /// for) closes the connection: the next output is `close`.
    #[wasm_bindgen(js_name = handleData)]
    pub fn handle_data(
        &mut self,
        bytes: &[u8],
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<u32, JsValue> {
        self.take_data(bytes, now_us)?;
        Ok(self.pending())
    }
}

impl Link {
    fn take_data(&mut self, bytes: &[u8], now_us: f64) -> Result<(), JsValue> {
        let now = time(now_us, "nowUs")?;
        if !self.resp {
            return Err(invalid_argument(
                "handleData is for links made with { resp: true }",
            ));
        }
        if self.reader.feed(&mut self.inner, bytes, now) {
            self.front.push_back(strings::close_output());
        }
        Ok(())
    }
}

#[wasm_bindgen]
impl Link {
    /// Time has reached `nowUs`. Early is harmless.
    #[wasm_bindgen(js_name = handleTimeout)]
    pub fn handle_timeout(
        &mut self,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<u32, JsValue> {
        let now = time(now_us, "nowUs")?;
        self.inner.handle_timeout(now);
        Ok(self.pending())
    }

    /// The next output, or `undefined` when there is nothing to do until the next input.
    #[wasm_bindgen(js_name = pollOutput, unchecked_return_type = "LinkOutput | undefined")]
    pub fn poll_output(&mut self) -> Result<JsValue, JsValue> {
        if let Some(value) = self.front.pop_front() {
            return Ok(value);
        }
        let value = match self.inner.poll_output() {
            None => return Ok(JsValue::UNDEFINED),
            Some(LinkOutput::Connect) => strings::connect_output(),
            Some(LinkOutput::Close) => {
                self.closed();
                strings::close_output()
            }
            Some(LinkOutput::Write(write)) => {
                let id = write.id().0 as f64;
                if self.resp {
                    self.reader.wrote(write.id());
                    self.scratch.clear();
                    write.encode_resp(&mut self.scratch);
                    strings::write_bytes(id, &self.scratch)
                } else {
                    strings::write_output(&write)
                }
            }
            Some(LinkOutput::Deliver(delivery)) => strings::deliver_output(
                delivery.tag as f64,
                delivery.request.0 as f64,
                &reply_to_js(&delivery.reply),
            ),
            Some(_) => return Err(error::error("unknown_output", "unknown link output")),
        };
        Ok(value)
    }

    /// The connect timeout in milliseconds (see the constructor's `connectTimeoutMs`).
    #[wasm_bindgen(getter, js_name = connectTimeoutMs)]
    pub fn connect_timeout_ms(&self) -> f64 {
        self.inner.connect_timeout().as_micros() as f64 / 1000.0
    }

    /// When `handleTimeout` is next due (us), or `undefined` if nothing waits on time.
    #[wasm_bindgen(js_name = pollTimeout)]
    pub fn poll_timeout(&self) -> Option<f64> {
        self.inner.poll_timeout().map(time_to_js)
    }

    /// True while a written command is unanswered past its deadline at `nowUs`.
    #[wasm_bindgen(js_name = isStalled)]
    pub fn is_stalled(
        &self,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<bool, JsValue> {
        Ok(self.inner.is_stalled(time(now_us, "nowUs")?))
    }

    /// True when nothing is queued or awaiting a reply (safe to close the connection).
    #[wasm_bindgen(getter, js_name = isIdle)]
    pub fn is_idle(&self) -> bool {
        self.inner.is_idle()
    }

    /// True while a connection is open.
    #[wasm_bindgen(getter, js_name = isOpen)]
    pub fn is_open(&self) -> bool {
        self.inner.is_open()
    }

    /// Writes awaiting their replies (the three script loads included).
    #[wasm_bindgen(getter, js_name = inFlight)]
    pub fn in_flight(&self) -> usize {
        self.inner.in_flight()
    }

    /// Commands queued, not yet written.
    #[wasm_bindgen(getter)]
    pub fn queued(&self) -> usize {
        self.inner.queued()
    }

    /// Tokens whose release this link still owes.
    #[wasm_bindgen(getter)]
    pub fn owed(&self) -> usize {
        self.inner.owed()
    }
}
