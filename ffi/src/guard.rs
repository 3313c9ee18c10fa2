//! The resource-side check of a fencing token: a fenced write of one item on the
//! resource's own Redis server (the project's `docs/fencing.md`).

use redlock_core::{FencedSet, FencedWrite};

use crate::boundary::{free_handle, guard, guard_value, into_handle, put_args, put_bytes};
use crate::error::{code_of, redlock_result, redlock_result as R};
use crate::reply::redlock_reply;

/// No reply handed in yet (`redlock_fenced_set_result`).
pub const REDLOCK_FENCED_PENDING: u32 = 0;
/// The item now holds the value; its guard holds the token.
pub const REDLOCK_FENCED_ACCEPTED: u32 = 1;
/// Nothing changed: the item had already accepted a token at least as high
/// (`redlock_fenced_set_seen`). The writer is a stale holder.
pub const REDLOCK_FENCED_STALE: u32 = 2;
/// The server lacks the script: send the `EVAL` form (`eval = true`) and hand in that
/// reply instead.
pub const REDLOCK_FENCED_RETRY_AS_EVAL: u32 = 3;
/// The server answered an error or a malformed reply, or none came
/// (`redlock_fenced_set_failure` says what). After a timeout or lost connection, whether
/// the write happened is not known.
pub const REDLOCK_FENCED_FAILED: u32 = 4;

/// One fenced write of a value to an item under a fencing token, and what became of it.
/// Freed by `redlock_fenced_set_free`.
pub struct redlock_fenced_set {
    inner: FencedSet,
    evalsha: Vec<Vec<u8>>,
    eval: Vec<Vec<u8>>,
    result: Option<FencedWrite>,
}

/// A fenced write of the `value_len` bytes at `value` to the item named by the
/// `item_len` bytes at `item`, under `token` (a lease's `redlock_lease_fencing_token`).
/// Both are copied. `REDLOCK_EMPTY_RESOURCE` for an empty item,
/// `REDLOCK_INVALID_FENCING_TOKEN` for a token of 0 or above `REDLOCK_MAX_FENCING_TOKEN`.
#[no_mangle]
pub unsafe extern "C" fn redlock_fenced_set_new(
    item: *const u8,
    item_len: usize,
    value: *const u8,
    value_len: usize,
    token: u64,
    out_write: *mut *mut redlock_fenced_set,
) -> redlock_result {
    guard(|| {
        let item = arg_bytes!(item, item_len);
        let value = arg_bytes!(value, value_len);
        let out = arg_out!(out_write);
        match FencedSet::new(item, value, token) {
            Ok(inner) => {
                out.write(into_handle(redlock_fenced_set {
                    evalsha: inner.args(false),
                    eval: inner.args(true),
                    inner,
                    result: None,
                }));
                R::REDLOCK_OK
            }
            Err(error) => code_of(Err(error)),
        }
    })
}

/// Frees a fenced write. NULL is ignored.
#[no_mangle]
pub unsafe extern "C" fn redlock_fenced_set_free(write: *mut redlock_fenced_set) {
    guard_value((), || {
        // SAFETY: by the crate's contract `write` is NULL or a live handle.
        unsafe { free_handle(write) }
    })
}

/// The command to send, into caller arrays of `capacity` elements (7 suffice):
/// `EVALSHA <sha> 2 <item> <guard key> <token> <value>`, or with `eval` the `EVAL` form.
/// The arguments are borrowed until the write is freed; the count goes to `*out_argc`.
#[no_mangle]
pub unsafe extern "C" fn redlock_fenced_set_args(
    write: *const redlock_fenced_set,
    eval: bool,
    args: *mut *const u8,
    arg_lens: *mut usize,
    capacity: usize,
    out_argc: *mut usize,
) -> redlock_result {
    guard(|| {
        let write = arg_ref!(write);
        if args.is_null() || arg_lens.is_null() {
            return R::REDLOCK_NULL_PARAMETER;
        }
        let out_argc = arg_out!(out_argc);
        let argv = if eval { &write.eval } else { &write.evalsha };
        // SAFETY: both arrays were checked non-NULL above and are writable for
        // `capacity` elements by the crate's contract.
        match unsafe { put_args(argv.iter().map(Vec::as_slice), args, arg_lens, capacity) } {
            Ok(argc) => {
                out_argc.write(argc);
                R::REDLOCK_OK
            }
            Err(code) => code,
        }
    })
}

/// Hands in the server's reply (built with `redlock_reply_new*`, or from a
/// `redlock_decoder`; copied, the caller still frees it) and returns what became of the
/// write in `*out_result`, a `REDLOCK_FENCED_*` value. Each reply replaces the last.
#[no_mangle]
pub unsafe extern "C" fn redlock_fenced_set_handle_reply(
    write: *mut redlock_fenced_set,
    reply: *const redlock_reply,
    out_result: *mut u32,
) -> redlock_result {
    guard(|| {
        let write = arg_mut!(write);
        let reply = arg_ref!(reply);
        let out = arg_out!(out_result);
        let result = write.inner.handle_reply(&reply.inner);
        out.write(result_code(Some(&result)));
        write.result = Some(result);
        R::REDLOCK_OK
    })
}

fn result_code(result: Option<&FencedWrite>) -> u32 {
    match result {
        None => REDLOCK_FENCED_PENDING,
        Some(FencedWrite::Accepted) => REDLOCK_FENCED_ACCEPTED,
        Some(FencedWrite::Stale { .. }) => REDLOCK_FENCED_STALE,
        Some(FencedWrite::RetryAsEval) => REDLOCK_FENCED_RETRY_AS_EVAL,
        Some(_) => REDLOCK_FENCED_FAILED,
    }
}

/// The last result, a `REDLOCK_FENCED_*` value (`REDLOCK_FENCED_PENDING` before any
/// reply and for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_fenced_set_result(write: *const redlock_fenced_set) -> u32 {
    guard_value(REDLOCK_FENCED_PENDING, || {
        result_code(arg_ref!(write, REDLOCK_FENCED_PENDING).result.as_ref())
    })
}

/// The token the item had accepted when the write was refused as stale.
/// `REDLOCK_NO_VALUE` unless the last result is `REDLOCK_FENCED_STALE`.
#[no_mangle]
pub unsafe extern "C" fn redlock_fenced_set_seen(
    write: *const redlock_fenced_set,
    out_seen: *mut u64,
) -> redlock_result {
    guard(|| {
        let write = arg_ref!(write);
        let out = arg_out!(out_seen);
        match write.result {
            Some(FencedWrite::Stale { seen }) => {
                out.write(seen);
                R::REDLOCK_OK
            }
            _ => R::REDLOCK_NO_VALUE,
        }
    })
}

/// What went wrong when the last result is `REDLOCK_FENCED_FAILED`, borrowed (UTF-8, not
/// NUL-terminated) until the next reply or the write is freed. `REDLOCK_NO_VALUE`
/// otherwise.
#[no_mangle]
pub unsafe extern "C" fn redlock_fenced_set_failure(
    write: *const redlock_fenced_set,
    out_text: *mut *const u8,
    out_text_len: *mut usize,
) -> redlock_result {
    guard(|| {
        let write = arg_ref!(write);
        let (out_ptr, out_len) = (arg_out!(out_text), arg_out!(out_text_len));
        match &write.result {
            Some(FencedWrite::Failed(text)) => {
                put_bytes(out_ptr, out_len, text.as_bytes());
                R::REDLOCK_OK
            }
            _ => R::REDLOCK_NO_VALUE,
        }
    })
}
