//! The client (a configuration and a source of randomness), the operations it starts,
//! leases, and tokens.

use std::time::Duration;

use redlock_core::{AcquireOptions, Lease, Redlock, Time, Token, UsageError};

use crate::boundary::{copy_out, free_handle, guard, guard_value, into_handle, put_bytes};
use crate::config::redlock_config;
use crate::error::{redlock_result, redlock_result as R};
use crate::operation::redlock_operation;

/// A Redlock client: starts acquisitions, extensions and releases. Operations are
/// independent of the client once started and may outlive it.
pub struct redlock_client {
    pub(crate) inner: Redlock,
}

/// A held lock: its keys, token, `valid_until` and TTL; what extending and releasing it
/// need.
pub struct redlock_lease {
    pub(crate) inner: Lease,
}

/// A client whose tokens come from the operating system's CSPRNG. The configuration is
/// copied: it may be freed right after. Free the client with `redlock_client_free`.
#[no_mangle]
pub unsafe extern "C" fn redlock_client_new(
    config: *const redlock_config,
    out_client: *mut *mut redlock_client,
) -> redlock_result {
    guard(|| {
        let config = arg_ref!(config);
        let out = arg_out!(out_client);
        out.write(into_handle(redlock_client {
            inner: Redlock::new(config.inner.clone()),
        }));
        R::REDLOCK_OK
    })
}

/// A client whose tokens come from a ChaCha20 stream seeded with the
/// `REDLOCK_SEED_LEN` (32) bytes at `seed` (`REDLOCK_INVALID_INPUT` for another
/// length). For places without OS randomness; the seed MUST itself be secret and
/// random, or tokens become predictable. The same seed gives the same tokens.
#[no_mangle]
pub unsafe extern "C" fn redlock_client_new_seeded(
    config: *const redlock_config,
    seed: *const u8,
    seed_len: usize,
    out_client: *mut *mut redlock_client,
) -> redlock_result {
    guard(|| {
        let config = arg_ref!(config);
        let seed = arg_bytes!(seed, seed_len);
        let out = arg_out!(out_client);
        let Ok(seed) = <[u8; 32]>::try_from(seed) else {
            return R::REDLOCK_INVALID_INPUT;
        };
        out.write(into_handle(redlock_client {
            inner: Redlock::with_seed(config.inner.clone(), seed),
        }));
        R::REDLOCK_OK
    })
}

/// Frees a client. NULL is ignored. Operations and leases it made stay valid.
#[no_mangle]
pub unsafe extern "C" fn redlock_client_free(client: *mut redlock_client) {
    guard_value((), || {
        // SAFETY: by the crate's contract `client` is NULL or a live client handle.
        unsafe { free_handle(client) }
    })
}

fn start(
    result: Result<redlock_core::Operation, UsageError>,
    out: &mut std::mem::MaybeUninit<*mut redlock_operation>,
) -> redlock_result {
    match result {
        Ok(op) => {
            out.write(into_handle(redlock_operation::new(op)));
            R::REDLOCK_OK
        }
        Err(error) => error.into(),
    }
}

/// Starts acquiring a lock on `resource_count` resources at `now_us` (microseconds on
/// the caller's monotonic clock), with the configured TTL. Resource `i` is the
/// `resource_lens[i]` bytes at `resources[i]`. Usage errors: `REDLOCK_NO_RESOURCES`,
/// `REDLOCK_EMPTY_RESOURCE`, `REDLOCK_TOO_MANY_RESOURCES`, `REDLOCK_DUPLICATE_RESOURCE`,
/// `REDLOCK_RANDOM_SOURCE_FAILED`. The operation is freed by `redlock_operation_free`.
#[no_mangle]
pub unsafe extern "C" fn redlock_client_acquire(
    client: *mut redlock_client,
    resources: *const *const u8,
    resource_lens: *const usize,
    resource_count: usize,
    now_us: u64,
    out_operation: *mut *mut redlock_operation,
) -> redlock_result {
    guard(|| {
        let client = arg_mut!(client);
        let resources = arg_byte_strings!(resources, resource_lens, resource_count);
        let out = arg_out!(out_operation);
        start(
            client
                .inner
                .acquire(&resources[..], Time::from_micros(now_us)),
            out,
        )
    })
}

/// Starts reading who holds the lock on `resource_count` resources at `now_us`: one
/// `GET` (`MGET` for several) per node, decided at the quorum. Its outcome is
/// `REDLOCK_OUTCOME_INSPECTED` (`redlock_outcome_is_locked`, `redlock_outcome_holder`,
/// `redlock_outcome_is_held_by`) or `REDLOCK_OUTCOME_NOT_INSPECTED`. It never changes a
/// key. The same usage errors as `redlock_client_acquire`.
#[no_mangle]
pub unsafe extern "C" fn redlock_client_inspect(
    client: *const redlock_client,
    resources: *const *const u8,
    resource_lens: *const usize,
    resource_count: usize,
    now_us: u64,
    out_operation: *mut *mut redlock_operation,
) -> redlock_result {
    guard(|| {
        let client = arg_ref!(client);
        let resources = arg_byte_strings!(resources, resource_lens, resource_count);
        let out = arg_out!(out_operation);
        start(
            client
                .inner
                .inspect(&resources[..], Time::from_micros(now_us)),
            out,
        )
    })
}

/// Like `redlock_client_acquire`, with a TTL of `ttl_ms` for this lock only, checked
/// against the rest of the configuration (`REDLOCK_INVALID_TTL` when it breaks a rule).
#[no_mangle]
pub unsafe extern "C" fn redlock_client_acquire_for(
    client: *mut redlock_client,
    resources: *const *const u8,
    resource_lens: *const usize,
    resource_count: usize,
    ttl_ms: u64,
    now_us: u64,
    out_operation: *mut *mut redlock_operation,
) -> redlock_result {
    guard(|| {
        let client = arg_mut!(client);
        let resources = arg_byte_strings!(resources, resource_lens, resource_count);
        let out = arg_out!(out_operation);
        start(
            client.inner.acquire_for(
                &resources[..],
                Duration::from_millis(ttl_ms),
                Time::from_micros(now_us),
            ),
            out,
        )
    })
}

/// The options `redlock_client_acquire_with*` take: a TTL of `ttl_ms` unless 0, and a
/// wait limit of `wait_us` when `has_wait`.
fn acquire_options(ttl_ms: u64, has_wait: bool, wait_us: u64) -> AcquireOptions {
    let mut options = AcquireOptions::new();
    if ttl_ms != 0 {
        options = options.ttl(Duration::from_millis(ttl_ms));
    }
    if has_wait {
        options = options.wait(Duration::from_micros(wait_us));
    }
    options
}

/// Like `redlock_client_acquire`, with this acquisition's options: a TTL of `ttl_ms`
/// (0: the configured TTL; otherwise checked as `redlock_client_acquire_for` does) and,
/// when `has_wait`, a wait limit of `wait_us` microseconds (without one, the configured
/// attempts apply). With a wait limit the acquisition keeps trying until
/// `now_us + wait_us`, never starting an attempt that could not end by then, and tries
/// again early on release notices (`redlock_operation_handle_notice`).
#[no_mangle]
pub unsafe extern "C" fn redlock_client_acquire_with(
    client: *mut redlock_client,
    resources: *const *const u8,
    resource_lens: *const usize,
    resource_count: usize,
    ttl_ms: u64,
    has_wait: bool,
    wait_us: u64,
    now_us: u64,
    out_operation: *mut *mut redlock_operation,
) -> redlock_result {
    guard(|| {
        let client = arg_mut!(client);
        let resources = arg_byte_strings!(resources, resource_lens, resource_count);
        let out = arg_out!(out_operation);
        let options = acquire_options(ttl_ms, has_wait, wait_us);
        start(
            client
                .inner
                .acquire_with(&resources[..], &options, Time::from_micros(now_us)),
            out,
        )
    })
}

/// `redlock_client_acquire_with` with tokens and jitter from the `random_len` bytes at
/// `random` (copied), as `redlock_client_acquire_with_random` takes them. With a wait
/// limit the bytes MUST hold at least one token; when they run out no further attempt
/// starts. For tests and replays: real locks use the client's own source.
#[no_mangle]
pub unsafe extern "C" fn redlock_client_acquire_with_random_options(
    client: *const redlock_client,
    resources: *const *const u8,
    resource_lens: *const usize,
    resource_count: usize,
    ttl_ms: u64,
    has_wait: bool,
    wait_us: u64,
    random: *const u8,
    random_len: usize,
    now_us: u64,
    out_operation: *mut *mut redlock_operation,
) -> redlock_result {
    guard(|| {
        let client = arg_ref!(client);
        let resources = arg_byte_strings!(resources, resource_lens, resource_count);
        let random = arg_bytes!(random, random_len);
        let out = arg_out!(out_operation);
        let options = acquire_options(ttl_ms, has_wait, wait_us);
        start(
            client.inner.acquire_with_random_options(
                &resources[..],
                &options,
                random.to_vec(),
                Time::from_micros(now_us),
            ),
            out,
        )
    })
}

/// Like `redlock_client_acquire`, drawing tokens and retry jitter from the
/// `random_len` bytes at `random` (copied) in the core's documented order: the first
/// token, then for each retry 8 bytes of jitter and the next token. At least
/// `attempts * token_bytes + (attempts - 1) * 8` bytes, else
/// `REDLOCK_NOT_ENOUGH_RANDOM_BYTES`. For real locks they MUST come from a CSPRNG.
#[no_mangle]
pub unsafe extern "C" fn redlock_client_acquire_with_random(
    client: *const redlock_client,
    resources: *const *const u8,
    resource_lens: *const usize,
    resource_count: usize,
    random: *const u8,
    random_len: usize,
    now_us: u64,
    out_operation: *mut *mut redlock_operation,
) -> redlock_result {
    guard(|| {
        let client = arg_ref!(client);
        let resources = arg_byte_strings!(resources, resource_lens, resource_count);
        let random = arg_bytes!(random, random_len);
        let out = arg_out!(out_operation);
        start(
            client.inner.acquire_with_random(
                &resources[..],
                random.to_vec(),
                Time::from_micros(now_us),
            ),
            out,
        )
    })
}

/// Starts extending `lease` by its own TTL from `now_us`. The lease is copied.
#[no_mangle]
pub unsafe extern "C" fn redlock_client_extend(
    client: *const redlock_client,
    lease: *const redlock_lease,
    now_us: u64,
    out_operation: *mut *mut redlock_operation,
) -> redlock_result {
    guard(|| {
        let client = arg_ref!(client);
        let lease = arg_ref!(lease);
        let out = arg_out!(out_operation);
        start(
            client.inner.extend(&lease.inner, Time::from_micros(now_us)),
            out,
        )
    })
}

/// Starts extending `lease` by `ttl_ms` from `now_us`; `REDLOCK_INVALID_TTL` when that
/// TTL breaks a rule of the configuration.
#[no_mangle]
pub unsafe extern "C" fn redlock_client_extend_for(
    client: *const redlock_client,
    lease: *const redlock_lease,
    ttl_ms: u64,
    now_us: u64,
    out_operation: *mut *mut redlock_operation,
) -> redlock_result {
    guard(|| {
        let client = arg_ref!(client);
        let lease = arg_ref!(lease);
        let out = arg_out!(out_operation);
        start(
            client.inner.extend_for(
                &lease.inner,
                Duration::from_millis(ttl_ms),
                Time::from_micros(now_us),
            ),
            out,
        )
    })
}

/// Starts releasing `lease` on every node at `now_us`. Always possible.
#[no_mangle]
pub unsafe extern "C" fn redlock_client_release(
    client: *const redlock_client,
    lease: *const redlock_lease,
    now_us: u64,
    out_operation: *mut *mut redlock_operation,
) -> redlock_result {
    guard(|| {
        let client = arg_ref!(client);
        let lease = arg_ref!(lease);
        let out = arg_out!(out_operation);
        out.write(into_handle(redlock_operation::new(
            client
                .inner
                .release(&lease.inner, Time::from_micros(now_us)),
        )));
        R::REDLOCK_OK
    })
}

/// Whether a per-operation TTL of `ttl_ms` fits this client's configuration:
/// `REDLOCK_OK`, or the `REDLOCK_CONFIG_*` code of the rule it breaks (the detail
/// behind `REDLOCK_INVALID_TTL`).
#[no_mangle]
pub unsafe extern "C" fn redlock_client_check_ttl(
    client: *const redlock_client,
    ttl_ms: u64,
) -> redlock_result {
    guard(|| {
        let client = arg_ref!(client);
        match client
            .inner
            .config()
            .with_ttl(Duration::from_millis(ttl_ms))
        {
            Ok(_) => R::REDLOCK_OK,
            Err(error) => error.into(),
        }
    })
}

/// A lease rebuilt from its parts, for a holder that kept only the token (another
/// process, a command line). Resources as in `redlock_client_acquire`; the token is
/// `token_len` bytes of printable ASCII without spaces (`REDLOCK_INVALID_TOKEN`
/// otherwise, invalid UTF-8 included); `valid_until_us` is whatever the holder knows
/// (0 if nothing). Free it with `redlock_lease_free`.
#[no_mangle]
pub unsafe extern "C" fn redlock_client_lease(
    client: *const redlock_client,
    resources: *const *const u8,
    resource_lens: *const usize,
    resource_count: usize,
    token: *const u8,
    token_len: usize,
    valid_until_us: u64,
    out_lease: *mut *mut redlock_lease,
) -> redlock_result {
    guard(|| {
        let client = arg_ref!(client);
        let resources = arg_byte_strings!(resources, resource_lens, resource_count);
        let token = arg_bytes!(token, token_len);
        let out = arg_out!(out_lease);
        // Non-UTF-8 bytes are not printable ASCII either: the core's own rule applies.
        let Ok(token) = std::str::from_utf8(token) else {
            return R::REDLOCK_INVALID_TOKEN;
        };
        match client
            .inner
            .lease(&resources[..], token, Time::from_micros(valid_until_us))
        {
            Ok(lease) => {
                out.write(into_handle(redlock_lease { inner: lease }));
                R::REDLOCK_OK
            }
            Err(error) => error.into(),
        }
    })
}

/// Writes a fresh token (lowercase hex of `token_bytes` random bytes from the client's
/// source) into `buf` and its length into `*out_len`; no NUL is written. A buffer of
/// `2 * REDLOCK_MAX_TOKEN_BYTES` bytes always suffices.
#[no_mangle]
pub unsafe extern "C" fn redlock_client_generate_token(
    client: *mut redlock_client,
    buf: *mut u8,
    buf_len: usize,
    out_len: *mut usize,
) -> redlock_result {
    guard(|| {
        let client = arg_mut!(client);
        if buf.is_null() || out_len.is_null() {
            return R::REDLOCK_NULL_PARAMETER;
        }
        let needed = client.inner.config().token_bytes() * 2;
        if buf_len < needed {
            // Checked first so that a short buffer does not consume randomness.
            return R::REDLOCK_BUFFER_TOO_SMALL;
        }
        match client.inner.generate_token() {
            // SAFETY: `buf` is writable for `buf_len` bytes by the crate's contract.
            Ok(token) => unsafe { copy_out(token.as_bytes(), false, buf, buf_len, out_len) },
            Err(error) => error.into(),
        }
    })
}

/// Writes the token the core makes of the `bytes_len` caller-supplied random bytes at
/// `bytes` (their lowercase hex) into `buf`, and its length into `*out_len`; no NUL is
/// written. `bytes_len` must be `REDLOCK_MIN_TOKEN_BYTES` to `REDLOCK_MAX_TOKEN_BYTES`
/// (`REDLOCK_INVALID_INPUT` otherwise); `buf_len` at least twice that.
#[no_mangle]
pub unsafe extern "C" fn redlock_token_from_random_bytes(
    bytes: *const u8,
    bytes_len: usize,
    buf: *mut u8,
    buf_len: usize,
    out_len: *mut usize,
) -> redlock_result {
    guard(|| {
        let bytes = arg_bytes!(bytes, bytes_len);
        if buf.is_null() || out_len.is_null() {
            return R::REDLOCK_NULL_PARAMETER;
        }
        if !(redlock_core::MIN_TOKEN_BYTES..=redlock_core::MAX_TOKEN_BYTES).contains(&bytes.len()) {
            return R::REDLOCK_INVALID_INPUT;
        }
        let token = Token::from_random_bytes(bytes);
        // SAFETY: `buf` is writable for `buf_len` bytes by the crate's contract.
        unsafe { copy_out(token.as_bytes(), false, buf, buf_len, out_len) }
    })
}

/// When a holder that keeps `lease` alive should start its next extension:
/// `*out_due` true and `*out_at_us` the instant (it may be `now_us`), or `*out_due`
/// false (and `*out_at_us` 0) when it should not (the lease expired, or the bound on
/// extensions is reached). Decided by the core from this client's configuration.
#[no_mangle]
pub unsafe extern "C" fn redlock_client_next_extension(
    client: *const redlock_client,
    lease: *const redlock_lease,
    now_us: u64,
    out_due: *mut bool,
    out_at_us: *mut u64,
) -> redlock_result {
    guard(|| {
        let client = arg_ref!(client);
        let lease = arg_ref!(lease);
        let (out_due, out_at) = (arg_out!(out_due), arg_out!(out_at_us));
        let at = client
            .inner
            .config()
            .next_extension(&lease.inner, Time::from_micros(now_us));
        out_due.write(at.is_some());
        out_at.write(at.map_or(0, Time::as_micros));
        R::REDLOCK_OK
    })
}

/// Frees a lease. NULL is ignored.
#[no_mangle]
pub unsafe extern "C" fn redlock_lease_free(lease: *mut redlock_lease) {
    guard_value((), || {
        // SAFETY: by the crate's contract `lease` is NULL or a live lease handle.
        unsafe { free_handle(lease) }
    })
}

/// A copy of `lease`, freed by `redlock_lease_free`.
#[no_mangle]
pub unsafe extern "C" fn redlock_lease_clone(
    lease: *const redlock_lease,
    out_lease: *mut *mut redlock_lease,
) -> redlock_result {
    guard(|| {
        let lease = arg_ref!(lease);
        let out = arg_out!(out_lease);
        out.write(into_handle(redlock_lease {
            inner: lease.inner.clone(),
        }));
        R::REDLOCK_OK
    })
}

/// The token stored under every key, borrowed: valid until the lease is freed.
#[no_mangle]
pub unsafe extern "C" fn redlock_lease_token(
    lease: *const redlock_lease,
    out_token: *mut *const u8,
    out_token_len: *mut usize,
) -> redlock_result {
    guard(|| {
        let lease = arg_ref!(lease);
        let (out_ptr, out_len) = (arg_out!(out_token), arg_out!(out_token_len));
        put_bytes(out_ptr, out_len, lease.inner.token().as_bytes());
        R::REDLOCK_OK
    })
}

/// Number of locked keys (0 for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_lease_key_count(lease: *const redlock_lease) -> usize {
    guard_value(0, || arg_ref!(lease, 0).inner.keys().len())
}

/// Key `index` (resource name with the key prefix), borrowed: valid until the lease is
/// freed. `REDLOCK_OUT_OF_RANGE` past the last key.
#[no_mangle]
pub unsafe extern "C" fn redlock_lease_key(
    lease: *const redlock_lease,
    index: usize,
    out_key: *mut *const u8,
    out_key_len: *mut usize,
) -> redlock_result {
    guard(|| {
        let lease = arg_ref!(lease);
        let (out_ptr, out_len) = (arg_out!(out_key), arg_out!(out_key_len));
        match lease.inner.keys().get(index) {
            Some(key) => {
                put_bytes(out_ptr, out_len, key);
                R::REDLOCK_OK
            }
            None => R::REDLOCK_OUT_OF_RANGE,
        }
    })
}

/// The instant, on the caller's monotonic clock, until which the lock is held; the
/// holder MUST NOT rely on it at or after this instant (0 for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_lease_valid_until(lease: *const redlock_lease) -> u64 {
    guard_value(0, || arg_ref!(lease, 0).inner.valid_until().as_micros())
}

/// Validity left at `now_us`, in microseconds (0 once expired, or for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_lease_validity(lease: *const redlock_lease, now_us: u64) -> u64 {
    guard_value(0, || {
        let validity = arg_ref!(lease, 0).inner.validity(Time::from_micros(now_us));
        u64::try_from(validity.as_micros()).unwrap_or(u64::MAX)
    })
}

/// True while `now_us < valid_until` (false for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_lease_is_valid(lease: *const redlock_lease, now_us: u64) -> bool {
    guard_value(false, || {
        arg_ref!(lease, false)
            .inner
            .is_valid(Time::from_micros(now_us))
    })
}

/// The TTL the lock was acquired or last extended with, in milliseconds (0 for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_lease_ttl_ms(lease: *const redlock_lease) -> u64 {
    guard_value(0, || arg_ref!(lease, 0).inner.ttl_ms())
}

/// The longest TTL, in milliseconds, that any of the lock's keys may carry (its
/// acquisition's and every extension's, failed ones included). `REDLOCK_NO_VALUE` for a
/// lease rebuilt from its parts (`redlock_client_lease`), whose keys' TTL this process
/// never saw.
#[no_mangle]
pub unsafe extern "C" fn redlock_lease_key_ttl_ms(
    lease: *const redlock_lease,
    out_ttl_ms: *mut u64,
) -> redlock_result {
    guard(|| {
        let lease = arg_ref!(lease);
        let out = arg_out!(out_ttl_ms);
        match lease.inner.key_ttl_ms() {
            Some(ttl) => {
                out.write(ttl);
                R::REDLOCK_OK
            }
            None => R::REDLOCK_NO_VALUE,
        }
    })
}

/// The lease's fencing token (see `redlock_outcome_fencing_token`). `REDLOCK_NO_VALUE`
/// without fencing, and for a lease rebuilt from its parts (`redlock_client_lease`).
#[no_mangle]
pub unsafe extern "C" fn redlock_lease_fencing_token(
    lease: *const redlock_lease,
    out_token: *mut u64,
) -> redlock_result {
    guard(|| {
        let lease = arg_ref!(lease);
        let out = arg_out!(out_token);
        match lease.inner.fencing_token() {
            Some(token) => {
                out.write(token);
                R::REDLOCK_OK
            }
            None => R::REDLOCK_NO_VALUE,
        }
    })
}

/// Successful extensions since the lock was acquired (0 for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_lease_extensions(lease: *const redlock_lease) -> u32 {
    guard_value(0, || arg_ref!(lease, 0).inner.extensions())
}
