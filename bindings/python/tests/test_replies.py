"""How redis-py's replies and errors are handed to the core (no I/O)."""

from __future__ import annotations

from redis.exceptions import (
    ConnectionError,
    NoScriptError,
    ReadOnlyError,
    ResponseError,
    TimeoutError,
)

from redlock_core import _ffi as ffi
from redlock_core._common import error_text, from_exception, from_response


def test_replies_map_to_the_core_kinds() -> None:
    assert from_response(b"OK") == (ffi.REPLY_OK, 0, None)
    assert from_response("OK") == (ffi.REPLY_OK, 0, None)
    assert from_response(None) == (ffi.REPLY_NIL, 0, None)
    assert from_response(1) == (ffi.REPLY_INTEGER, 1, None)
    assert from_response(True) == (ffi.REPLY_INTEGER, 1, None)  # RESP3 boolean
    assert from_response(2**70) == (ffi.REPLY_BULK, 0, str(2**70).encode())  # big number
    assert from_response(b"QUEUED") == (ffi.REPLY_BULK, 0, b"QUEUED")
    assert from_response(1.5) == (ffi.REPLY_BULK, 0, b"1.5")
    assert from_response([b"a", 1, None]) == (
        ffi.REPLY_ARRAY,
        0,
        [(ffi.REPLY_BULK, 0, b"a"), (ffi.REPLY_INTEGER, 1, None), (ffi.REPLY_NIL, 0, None)],
    )
    kind, _, items = from_response({b"k": b"v"})  # RESP3 map: alternating keys and values
    assert kind == ffi.REPLY_ARRAY and len(items) == 2


def test_errors_keep_the_prefix_the_core_reads() -> None:
    # redis-py 8 keeps the stripped prefix in status_code; earlier versions in the class.
    with_code = NoScriptError("No matching script.")
    with_code.status_code = "NOSCRIPT"  # as redis-py 8 sets it
    assert error_text(with_code) == "NOSCRIPT No matching script."
    assert error_text(NoScriptError("No matching script.")) == "NOSCRIPT No matching script."
    assert error_text(ReadOnlyError("You can't write")).startswith("READONLY ")
    assert error_text(ResponseError("unknown command 'X'")) == "ERR unknown command 'X'"
    assert error_text(ResponseError("WRONGTYPE Operation")) == "WRONGTYPE Operation"
    assert from_exception(NoScriptError("x"))[0] == ffi.REPLY_ERROR
    kind, _, text = from_exception(ConnectionError("refused"))
    assert kind == ffi.REPLY_CONNECTION_FAILED and b"refused" in text
    assert from_exception(TimeoutError())[0] == ffi.REPLY_CONNECTION_FAILED
    assert from_exception(OSError("boom"))[2] == b"OSError: boom"
