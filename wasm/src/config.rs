//! `Config`: every setting of the core, checked once.

use core::time::Duration;

use serde::{Deserialize, Serialize};
use wasm_bindgen::prelude::*;

use crate::client::Lease;
use crate::convert::{options_from_js, time, time_to_js, to_js, whole, Bytes, BytesRef};
use crate::error;
use crate::types::{ConfigOptionsJs, ConfigSettingsJs};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Options {
    nodes: usize,
    ttl_ms: u64,
    drift_factor: Option<f64>,
    drift_fixed_us: Option<u64>,
    node_timeout_us: Option<u64>,
    min_validity_us: Option<u64>,
    attempts: Option<u32>,
    retry_delay_us: Option<u64>,
    retry_jitter_us: Option<u64>,
    key_prefix: Option<Bytes>,
    token_bytes: Option<usize>,
    max_extensions: Option<u32>,
    fencing: Option<bool>,
}

const OPTION_NAMES: &[&str] = &[
    "nodes",
    "ttlMs",
    "driftFactor",
    "driftFixedUs",
    "nodeTimeoutUs",
    "minValidityUs",
    "attempts",
    "retryDelayUs",
    "retryJitterUs",
    "keyPrefix",
    "tokenBytes",
    "maxExtensions",
    "fencing",
];

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Settings<'a> {
    nodes: usize,
    quorum: usize,
    ttl_ms: f64,
    drift_factor: f64,
    drift_fixed_us: f64,
    drift_us: f64,
    node_timeout_us: f64,
    min_validity_us: f64,
    attempts: u32,
    retry_delay_us: f64,
    retry_jitter_us: f64,
    key_prefix: BytesRef<'a>,
    token_bytes: usize,
    max_extensions: Option<u32>,
    fencing: bool,
}

fn micros(duration: Duration) -> f64 {
    duration.as_micros() as f64
}

/// A checked configuration: N nodes, the TTL and every optional setting.
#[wasm_bindgen]
#[derive(Clone, Debug)]
pub struct Config {
    pub(crate) inner: redlock_core::Config,
}

#[wasm_bindgen]
impl Config {
    /// Checks `options` and builds the configuration. Throws a `RedlockError` whose
    /// `code` is the core's configuration error (`no_nodes`, `ttl_zero`, ...) or
    /// `invalid_argument` for a missing, unknown or mistyped field.
    #[wasm_bindgen(constructor)]
    pub fn new(options: ConfigOptionsJs) -> Result<Config, JsValue> {
        let options: Options = options_from_js(options.into(), OPTION_NAMES, "config options")?;
        let mut builder =
            redlock_core::Config::builder(options.nodes, Duration::from_millis(options.ttl_ms));
        if let Some(factor) = options.drift_factor {
            builder = builder.drift_factor(factor);
        }
        if let Some(us) = options.drift_fixed_us {
            builder = builder.drift_fixed(Duration::from_micros(us));
        }
        if let Some(us) = options.node_timeout_us {
            builder = builder.node_timeout(Duration::from_micros(us));
        }
        if let Some(us) = options.min_validity_us {
            builder = builder.min_validity(Duration::from_micros(us));
        }
        if let Some(attempts) = options.attempts {
            builder = builder.attempts(attempts);
        }
        if let Some(us) = options.retry_delay_us {
            builder = builder.retry_delay(Duration::from_micros(us));
        }
        if let Some(us) = options.retry_jitter_us {
            builder = builder.retry_jitter(Duration::from_micros(us));
        }
        if let Some(prefix) = options.key_prefix {
            builder = builder.key_prefix(prefix.0);
        }
        if let Some(bytes) = options.token_bytes {
            builder = builder.token_bytes(bytes);
        }
        builder = builder.max_extensions(options.max_extensions);
        if let Some(on) = options.fencing {
            builder = builder.fencing(on);
        }
        let inner = builder.build().map_err(error::config)?;
        Ok(Config { inner })
    }

    /// The same configuration with another TTL (whole milliseconds), checked again.
    #[wasm_bindgen(js_name = withTtl)]
    pub fn with_ttl(
        &self,
        #[wasm_bindgen(js_name = ttlMs)] ttl_ms: f64,
    ) -> Result<Config, JsValue> {
        let ttl_ms = whole(ttl_ms, "ttlMs")?;
        let inner = self
            .inner
            .with_ttl(Duration::from_millis(ttl_ms))
            .map_err(error::config)?;
        Ok(Config { inner })
    }

    /// Every setting, derived ones (quorum, total drift, node timeout) included.
    pub fn settings(&self) -> Result<ConfigSettingsJs, JsValue> {
        let c = &self.inner;
        to_js(&Settings {
            nodes: c.nodes(),
            quorum: c.quorum(),
            ttl_ms: c.ttl_ms() as f64,
            drift_factor: c.drift_factor(),
            drift_fixed_us: micros(c.drift_fixed()),
            drift_us: micros(c.drift()),
            node_timeout_us: micros(c.node_timeout()),
            min_validity_us: micros(c.min_validity()),
            attempts: c.attempts(),
            retry_delay_us: micros(c.retry_delay()),
            retry_jitter_us: micros(c.retry_jitter()),
            key_prefix: BytesRef(c.key_prefix()),
            token_bytes: c.token_bytes(),
            max_extensions: c.max_extensions(),
            fencing: c.fencing(),
        })
        .map(JsValue::unchecked_into)
    }

    /// Same as `settings()`, so `JSON.stringify(config)` shows them.
    #[wasm_bindgen(js_name = toJSON)]
    pub fn to_json(&self) -> Result<ConfigSettingsJs, JsValue> {
        self.settings()
    }

    /// Number of nodes, N.
    #[wasm_bindgen(getter)]
    pub fn nodes(&self) -> usize {
        self.inner.nodes()
    }

    /// Successes needed to hold the lock: N / 2 + 1.
    #[wasm_bindgen(getter)]
    pub fn quorum(&self) -> usize {
        self.inner.quorum()
    }

    /// The lock's TTL in milliseconds.
    #[wasm_bindgen(getter, js_name = ttlMs)]
    pub fn ttl_ms(&self) -> f64 {
        self.inner.ttl_ms() as f64
    }

    /// How long one node may take to answer one round, in microseconds.
    #[wasm_bindgen(getter, js_name = nodeTimeoutUs)]
    pub fn node_timeout_us(&self) -> f64 {
        micros(self.inner.node_timeout())
    }

    /// The total drift allowance `ceil(ttl * driftFactor) + driftFixed`, in microseconds.
    #[wasm_bindgen(getter, js_name = driftUs)]
    pub fn drift_us(&self) -> f64 {
        micros(self.inner.drift())
    }

    /// True when acquisitions hand out fencing tokens (`docs/fencing.md`).
    #[wasm_bindgen(getter)]
    pub fn fencing(&self) -> bool {
        self.inner.fencing()
    }

    /// Attempts of one acquisition.
    #[wasm_bindgen(getter)]
    pub fn attempts(&self) -> u32 {
        self.inner.attempts()
    }

    /// When a holder that keeps `lease` alive should start its next extension (us), or
    /// `undefined` when it should not (expired, or the extension bound reached).
    #[wasm_bindgen(js_name = nextExtension)]
    pub fn next_extension(
        &self,
        lease: &Lease,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<Option<f64>, JsValue> {
        let now = time(now_us, "nowUs")?;
        Ok(self.inner.next_extension(&lease.inner, now).map(time_to_js))
    }
}
