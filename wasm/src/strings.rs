//! JS strings used on every output and reply, created once: building them anew from
//! Rust text (a UTF-8 decode each) dominated the cost of a lock cycle.

use wasm_bindgen::prelude::*;

macro_rules! js_strings {
    ($($field:ident = $text:literal),* $(,)?) => {
        pub(crate) struct Strings {
            $(pub $field: JsValue,)*
        }

        impl Strings {
            fn new() -> Strings {
                Strings { $($field: JsValue::from_str($text),)* }
            }
        }
    };
}

js_strings! {
    type_ = "type",
    kind = "kind",
    value = "value",
    ok = "ok",
    nil = "nil",
    integer = "integer",
    timeout = "timeout",
    set = "set",
    acquire = "acquire",
    release = "release",
    extend = "extend",
    released = "released",
    nodes = "nodes",
    error = "error",
    // Outcome kinds, failure reasons and node results.
    acquired = "acquired",
    not_acquired = "not_acquired",
    extended = "extended",
    not_extended = "not_extended",
    conflict = "conflict",
    nodes_failed = "nodes_failed",
    mixed = "mixed",
    validity_too_short = "validity_too_short",
    not_asked = "not_asked",
    pending = "pending",
    success = "success",
}

impl Strings {
    /// The cached string for one of the core's stable codes (a new one otherwise).
    pub(crate) fn code(&self, code: &str) -> JsValue {
        match code {
            "acquired" => self.acquired.clone(),
            "not_acquired" => self.not_acquired.clone(),
            "extended" => self.extended.clone(),
            "not_extended" => self.not_extended.clone(),
            "released" => self.released.clone(),
            "conflict" => self.conflict.clone(),
            "nodes_failed" => self.nodes_failed.clone(),
            "mixed" => self.mixed.clone(),
            "validity_too_short" => self.validity_too_short.clone(),
            "not_asked" => self.not_asked.clone(),
            "pending" => self.pending.clone(),
            "success" => self.success.clone(),
            "timeout" => self.timeout.clone(),
            other => JsValue::from_str(other),
        }
    }
}

#[wasm_bindgen]
extern "C" {
    /// A plain JS object, with property access that skips `Reflect`'s exception wrapper.
    #[wasm_bindgen(extends = js_sys::Object)]
    pub(crate) type Plain;

    /// `target[key] = value`, without the exception wrapper of `Reflect.set` (which made
    /// every property a slow call). Only used on fresh plain objects.
    #[wasm_bindgen(method, indexing_setter)]
    pub(crate) fn put(target: &Plain, key: &JsValue, value: &JsValue);

    /// `target[key]`; `target` MUST be an object (checked by the caller).
    #[wasm_bindgen(method, indexing_getter)]
    pub(crate) fn field(target: &Plain, key: &JsValue) -> JsValue;
}

thread_local! {
    static STRINGS: Strings = Strings::new();
}

/// Runs `f` with the cached strings.
pub(crate) fn with<R>(f: impl FnOnce(&Strings) -> R) -> R {
    STRINGS.with(f)
}

impl Plain {
    /// A new empty object.
    pub(crate) fn new() -> Plain {
        js_sys::Object::new().unchecked_into()
    }
}

// Output objects built in one call each, as object literals: setting their properties
// one import call at a time cost more than the core's whole decision.
#[wasm_bindgen(inline_js = "
export function sendOutput(node, requestId, deadline, kind, isEval, args) {
  return { type: 'send', node, requestId, deadline, kind, isEval, args };
}
export function waitOutput(until) {
  return { type: 'wait', until };
}
export function outcomeOutput(outcome) {
  return { type: 'outcome', outcome };
}
export function acquired(validityUs, attempts, nodes, lease) {
  return { kind: 'acquired', lease, validityUs, attempts, nodes };
}
export function notAcquired(reason, attempts, token, nodes) {
  return { kind: 'not_acquired', reason, attempts, token, nodes };
}
export function extended(validityUs, nodes, lease) {
  return { kind: 'extended', lease, validityUs, nodes };
}
export function notExtended(reason, validityUs, retryAt, lost, nodes, lease) {
  return { kind: 'not_extended', reason, lease, validityUs, retryAt: retryAt ?? null, lost, nodes };
}
export function released(released, nodes) {
  return { kind: 'released', released, nodes };
}
")]
extern "C" {
    #[wasm_bindgen(js_name = sendOutput)]
    pub(crate) fn send_output(
        node: f64,
        request_id: f64,
        deadline: f64,
        kind: &JsValue,
        is_eval: bool,
        args: &JsValue,
    ) -> JsValue;

    #[wasm_bindgen(js_name = waitOutput)]
    pub(crate) fn wait_output(until: f64) -> JsValue;

    #[wasm_bindgen(js_name = outcomeOutput)]
    pub(crate) fn outcome_output(outcome: &JsValue) -> JsValue;

    pub(crate) fn acquired(
        validity_us: f64,
        attempts: u32,
        nodes: &JsValue,
        lease: JsValue,
    ) -> JsValue;

    #[wasm_bindgen(js_name = notAcquired)]
    pub(crate) fn not_acquired(
        reason: &JsValue,
        attempts: u32,
        token: &str,
        nodes: &JsValue,
    ) -> JsValue;

    pub(crate) fn extended(validity_us: f64, nodes: &JsValue, lease: JsValue) -> JsValue;

    #[wasm_bindgen(js_name = notExtended)]
    pub(crate) fn not_extended(
        reason: &JsValue,
        validity_us: f64,
        retry_at: Option<f64>,
        lost: bool,
        nodes: &JsValue,
        lease: JsValue,
    ) -> JsValue;

    pub(crate) fn released(released: f64, nodes: &JsValue) -> JsValue;
}

/// How many argument strings the cache keeps before it starts over.
const ARG_CACHE_SIZE: usize = 256;

thread_local! {
    /// JS strings of recent command arguments: every lock of a resource sends the same
    /// command names, key, TTL and script SHA-1s, and making each string anew (a UTF-8
    /// decode in JS) was the largest part of an output's cost. Tokens are not cached:
    /// they never repeat.
    static ARGS: core::cell::RefCell<std::collections::BTreeMap<Vec<u8>, JsValue>> =
        const { core::cell::RefCell::new(std::collections::BTreeMap::new()) };
}

/// The JS string for an argument's text, from the cache when it was seen recently.
pub(crate) fn cached_arg(text: &str) -> JsValue {
    ARGS.with(|cache| {
        let Ok(mut cache) = cache.try_borrow_mut() else {
            return JsValue::from_str(text);
        };
        if let Some(value) = cache.get(text.as_bytes()) {
            return value.clone();
        }
        if cache.len() >= ARG_CACHE_SIZE {
            cache.clear();
        }
        let value = JsValue::from_str(text);
        cache.insert(text.as_bytes().to_vec(), value.clone());
        value
    })
}
