//! Configuration: a builder with every setting of the core, validated once by
//! `redlock_config_builder_build`.

use std::time::Duration;

use redlock_core::{Config, ConfigBuilder};

use crate::boundary::{free_handle, guard, guard_value, into_handle, put_bytes};
use crate::error::{redlock_result, redlock_result as R};

/// Settings of a configuration not yet checked. Every setter is optional; the
/// defaults are the core's (see the `REDLOCK_DEFAULT_*` constants).
pub struct redlock_config_builder {
    inner: ConfigBuilder,
}

/// A checked configuration. Immutable: may be shared by threads and by any number of
/// clients (each client keeps its own copy).
pub struct redlock_config {
    pub(crate) inner: Config,
}

/// Starts a configuration for `nodes` independent Redis nodes and a lock TTL of
/// `ttl_ms` milliseconds. Nothing is checked until `redlock_config_builder_build`.
/// Free the builder with `redlock_config_builder_free`.
#[no_mangle]
pub unsafe extern "C" fn redlock_config_builder_new(
    nodes: usize,
    ttl_ms: u64,
    out_builder: *mut *mut redlock_config_builder,
) -> redlock_result {
    guard(|| {
        let out = arg_out!(out_builder);
        out.write(into_handle(redlock_config_builder {
            inner: Config::builder(nodes, Duration::from_millis(ttl_ms)),
        }));
        R::REDLOCK_OK
    })
}

/// Frees a builder. NULL is ignored.
#[no_mangle]
pub unsafe extern "C" fn redlock_config_builder_free(builder: *mut redlock_config_builder) {
    guard_value((), || {
        // SAFETY: by the crate's contract `builder` is NULL or a live builder handle.
        unsafe { free_handle(builder) }
    })
}

/// Applies one setter of the core's builder in place.
fn update(
    builder: &mut redlock_config_builder,
    set: impl FnOnce(ConfigBuilder) -> ConfigBuilder,
) -> redlock_result {
    // The placeholder lives only until `set` returns the updated builder.
    let current = std::mem::replace(&mut builder.inner, Config::builder(0, Duration::ZERO));
    builder.inner = set(current);
    R::REDLOCK_OK
}

/// Sets the lock's TTL in milliseconds.
#[no_mangle]
pub unsafe extern "C" fn redlock_config_builder_set_ttl_ms(
    builder: *mut redlock_config_builder,
    ttl_ms: u64,
) -> redlock_result {
    guard(|| {
        let builder = arg_mut!(builder);
        update(builder, |b| b.ttl(Duration::from_millis(ttl_ms)))
    })
}

/// Sets the fraction of the TTL allowed for clock-rate differences (default 0.01);
/// `0 <= factor < 1`.
#[no_mangle]
pub unsafe extern "C" fn redlock_config_builder_set_drift_factor(
    builder: *mut redlock_config_builder,
    factor: f64,
) -> redlock_result {
    guard(|| {
        let builder = arg_mut!(builder);
        update(builder, |b| b.drift_factor(factor))
    })
}

/// Sets the fixed drift added to the proportional one, in microseconds.
#[no_mangle]
pub unsafe extern "C" fn redlock_config_builder_set_drift_fixed_us(
    builder: *mut redlock_config_builder,
    micros: u64,
) -> redlock_result {
    guard(|| {
        let builder = arg_mut!(builder);
        update(builder, |b| b.drift_fixed(Duration::from_micros(micros)))
    })
}

/// Sets how long one node may take to answer one round, in microseconds (default:
/// the smaller of `REDLOCK_DEFAULT_NODE_TIMEOUT_CAP_US` and a tenth of the TTL).
#[no_mangle]
pub unsafe extern "C" fn redlock_config_builder_set_node_timeout_us(
    builder: *mut redlock_config_builder,
    micros: u64,
) -> redlock_result {
    guard(|| {
        let builder = arg_mut!(builder);
        update(builder, |b| b.node_timeout(Duration::from_micros(micros)))
    })
}

/// Sets the least validity an acquisition or extension must leave, in microseconds
/// (default 0: any positive validity counts).
#[no_mangle]
pub unsafe extern "C" fn redlock_config_builder_set_min_validity_us(
    builder: *mut redlock_config_builder,
    micros: u64,
) -> redlock_result {
    guard(|| {
        let builder = arg_mut!(builder);
        update(builder, |b| b.min_validity(Duration::from_micros(micros)))
    })
}

/// Sets the attempts of one acquisition, the first included.
#[no_mangle]
pub unsafe extern "C" fn redlock_config_builder_set_attempts(
    builder: *mut redlock_config_builder,
    attempts: u32,
) -> redlock_result {
    guard(|| {
        let builder = arg_mut!(builder);
        update(builder, |b| b.attempts(attempts))
    })
}

/// Sets the base delay between attempts, in microseconds.
#[no_mangle]
pub unsafe extern "C" fn redlock_config_builder_set_retry_delay_us(
    builder: *mut redlock_config_builder,
    micros: u64,
) -> redlock_result {
    guard(|| {
        let builder = arg_mut!(builder);
        update(builder, |b| b.retry_delay(Duration::from_micros(micros)))
    })
}

/// Sets the jitter around the retry delay, in microseconds; at most the delay.
#[no_mangle]
pub unsafe extern "C" fn redlock_config_builder_set_retry_jitter_us(
    builder: *mut redlock_config_builder,
    micros: u64,
) -> redlock_result {
    guard(|| {
        let builder = arg_mut!(builder);
        update(builder, |b| b.retry_jitter(Duration::from_micros(micros)))
    })
}

/// Sets the random bytes per token (`REDLOCK_MIN_TOKEN_BYTES` to
/// `REDLOCK_MAX_TOKEN_BYTES`).
#[no_mangle]
pub unsafe extern "C" fn redlock_config_builder_set_token_bytes(
    builder: *mut redlock_config_builder,
    bytes: usize,
) -> redlock_result {
    guard(|| {
        let builder = arg_mut!(builder);
        update(builder, |b| b.token_bytes(bytes))
    })
}

/// Bounds the extensions `redlock_client_next_extension` schedules for one lease.
#[no_mangle]
pub unsafe extern "C" fn redlock_config_builder_set_max_extensions(
    builder: *mut redlock_config_builder,
    max: u32,
) -> redlock_result {
    guard(|| {
        let builder = arg_mut!(builder);
        update(builder, |b| b.max_extensions(Some(max)))
    })
}

/// Removes the bound on extensions (the default).
#[no_mangle]
pub unsafe extern "C" fn redlock_config_builder_set_unbounded_extensions(
    builder: *mut redlock_config_builder,
) -> redlock_result {
    guard(|| {
        let builder = arg_mut!(builder);
        update(builder, |b| b.max_extensions(None))
    })
}

/// Turns fencing on or off (default off): each acquisition then also raises a
/// per-resource counter on the nodes and writes the result back to a quorum before
/// handing out the lock, whose lease carries a fencing token
/// (`redlock_lease_fencing_token`). One more round trip per acquisition; see the
/// project's `docs/fencing.md`.
#[no_mangle]
pub unsafe extern "C" fn redlock_config_builder_set_fencing(
    builder: *mut redlock_config_builder,
    fencing: bool,
) -> redlock_result {
    guard(|| {
        let builder = arg_mut!(builder);
        update(builder, |b| b.fencing(fencing))
    })
}

/// Sets the bytes put in front of every resource name to form its key (default none:
/// the key is the resource name, so other Redlock clients using the same name exclude
/// us and we them). The bytes are copied.
#[no_mangle]
pub unsafe extern "C" fn redlock_config_builder_set_key_prefix(
    builder: *mut redlock_config_builder,
    prefix: *const u8,
    prefix_len: usize,
) -> redlock_result {
    guard(|| {
        let builder = arg_mut!(builder);
        let prefix = arg_bytes!(prefix, prefix_len);
        update(builder, |b| b.key_prefix(prefix))
    })
}

/// Checks every setting and writes the configuration to `*out_config`, or returns the
/// first problem as a `REDLOCK_CONFIG_*` code. The builder is left as it was (it can be
/// changed and built again) and is still freed by `redlock_config_builder_free`; the
/// configuration is freed by `redlock_config_free`.
#[no_mangle]
pub unsafe extern "C" fn redlock_config_builder_build(
    builder: *const redlock_config_builder,
    out_config: *mut *mut redlock_config,
) -> redlock_result {
    guard(|| {
        let builder = arg_ref!(builder);
        let out = arg_out!(out_config);
        match builder.inner.clone().build() {
            Ok(config) => {
                out.write(into_handle(redlock_config { inner: config }));
                R::REDLOCK_OK
            }
            Err(error) => error.into(),
        }
    })
}

/// Frees a configuration. NULL is ignored.
#[no_mangle]
pub unsafe extern "C" fn redlock_config_free(config: *mut redlock_config) {
    guard_value((), || {
        // SAFETY: by the crate's contract `config` is NULL or a live config handle.
        unsafe { free_handle(config) }
    })
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

/// Number of nodes, N (0 for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_config_nodes(config: *const redlock_config) -> usize {
    guard_value(0, || {
        let c = &arg_ref!(config, 0).inner;
        c.nodes()
    })
}

/// Successes needed to hold the lock: N / 2 + 1 (0 for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_config_quorum(config: *const redlock_config) -> usize {
    guard_value(0, || {
        let c = &arg_ref!(config, 0).inner;
        c.quorum()
    })
}

/// The lock's TTL in milliseconds (0 for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_config_ttl_ms(config: *const redlock_config) -> u64 {
    guard_value(0, || {
        let c = &arg_ref!(config, 0).inner;
        c.ttl_ms()
    })
}

/// The drift factor (0 for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_config_drift_factor(config: *const redlock_config) -> f64 {
    guard_value(0.0, || {
        let c = &arg_ref!(config, 0.0).inner;
        c.drift_factor()
    })
}

/// The fixed drift, in microseconds (0 for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_config_drift_fixed_us(config: *const redlock_config) -> u64 {
    guard_value(0, || {
        let c = &arg_ref!(config, 0).inner;
        micros(c.drift_fixed())
    })
}

/// The whole drift allowance `ceil(ttl * drift_factor) + drift_fixed`, in
/// microseconds (0 for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_config_drift_us(config: *const redlock_config) -> u64 {
    guard_value(0, || {
        let c = &arg_ref!(config, 0).inner;
        micros(c.drift())
    })
}

/// The node timeout, in microseconds (0 for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_config_node_timeout_us(config: *const redlock_config) -> u64 {
    guard_value(0, || {
        let c = &arg_ref!(config, 0).inner;
        micros(c.node_timeout())
    })
}

/// The minimum validity, in microseconds (0 for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_config_min_validity_us(config: *const redlock_config) -> u64 {
    guard_value(0, || {
        let c = &arg_ref!(config, 0).inner;
        micros(c.min_validity())
    })
}

/// Attempts of one acquisition (0 for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_config_attempts(config: *const redlock_config) -> u32 {
    guard_value(0, || {
        let c = &arg_ref!(config, 0).inner;
        c.attempts()
    })
}

/// The base delay between attempts, in microseconds (0 for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_config_retry_delay_us(config: *const redlock_config) -> u64 {
    guard_value(0, || {
        let c = &arg_ref!(config, 0).inner;
        micros(c.retry_delay())
    })
}

/// The jitter around the retry delay, in microseconds (0 for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_config_retry_jitter_us(config: *const redlock_config) -> u64 {
    guard_value(0, || {
        let c = &arg_ref!(config, 0).inner;
        micros(c.retry_jitter())
    })
}

/// Random bytes per token (0 for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_config_token_bytes(config: *const redlock_config) -> usize {
    guard_value(0, || {
        let c = &arg_ref!(config, 0).inner;
        c.token_bytes()
    })
}

/// The key prefix, borrowed: valid until the configuration is freed.
#[no_mangle]
pub unsafe extern "C" fn redlock_config_key_prefix(
    config: *const redlock_config,
    out_prefix: *mut *const u8,
    out_prefix_len: *mut usize,
) -> redlock_result {
    guard(|| {
        let config = arg_ref!(config);
        let (out_ptr, out_len) = (arg_out!(out_prefix), arg_out!(out_prefix_len));
        put_bytes(out_ptr, out_len, config.inner.key_prefix());
        R::REDLOCK_OK
    })
}

/// The bound on extensions: `*out_bounded` is false when unbounded (and `*out_max` is
/// then 0).
#[no_mangle]
pub unsafe extern "C" fn redlock_config_max_extensions(
    config: *const redlock_config,
    out_bounded: *mut bool,
    out_max: *mut u32,
) -> redlock_result {
    guard(|| {
        let config = arg_ref!(config);
        let (out_bounded, out_max) = (arg_out!(out_bounded), arg_out!(out_max));
        let max = config.inner.max_extensions();
        out_bounded.write(max.is_some());
        out_max.write(max.unwrap_or(0));
        R::REDLOCK_OK
    })
}

/// Whether acquisitions issue fencing tokens (false for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_config_fencing(config: *const redlock_config) -> bool {
    guard_value(false, || arg_ref!(config, false).inner.fencing())
}
