//! `Redlock` (starts operations) and `Lease` (a held lock).

use core::time::Duration;

use serde::Deserialize;
use wasm_bindgen::prelude::*;

use crate::config::Config;
use crate::convert::{options_from_js, time, time_to_js, to_js, whole, BytesRef};
use crate::error::{self, invalid_argument};
use crate::operation::Operation;
use crate::types::{AcquireOptionsJs, KeysJs, ResourcesJs};

/// A Redlock client: a configuration and a source of randomness, from which
/// acquisitions, extensions and releases start as [`Operation`]s.
#[wasm_bindgen]
pub struct Redlock {
    inner: redlock_core::Redlock,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AcquireOptions {
    ttl_ms: Option<u64>,
    wait_us: Option<u64>,
    random: Option<serde_bytes_buf::ByteBuf>,
}

/// `Vec<u8>` from a `Uint8Array` (serde's `Vec<u8>` would expect an array of numbers).
mod serde_bytes_buf {
    use serde::de::{Deserializer, Visitor};

    pub(crate) struct ByteBuf(pub Vec<u8>);

    impl<'de> serde::Deserialize<'de> for ByteBuf {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ByteBuf, D::Error> {
            struct BufVisitor;
            impl<'de> Visitor<'de> for BufVisitor {
                type Value = ByteBuf;
                fn expecting(&self, f: &mut core::fmt::Formatter) -> core::fmt::Result {
                    f.write_str("a Uint8Array")
                }
                fn visit_bytes<E>(self, v: &[u8]) -> Result<ByteBuf, E> {
                    Ok(ByteBuf(v.to_vec()))
                }
                fn visit_byte_buf<E>(self, v: Vec<u8>) -> Result<ByteBuf, E> {
                    Ok(ByteBuf(v))
                }
            }
            deserializer.deserialize_byte_buf(BufVisitor)
        }
    }
}

#[wasm_bindgen]
impl Redlock {
    /// A client over `config`. Tokens come from `crypto.getRandomValues`, or, given a
    /// 32-byte `seed`, from a ChaCha20 stream seeded with it (the seed MUST itself be
    /// secret and random; the same seed gives the same tokens, for simulations).
    #[wasm_bindgen(constructor)]
    pub fn new(config: &Config, seed: Option<Vec<u8>>) -> Result<Redlock, JsValue> {
        let config = config.inner.clone();
        let inner = match seed {
            None => redlock_core::Redlock::new(config),
            Some(seed) => {
                let seed: [u8; 32] = seed
                    .as_slice()
                    .try_into()
                    .map_err(|_| invalid_argument("a seed must be exactly 32 bytes"))?;
                redlock_core::Redlock::with_seed(config, seed)
            }
        };
        Ok(Redlock { inner })
    }

    /// The configuration.
    #[wasm_bindgen(getter)]
    pub fn config(&self) -> Config {
        Config {
            inner: self.inner.config().clone(),
        }
    }

    /// Starts acquiring a lock on `resources` (one or an array) at `nowUs`. Options: a
    /// TTL for this lock only (`ttlMs`), a wait limit (`waitUs`: keep trying until then
    /// instead of for the configured attempts; see `Operation.handleNoticeMessage`), and the
    /// caller's random bytes (for conformance vectors). The first round's commands are
    /// ready to poll.
    pub fn acquire(
        &mut self,
        resources: ResourcesJs,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
        options: Option<AcquireOptionsJs>,
    ) -> Result<Operation, JsValue> {
        self.start_acquire(&resources, now_us, options)
            .map(Operation::new)
    }

    /// The channels on which releases of `resources` (one or an array; the key prefix
    /// is applied) are announced to this client's acquisitions: per key, its notice
    /// channel (releases that name no waiter) and this client's waiter channel (releases
    /// that name one of its waiters). A waiter subscribes to them on every node and hands
    /// each message to `Operation.handleNoticeMessage` with its node's index.
    #[wasm_bindgen(js_name = noticeChannels)]
    pub fn notice_channels(&self, resources: ResourcesJs) -> Result<KeysJs, JsValue> {
        let resources = crate::convert::resources(&resources)?;
        let channels = self
            .inner
            .notice_channels(&resources)
            .map_err(error::usage)?;
        let refs: Vec<BytesRef> = channels.iter().map(|c| BytesRef(c)).collect();
        to_js(&refs).map(JsValue::unchecked_into)
    }

    /// Starts extending `lease` from `nowUs` by its own TTL, or by `ttlMs` (whole
    /// milliseconds; later extensions keep it).
    pub fn extend(
        &self,
        lease: &Lease,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
        #[wasm_bindgen(js_name = ttlMs)] ttl_ms: Option<f64>,
    ) -> Result<Operation, JsValue> {
        self.start_extend(lease, now_us, ttl_ms).map(Operation::new)
    }

    /// Starts reading who holds the lock on `resources` at `nowUs` (docs/inspection.md):
    /// one `GET` (or `MGET`) per node, decided at the quorum. The outcome is `inspected`
    /// (`holder`: the token a quorum hold, or `null`) or `not_inspected` (too few nodes
    /// answered; error class `nodes_failing`). It never changes a key.
    pub fn inspect(
        &self,
        resources: ResourcesJs,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<Operation, JsValue> {
        self.start_inspect(&resources, now_us).map(Operation::new)
    }

    /// Starts releasing `lease` on every node at `nowUs`.
    pub fn release(
        &self,
        lease: &Lease,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<Operation, JsValue> {
        self.start_release(lease, now_us).map(Operation::new)
    }

    /// A lease rebuilt from its parts, for a holder that kept only the token.
    /// `validUntilUs` is whatever the holder knows (default 0: nothing).
    pub fn lease(
        &self,
        resources: ResourcesJs,
        token: &str,
        #[wasm_bindgen(js_name = validUntilUs)] valid_until_us: Option<f64>,
    ) -> Result<Lease, JsValue> {
        let resources = crate::convert::resources(&resources)?;
        let valid_until = time(valid_until_us.unwrap_or(0.0), "validUntilUs")?;
        let inner = self
            .inner
            .lease(&resources, token, valid_until)
            .map_err(error::usage)?;
        Ok(Lease { inner })
    }

    /// A fresh token from this client's random source.
    #[wasm_bindgen(js_name = generateToken)]
    pub fn generate_token(&mut self) -> Result<String, JsValue> {
        self.inner
            .generate_token()
            .map(|token| token.as_str().to_string())
            .map_err(error::usage)
    }

    /// When a holder that keeps `lease` alive should start its next extension (us), or
    /// `undefined` when it should not (expired, or the extension bound reached), from
    /// the lease's own TTL.
    #[wasm_bindgen(js_name = nextExtension)]
    pub fn next_extension(
        &self,
        lease: &Lease,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<Option<f64>, JsValue> {
        let now = time(now_us, "nowUs")?;
        let at = self.inner.config().next_extension(&lease.inner, now);
        Ok(at.map(time_to_js))
    }
}

/// The operations' starts, shared by the methods above (which wrap the operation for
/// JavaScript) and `Engine` (which keeps it).
impl Redlock {
    pub(crate) fn start_acquire(
        &mut self,
        resources: &JsValue,
        now_us: f64,
        options: Option<AcquireOptionsJs>,
    ) -> Result<redlock_core::Operation, JsValue> {
        let resources = crate::convert::resources(resources)?;
        self.start_acquire_of(&resources, now_us, options)
    }

    /// `start_acquire` with the resources already converted.
    pub(crate) fn start_acquire_of<R: AsRef<[u8]>>(
        &mut self,
        resources: &[R],
        now_us: f64,
        options: Option<AcquireOptionsJs>,
    ) -> Result<redlock_core::Operation, JsValue> {
        let now = time(now_us, "nowUs")?;
        let options: AcquireOptions = match options {
            Some(options) if !options.is_undefined() && !options.is_null() => options_from_js(
                options.into(),
                &["ttlMs", "waitUs", "random"],
                "acquire options",
            )?,
            _ => AcquireOptions::default(),
        };
        let mut core_options = redlock_core::AcquireOptions::new();
        if let Some(ttl_ms) = options.ttl_ms {
            core_options = core_options.ttl(Duration::from_millis(ttl_ms));
        }
        if let Some(wait_us) = options.wait_us {
            core_options = core_options.wait(Duration::from_micros(wait_us));
        }
        match options.random {
            None => self.inner.acquire_with(resources, &core_options, now),
            Some(random) => {
                self.inner
                    .acquire_with_random_options(resources, &core_options, random.0, now)
            }
        }
        .map_err(error::usage)
    }

    pub(crate) fn start_extend(
        &self,
        lease: &Lease,
        now_us: f64,
        ttl_ms: Option<f64>,
    ) -> Result<redlock_core::Operation, JsValue> {
        let now = time(now_us, "nowUs")?;
        match ttl_ms {
            None => self.inner.extend(&lease.inner, now),
            Some(ttl_ms) => {
                let ttl = Duration::from_millis(whole(ttl_ms, "ttlMs")?);
                self.inner.extend_for(&lease.inner, ttl, now)
            }
        }
        .map_err(error::usage)
    }

    pub(crate) fn start_inspect(
        &self,
        resources: &JsValue,
        now_us: f64,
    ) -> Result<redlock_core::Operation, JsValue> {
        let now = time(now_us, "nowUs")?;
        let resources = crate::convert::resources(resources)?;
        self.inner.inspect(&resources, now).map_err(error::usage)
    }

    pub(crate) fn start_release(
        &self,
        lease: &Lease,
        now_us: f64,
    ) -> Result<redlock_core::Operation, JsValue> {
        let now = time(now_us, "nowUs")?;
        Ok(self.inner.release(&lease.inner, now))
    }
}

/// A held lock: what extending and releasing it need, and until when it is valid.
#[wasm_bindgen]
#[derive(Clone, Debug)]
pub struct Lease {
    pub(crate) inner: redlock_core::Lease,
}

#[wasm_bindgen]
impl Lease {
    /// The token stored under every key.
    #[wasm_bindgen(getter)]
    pub fn token(&self) -> String {
        self.inner.token().as_str().to_string()
    }

    /// The locked keys (key prefix included), in the order given: text where valid
    /// UTF-8, bytes otherwise.
    #[wasm_bindgen(getter)]
    pub fn keys(&self) -> Result<KeysJs, JsValue> {
        let keys: Vec<BytesRef> = self.inner.keys().iter().map(|k| BytesRef(k)).collect();
        to_js(&keys).map(JsValue::unchecked_into)
    }

    /// The instant (us, caller's clock) until which the lock is held. The holder MUST
    /// NOT rely on the lock at or after it.
    #[wasm_bindgen(getter, js_name = validUntil)]
    pub fn valid_until(&self) -> f64 {
        time_to_js(self.inner.valid_until())
    }

    /// Validity left at `nowUs`, in microseconds (zero once expired).
    pub fn validity(&self, #[wasm_bindgen(js_name = nowUs)] now_us: f64) -> Result<f64, JsValue> {
        let now = time(now_us, "nowUs")?;
        Ok(self.inner.validity(now).as_micros() as f64)
    }

    /// True while `nowUs < validUntil`.
    #[wasm_bindgen(js_name = isValid)]
    pub fn is_valid(&self, #[wasm_bindgen(js_name = nowUs)] now_us: f64) -> Result<bool, JsValue> {
        Ok(self.inner.is_valid(time(now_us, "nowUs")?))
    }

    /// The TTL the lock was acquired or last extended with, in milliseconds.
    #[wasm_bindgen(getter, js_name = ttlMs)]
    pub fn ttl_ms(&self) -> f64 {
        self.inner.ttl_ms() as f64
    }

    /// Successful extensions since the lock was acquired.
    #[wasm_bindgen(getter)]
    pub fn extensions(&self) -> u32 {
        self.inner.extensions()
    }

    /// The fencing token (`docs/fencing.md`): a whole number below 2^53, or `undefined`
    /// without fencing and for a lease rebuilt from its parts. Send it with every write
    /// to the protected resource (see `FencedSet`).
    #[wasm_bindgen(getter, js_name = fencingToken)]
    pub fn fencing_token(&self) -> Option<f64> {
        self.inner.fencing_token().map(|t| t as f64)
    }

    /// A copy that lives on independently of this one.
    #[wasm_bindgen(js_name = clone)]
    pub fn clone_lease(&self) -> Lease {
        self.clone()
    }
}
