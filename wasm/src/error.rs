//! Errors as real JS `Error`s with a stable `code`.

use wasm_bindgen::JsValue;

/// The `code` of an error about a JS value of the wrong type or range.
pub(crate) const INVALID_ARGUMENT: &str = "invalid_argument";

/// A JS `Error` named `RedlockError` with `message` and the stable `code`.
pub(crate) fn error(code: &str, message: &str) -> JsValue {
    let error = js_sys::Error::new(message);
    error.set_name("RedlockError");
    // Setting a property on a fresh, extensible Error object cannot fail.
    let _ = js_sys::Reflect::set(&error, &"code".into(), &code.into());
    error.into()
}

pub(crate) fn invalid_argument(message: &str) -> JsValue {
    error(INVALID_ARGUMENT, message)
}

pub(crate) fn usage(e: redlock_core::UsageError) -> JsValue {
    error(e.code(), &e.to_string())
}

pub(crate) fn config(e: redlock_core::ConfigError) -> JsValue {
    error(e.code(), &e.to_string())
}
