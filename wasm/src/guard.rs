//! The resource-side fencing check (`FencedSet`) and the names the core gives to
//! per-resource channels and keys.

use redlock_core::{FencedWrite, MAX_FENCING_TOKEN};
use serde::Serialize;
use wasm_bindgen::prelude::*;

use crate::convert::{bytes_from_js, reply_from_js, to_js, BytesRef};
use crate::error::{self, invalid_argument};
use crate::strings::bytes_to_js;
use crate::types::{ArgsJs, BytesJs, FencedWriteJs, ReplyJs};

/// A fencing token from JS: a number (not a string or `bigint`), then the core's rule
/// (a whole number from 1 to 2^53 - 1). A fraction or a negative number breaks the core's
/// rule too, so it gets the core's code.
fn fencing_token(value: &JsValue) -> Result<u64, JsValue> {
    let Some(number) = value.as_f64() else {
        return Err(invalid_argument(
            "a fencing token must be a number (a lock's fencingToken)",
        ));
    };
    if number.is_finite()
        && number.fract() == 0.0
        && number >= 0.0
        && number <= MAX_FENCING_TOKEN as f64
    {
        Ok(number as u64)
    } else {
        // 0 is refused by the core itself, with the same code.
        Err(error::usage(redlock_core::UsageError::InvalidFencingToken))
    }
}

/// One fenced write of `value` to `item` under a fencing token, for a resource that is a
/// Redis key: the item is set only if the token is greater than the highest one it has
/// accepted (kept under `fenceGuardKey(item)`, on the item's own server).
///
/// Send `args(false)` (`EVALSHA`) to the item's server and hand the reply to
/// `handleReply`. On `retry_as_eval` send `args(true)` (`EVAL`) and hand in that reply.
#[wasm_bindgen]
pub struct FencedSet {
    inner: redlock_core::FencedSet,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Write<'a> {
    Accepted { token: f64 },
    Stale { token: f64, seen: f64 },
    RetryAsEval,
    Failed { error: &'a str },
}

#[wasm_bindgen]
impl FencedSet {
    /// A write of `value` (text or bytes) to `item` (a non-empty key) under `token`
    /// (a lock's `fencingToken`). Throws `empty_resource` for an empty item,
    /// `invalid_fencing_token` for a token that is not a whole number from 1 to
    /// 2^53 - 1, `invalid_argument` for a value of the wrong type.
    #[wasm_bindgen(constructor)]
    pub fn new(
        item: BytesJs,
        value: BytesJs,
        #[wasm_bindgen(unchecked_param_type = "number")] token: JsValue,
    ) -> Result<FencedSet, JsValue> {
        let item = bytes_from_js(&item, "the item")?;
        let value = bytes_from_js(&value, "the value")?;
        let token = fencing_token(&token)?;
        let inner = redlock_core::FencedSet::new(&item, &value, token).map_err(error::usage)?;
        Ok(FencedSet { inner })
    }

    /// The token this write carries.
    #[wasm_bindgen(getter)]
    pub fn token(&self) -> f64 {
        self.inner.token() as f64
    }

    /// The command to send: `EVALSHA <sha1> 2 <item> <guard> <token> <value>`, or with
    /// `eval` the same as `EVAL <script> ...`. Text where valid UTF-8, bytes otherwise.
    pub fn args(&self, eval: bool) -> ArgsJs {
        let array = js_sys::Array::new();
        for arg in self.inner.args(eval) {
            array.push(&bytes_to_js(&arg));
        }
        JsValue::from(array).unchecked_into()
    }

    /// Reads the server's reply to `args(...)` (a reply object as `Operation.handleReply`
    /// takes it): `accepted`, `stale` with the token the item had already accepted,
    /// `retry_as_eval` (send `args(true)` and hand in that reply instead), or `failed`
    /// with what went wrong (after a timeout or a lost connection the write may or may
    /// not have happened). Throws only for a reply object of the wrong shape.
    #[wasm_bindgen(js_name = handleReply)]
    pub fn handle_reply(&self, reply: ReplyJs) -> Result<FencedWriteJs, JsValue> {
        let reply = reply_from_js(&reply)?;
        let token = self.inner.token() as f64;
        let result = self.inner.handle_reply(&reply);
        let write = match &result {
            FencedWrite::Accepted => Write::Accepted { token },
            FencedWrite::Stale { seen } => Write::Stale {
                token,
                seen: *seen as f64,
            },
            FencedWrite::RetryAsEval => Write::RetryAsEval,
            FencedWrite::Failed(text) => Write::Failed { error: text },
            // `FencedWrite` is non-exhaustive: a future kind is a failure with its name.
            _ => Write::Failed {
                error: "the fenced write ended in a way this build does not know",
            },
        };
        to_js(&write).map(JsValue::unchecked_into)
    }
}

/// The channel on which releases of lock key `key` are announced (the release script
/// publishes the key there): `redlock:released:<key>`. Text where valid UTF-8.
#[wasm_bindgen(js_name = noticeChannel)]
pub fn notice_channel(key: BytesJs) -> Result<BytesJs, JsValue> {
    let key = bytes_from_js(&key, "a key")?;
    to_js(&BytesRef(&redlock_core::notice_channel(&key))).map(JsValue::unchecked_into)
}

/// The guard key of a protected item (the highest fencing token it accepted), in the
/// item's Redis Cluster slot.
#[wasm_bindgen(js_name = fenceGuardKey)]
pub fn fence_guard_key(item: BytesJs) -> Result<BytesJs, JsValue> {
    let item = bytes_from_js(&item, "the item")?;
    to_js(&BytesRef(&redlock_core::fence_guard_key(&item))).map(JsValue::unchecked_into)
}

/// The fence key (the per-resource counter) next to lock key `key`.
#[wasm_bindgen(js_name = fenceKey)]
pub fn fence_key(key: BytesJs) -> Result<BytesJs, JsValue> {
    let key = bytes_from_js(&key, "a key")?;
    to_js(&BytesRef(&redlock_core::fence_key(&key))).map(JsValue::unchecked_into)
}
