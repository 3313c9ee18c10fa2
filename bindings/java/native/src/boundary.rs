//! The boundary with the JVM: the panic guard, the exceptions native errors become, and
//! the handles Java holds as `long`s. All of this crate's `unsafe` is in this module.
//!
//! # Why panics never reach the JVM
//!
//! Every exported function runs its body inside [`guard`], under `catch_unwind`. A panic
//! (a bug: the core promises none on any input) becomes a `RedlockNativeException`
//! carrying the panic's message, which our panic hook stored instead of printing it to
//! the JVM's stderr. The function then returns a neutral value the Java side never uses,
//! because a Java exception is pending.
//!
//! # Handles
//!
//! A handle is `Box::into_raw` of a Rust value, passed to Java as a `long`. The Java
//! class that owns it frees it exactly once (`close()`, or its `Cleaner` when it becomes
//! unreachable) and never passes it again afterwards: it swaps the field to 0 under its
//! lock and refuses calls on 0, so the native side only ever sees 0 (refused here with
//! `used_after_close`) or a live handle of the right type. Calls on one handle are
//! serialised by its Java owner.

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Once;

use jni::objects::{JObject, JThrowable, JValue};
use jni::sys::jlong;
use jni::JNIEnv;

/// Exception classes, by the kind of mistake.
pub(crate) const ARGUMENT: &str = "io/github/redlockcore/RedlockArgumentException";
pub(crate) const STATE: &str = "io/github/redlockcore/RedlockStateException";
pub(crate) const NATIVE: &str = "io/github/redlockcore/RedlockNativeException";
pub(crate) const PROTOCOL: &str = "io/github/redlockcore/RedlockProtocolException";

/// Why a native call failed; becomes a Java exception in [`guard`].
#[derive(Debug)]
pub(crate) enum Failure {
    /// Throw `class(code, message)`.
    Throw {
        class: &'static str,
        code: &'static str,
        message: String,
    },
    /// A JNI call failed; if it left a Java exception pending, that one is thrown.
    Jni(jni::errors::Error),
}

impl Failure {
    pub(crate) fn argument(code: &'static str, message: impl Into<String>) -> Failure {
        Failure::Throw {
            class: ARGUMENT,
            code,
            message: message.into(),
        }
    }

    pub(crate) fn state(code: &'static str, message: impl Into<String>) -> Failure {
        Failure::Throw {
            class: STATE,
            code,
            message: message.into(),
        }
    }
}

impl From<jni::errors::Error> for Failure {
    fn from(error: jni::errors::Error) -> Failure {
        Failure::Jni(error)
    }
}

pub(crate) type Result<T> = std::result::Result<T, Failure>;

thread_local! {
    /// The message of the last panic on this thread, recorded by our hook.
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

static HOOK: Once = Once::new();

/// Replaces the default panic hook (which prints to stderr) with one that records the
/// message for the exception. Installed once, when the library loads.
pub(crate) fn install_panic_hook() {
    HOOK.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            let text = info.to_string();
            // `try_with`: a panic during thread teardown must not panic again.
            let _ = LAST_PANIC.try_with(|last| {
                if let Ok(mut last) = last.try_borrow_mut() {
                    *last = Some(text);
                }
            });
        }));
    });
}

/// Runs `body`; a failure or a panic becomes a pending Java exception and `fallback` is
/// returned.
pub(crate) fn guard<'local, T>(
    env: &mut JNIEnv<'local>,
    fallback: T,
    body: impl FnOnce(&mut JNIEnv<'local>) -> Result<T>,
) -> T {
    install_panic_hook();
    let result = catch_unwind(AssertUnwindSafe(|| body(env)));
    match result {
        Ok(Ok(value)) => value,
        Ok(Err(failure)) => {
            throw(env, failure);
            fallback
        }
        Err(_) => {
            let message = LAST_PANIC
                .try_with(|last| last.try_borrow_mut().ok().and_then(|mut l| l.take()))
                .ok()
                .flatten()
                .unwrap_or_else(|| String::from("unknown panic"));
            throw(
                env,
                Failure::Throw {
                    class: NATIVE,
                    code: "panic",
                    message: format!("redlock native code panicked (a bug): {message}"),
                },
            );
            fallback
        }
    }
}

fn throw(env: &mut JNIEnv<'_>, failure: Failure) {
    if env.exception_check().unwrap_or(true) {
        // A Java exception is already pending (from a failed JNI call): keep it.
        return;
    }
    let (class, code, message) = match failure {
        Failure::Throw {
            class,
            code,
            message,
        } => (class, code, message),
        Failure::Jni(error) => (NATIVE, "jni", format!("JNI call failed: {error}")),
    };
    if throw_typed(env, class, code, &message).is_err() {
        let _ = env.exception_clear();
        let _ = env.throw_new(
            "java/lang/IllegalStateException",
            format!("{code}: {message}"),
        );
    }
}

fn throw_typed(
    env: &mut JNIEnv<'_>,
    class: &str,
    code: &str,
    message: &str,
) -> jni::errors::Result<()> {
    let code = env.new_string(code)?;
    let message = env.new_string(message)?;
    let exception = env.new_object(
        class,
        "(Ljava/lang/String;Ljava/lang/String;)V",
        &[JValue::Object(&code), JValue::Object(&message)],
    )?;
    env.throw(JThrowable::from(exception))
}

/// Handles made and not yet freed, over every type (the leak tests read it).
static LIVE: AtomicI64 = AtomicI64::new(0);

/// The number of live handles.
pub(crate) fn live_handles() -> i64 {
    LIVE.load(Ordering::Relaxed)
}

/// Moves `value` to the heap and returns its handle.
pub(crate) fn into_handle<T>(value: T) -> jlong {
    LIVE.fetch_add(1, Ordering::Relaxed);
    Box::into_raw(Box::new(value)) as jlong
}

/// The value behind `handle`.
///
/// Callers pass only handles made by [`into_handle`] with the same `T` and not yet freed,
/// or 0 (see the module documentation); 0 is refused with `used_after_close`.
pub(crate) fn handle<'a, T>(handle: jlong, what: &str) -> Result<&'a mut T> {
    let ptr = handle as *mut T;
    // SAFETY: by the contract above, a non-zero handle is a live `Box<T>` that only the
    // calling Java object (whose lock the caller holds) uses during this call.
    match unsafe { ptr.as_mut() } {
        Some(value) => Ok(value),
        None => Err(Failure::state(
            "used_after_close",
            format!("the {what} was already closed"),
        )),
    }
}

/// Frees the value behind `handle` (nothing for 0).
pub(crate) fn free<T>(handle: jlong) {
    let ptr = handle as *mut T;
    if !ptr.is_null() {
        // SAFETY: a non-zero handle is a live `Box<T>` made by `into_handle`, and its
        // Java owner frees it exactly once (module documentation).
        drop(unsafe { Box::from_raw(ptr) });
        LIVE.fetch_sub(1, Ordering::Relaxed);
    }
}

/// True when `object` is Java's `null`.
pub(crate) fn is_null(object: &JObject<'_>) -> bool {
    object.as_raw().is_null()
}

/// A local reference this crate made during the current native call, as an object again.
pub(crate) fn local_object<'local>(raw: jni::sys::jobject) -> JObject<'local> {
    // SAFETY: callers pass only a live local reference returned by this crate's own
    // conversions in the same native call, so it is valid for this frame.
    unsafe { JObject::from_raw(raw) }
}

/// Bytes as the `jbyte`s Java arrays hold, without a copy.
pub(crate) fn as_signed(bytes: &[u8]) -> &[i8] {
    // SAFETY: `u8` and `i8` have the same size, alignment and validity (every bit
    // pattern is a value of both), so the slice is reinterpreted bit for bit.
    unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<i8>(), bytes.len()) }
}

/// As [`as_signed`], for a buffer Java fills.
pub(crate) fn as_signed_mut(bytes: &mut [u8]) -> &mut [i8] {
    // SAFETY: as in `as_signed`; the exclusive borrow is carried over.
    unsafe { std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<i8>(), bytes.len()) }
}
