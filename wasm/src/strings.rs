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
    lease = "lease",
    reason = "reason",
    validity_us = "validityUs",
    attempts = "attempts",
    token = "token",
    retry_at = "retryAt",
    lost = "lost",
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
}
