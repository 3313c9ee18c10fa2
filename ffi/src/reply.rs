//! Replies as values (built from C, or decoded from RESP bytes) and the RESP decoder.

use redlock_core::resp::{Decoder, Limits};
use redlock_core::Reply;

use crate::boundary::{free_handle, guard, guard_value, into_handle, put_bytes};
use crate::error::{redlock_result, redlock_result as R};

/// The status reply `OK`.
pub const REDLOCK_REPLY_OK: u32 = 1;
/// A status reply other than `OK` (text).
pub const REDLOCK_REPLY_STATUS: u32 = 2;
/// A null reply (null bulk string, null array, RESP3 null).
pub const REDLOCK_REPLY_NIL: u32 = 3;
/// An integer reply.
pub const REDLOCK_REPLY_INTEGER: u32 = 4;
/// A bulk string reply (bytes).
pub const REDLOCK_REPLY_BULK: u32 = 5;
/// An array reply (built with `redlock_reply_new_array` and `redlock_reply_array_push`).
pub const REDLOCK_REPLY_ARRAY: u32 = 6;
/// An error reply with the node's full text (`NOSCRIPT No matching script. ...`).
pub const REDLOCK_REPLY_ERROR: u32 = 7;
/// The driver gave up waiting for this reply.
pub const REDLOCK_REPLY_TIMEOUT: u32 = 8;
/// The driver could not reach the node or lost the connection (text says why).
pub const REDLOCK_REPLY_CONNECTION_FAILED: u32 = 9;

/// One reply, as a value: built by the caller or taken from a decoder. Freed by
/// `redlock_reply_free`.
pub struct redlock_reply {
    pub(crate) inner: Reply,
}

/// An incremental RESP2/RESP3 decoder for drivers that own a raw socket: feed it the
/// bytes read, take replies as they complete. Freed by `redlock_decoder_free`.
pub struct redlock_decoder {
    inner: Decoder,
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The reply of kind `kind` (any but `REDLOCK_REPLY_ARRAY`) with its integer or text.
pub(crate) fn reply_from_parts(
    kind: u32,
    integer: i64,
    bytes: &[u8],
) -> Result<Reply, redlock_result> {
    Ok(match kind {
        REDLOCK_REPLY_OK => Reply::Ok,
        REDLOCK_REPLY_STATUS => Reply::status(&text(bytes)),
        REDLOCK_REPLY_NIL => Reply::Nil,
        REDLOCK_REPLY_INTEGER => Reply::Integer(integer),
        REDLOCK_REPLY_BULK => Reply::Bulk(bytes.to_vec()),
        REDLOCK_REPLY_ERROR => Reply::Error(text(bytes)),
        REDLOCK_REPLY_TIMEOUT => Reply::Timeout,
        REDLOCK_REPLY_CONNECTION_FAILED => Reply::ConnectionFailed(text(bytes)),
        _ => return Err(R::REDLOCK_INVALID_INPUT),
    })
}

/// A reply of kind `kind` (a `REDLOCK_REPLY_*` value; `REDLOCK_REPLY_ARRAY` gives an
/// empty array), with `integer` and the `text_len` bytes at `text` read as for
/// `redlock_operation_handle_reply`. `REDLOCK_INVALID_INPUT` for an unknown kind.
#[no_mangle]
pub unsafe extern "C" fn redlock_reply_new(
    kind: u32,
    integer: i64,
    text: *const u8,
    text_len: usize,
    out_reply: *mut *mut redlock_reply,
) -> redlock_result {
    guard(|| {
        let text = arg_bytes!(text, text_len);
        let out = arg_out!(out_reply);
        let reply = if kind == REDLOCK_REPLY_ARRAY {
            Reply::Array(Vec::new())
        } else {
            match reply_from_parts(kind, integer, text) {
                Ok(reply) => reply,
                Err(code) => return code,
            }
        };
        out.write(into_handle(redlock_reply { inner: reply }));
        R::REDLOCK_OK
    })
}

/// Appends a copy of `item` to the array `array` (build nested arrays inside out).
/// `REDLOCK_INVALID_INPUT` when `array` is not an array.
#[no_mangle]
pub unsafe extern "C" fn redlock_reply_array_push(
    array: *mut redlock_reply,
    item: *const redlock_reply,
) -> redlock_result {
    guard(|| {
        let array = arg_mut!(array);
        let item = arg_ref!(item);
        let Reply::Array(items) = &mut array.inner else {
            return R::REDLOCK_INVALID_INPUT;
        };
        // Cloned before pushing: `item` may be `array` itself.
        let copy = item.inner.clone();
        items.push(copy);
        R::REDLOCK_OK
    })
}

/// Frees a reply. NULL is ignored.
#[no_mangle]
pub unsafe extern "C" fn redlock_reply_free(reply: *mut redlock_reply) {
    guard_value((), || {
        // SAFETY: by the crate's contract `reply` is NULL or a live reply handle.
        unsafe { free_handle(reply) }
    })
}

/// The `REDLOCK_REPLY_*` kind of `reply` (0 for a kind this version does not know).
pub(crate) fn reply_kind(reply: &Reply) -> u32 {
    match reply {
        Reply::Ok => REDLOCK_REPLY_OK,
        Reply::Status(_) => REDLOCK_REPLY_STATUS,
        Reply::Nil => REDLOCK_REPLY_NIL,
        Reply::Integer(_) => REDLOCK_REPLY_INTEGER,
        Reply::Bulk(_) => REDLOCK_REPLY_BULK,
        Reply::Array(_) => REDLOCK_REPLY_ARRAY,
        Reply::Error(_) => REDLOCK_REPLY_ERROR,
        Reply::Timeout => REDLOCK_REPLY_TIMEOUT,
        Reply::ConnectionFailed(_) => REDLOCK_REPLY_CONNECTION_FAILED,
        _ => 0,
    }
}

/// The reply's `REDLOCK_REPLY_*` kind (0 for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_reply_kind(reply: *const redlock_reply) -> u32 {
    guard_value(0, || reply_kind(&arg_ref!(reply, 0).inner))
}

/// The value of an integer reply. `REDLOCK_NO_VALUE` for other kinds.
#[no_mangle]
pub unsafe extern "C" fn redlock_reply_integer(
    reply: *const redlock_reply,
    out_integer: *mut i64,
) -> redlock_result {
    guard(|| {
        let reply = arg_ref!(reply);
        let out = arg_out!(out_integer);
        match reply.inner {
            Reply::Integer(n) => {
                out.write(n);
                R::REDLOCK_OK
            }
            _ => R::REDLOCK_NO_VALUE,
        }
    })
}

/// The bytes of a status, bulk, error or connection-failed reply, borrowed: valid
/// until the reply is freed. `REDLOCK_NO_VALUE` for other kinds.
#[no_mangle]
pub unsafe extern "C" fn redlock_reply_bytes(
    reply: *const redlock_reply,
    out_bytes: *mut *const u8,
    out_bytes_len: *mut usize,
) -> redlock_result {
    guard(|| {
        let reply = arg_ref!(reply);
        let (out_ptr, out_len) = (arg_out!(out_bytes), arg_out!(out_bytes_len));
        let bytes: &[u8] = match &reply.inner {
            Reply::Status(text) | Reply::Error(text) | Reply::ConnectionFailed(text) => {
                text.as_bytes()
            }
            Reply::Bulk(bytes) => bytes,
            _ => return R::REDLOCK_NO_VALUE,
        };
        put_bytes(out_ptr, out_len, bytes);
        R::REDLOCK_OK
    })
}

/// Number of elements of an array reply (0 for other kinds and NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_reply_array_len(reply: *const redlock_reply) -> usize {
    guard_value(0, || match &arg_ref!(reply, 0).inner {
        Reply::Array(items) => items.len(),
        _ => 0,
    })
}

/// A copy of element `index` of an array reply, freed by `redlock_reply_free`.
/// `REDLOCK_NO_VALUE` for other kinds, `REDLOCK_OUT_OF_RANGE` past the end.
#[no_mangle]
pub unsafe extern "C" fn redlock_reply_array_get(
    reply: *const redlock_reply,
    index: usize,
    out_item: *mut *mut redlock_reply,
) -> redlock_result {
    guard(|| {
        let reply = arg_ref!(reply);
        let out = arg_out!(out_item);
        let Reply::Array(items) = &reply.inner else {
            return R::REDLOCK_NO_VALUE;
        };
        match items.get(index) {
            Some(item) => {
                out.write(into_handle(redlock_reply {
                    inner: item.clone(),
                }));
                R::REDLOCK_OK
            }
            None => R::REDLOCK_OUT_OF_RANGE,
        }
    })
}

/// A decoder with the default limits (bulk strings up to 512 MiB, 2^20 elements per
/// aggregate, nesting depth 32, lines up to 64 KiB).
#[no_mangle]
pub unsafe extern "C" fn redlock_decoder_new(
    out_decoder: *mut *mut redlock_decoder,
) -> redlock_result {
    guard(|| {
        let out = arg_out!(out_decoder);
        out.write(into_handle(redlock_decoder {
            inner: Decoder::new(),
        }));
        R::REDLOCK_OK
    })
}

/// A decoder with the given limits: longest bulk string, most elements in one
/// aggregate, deepest nesting, longest simple line. A frame beyond them is
/// `REDLOCK_PROTOCOL_TOO_LARGE` or `REDLOCK_PROTOCOL_TOO_DEEP`.
#[no_mangle]
pub unsafe extern "C" fn redlock_decoder_new_with_limits(
    max_bulk: usize,
    max_elements: usize,
    max_depth: usize,
    max_line: usize,
    out_decoder: *mut *mut redlock_decoder,
) -> redlock_result {
    guard(|| {
        let out = arg_out!(out_decoder);
        out.write(into_handle(redlock_decoder {
            inner: Decoder::with_limits(Limits {
                max_bulk,
                max_elements,
                max_depth,
                max_line,
            }),
        }));
        R::REDLOCK_OK
    })
}

/// Frees a decoder. NULL is ignored.
#[no_mangle]
pub unsafe extern "C" fn redlock_decoder_free(decoder: *mut redlock_decoder) {
    guard_value((), || {
        // SAFETY: by the crate's contract `decoder` is NULL or a live decoder handle.
        unsafe { free_handle(decoder) }
    })
}

/// Adds the `bytes_len` bytes at `bytes` (copied), as read from the connection.
#[no_mangle]
pub unsafe extern "C" fn redlock_decoder_feed(
    decoder: *mut redlock_decoder,
    bytes: *const u8,
    bytes_len: usize,
) -> redlock_result {
    guard(|| {
        let decoder = arg_mut!(decoder);
        let bytes = arg_bytes!(bytes, bytes_len);
        decoder.inner.feed(bytes);
        R::REDLOCK_OK
    })
}

/// The next complete reply: `*out_reply` is a new reply (freed by
/// `redlock_reply_free`), or NULL when more bytes are needed. A malformed stream gives
/// a `REDLOCK_PROTOCOL_*` code, and keeps giving it: the connection must be closed.
/// Out-of-band push frames are skipped.
#[no_mangle]
pub unsafe extern "C" fn redlock_decoder_next_reply(
    decoder: *mut redlock_decoder,
    out_reply: *mut *mut redlock_reply,
) -> redlock_result {
    guard(|| {
        let decoder = arg_mut!(decoder);
        let out = arg_out!(out_reply);
        match decoder.inner.next_reply() {
            Ok(Some(reply)) => out.write(into_handle(redlock_reply { inner: reply })),
            Ok(None) => out.write(std::ptr::null_mut()),
            Err(error) => return error.into(),
        };
        R::REDLOCK_OK
    })
}

/// Bytes fed but not yet consumed by a complete reply (0 for NULL).
#[no_mangle]
pub unsafe extern "C" fn redlock_decoder_buffered(decoder: *const redlock_decoder) -> usize {
    guard_value(0, || arg_ref!(decoder, 0).inner.buffered())
}
