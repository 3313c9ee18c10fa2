//! # redlock-wasm
//!
//! The redlock core as WebAssembly for JavaScript runtimes (Node.js, Cloudflare
//! workerd, browsers), through wasm-bindgen. A thin shell: every decision (quorum,
//! validity, deadlines, retries, release plan, extension schedule) is the core's.
//!
//! ## Conventions
//!
//! - Names are camelCase; classes mirror the core: [`Config`], [`Redlock`],
//!   [`Operation`], [`Lease`], [`Link`] (one node's command policy), [`Engine`] (the
//!   driver loop inside the module: N links and the operations using them), [`KeepAlive`],
//!   [`Subscriptions`] (the notice subscriber connections' policy), [`Decoder`], and
//!   [`FencedSet`] (the resource-side fencing check).
//! - **Time is a JS number of microseconds** on the caller's monotonic clock (for
//!   example `Math.floor(performance.now() * 1000)`), from any fixed origin. A fraction
//!   is dropped. Every instant the core hands back (deadlines, `validUntil`, `retryAt`)
//!   is on the same clock, exact below 2^53 us (285 years), so no `BigInt` is needed.
//! - Plain data (options, replies, outputs, outcomes) crosses as JS objects through
//!   serde-wasm-bindgen; the exact shapes are the TypeScript types in the generated
//!   `.d.ts`.
//! - Errors are real JS `Error`s named `RedlockError` with a stable `code`: the core's
//!   configuration, usage and RESP protocol codes, or `invalid_argument` for a value
//!   of the wrong type or range.
//! - Tokens come from `crypto.getRandomValues` (getrandom's JS backend) unless a seed or
//!   the caller's random bytes are given.

#![forbid(unsafe_code)]

mod client;
mod config;
mod convert;
mod engine;
mod error;
mod guard;
mod keepalive;
mod link;
mod operation;
mod reader;
mod resp;
mod strings;
mod subscriptions;
mod types;

pub use client::{Lease, Redlock};
pub use config::Config;
pub use engine::Engine;
pub use guard::{fence_guard_key, fence_key, notice_channel, FencedSet};
pub use keepalive::KeepAlive;
pub use link::Link;
pub use operation::Operation;
pub use resp::Decoder;
pub use subscriptions::{SubscriberOutputKind, Subscriptions};

use serde::Serialize;
use wasm_bindgen::prelude::*;

use crate::convert::to_js;
use crate::types::{DefaultsJs, ErrorClassesJs, LimitsJs, PairJs, ScriptsJs};

/// This package's version (the core's).
#[wasm_bindgen]
pub fn version() -> String {
    redlock_core::VERSION.to_string()
}

#[derive(Serialize)]
struct Script {
    text: &'static str,
    sha1: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Scripts {
    acquire: Script,
    release: Script,
    extend: Script,
    fenced_acquire: Script,
    write_back: Script,
    fenced_set: Script,
    queued_acquire: Script,
}

/// The Lua scripts the core sends, with the SHA-1s it sends them by (`EVALSHA`).
#[wasm_bindgen]
pub fn scripts() -> Result<ScriptsJs, JsValue> {
    to_js(&Scripts {
        acquire: Script {
            text: redlock_core::ACQUIRE_SCRIPT,
            sha1: redlock_core::ACQUIRE_SHA1,
        },
        release: Script {
            text: redlock_core::RELEASE_SCRIPT,
            sha1: redlock_core::RELEASE_SHA1,
        },
        extend: Script {
            text: redlock_core::EXTEND_SCRIPT,
            sha1: redlock_core::EXTEND_SHA1,
        },
        fenced_acquire: Script {
            text: redlock_core::FENCED_ACQUIRE_SCRIPT,
            sha1: redlock_core::FENCED_ACQUIRE_SHA1,
        },
        write_back: Script {
            text: redlock_core::WRITE_BACK_SCRIPT,
            sha1: redlock_core::WRITE_BACK_SHA1,
        },
        fenced_set: Script {
            text: redlock_core::FENCED_SET_SCRIPT,
            sha1: redlock_core::FENCED_SET_SHA1,
        },
        queued_acquire: Script {
            text: redlock_core::QUEUED_ACQUIRE_SCRIPT,
            sha1: redlock_core::QUEUED_ACQUIRE_SHA1,
        },
    })
    .map(JsValue::unchecked_into)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Limits {
    max_nodes: usize,
    max_ttl_ms: u64,
    min_token_bytes: usize,
    max_token_bytes: usize,
    max_attempts: u32,
    max_resources: usize,
    max_token_text: usize,
    max_fencing_token: f64,
}

/// The bounds every configuration and lock is checked against.
#[wasm_bindgen]
pub fn limits() -> Result<LimitsJs, JsValue> {
    to_js(&Limits {
        max_nodes: redlock_core::MAX_NODES,
        max_ttl_ms: redlock_core::MAX_TTL_MS,
        min_token_bytes: redlock_core::MIN_TOKEN_BYTES,
        max_token_bytes: redlock_core::MAX_TOKEN_BYTES,
        max_attempts: redlock_core::MAX_ATTEMPTS,
        max_resources: redlock_core::MAX_RESOURCES,
        max_token_text: redlock_core::MAX_TOKEN_TEXT,
        max_fencing_token: redlock_core::MAX_FENCING_TOKEN as f64,
    })
    .map(JsValue::unchecked_into)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Defaults {
    drift_factor: f64,
    drift_fixed_us: u64,
    node_timeout_cap_us: u64,
    attempts: u32,
    retry_delay_us: u64,
    retry_jitter_us: u64,
    token_bytes: usize,
    notice_channel_linger_ms: u64,
    subscriber_reopen_first_ms: u64,
    subscriber_reopen_max_ms: u64,
    connect_timeout_default_ms: u64,
    sentinel_query_timeout_default_ms: u64,
}

/// The default of every optional setting, how long a driver keeps a notice channel
/// subscribed after its last waiter (`noticeChannelLingerMs`), and how long it keeps a
/// failed subscriber connection closed before opening it again
/// (`subscriberReopenFirstMs`, doubling up to `subscriberReopenMaxMs`), and how long a
/// connection may take to open when the client sets no bound (`connectTimeoutDefaultMs`),
/// and how long one Redis Sentinel may take to connect and answer before the next is
/// asked (`sentinelQueryTimeoutDefaultMs`).
#[wasm_bindgen]
pub fn defaults() -> Result<DefaultsJs, JsValue> {
    let micros = |d: core::time::Duration| d.as_micros() as u64;
    to_js(&Defaults {
        drift_factor: redlock_core::DEFAULT_DRIFT_FACTOR,
        drift_fixed_us: micros(redlock_core::DEFAULT_DRIFT_FIXED),
        node_timeout_cap_us: micros(redlock_core::DEFAULT_NODE_TIMEOUT_CAP),
        attempts: redlock_core::DEFAULT_ATTEMPTS,
        retry_delay_us: micros(redlock_core::DEFAULT_RETRY_DELAY),
        retry_jitter_us: micros(redlock_core::DEFAULT_RETRY_JITTER),
        token_bytes: redlock_core::DEFAULT_TOKEN_BYTES,
        notice_channel_linger_ms: redlock_core::NOTICE_CHANNEL_LINGER_MS,
        subscriber_reopen_first_ms: redlock_core::SUBSCRIBER_REOPEN_FIRST_MS,
        subscriber_reopen_max_ms: redlock_core::SUBSCRIBER_REOPEN_MAX_MS,
        connect_timeout_default_ms: redlock_core::CONNECT_TIMEOUT_DEFAULT_MS,
        sentinel_query_timeout_default_ms: redlock_core::SENTINEL_QUERY_TIMEOUT_DEFAULT_MS,
    })
    .map(JsValue::unchecked_into)
}

/// The connect timeout of a node reached through `sentinels` Sentinels (ms): each may use
/// its whole `queryMs` in turn, then the master's connection has `connectMs`.
/// Saturating; never throws (a negative or fractional number is taken as its integer
/// part, at least 0).
#[wasm_bindgen(js_name = sentinelConnectTimeoutMs)]
pub fn sentinel_connect_timeout_ms(sentinels: f64, query_ms: f64, connect_ms: f64) -> f64 {
    // `as` saturates floats to the integer range (NaN to 0): no input panics.
    redlock_core::sentinel_connect_timeout_ms(
        sentinels as usize,
        query_ms as u64,
        connect_ms as u64,
    ) as f64
}

/// The first two positions in `addresses` that name the same Redis server
/// (`[i, j]`), or `undefined`. Addresses are compared as host and port (a scheme, user,
/// password, database and options are ignored; `localhost` is `127.0.0.1`; a missing
/// port is 6379). Redlock's nodes must be independent: refuse such a list.
#[wasm_bindgen(js_name = duplicateNode)]
pub fn duplicate_node(addresses: Vec<String>) -> Option<PairJs> {
    redlock_core::duplicate_node(&addresses).map(|(i, j)| {
        let pair = js_sys::Array::of2(&JsValue::from(i as u32), &JsValue::from(j as u32));
        JsValue::from(pair).unchecked_into()
    })
}

#[derive(Serialize)]
struct ErrorClassInfo {
    code: &'static str,
    number: u32,
    message: String,
}

/// Every error class, in number order, with its stable code, number and message.
#[wasm_bindgen(js_name = errorClasses)]
pub fn error_classes() -> Result<ErrorClassesJs, JsValue> {
    let classes: Vec<ErrorClassInfo> = redlock_core::ErrorClass::ALL
        .iter()
        .map(|class| ErrorClassInfo {
            code: class.code(),
            number: class.number(),
            message: class.to_string(),
        })
        .collect();
    to_js(&classes).map(JsValue::unchecked_into)
}
