//! The core's RESP codec, for drivers that own a raw socket (edge runtimes).

use redlock_core::resp;
use serde::Deserialize;
use wasm_bindgen::prelude::*;

use crate::convert::{options_from_js, to_js, ReplyOut};
use crate::error::{self, invalid_argument};
use crate::types::{ArgsJs, DecodedReplyJs, DecoderLimitsJs};

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct LimitsIn {
    max_bulk: Option<usize>,
    max_elements: Option<usize>,
    max_depth: Option<usize>,
    max_line: Option<usize>,
}

/// An incremental RESP2/RESP3 decoder: feed it bytes as they arrive, take replies as
/// they complete. After a protocol error it keeps throwing it: close the connection.
#[wasm_bindgen]
pub struct Decoder {
    inner: resp::Decoder,
}

#[wasm_bindgen]
impl Decoder {
    /// A decoder with the core's default limits, or the given ones.
    #[wasm_bindgen(constructor)]
    pub fn new(limits: Option<DecoderLimitsJs>) -> Result<Decoder, JsValue> {
        let given: LimitsIn = match limits {
            Some(limits) if !limits.is_undefined() && !limits.is_null() => {
                let known = ["maxBulk", "maxElements", "maxDepth", "maxLine"];
                options_from_js(limits.into(), &known, "decoder limits")?
            }
            _ => LimitsIn::default(),
        };
        let default = resp::Limits::default();
        let limits = resp::Limits {
            max_bulk: given.max_bulk.unwrap_or(default.max_bulk),
            max_elements: given.max_elements.unwrap_or(default.max_elements),
            max_depth: given.max_depth.unwrap_or(default.max_depth),
            max_line: given.max_line.unwrap_or(default.max_line),
        };
        Ok(Decoder {
            inner: resp::Decoder::with_limits(limits),
        })
    }

    /// Appends received bytes.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.inner.feed(bytes);
    }

    /// The next complete reply, or `undefined` until more bytes arrive. Throws a
    /// `RedlockError` whose `code` is the protocol error (`unknown_type`, `bad_number`,
    /// `bad_terminator`, `too_large`, `too_deep`, `bad_value`).
    #[wasm_bindgen(js_name = nextReply)]
    pub fn next_reply(&mut self) -> Result<Option<DecodedReplyJs>, JsValue> {
        match self.inner.next_reply() {
            Ok(None) => Ok(None),
            Ok(Some(reply)) => Ok(Some(to_js(&ReplyOut(&reply))?.unchecked_into())),
            Err(e) => Err(error::error(e.code(), &e.to_string())),
        }
    }

    /// Bytes received and not yet consumed by a complete reply.
    #[wasm_bindgen(getter)]
    pub fn buffered(&self) -> usize {
        self.inner.buffered()
    }
}

/// Encodes a command (its name first) as a RESP array of bulk strings; strings are
/// sent as UTF-8.
#[wasm_bindgen(js_name = encodeCommand)]
pub fn encode_command(args: ArgsJs) -> Result<Vec<u8>, JsValue> {
    if !js_sys::Array::is_array(&args) {
        return Err(invalid_argument(
            "a command is an array of strings or Uint8Arrays",
        ));
    }
    let array: &js_sys::Array = args.unchecked_ref();
    // Capacity bounded: a sparse JS array can claim any length.
    let mut owned: Vec<Vec<u8>> = Vec::with_capacity((array.length() as usize).min(64));
    for arg in array.iter() {
        if let Some(text) = arg.as_string() {
            owned.push(text.into_bytes());
        } else if let Some(bytes) = arg.dyn_ref::<js_sys::Uint8Array>() {
            owned.push(bytes.to_vec());
        } else {
            return Err(invalid_argument(
                "a command argument must be a string or a Uint8Array",
            ));
        }
    }
    let mut out = Vec::new();
    resp::encode_command(owned.iter().map(Vec::as_slice), &mut out);
    Ok(out)
}
