//! The library's version, the Lua scripts with their SHA-1s, and the core's limits and
//! defaults.

use std::ffi::{c_char, CStr};

use crate::boundary::guard_value;

/// The most nodes a configuration accepts.
pub const REDLOCK_MAX_NODES: usize = 255;
/// The most resources one lock may cover.
pub const REDLOCK_MAX_RESOURCES: usize = 64;
/// The fewest random bytes in a token (128 bits).
pub const REDLOCK_MIN_TOKEN_BYTES: usize = 16;
/// The most random bytes in a token.
pub const REDLOCK_MAX_TOKEN_BYTES: usize = 64;
/// Default random bytes per token (160 bits).
pub const REDLOCK_DEFAULT_TOKEN_BYTES: usize = 20;
/// The longest token text accepted by `redlock_client_lease`.
pub const REDLOCK_MAX_TOKEN_TEXT: usize = 256;
/// The most attempts one acquisition may make.
pub const REDLOCK_MAX_ATTEMPTS: u32 = 1_000_000;
/// Default attempts of one acquisition, the first included.
pub const REDLOCK_DEFAULT_ATTEMPTS: u32 = 3;
/// Default fixed drift, in microseconds.
pub const REDLOCK_DEFAULT_DRIFT_FIXED_US: u64 = 2_000;
/// Upper bound of the default node timeout (the default is the smaller of this and a
/// tenth of the TTL), in microseconds.
pub const REDLOCK_DEFAULT_NODE_TIMEOUT_CAP_US: u64 = 50_000;
/// Default base delay between attempts, in microseconds.
pub const REDLOCK_DEFAULT_RETRY_DELAY_US: u64 = 200_000;
/// Default jitter around the retry delay, in microseconds.
pub const REDLOCK_DEFAULT_RETRY_JITTER_US: u64 = 100_000;
/// Bytes of the seed `redlock_client_new_seeded` takes.
pub const REDLOCK_SEED_LEN: usize = 32;

/// The acquire script (several resources), for `redlock_script_text`.
pub const REDLOCK_SCRIPT_ACQUIRE: u32 = 1;
/// The release script.
pub const REDLOCK_SCRIPT_RELEASE: u32 = 2;
/// The extend script.
pub const REDLOCK_SCRIPT_EXTEND: u32 = 3;
/// The fenced acquisition script.
pub const REDLOCK_SCRIPT_FENCED_ACQUIRE: u32 = 4;
/// The fencing write-back script.
pub const REDLOCK_SCRIPT_WRITE_BACK: u32 = 5;
/// The resource-side check of a fencing token (`redlock_fenced_set_new`).
pub const REDLOCK_SCRIPT_FENCED_SET: u32 = 6;
/// A waiting acquisition's attempt (lock keys and the queue of waiters).
pub const REDLOCK_SCRIPT_QUEUED_ACQUIRE: u32 = 7;
/// The largest fencing token the scripts handle exactly (2^53 - 1).
pub const REDLOCK_MAX_FENCING_TOKEN: u64 = 9_007_199_254_740_991;

/// `text` with a NUL appended, at compile time.
const fn nul_terminated<const N: usize>(text: &str) -> [u8; N] {
    let bytes = text.as_bytes();
    let mut out = [0u8; N];
    let mut i = 0;
    while i < bytes.len() {
        out[i] = bytes[i];
        i += 1;
    }
    out
}

macro_rules! c_text {
    ($text:path) => {{
        const BYTES: [u8; $text.len() + 1] = nul_terminated($text);
        // The core's texts hold no NUL, so the only one is the terminator (checked by
        // the tests); a failure here is a compile-time error, not a runtime one.
        const TEXT: &CStr = match CStr::from_bytes_with_nul(&BYTES) {
            Ok(text) => text,
            Err(_) => panic!("NUL inside a constant text"),
        };
        TEXT
    }};
}

const VERSION: &CStr = c_text!(redlock_core::VERSION);

/// The library's version (`"0.1.0"`). Static, NUL-terminated; never freed.
#[no_mangle]
pub extern "C" fn redlock_version() -> *const c_char {
    VERSION.as_ptr()
}

/// The largest TTL a configuration accepts, in milliseconds.
#[no_mangle]
pub extern "C" fn redlock_max_ttl_ms() -> u64 {
    redlock_core::MAX_TTL_MS
}

/// How long to keep a release-notice channel subscribed after the last acquisition
/// listening on it ended, in milliseconds (the same for every driver).
#[no_mangle]
pub extern "C" fn redlock_notice_channel_linger_ms() -> u64 {
    redlock_core::NOTICE_CHANNEL_LINGER_MS
}

/// How long a notice subscriber connection that failed stays closed before it is opened
/// again while acquisitions wait, at first (milliseconds; doubling while it keeps
/// failing, back to this once a subscription is confirmed).
#[no_mangle]
pub extern "C" fn redlock_subscriber_reopen_first_ms() -> u64 {
    redlock_core::SUBSCRIBER_REOPEN_FIRST_MS
}

/// How long a connection the driver opens may take (TCP, TLS, `AUTH`, `SELECT`), and a
/// notice subscriber connection to open and confirm a subscription, when the user's
/// client sets no bound of its own (milliseconds; the same for every driver).
#[no_mangle]
pub extern "C" fn redlock_connect_timeout_default_ms() -> u64 {
    redlock_core::CONNECT_TIMEOUT_DEFAULT_MS
}

/// How long one Redis Sentinel may take to connect and answer before the driver asks the
/// next one, when the user sets no bound (milliseconds; the same for every driver).
#[no_mangle]
pub extern "C" fn redlock_sentinel_query_timeout_default_ms() -> u64 {
    redlock_core::SENTINEL_QUERY_TIMEOUT_DEFAULT_MS
}

/// The connect timeout of a node reached through `sentinels` Sentinels (milliseconds):
/// each may use its whole `query_ms` in turn, then the master's connection has
/// `connect_ms`. Saturating; never fails.
#[no_mangle]
pub extern "C" fn redlock_sentinel_connect_timeout_ms(
    sentinels: usize,
    query_ms: u64,
    connect_ms: u64,
) -> u64 {
    redlock_core::sentinel_connect_timeout_ms(sentinels, query_ms, connect_ms)
}

/// The longest pause between two openings of a failing notice subscriber connection
/// (milliseconds).
#[no_mangle]
pub extern "C" fn redlock_subscriber_reopen_max_ms() -> u64 {
    redlock_core::SUBSCRIBER_REOPEN_MAX_MS
}

fn script(script: u32) -> Option<(&'static CStr, &'static CStr)> {
    match script {
        REDLOCK_SCRIPT_ACQUIRE => Some((
            c_text!(redlock_core::ACQUIRE_SCRIPT),
            c_text!(redlock_core::ACQUIRE_SHA1),
        )),
        REDLOCK_SCRIPT_RELEASE => Some((
            c_text!(redlock_core::RELEASE_SCRIPT),
            c_text!(redlock_core::RELEASE_SHA1),
        )),
        REDLOCK_SCRIPT_EXTEND => Some((
            c_text!(redlock_core::EXTEND_SCRIPT),
            c_text!(redlock_core::EXTEND_SHA1),
        )),
        REDLOCK_SCRIPT_FENCED_ACQUIRE => Some((
            c_text!(redlock_core::FENCED_ACQUIRE_SCRIPT),
            c_text!(redlock_core::FENCED_ACQUIRE_SHA1),
        )),
        REDLOCK_SCRIPT_WRITE_BACK => Some((
            c_text!(redlock_core::WRITE_BACK_SCRIPT),
            c_text!(redlock_core::WRITE_BACK_SHA1),
        )),
        REDLOCK_SCRIPT_FENCED_SET => Some((
            c_text!(redlock_core::FENCED_SET_SCRIPT),
            c_text!(redlock_core::FENCED_SET_SHA1),
        )),
        REDLOCK_SCRIPT_QUEUED_ACQUIRE => Some((
            c_text!(redlock_core::QUEUED_ACQUIRE_SCRIPT),
            c_text!(redlock_core::QUEUED_ACQUIRE_SHA1),
        )),
        _ => None,
    }
}

/// The Lua text of `script` (a `REDLOCK_SCRIPT_*` value), exactly as `EVAL` sends it,
/// or NULL for another value. Static, NUL-terminated; never freed.
#[no_mangle]
pub extern "C" fn redlock_script_text(script_id: u32) -> *const c_char {
    guard_value(std::ptr::null(), || {
        script(script_id).map_or(std::ptr::null(), |(text, _)| text.as_ptr())
    })
}

/// The SHA-1 of `script` in lowercase hex, as `EVALSHA` sends it, or NULL for another
/// value. Static, NUL-terminated; never freed.
#[no_mangle]
pub extern "C" fn redlock_script_sha1(script_id: u32) -> *const c_char {
    guard_value(std::ptr::null(), || {
        script(script_id).map_or(std::ptr::null(), |(_, sha1)| sha1.as_ptr())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(ptr: *const c_char) -> &'static str {
        // SAFETY: the functions under test return static NUL-terminated texts.
        unsafe { CStr::from_ptr(ptr) }.to_str().unwrap()
    }

    #[test]
    fn constants_are_the_cores() {
        assert_eq!(REDLOCK_MAX_NODES, redlock_core::MAX_NODES);
        assert_eq!(REDLOCK_MAX_RESOURCES, redlock_core::MAX_RESOURCES);
        assert_eq!(REDLOCK_MIN_TOKEN_BYTES, redlock_core::MIN_TOKEN_BYTES);
        assert_eq!(REDLOCK_MAX_TOKEN_BYTES, redlock_core::MAX_TOKEN_BYTES);
        assert_eq!(
            REDLOCK_DEFAULT_TOKEN_BYTES,
            redlock_core::DEFAULT_TOKEN_BYTES
        );
        assert_eq!(REDLOCK_MAX_TOKEN_TEXT, redlock_core::MAX_TOKEN_TEXT);
        assert_eq!(REDLOCK_MAX_ATTEMPTS, redlock_core::MAX_ATTEMPTS);
        assert_eq!(REDLOCK_DEFAULT_ATTEMPTS, redlock_core::DEFAULT_ATTEMPTS);
        let us = |d: std::time::Duration| d.as_micros() as u64;
        assert_eq!(
            REDLOCK_DEFAULT_DRIFT_FIXED_US,
            us(redlock_core::DEFAULT_DRIFT_FIXED)
        );
        assert_eq!(
            REDLOCK_DEFAULT_NODE_TIMEOUT_CAP_US,
            us(redlock_core::DEFAULT_NODE_TIMEOUT_CAP)
        );
        assert_eq!(
            REDLOCK_DEFAULT_RETRY_DELAY_US,
            us(redlock_core::DEFAULT_RETRY_DELAY)
        );
        assert_eq!(
            REDLOCK_DEFAULT_RETRY_JITTER_US,
            us(redlock_core::DEFAULT_RETRY_JITTER)
        );
    }

    #[test]
    fn texts_are_the_cores() {
        assert_eq!(text(redlock_version()), redlock_core::VERSION);
        assert_eq!(
            text(redlock_script_text(REDLOCK_SCRIPT_ACQUIRE)),
            redlock_core::ACQUIRE_SCRIPT
        );
        assert_eq!(
            text(redlock_script_text(REDLOCK_SCRIPT_RELEASE)),
            redlock_core::RELEASE_SCRIPT
        );
        assert_eq!(
            text(redlock_script_text(REDLOCK_SCRIPT_EXTEND)),
            redlock_core::EXTEND_SCRIPT
        );
        assert_eq!(
            text(redlock_script_sha1(REDLOCK_SCRIPT_ACQUIRE)),
            redlock_core::ACQUIRE_SHA1
        );
        assert_eq!(
            text(redlock_script_sha1(REDLOCK_SCRIPT_RELEASE)),
            redlock_core::RELEASE_SHA1
        );
        assert_eq!(
            text(redlock_script_sha1(REDLOCK_SCRIPT_EXTEND)),
            redlock_core::EXTEND_SHA1
        );
        assert!(redlock_script_text(0).is_null());
        for (script, text_, sha) in [
            (
                REDLOCK_SCRIPT_FENCED_ACQUIRE,
                redlock_core::FENCED_ACQUIRE_SCRIPT,
                redlock_core::FENCED_ACQUIRE_SHA1,
            ),
            (
                REDLOCK_SCRIPT_WRITE_BACK,
                redlock_core::WRITE_BACK_SCRIPT,
                redlock_core::WRITE_BACK_SHA1,
            ),
            (
                REDLOCK_SCRIPT_FENCED_SET,
                redlock_core::FENCED_SET_SCRIPT,
                redlock_core::FENCED_SET_SHA1,
            ),
            (
                REDLOCK_SCRIPT_QUEUED_ACQUIRE,
                redlock_core::QUEUED_ACQUIRE_SCRIPT,
                redlock_core::QUEUED_ACQUIRE_SHA1,
            ),
        ] {
            assert_eq!(text(redlock_script_text(script)), text_);
            assert_eq!(text(redlock_script_sha1(script)), sha);
        }
        assert!(redlock_script_sha1(8).is_null());
        assert_eq!(REDLOCK_MAX_FENCING_TOKEN, redlock_core::MAX_FENCING_TOKEN);
    }
}
