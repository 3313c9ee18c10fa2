"""What every wrapper of the core shares: argument checks, module functions, and
the handle base class that frees its library handle exactly once."""

from __future__ import annotations

import ctypes
import math
import time
from collections.abc import Sequence
from ctypes import byref, c_bool, c_char_p, c_size_t, c_void_p
from typing import Any, Union

from . import _ffi
from ._errors import ArgumentTypeError, InvalidArgumentError, UsedAfterCloseError
from ._ffi import lib

Resource = Union[str, bytes]
Resources = Union[Resource, Sequence[Resource]]

_U32_MAX = 2**32 - 1
_U64_MAX = 2**64 - 1
_I64_MIN = -(2**63)
_I64_MAX = 2**63 - 1
_SIZE_MAX = 2 ** (8 * ctypes.sizeof(c_size_t)) - 1


def now_us() -> int:
    """The package's clock: ``time.monotonic_ns() // 1000``, microseconds from the
    monotonic clock's own origin, the same in every thread of the process."""
    return time.monotonic_ns() // 1000


# ---- argument checks --------------------------------------------------------------

#: How much of a caller's value (a resource name, a bad argument) a message quotes.
QUOTE_LIMIT = 64


def quoted(value: object, limit: int = QUOTE_LIMIT) -> str:
    """``repr(value)`` for a message, cut to about ``limit`` characters with "…" (and
    the whole length) when longer: a 1 MB resource name is never copied into a message."""
    if isinstance(value, (str, bytes, bytearray, memoryview)):
        length = len(value)
        if length > limit:
            head = bytes(value[:limit]) if not isinstance(value, str) else value[:limit]
            return f"{head!r}… ({length} {'characters' if isinstance(value, str) else 'bytes'})"
        return repr(bytes(value) if isinstance(value, (bytearray, memoryview)) else value)
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}…"


def names_text(resources: Sequence[object], limit: int = 8) -> str:
    """Resource names for a message: each quoted (cut to about 64 bytes), at most
    ``limit`` of them."""
    shown = ", ".join(quoted(resource) for resource in list(resources)[:limit])
    more = len(resources) - limit
    return f"{shown} and {more} more" if more > 0 else shown


def invalid(code: str, message: str) -> InvalidArgumentError:
    """The package's :class:`InvalidArgumentError` for an argument it checks itself
    (``code`` names the rule; the message says the rule and the range allowed)."""
    return InvalidArgumentError(_ffi.INVALID_INPUT, code, message)


def wrong_type(message: str) -> ArgumentTypeError:
    """The :class:`ArgumentTypeError` (an ``InvalidArgumentError`` and a ``TypeError``)
    for an argument of the wrong Python type."""
    return ArgumentTypeError(_ffi.INVALID_INPUT, "wrong_type", message)


def _unsigned(value: object, name: str, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise wrong_type(f"{name} must be an int, not {type(value).__name__}")
    if value < 0 or value > maximum:
        raise invalid(
            "out_of_range",
            f"{name} must be a whole number from 0 to {maximum}, got {quoted(value)}",
        )
    return value


def _u32(value: object, name: str) -> int:
    return _unsigned(value, name, _U32_MAX)


def _u64(value: object, name: str) -> int:
    return _unsigned(value, name, _U64_MAX)


def _size(value: object, name: str) -> int:
    return _unsigned(value, name, _SIZE_MAX)


def _i64(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise wrong_type(f"{name} must be an int, not {type(value).__name__}")
    if not _I64_MIN <= value <= _I64_MAX:
        raise invalid(
            "out_of_range",
            f"{name} must be a whole number from {_I64_MIN} to {_I64_MAX}, got {quoted(value)}",
        )
    return value


def _bytes(value: object, name: str) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise wrong_type(f"{name} must be str or bytes, not {type(value).__name__}")


def resource_list(resources: object) -> list[bytes]:
    """``resources`` as a list of byte strings: one name (``str``, sent as UTF-8, or
    ``bytes``) or a sequence of names."""
    if isinstance(resources, (str, bytes, bytearray, memoryview)):
        return [_bytes(resources, "resource")]
    try:
        items = list(resources)  # type: ignore[call-overload]
    except TypeError:
        raise wrong_type(
            f"resources must be a str, bytes, or a sequence of them, not {type(resources).__name__}"
        ) from None
    return [_bytes(item, "resource") for item in items]


def _byte_strings(items: Sequence[bytes]) -> tuple[Any, Any, int]:
    count = len(items)
    pointers = (c_char_p * max(count, 1))(*items)
    lengths = (c_size_t * max(count, 1))(*(len(item) for item in items))
    return pointers, lengths, count


# ---- module functions -------------------------------------------------------------


def version() -> str:
    """The library's version."""
    return bytes(lib.redlock_version()).decode("ascii")


def max_ttl_ms() -> int:
    """The largest TTL a configuration accepts, in milliseconds."""
    return int(lib.redlock_max_ttl_ms())


def notice_channel_linger_ms() -> int:
    """How long a notice channel stays subscribed after its last waiter ended (ms)."""
    return int(lib.redlock_notice_channel_linger_ms())


def subscriber_reopen_ms() -> tuple[int, int]:
    """How long a failed subscriber connection stays closed before it is opened again,
    at first and at most (ms)."""
    return int(lib.redlock_subscriber_reopen_first_ms()), int(
        lib.redlock_subscriber_reopen_max_ms()
    )


def connect_timeout_default_ms() -> int:
    """How long a connection may take to open, and a subscriber connection to confirm a
    subscription, when the client sets no bound of its own (ms; the same in every
    binding)."""
    return int(lib.redlock_connect_timeout_default_ms())


def sentinel_query_timeout_default_ms() -> int:
    """How long one Redis Sentinel may take to connect and answer
    ``SENTINEL get-master-addr-by-name`` when the user sets no bound (ms; the same in
    every binding). A Sentinel past it is skipped, and the next one is asked."""
    return int(lib.redlock_sentinel_query_timeout_default_ms())


def sentinel_connect_timeout_ms(sentinels: int, query_ms: int, connect_ms: int) -> int:
    """The connect timeout of a node reached through ``sentinels`` Sentinels (ms): each
    may use its whole ``query_ms`` in turn, then the master's connection has
    ``connect_ms`` (saturating; the same in every binding)."""
    return int(
        lib.redlock_sentinel_connect_timeout_ms(
            _size(sentinels, "sentinels"),
            _u64(query_ms, "query_ms"),
            _u64(connect_ms, "connect_ms"),
        )
    )


def script_text(script: int) -> str:
    """The Lua text of ``SCRIPT_ACQUIRE``, ``SCRIPT_RELEASE`` or ``SCRIPT_EXTEND``."""
    text = lib.redlock_script_text(_u32(script, "script"))
    if text is None:
        raise invalid(
            "out_of_range", f"no script {quoted(script)} (use 1 acquire, 2 release, 3 extend)"
        )
    return bytes(text).decode("utf-8")


def script_sha1(script: int) -> str:
    """The SHA-1 of a script in lowercase hex, as ``EVALSHA`` sends it."""
    sha = lib.redlock_script_sha1(_u32(script, "script"))
    if sha is None:
        raise invalid(
            "out_of_range", f"no script {quoted(script)} (use 1 acquire, 2 release, 3 extend)"
        )
    return bytes(sha).decode("ascii")


def token_from_random_bytes(random: bytes) -> str:
    """The token the core makes of ``random`` (16 to 64 bytes): their lowercase hex."""
    data = _bytes(random, "random")
    buffer = ctypes.create_string_buffer(2 * _ffi.MAX_TOKEN_BYTES)
    length = c_size_t()
    _ffi.check(
        lib.redlock_token_from_random_bytes(data, len(data), buffer, len(buffer), byref(length)),
        "token_from_random_bytes",
    )
    return buffer.raw[: length.value].decode("ascii")


def duplicate_node(addresses: Sequence[str]) -> tuple[int, int] | None:
    """The first two positions in ``addresses`` that name the same Redis server (host
    and port, as the core compares them), or ``None``."""
    items = [
        _bytes(address.encode("utf-8") if isinstance(address, str) else address, "address")
        for address in addresses
    ]
    pointers, lengths, count = _byte_strings(items)
    found, first, second = c_bool(), c_size_t(), c_size_t()
    _ffi.check(
        lib.redlock_duplicate_node(
            pointers, lengths, count, byref(found), byref(first), byref(second)
        ),
        "duplicate_node",
    )
    return (int(first.value), int(second.value)) if found.value else None


def error_class_name(error_class: int) -> str | None:
    """The stable name of an ``ERROR_CLASS_*`` number (``"held_elsewhere"``, ...)."""
    name = lib.redlock_error_class_name(_u32(error_class, "error_class"))
    return name.decode("ascii") if name else None


def lost_reason_name(reason: int) -> str | None:
    """The stable name of a keep-alive's lost reason (``"taken"``, ``"not_held"``,
    ``"expired"``, ``"extension_limit"``)."""
    name = lib.redlock_lost_reason_name(_u32(reason, "reason"))
    return name.decode("ascii") if name else None


# ---- handles ----------------------------------------------------------------------


class _Handle:
    """Owns one library handle; frees it once."""

    __slots__ = ("_ptr",)
    _free_name = ""

    def __init__(self, pointer: int | None) -> None:
        self._ptr: int | None = pointer

    def _p(self) -> int:
        pointer = self._ptr
        if pointer is None:
            raise UsedAfterCloseError(f"this {type(self).__name__} is closed")
        return pointer

    @property
    def closed(self) -> bool:
        return self._ptr is None

    def close(self) -> None:
        """Frees the handle; later calls raise ``ValueError``. Idempotent."""
        pointer, self._ptr = self._ptr, None
        if pointer is not None:
            getattr(lib, self._free_name)(pointer)

    def __enter__(self: Any) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may already be gone
            pass


def _new_handle() -> c_void_p:
    return c_void_p()


#: The longest duration a setting in microseconds takes, in seconds (2^63 us).
_MAX_SECONDS = 2**63 / 1_000_000


def micros(seconds: object, name: str) -> int:
    """A non-negative duration in seconds (``int``, ``float`` or ``timedelta``) as whole
    microseconds. Anything else is refused with the rule and the range: a wrong type
    with :class:`ArgumentTypeError`, a negative, NaN, infinite or too large one with
    :class:`InvalidArgumentError` (``invalid_duration``)."""
    total = _seconds(seconds, name, _MAX_SECONDS)
    return round(total * 1_000_000)


def millis(seconds: object, name: str, maximum_ms: int | None = None) -> int:
    """A duration in seconds that must be a whole number of milliseconds, in ms, at most
    ``maximum_ms`` (the TTL's bound, for a TTL)."""
    limit = _MAX_SECONDS if maximum_ms is None else maximum_ms / 1000
    low = "0" if maximum_ms is None else "0.001"
    total = _seconds(seconds, name, limit, whole_ms=True, low=low)
    value = total * 1000
    whole = round(value)
    if abs(value - whole) > 1e-6 * max(1.0, abs(value)):
        raise invalid(
            "invalid_duration",
            f"{name} must be a whole number of milliseconds (seconds from {low} to {limit:g} "
            f"in steps of 0.001), got {quoted(seconds)} s",
        )
    return whole


def _seconds(
    value: object, name: str, limit: float, whole_ms: bool = False, low: str = "0"
) -> float:
    from datetime import timedelta

    if isinstance(value, timedelta):
        total = value.total_seconds()
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise wrong_type(
            f"{name} must be a number of seconds or a timedelta, not {type(value).__name__}"
        )
    else:
        total = float(value)
    if math.isnan(total) or math.isinf(total) or total < 0 or total > limit:
        unit = "whole milliseconds, " if whole_ms else ""
        raise invalid(
            "invalid_duration",
            f"{name} must be a finite, non-negative number of seconds from {low} to {limit:g} "
            f"({unit}or a "
            f"timedelta), got {quoted(value)}",
        )
    return total
