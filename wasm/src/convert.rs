//! Conversions between JS values and the core's types.

use redlock_core::{NodeResult, Reply, Time};
use serde::de::{self, DeserializeOwned, Deserializer, Visitor};
use serde::ser::{SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};
use wasm_bindgen::{JsCast, JsValue};

use crate::error::invalid_argument;
use crate::strings::{self, Plain, Strings};

/// Serializes `value` into a plain JS object.
pub(crate) fn to_js<T: Serialize + ?Sized>(value: &T) -> Result<JsValue, JsValue> {
    value
        .serialize(&serde_wasm_bindgen::Serializer::new().serialize_missing_as_null(true))
        .map_err(|e| invalid_argument(&e.to_string()))
}

/// Deserializes options object `value`, refusing fields not in `known` (serde's
/// `deny_unknown_fields` does not see them: serde-wasm-bindgen reads only the fields a
/// struct names, so a misspelt option would silently be ignored).
pub(crate) fn options_from_js<T: DeserializeOwned>(
    value: JsValue,
    known: &[&str],
    what: &str,
) -> Result<T, JsValue> {
    if let Some(object) = value.dyn_ref::<js_sys::Object>() {
        for key in js_sys::Object::keys(object).iter() {
            let key = key.as_string().unwrap_or_default();
            if !known.contains(&key.as_str()) {
                return Err(invalid_argument(&format!(
                    "{what}: unknown field `{key}` (expected one of {})",
                    known.join(", ")
                )));
            }
        }
    }
    from_js(value, what)
}

/// Deserializes `value`, naming `what` in the error.
pub(crate) fn from_js<T: DeserializeOwned>(value: JsValue, what: &str) -> Result<T, JsValue> {
    serde_wasm_bindgen::from_value(value).map_err(|e| invalid_argument(&format!("{what}: {e}")))
}

/// A JS number of microseconds as a core [`Time`]; the fraction is dropped and values
/// beyond `u64` saturate.
pub(crate) fn time(now: f64, what: &str) -> Result<Time, JsValue> {
    if now.is_finite() && now >= 0.0 {
        // `as` truncates toward zero and saturates at u64::MAX.
        Ok(Time::from_micros(now as u64))
    } else {
        Err(invalid_argument(&format!(
            "{what} must be a non-negative number of microseconds, got {now}"
        )))
    }
}

/// A core [`Time`] as a JS number (exact below 2^53 us).
pub(crate) fn time_to_js(time: Time) -> f64 {
    time.as_micros() as f64
}

/// A non-negative whole number that fits `u64`.
pub(crate) fn whole(value: f64, what: &str) -> Result<u64, JsValue> {
    if value.is_finite() && value >= 0.0 && value.fract() == 0.0 && value <= u64::MAX as f64 {
        Ok(value as u64)
    } else {
        Err(invalid_argument(&format!(
            "{what} must be a non-negative whole number, got {value}"
        )))
    }
}

/// A node index from JS: a non-negative whole number (`usize::MAX` when it does not fit,
/// which the core refuses as an unknown node).
pub(crate) fn node_index(value: f64) -> Result<usize, JsValue> {
    Ok(usize::try_from(whole(value, "node")?).unwrap_or(usize::MAX))
}

/// Bytes that JS gives as a string (UTF-8) or a `Uint8Array`, and gets back as a string
/// when they are valid UTF-8, a `Uint8Array` otherwise.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Bytes(pub Vec<u8>);

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Bytes, D::Error> {
        struct BytesVisitor;
        impl<'de> Visitor<'de> for BytesVisitor {
            type Value = Bytes;
            fn expecting(&self, f: &mut core::fmt::Formatter) -> core::fmt::Result {
                f.write_str("a string or a Uint8Array")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Bytes, E> {
                Ok(Bytes(v.as_bytes().to_vec()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Bytes, E> {
                Ok(Bytes(v.into_bytes()))
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Bytes, E> {
                Ok(Bytes(v.to_vec()))
            }
            fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<Bytes, E> {
                Ok(Bytes(v))
            }
        }
        deserializer.deserialize_any(BytesVisitor)
    }
}

/// Serializes bytes as a string when valid UTF-8, as a `Uint8Array` otherwise.
pub(crate) struct BytesRef<'a>(pub &'a [u8]);

impl Serialize for BytesRef<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match core::str::from_utf8(self.0) {
            Ok(text) => serializer.serialize_str(text),
            Err(_) => serializer.serialize_bytes(self.0),
        }
    }
}

/// One resource name from a JS string or `Uint8Array`.
fn resource(value: &JsValue) -> Result<Vec<u8>, JsValue> {
    bytes_from_js(value, "a resource")
}

/// Bytes from a JS string (UTF-8) or `Uint8Array`; `what` names the value in the error.
pub(crate) fn bytes_from_js(value: &JsValue, what: &str) -> Result<Vec<u8>, JsValue> {
    if let Some(text) = value.as_string() {
        Ok(text.into_bytes())
    } else if let Some(bytes) = value.dyn_ref::<js_sys::Uint8Array>() {
        Ok(bytes.to_vec())
    } else {
        Err(invalid_argument(&format!(
            "{what} must be a string or a Uint8Array"
        )))
    }
}

/// Resources given as one resource or an array of them.
pub(crate) fn resources(value: &JsValue) -> Result<Vec<Vec<u8>>, JsValue> {
    if js_sys::Array::is_array(value) {
        let array: &js_sys::Array = value.unchecked_ref();
        array.iter().map(|item| resource(&item)).collect()
    } else {
        Ok(vec![resource(value)?])
    }
}

/// A per-node result: its code, or `{ error: text, cause }`.
pub(crate) struct NodeResultRef<'a>(pub &'a NodeResult);

impl Serialize for NodeResultRef<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            NodeResult::Error(text) => {
                #[derive(Serialize)]
                struct ErrorResult<'a> {
                    error: &'a str,
                    cause: &'static str,
                }
                let cause = self.0.cause().map_or("error", |c| c.code());
                ErrorResult { error: text, cause }.serialize(serializer)
            }
            other => serializer.serialize_str(other.code()),
        }
    }
}

pub(crate) struct NodeResults<'a>(pub &'a [NodeResult]);

impl Serialize for NodeResults<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for result in self.0 {
            seq.serialize_element(&NodeResultRef(result))?;
        }
        seq.end()
    }
}

/// Arrays nested deeper than this in a reply from JS are refused (the RESP decoder's
/// default limit).
const MAX_REPLY_DEPTH: usize = 32;

fn reply_text(object: &Plain, strings: &Strings, kind: &str) -> Result<String, JsValue> {
    object
        .field(&strings.value)
        .as_string()
        .ok_or_else(|| invalid_argument(&format!("a `{kind}` reply needs a string `value`")))
}

/// A reply in the conformance vectors' format (`{ type, value }`), read by hand: it is
/// on every lock's path, and serde's generic reader cost more than the core's decision.
pub(crate) fn reply_from_js(reply: &JsValue) -> Result<Reply, JsValue> {
    strings::with(|s| read_reply(reply, s, 0))
}

fn read_reply(reply: &JsValue, s: &Strings, depth: usize) -> Result<Reply, JsValue> {
    if !reply.is_object() {
        return Err(invalid_argument(
            "a reply must be an object { type, value }",
        ));
    }
    let object: &Plain = reply.unchecked_ref();
    let kind = object.field(&s.type_);
    // The shapes of every lock cycle first, compared without decoding any text.
    if kind == s.ok {
        return Ok(Reply::Ok);
    }
    if kind == s.integer {
        let value = object.field(&s.value);
        if let Some(n) = value.as_f64() {
            if n.fract() == 0.0 && n.abs() <= MAX_SAFE_INTEGER {
                return Ok(Reply::Integer(n as i64));
            }
        } else if let Ok(big) = value.dyn_into::<js_sys::BigInt>() {
            if let Ok(n) = i64::try_from(big) {
                return Ok(Reply::Integer(n));
            }
        }
        return Err(invalid_argument(
            "an `integer` reply needs a whole number (or a bigint) in the i64 range",
        ));
    }
    if kind == s.nil {
        return Ok(Reply::Nil);
    }
    let Some(kind) = kind.as_string() else {
        return Err(invalid_argument("a reply's `type` must be a string"));
    };
    Ok(match kind.as_str() {
        "timeout" => Reply::Timeout,
        "status" => Reply::status(&reply_text(object, s, &kind)?),
        "error" => Reply::Error(reply_text(object, s, &kind)?),
        "connection_failed" => Reply::ConnectionFailed(reply_text(object, s, &kind)?),
        "bulk" => {
            let value = object.field(&s.value);
            match value.as_string() {
                Some(text) => Reply::Bulk(text.into_bytes()),
                None => match value.dyn_ref::<js_sys::Uint8Array>() {
                    Some(bytes) => Reply::Bulk(bytes.to_vec()),
                    None => {
                        return Err(invalid_argument(
                            "a `bulk` reply needs a string or Uint8Array `value`",
                        ))
                    }
                },
            }
        }
        "array" => {
            let value = object.field(&s.value);
            if !js_sys::Array::is_array(&value) {
                return Err(invalid_argument("an `array` reply needs an array `value`"));
            }
            if depth >= MAX_REPLY_DEPTH {
                return Err(invalid_argument("reply arrays are nested too deeply"));
            }
            let items: &js_sys::Array = value.unchecked_ref();
            // Capacity bounded: a sparse JS array can claim any length.
            let mut replies = Vec::with_capacity((items.length() as usize).min(64));
            for item in items.iter() {
                replies.push(read_reply(&item, s, depth + 1)?);
            }
            Reply::Array(replies)
        }
        other => {
            return Err(invalid_argument(&format!(
                "unknown reply type `{other}` (ok, status, nil, integer, bulk, array, error, timeout, connection_failed)"
            )))
        }
    })
}

/// A reply as JS gets it back from the RESP decoder: bulk strings as `Uint8Array`,
/// integers as numbers when exact, as `bigint` otherwise.
pub(crate) struct ReplyOut<'a>(pub &'a Reply);

const MAX_SAFE_INTEGER_I64: i64 = (1 << 53) - 1;
pub(crate) const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

struct Integer(i64);

impl Serialize for Integer {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if (-MAX_SAFE_INTEGER_I64..=MAX_SAFE_INTEGER_I64).contains(&self.0) {
            serializer.serialize_f64(self.0 as f64)
        } else {
            // serde-wasm-bindgen turns 128-bit integers into a bigint.
            serializer.serialize_i128(i128::from(self.0))
        }
    }
}

struct RawBytes<'a>(&'a [u8]);

impl Serialize for RawBytes<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(self.0)
    }
}

impl Serialize for ReplyOut<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Tagged<'a, T: Serialize> {
            #[serde(rename = "type")]
            kind: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            value: Option<T>,
        }
        fn tagged<S: Serializer, T: Serialize>(
            serializer: S,
            kind: &str,
            value: Option<T>,
        ) -> Result<S::Ok, S::Error> {
            Tagged { kind, value }.serialize(serializer)
        }
        match self.0 {
            Reply::Ok => tagged::<S, ()>(serializer, "ok", None),
            Reply::Status(text) => tagged(serializer, "status", Some(text)),
            Reply::Nil => tagged::<S, ()>(serializer, "nil", None),
            Reply::Integer(n) => tagged(serializer, "integer", Some(Integer(*n))),
            Reply::Bulk(bytes) => tagged(serializer, "bulk", Some(RawBytes(bytes))),
            Reply::Array(items) => tagged(
                serializer,
                "array",
                Some(items.iter().map(ReplyOut).collect::<Vec<_>>()),
            ),
            Reply::Error(text) => tagged(serializer, "error", Some(text)),
            Reply::Timeout => tagged::<S, ()>(serializer, "timeout", None),
            Reply::ConnectionFailed(text) => tagged(serializer, "connection_failed", Some(text)),
            // `Reply` is non-exhaustive; a future kind is reported by name rather than lost.
            other => tagged(serializer, "unknown", Some(format!("{other:?}"))),
        }
    }
}

/// A reply as a JS object in the shape `handleReply` takes back (`{ type, value }`),
/// built from literals: deliveries are on every lock's path.
/// A reply from a client library that gives status and bulk replies alike as strings,
/// read as the bulk strings they were (an inspection's `GET` answers bulk strings only).
pub(crate) fn as_bulk(reply: Reply) -> Reply {
    match reply {
        Reply::Ok => Reply::Bulk(b"OK".to_vec()),
        Reply::Status(text) => Reply::Bulk(text.into_bytes()),
        Reply::Array(items) => Reply::Array(items.into_iter().map(as_bulk).collect()),
        other => other,
    }
}

pub(crate) fn reply_to_js(reply: &Reply) -> JsValue {
    strings::with(|s| reply_to_js_with(s, reply))
}

fn reply_to_js_with(s: &Strings, reply: &Reply) -> JsValue {
    match reply {
        Reply::Ok => strings::ok_reply(),
        Reply::Nil => strings::nil_reply(),
        Reply::Timeout => strings::timeout_reply(),
        Reply::Integer(n) => {
            let value = if (-MAX_SAFE_INTEGER_I64..=MAX_SAFE_INTEGER_I64).contains(n) {
                JsValue::from_f64(*n as f64)
            } else {
                js_sys::BigInt::from(*n).into()
            };
            strings::value_reply(&s.integer, &value)
        }
        Reply::Status(text) => strings::value_reply(&s.status, &JsValue::from_str(text)),
        Reply::Error(text) => strings::value_reply(&s.error, &JsValue::from_str(text)),
        Reply::ConnectionFailed(text) => {
            strings::value_reply(&s.connection_failed, &JsValue::from_str(text))
        }
        Reply::Bulk(bytes) => strings::value_reply(&s.bulk, &strings::bytes_to_js(bytes)),
        Reply::Array(items) => {
            let array = js_sys::Array::new_with_length(items.len() as u32);
            for (index, item) in items.iter().enumerate() {
                array.set(index as u32, reply_to_js_with(s, item));
            }
            strings::value_reply(&s.array, &array.into())
        }
        // `Reply` is non-exhaustive: a future kind is reported by name rather than lost.
        other => strings::value_reply(
            &JsValue::from_str("unknown"),
            &JsValue::from_str(&format!("{other:?}")),
        ),
    }
}

/// A link cause from its JS name.
pub(crate) fn link_cause(value: &str) -> Result<redlock_core::LinkCause, JsValue> {
    use redlock_core::LinkCause;
    Ok(match value {
        "refused" => LinkCause::Refused,
        "auth" => LinkCause::Auth,
        "tls" => LinkCause::Tls,
        "timeout" => LinkCause::Timeout,
        "closed" => LinkCause::Closed,
        other => {
            return Err(invalid_argument(&format!(
                "unknown link cause `{other}` (refused, auth, tls, timeout, closed)"
            )))
        }
    })
}
