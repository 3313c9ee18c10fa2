"""The core's objects over its C ABI: one Python class per handle.

Each class owns one handle and frees it exactly once: on :meth:`close`, at the end of a
``with`` block, or when the object is collected. Using a closed object raises
``ValueError``; arguments are checked here before they reach C (ctypes would silently
wrap a negative number into a huge unsigned one), and every result code the library
returns is checked and raised as a :class:`~redlock_core.CoreError`.

This is the layer the drivers (:mod:`redlock_core`'s ``Redlock`` and ``AsyncRedlock``)
are built on; use it directly to drive the core with another transport. Times are
microseconds on the caller's monotonic clock (see :func:`now_us`).

The library is loaded with ``ctypes.PyDLL``, which keeps the GIL during every call, so
no two threads are ever inside the library at once; objects that several threads share
(a :class:`Client`, a :class:`Lease`) need no lock of their own for single calls.
"""

from __future__ import annotations

import ctypes
import math
import time
from collections.abc import Iterable, Sequence
from ctypes import byref, c_bool, c_char_p, c_int64, c_size_t, c_uint32, c_uint64, c_void_p
from typing import Any, NamedTuple, Union

from . import _ffi
from ._ffi import lib

__all__ = [
    "Client",
    "Command",
    "Config",
    "Decoder",
    "Lease",
    "Operation",
    "Outcome",
    "PackedCommand",
    "Reply",
    "Resource",
    "Resources",
    "max_ttl_ms",
    "now_us",
    "script_sha1",
    "script_text",
    "token_from_random_bytes",
    "version",
]

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


def _unsigned(value: object, name: str, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < 0 or value > maximum:
        raise ValueError(f"{name} must be from 0 to {maximum}, got {value}")
    return value


def _u32(value: object, name: str) -> int:
    return _unsigned(value, name, _U32_MAX)


def _u64(value: object, name: str) -> int:
    return _unsigned(value, name, _U64_MAX)


def _size(value: object, name: str) -> int:
    return _unsigned(value, name, _SIZE_MAX)


def _i64(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if not _I64_MIN <= value <= _I64_MAX:
        raise ValueError(f"{name} must fit in 64 signed bits, got {value}")
    return value


def _bytes(value: object, name: str) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"{name} must be str or bytes, not {type(value).__name__}")


def resource_list(resources: object) -> list[bytes]:
    """``resources`` as a list of byte strings: one name (``str``, sent as UTF-8, or
    ``bytes``) or a sequence of names."""
    if isinstance(resources, (str, bytes, bytearray, memoryview)):
        return [_bytes(resources, "resource")]
    try:
        items = list(resources)  # type: ignore[call-overload]
    except TypeError:
        raise TypeError(
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


def script_text(script: int) -> str:
    """The Lua text of ``SCRIPT_ACQUIRE``, ``SCRIPT_RELEASE`` or ``SCRIPT_EXTEND``."""
    text = lib.redlock_script_text(_u32(script, "script"))
    if text is None:
        raise ValueError(f"no script {script} (use 1 acquire, 2 release, 3 extend)")
    return bytes(text).decode("utf-8")


def script_sha1(script: int) -> str:
    """The SHA-1 of a script in lowercase hex, as ``EVALSHA`` sends it."""
    sha = lib.redlock_script_sha1(_u32(script, "script"))
    if sha is None:
        raise ValueError(f"no script {script} (use 1 acquire, 2 release, 3 extend)")
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
            raise ValueError(f"this {type(self).__name__} is closed")
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


class Config(_Handle):
    """A checked configuration (``redlock_config``). Every setting is optional and
    defaults to the core's; durations are microseconds, the TTL milliseconds. An
    unacceptable setting raises :class:`~redlock_core.ConfigError`."""

    __slots__ = ()
    _free_name = "redlock_config_free"

    def __init__(
        self,
        nodes: int,
        ttl_ms: int,
        *,
        drift_factor: float | None = None,
        drift_fixed_us: int | None = None,
        node_timeout_us: int | None = None,
        min_validity_us: int | None = None,
        attempts: int | None = None,
        retry_delay_us: int | None = None,
        retry_jitter_us: int | None = None,
        token_bytes: int | None = None,
        max_extensions: int | None = None,
        key_prefix: str | bytes | None = None,
    ) -> None:
        super().__init__(None)
        builder = _new_handle()
        _ffi.check(
            lib.redlock_config_builder_new(
                _size(nodes, "nodes"), _u64(ttl_ms, "ttl_ms"), byref(builder)
            ),
            "config",
        )
        try:
            b = builder.value

            def apply(function: str, *args: Any) -> None:
                _ffi.check(getattr(lib, function)(b, *args), "config")

            if drift_factor is not None:
                if isinstance(drift_factor, bool) or not isinstance(drift_factor, (int, float)):
                    raise TypeError(
                        f"drift_factor must be a number, not {type(drift_factor).__name__}"
                    )
                apply("redlock_config_builder_set_drift_factor", float(drift_factor))
            if drift_fixed_us is not None:
                apply(
                    "redlock_config_builder_set_drift_fixed_us",
                    _u64(drift_fixed_us, "drift_fixed_us"),
                )
            if node_timeout_us is not None:
                apply(
                    "redlock_config_builder_set_node_timeout_us",
                    _u64(node_timeout_us, "node_timeout_us"),
                )
            if min_validity_us is not None:
                apply(
                    "redlock_config_builder_set_min_validity_us",
                    _u64(min_validity_us, "min_validity_us"),
                )
            if attempts is not None:
                apply("redlock_config_builder_set_attempts", _u32(attempts, "attempts"))
            if retry_delay_us is not None:
                apply(
                    "redlock_config_builder_set_retry_delay_us",
                    _u64(retry_delay_us, "retry_delay_us"),
                )
            if retry_jitter_us is not None:
                apply(
                    "redlock_config_builder_set_retry_jitter_us",
                    _u64(retry_jitter_us, "retry_jitter_us"),
                )
            if token_bytes is not None:
                apply("redlock_config_builder_set_token_bytes", _size(token_bytes, "token_bytes"))
            if max_extensions is not None:
                apply(
                    "redlock_config_builder_set_max_extensions",
                    _u32(max_extensions, "max_extensions"),
                )
            if key_prefix is not None:
                prefix = _bytes(key_prefix, "key_prefix")
                apply("redlock_config_builder_set_key_prefix", prefix, len(prefix))
            config = _new_handle()
            _ffi.check(lib.redlock_config_builder_build(b, byref(config)), "config")
            self._ptr = config.value
        finally:
            lib.redlock_config_builder_free(builder)

    @property
    def nodes(self) -> int:
        return int(lib.redlock_config_nodes(self._p()))

    @property
    def quorum(self) -> int:
        return int(lib.redlock_config_quorum(self._p()))

    @property
    def ttl_ms(self) -> int:
        return int(lib.redlock_config_ttl_ms(self._p()))

    @property
    def drift_factor(self) -> float:
        return float(lib.redlock_config_drift_factor(self._p()))

    @property
    def drift_fixed_us(self) -> int:
        return int(lib.redlock_config_drift_fixed_us(self._p()))

    @property
    def drift_us(self) -> int:
        return int(lib.redlock_config_drift_us(self._p()))

    @property
    def node_timeout_us(self) -> int:
        return int(lib.redlock_config_node_timeout_us(self._p()))

    @property
    def min_validity_us(self) -> int:
        return int(lib.redlock_config_min_validity_us(self._p()))

    @property
    def attempts(self) -> int:
        return int(lib.redlock_config_attempts(self._p()))

    @property
    def retry_delay_us(self) -> int:
        return int(lib.redlock_config_retry_delay_us(self._p()))

    @property
    def retry_jitter_us(self) -> int:
        return int(lib.redlock_config_retry_jitter_us(self._p()))

    @property
    def token_bytes(self) -> int:
        return int(lib.redlock_config_token_bytes(self._p()))

    @property
    def key_prefix(self) -> bytes:
        pointer, length = c_void_p(), c_size_t()
        _ffi.check(lib.redlock_config_key_prefix(self._p(), byref(pointer), byref(length)))
        return _ffi.borrowed(pointer.value, length.value)

    @property
    def max_extensions(self) -> int | None:
        bounded, maximum = c_bool(), c_uint32()
        _ffi.check(lib.redlock_config_max_extensions(self._p(), byref(bounded), byref(maximum)))
        return int(maximum.value) if bounded.value else None


class Client(_Handle):
    """Starts acquisitions, extensions and releases (``redlock_client``). Tokens come
    from the OS's CSPRNG, or from a ChaCha20 stream seeded with ``seed`` (32 bytes,
    which MUST be secret and random for real locks)."""

    __slots__ = ("node_timeout_us", "nodes", "quorum", "ttl_ms")
    _free_name = "redlock_client_free"

    def __init__(self, config: Config, *, seed: bytes | None = None) -> None:
        super().__init__(None)
        if not isinstance(config, Config):
            raise TypeError(f"config must be a Config, not {type(config).__name__}")
        out = _new_handle()
        if seed is None:
            _ffi.check(lib.redlock_client_new(config._p(), byref(out)), "client")
        else:
            data = _bytes(seed, "seed")
            _ffi.check(
                lib.redlock_client_new_seeded(config._p(), data, len(data), byref(out)), "client"
            )
        self._ptr = out.value
        self.nodes = config.nodes
        self.quorum = config.quorum
        self.ttl_ms = config.ttl_ms
        self.node_timeout_us = config.node_timeout_us

    def acquire(self, resources: Resources, now: int, *, ttl_ms: int | None = None) -> Operation:
        """Starts acquiring ``resources`` at ``now``, with the configured TTL or
        ``ttl_ms`` for this lock only."""
        pointers, lengths, count = _byte_strings(resource_list(resources))
        out = _new_handle()
        if ttl_ms is None:
            rc = lib.redlock_client_acquire(
                self._p(), pointers, lengths, count, _u64(now, "now"), byref(out)
            )
        else:
            rc = lib.redlock_client_acquire_for(
                self._p(),
                pointers,
                lengths,
                count,
                _u64(ttl_ms, "ttl_ms"),
                _u64(now, "now"),
                byref(out),
            )
        _ffi.check(rc, "acquire")
        return Operation(out.value)

    def acquire_with_random(self, resources: Resources, random: bytes, now: int) -> Operation:
        """Like :meth:`acquire`, drawing tokens and jitter from ``random`` (the
        conformance vectors' way; real locks MUST use CSPRNG bytes)."""
        pointers, lengths, count = _byte_strings(resource_list(resources))
        data = _bytes(random, "random")
        out = _new_handle()
        _ffi.check(
            lib.redlock_client_acquire_with_random(
                self._p(), pointers, lengths, count, data, len(data), _u64(now, "now"), byref(out)
            ),
            "acquire",
        )
        return Operation(out.value)

    def extend(self, lease: Lease, now: int, *, ttl_ms: int | None = None) -> Operation:
        """Starts extending ``lease`` by its own TTL (or ``ttl_ms``) from ``now``."""
        lease_ptr = _lease_pointer(lease)
        out = _new_handle()
        if ttl_ms is None:
            rc = lib.redlock_client_extend(self._p(), lease_ptr, _u64(now, "now"), byref(out))
        else:
            rc = lib.redlock_client_extend_for(
                self._p(), lease_ptr, _u64(ttl_ms, "ttl_ms"), _u64(now, "now"), byref(out)
            )
        _ffi.check(rc, "extend")
        return Operation(out.value)

    def release(self, lease: Lease, now: int) -> Operation:
        """Starts releasing ``lease`` on every node at ``now``."""
        lease_ptr = _lease_pointer(lease)
        out = _new_handle()
        _ffi.check(
            lib.redlock_client_release(self._p(), lease_ptr, _u64(now, "now"), byref(out)),
            "release",
        )
        return Operation(out.value)

    def check_ttl(self, ttl_ms: int) -> None:
        """Raises :class:`~redlock_core.ConfigError` if ``ttl_ms`` does not fit this
        client's configuration."""
        _ffi.check(lib.redlock_client_check_ttl(self._p(), _u64(ttl_ms, "ttl_ms")), "ttl")

    def lease(self, resources: Resources, token: str | bytes, valid_until: int = 0) -> Lease:
        """A lease rebuilt from its parts (a token kept elsewhere)."""
        pointers, lengths, count = _byte_strings(resource_list(resources))
        data = _bytes(token, "token")
        out = _new_handle()
        _ffi.check(
            lib.redlock_client_lease(
                self._p(),
                pointers,
                lengths,
                count,
                data,
                len(data),
                _u64(valid_until, "valid_until"),
                byref(out),
            ),
            "lease",
        )
        return Lease(out.value)

    def generate_token(self) -> str:
        """A fresh token from the client's random source."""
        buffer = ctypes.create_string_buffer(2 * _ffi.MAX_TOKEN_BYTES)
        length = c_size_t()
        _ffi.check(
            lib.redlock_client_generate_token(self._p(), buffer, len(buffer), byref(length)),
            "generate_token",
        )
        return buffer.raw[: length.value].decode("ascii")

    def next_extension(self, lease: Lease, now: int) -> int | None:
        """When a holder keeping ``lease`` alive should start its next extension, or
        ``None`` when it should not (expired, or the bound on extensions reached)."""
        due, at = c_bool(), c_uint64()
        _ffi.check(
            lib.redlock_client_next_extension(
                self._p(), _lease_pointer(lease), _u64(now, "now"), byref(due), byref(at)
            ),
            "next_extension",
        )
        return int(at.value) if due.value else None


def _lease_pointer(lease: object) -> int:
    if not isinstance(lease, Lease):
        raise TypeError(f"lease must be a Lease, not {type(lease).__name__}")
    return lease._p()


class Command(NamedTuple):
    """A command to send: to node ``node``, under ``request_id``, waiting for its reply
    no later than ``deadline`` (microseconds); ``argv[0]`` is the command's name."""

    node: int
    request_id: int
    deadline: int
    argv: tuple[bytes, ...]


class PackedCommand(NamedTuple):
    """A command to send, as RESP bytes (see :class:`Command`)."""

    node: int
    request_id: int
    deadline: int
    resp: bytes


_ARGV_CAPACITY = 80  # EVALSHA sha1 numkeys + up to 64 keys + token + ttl, with room


class Operation(_Handle):
    """One acquisition, extension or release (``redlock_operation``).

    After it is created and after every input (:meth:`handle_reply`,
    :meth:`handle_timeout`), call :meth:`poll` until it returns ``OUTPUT_NONE``,
    acting on each output: ``OUTPUT_SEND`` (:meth:`command`), ``OUTPUT_WAIT``
    (:meth:`wait_until`), ``OUTPUT_OUTCOME`` (:meth:`take_outcome`).
    """

    __slots__ = (
        "_argc",
        "_args",
        "_capacity",
        "_command_kind",
        "_command_kind_refs",
        "_command_refs",
        "_deadline",
        "_kind",
        "_kind_ref",
        "_lens",
        "_node",
        "_request",
        "_resp",
        "_resp_length",
        "_resp_refs",
    )
    _free_name = "redlock_operation_free"

    def __init__(self, pointer: int | None) -> None:
        super().__init__(pointer)
        # Output slots, and references to them, made once per operation.
        self._kind = c_uint32()
        self._kind_ref = byref(self._kind)
        self._node = c_size_t()
        self._request = c_uint64()
        self._deadline = c_uint64()
        self._argc = c_size_t()
        self._command_refs = (
            byref(self._node),
            byref(self._request),
            byref(self._deadline),
            byref(self._argc),
        )
        self._resp = c_void_p()
        self._resp_length = c_size_t()
        self._resp_refs = (byref(self._resp), byref(self._resp_length))
        self._command_kind = (c_uint32(), c_bool())
        self._command_kind_refs = (byref(self._command_kind[0]), byref(self._command_kind[1]))
        self._capacity = 0
        self._args: Any = None
        self._lens: Any = None

    # inputs

    def handle_reply(
        self,
        request_id: int,
        kind: int,
        now: int,
        *,
        integer: int = 0,
        text: bytes | None = None,
    ) -> None:
        """Hands in the reply to ``request_id``: a ``REPLY_*`` kind other than
        ``REPLY_ARRAY`` with its integer or text."""
        data = b"" if text is None else _bytes(text, "text")
        _ffi.check(
            lib.redlock_operation_handle_reply(
                self._p(),
                _u64(request_id, "request_id"),
                _u32(kind, "kind"),
                _i64(integer, "integer"),
                data,
                len(data),
                _u64(now, "now"),
            ),
            "handle_reply",
        )

    def _reply(
        self, request_id: int, kind: int, integer: int, text: bytes | None, now: int
    ) -> None:
        """:meth:`handle_reply` for the drivers, whose arguments need no checking."""
        rc = lib.redlock_operation_handle_reply(
            self._p(), request_id, kind, integer, text, len(text) if text else 0, now
        )
        if rc != _ffi.OK:
            _ffi.fail(rc, "handle_reply")

    def handle_reply_value(self, request_id: int, reply: Reply, now: int) -> None:
        """Hands in the reply to ``request_id`` as a :class:`Reply` (arrays included)."""
        if not isinstance(reply, Reply):
            raise TypeError(f"reply must be a Reply, not {type(reply).__name__}")
        _ffi.check(
            lib.redlock_operation_handle_reply_value(
                self._p(), _u64(request_id, "request_id"), reply._p(), _u64(now, "now")
            ),
            "handle_reply",
        )

    def handle_timeout(self, now: int) -> None:
        """Time has reached ``now``: requests past their deadline time out, a due retry
        starts. Calling it early is harmless."""
        _ffi.check(
            lib.redlock_operation_handle_timeout(self._p(), _u64(now, "now")), "handle_timeout"
        )

    # outputs

    def poll(self) -> int:
        """The next output's kind: ``OUTPUT_NONE``, ``_SEND``, ``_WAIT`` or ``_OUTCOME``."""
        rc = lib.redlock_operation_poll_output(self._p(), self._kind_ref)
        if rc != _ffi.OK:
            _ffi.fail(rc, "poll")
        return self._kind.value

    def command(self) -> Command:
        """The current ``OUTPUT_SEND`` output's command."""
        pointer = self._p()
        rc = lib.redlock_operation_command(pointer, *self._command_refs)
        if rc != _ffi.OK:
            _ffi.fail(rc, "command")
        argc = self._argc.value
        if argc > self._capacity:
            self._capacity = max(argc, _ARGV_CAPACITY)
            self._args = (c_void_p * self._capacity)()
            self._lens = (c_size_t * self._capacity)()
        rc = lib.redlock_operation_command_args(
            pointer, self._args, self._lens, self._capacity, byref(self._argc)
        )
        if rc != _ffi.OK:
            _ffi.fail(rc, "command")
        string_at = ctypes.string_at
        args, lens = self._args, self._lens
        return Command(
            self._node.value,
            self._request.value,
            self._deadline.value,
            # The library lends argc (pointer, length) pairs, none of them NULL.
            tuple([string_at(args[i], lens[i]) for i in range(argc)]),
        )

    def packed_command(self) -> PackedCommand:
        """The current ``OUTPUT_SEND`` output's command, encoded in RESP by the core
        (what the drivers write to the socket: byte-identical in every binding)."""
        pointer = self._p()
        rc = lib.redlock_operation_command(pointer, *self._command_refs)
        if rc != _ffi.OK:
            _ffi.fail(rc, "command")
        rc = lib.redlock_operation_command_resp(pointer, *self._resp_refs)
        if rc != _ffi.OK:
            _ffi.fail(rc, "command_resp")
        return PackedCommand(
            self._node.value,
            self._request.value,
            self._deadline.value,
            # Lent by the library: never NULL for a command.
            ctypes.string_at(self._resp.value, self._resp_length.value),  # type: ignore[arg-type]
        )

    def command_arg(self, index: int) -> bytes:
        """Argument ``index`` of the current command."""
        pointer, length = c_void_p(), c_size_t()
        _ffi.check(
            lib.redlock_operation_command_arg(
                self._p(), _size(index, "index"), byref(pointer), byref(length)
            ),
            "command_arg",
        )
        return _ffi.borrowed(pointer.value, length.value)

    def command_resp(self) -> bytes:
        """The current command encoded in RESP, ready for a socket."""
        pointer, length = c_void_p(), c_size_t()
        _ffi.check(
            lib.redlock_operation_command_resp(self._p(), byref(pointer), byref(length)),
            "command_resp",
        )
        return _ffi.borrowed(pointer.value, length.value)

    def command_kind(self) -> tuple[int, bool]:
        """What the current command does (a ``COMMAND_*`` value) and whether it is an
        ``EVAL`` carrying the script's text."""
        rc = lib.redlock_operation_command_kind(self._p(), *self._command_kind_refs)
        if rc != _ffi.OK:
            _ffi.fail(rc, "command_kind")
        kind, is_eval = self._command_kind
        return kind.value, is_eval.value

    def wait_until(self) -> int:
        """The instant of the current ``OUTPUT_WAIT`` output."""
        until = c_uint64()
        _ffi.check(lib.redlock_operation_wait_until(self._p(), byref(until)), "wait_until")
        return int(until.value)

    def take_outcome(self) -> Outcome:
        """Takes the current ``OUTPUT_OUTCOME`` output's outcome."""
        out = _new_handle()
        _ffi.check(lib.redlock_operation_take_outcome(self._p(), byref(out)), "take_outcome")
        return Outcome(out.value)

    def poll_timeout(self) -> int | None:
        """When :meth:`handle_timeout` is next due, or ``None`` once finished."""
        due, at = c_bool(), c_uint64()
        _ffi.check(
            lib.redlock_operation_poll_timeout(self._p(), byref(due), byref(at)), "poll_timeout"
        )
        return int(at.value) if due.value else None

    # getters

    @property
    def kind(self) -> int:
        """``OPERATION_ACQUIRE``, ``_EXTEND`` or ``_RELEASE``."""
        return int(lib.redlock_operation_kind(self._p()))

    @property
    def is_finished(self) -> bool:
        return bool(lib.redlock_operation_is_finished(self._p()))

    @property
    def attempt(self) -> int:
        return int(lib.redlock_operation_attempt(self._p()))

    @property
    def token(self) -> str:
        """The current attempt's token (for an extension or release, the lease's)."""
        rc = lib.redlock_operation_token(self._p(), *self._resp_refs)
        if rc != _ffi.OK:
            _ffi.fail(rc, "token")
        return _ffi.borrowed(self._resp.value, self._resp_length.value).decode("ascii")

    @property
    def node_count(self) -> int:
        return int(lib.redlock_operation_node_count(self._p()))

    def node(self, index: int) -> tuple[str, str | None]:
        """The live view of node ``index``: its status name and error text."""
        kind, pointer, length = c_uint32(), c_void_p(), c_size_t()
        _ffi.check(
            lib.redlock_operation_node(
                self._p(), _size(index, "index"), byref(kind), byref(pointer), byref(length)
            ),
            "node",
        )
        return _node_parts(kind.value, pointer.value, length.value)


def _node_parts(kind: int, pointer: int | None, length: int) -> tuple[str, str | None]:
    status = _ffi.NODE_NAMES.get(kind, f"unknown_{kind}")
    if kind == _ffi.NODE_ERROR:
        return status, _ffi.borrowed(pointer, length).decode("utf-8", "replace")
    return status, None


class Outcome(_Handle):
    """A finished operation's outcome (``redlock_outcome``). Getters return ``None``
    for values this kind of outcome does not have."""

    __slots__ = ()
    _free_name = "redlock_outcome_free"

    def _optional(self, function: str, out: Any) -> Any | None:
        rc = getattr(lib, function)(self._p(), byref(out))
        if rc == _ffi.NO_VALUE:
            return None
        _ffi.check(rc, function)
        return out.value

    @property
    def kind(self) -> str:
        """``"acquired"``, ``"not_acquired"``, ``"extended"``, ``"not_extended"`` or
        ``"released"``."""
        kind = int(lib.redlock_outcome_kind(self._p()))
        return _ffi.OUTCOME_NAMES.get(kind, f"unknown_{kind}")

    @property
    def is_success(self) -> bool:
        return bool(lib.redlock_outcome_is_success(self._p()))

    @property
    def reason(self) -> str | None:
        reason = self._optional("redlock_outcome_reason", c_uint32())
        return None if reason is None else _ffi.REASON_NAMES.get(reason, f"unknown_{reason}")

    @property
    def token(self) -> str | None:
        pointer, length = c_void_p(), c_size_t()
        rc = lib.redlock_outcome_token(self._p(), byref(pointer), byref(length))
        if rc == _ffi.NO_VALUE:
            return None
        _ffi.check(rc, "token")
        return _ffi.borrowed(pointer.value, length.value).decode("ascii")

    @property
    def valid_until(self) -> int | None:
        return self._optional("redlock_outcome_valid_until", c_uint64())

    @property
    def validity(self) -> int | None:
        return self._optional("redlock_outcome_validity", c_uint64())

    @property
    def attempts(self) -> int | None:
        return self._optional("redlock_outcome_attempts", c_uint32())

    @property
    def extensions(self) -> int | None:
        return self._optional("redlock_outcome_extensions", c_uint32())

    @property
    def retry_at(self) -> int | None:
        """For not extended: when to try again, or ``None`` (no time left, lost, or
        another kind of outcome)."""
        due, at = c_bool(), c_uint64()
        rc = lib.redlock_outcome_retry_at(self._p(), byref(due), byref(at))
        if rc == _ffi.NO_VALUE:
            return None
        _ffi.check(rc, "retry_at")
        return int(at.value) if due.value else None

    @property
    def is_lost(self) -> bool | None:
        lost = self._optional("redlock_outcome_is_lost", c_bool())
        return None if lost is None else bool(lost)

    @property
    def released(self) -> int | None:
        return self._optional("redlock_outcome_released", c_size_t())

    def lease(self) -> Lease | None:
        """A copy of the lease (acquired, extended, not extended), else ``None``."""
        out = _new_handle()
        rc = lib.redlock_outcome_lease(self._p(), byref(out))
        if rc == _ffi.NO_VALUE:
            return None
        _ffi.check(rc, "lease")
        return Lease(out.value)

    @property
    def node_count(self) -> int:
        return int(lib.redlock_outcome_node_count(self._p()))

    def node(self, index: int) -> tuple[str, str | None]:
        """How node ``index`` answered: its status name and error text."""
        kind, pointer, length = c_uint32(), c_void_p(), c_size_t()
        _ffi.check(
            lib.redlock_outcome_node(
                self._p(), _size(index, "index"), byref(kind), byref(pointer), byref(length)
            ),
            "node",
        )
        return _node_parts(kind.value, pointer.value, length.value)

    def nodes(self) -> list[tuple[str, str | None]]:
        return [self.node(index) for index in range(self.node_count)]


class Lease(_Handle):
    """A held lock's keys, token, ``valid_until`` and TTL (``redlock_lease``)."""

    __slots__ = ()
    _free_name = "redlock_lease_free"

    def clone(self) -> Lease:
        out = _new_handle()
        _ffi.check(lib.redlock_lease_clone(self._p(), byref(out)), "lease_clone")
        return Lease(out.value)

    @property
    def token(self) -> str:
        pointer, length = c_void_p(), c_size_t()
        _ffi.check(lib.redlock_lease_token(self._p(), byref(pointer), byref(length)), "lease_token")
        return _ffi.borrowed(pointer.value, length.value).decode("ascii")

    @property
    def keys(self) -> list[bytes]:
        pointer = self._p()
        keys = []
        for index in range(int(lib.redlock_lease_key_count(pointer))):
            key, length = c_void_p(), c_size_t()
            _ffi.check(
                lib.redlock_lease_key(pointer, index, byref(key), byref(length)), "lease_key"
            )
            keys.append(_ffi.borrowed(key.value, length.value))
        return keys

    @property
    def valid_until(self) -> int:
        """The instant (our clock) until which the lock is held."""
        return int(lib.redlock_lease_valid_until(self._p()))

    def validity(self, now: int) -> int:
        """Microseconds of validity left at ``now`` (0 once expired)."""
        return int(lib.redlock_lease_validity(self._p(), _u64(now, "now")))

    def is_valid(self, now: int) -> bool:
        return bool(lib.redlock_lease_is_valid(self._p(), _u64(now, "now")))

    @property
    def ttl_ms(self) -> int:
        return int(lib.redlock_lease_ttl_ms(self._p()))

    @property
    def extensions(self) -> int:
        return int(lib.redlock_lease_extensions(self._p()))


class Reply(_Handle):
    """One reply as a value (``redlock_reply``): built here, or taken from a
    :class:`Decoder`."""

    __slots__ = ()
    _free_name = "redlock_reply_free"

    @classmethod
    def new(cls, kind: int, *, integer: int = 0, text: bytes | None = None) -> Reply:
        """A reply of ``kind`` (a ``REPLY_*`` value; ``REPLY_ARRAY`` is empty)."""
        data = b"" if text is None else _bytes(text, "text")
        out = _new_handle()
        _ffi.check(
            lib.redlock_reply_new(
                _u32(kind, "kind"), _i64(integer, "integer"), data, len(data), byref(out)
            ),
            "reply",
        )
        return cls(out.value)

    @classmethod
    def array(cls, items: Iterable[Reply]) -> Reply:
        """An array reply holding copies of ``items``."""
        array = cls.new(_ffi.REPLY_ARRAY)
        try:
            for item in items:
                array.push(item)
        except BaseException:
            array.close()
            raise
        return array

    def push(self, item: Reply) -> None:
        """Appends a copy of ``item`` (this reply must be an array)."""
        if not isinstance(item, Reply):
            raise TypeError(f"item must be a Reply, not {type(item).__name__}")
        _ffi.check(lib.redlock_reply_array_push(self._p(), item._p()), "reply_array_push")

    @property
    def kind(self) -> int:
        return int(lib.redlock_reply_kind(self._p()))

    @property
    def integer(self) -> int | None:
        value = c_int64()
        rc = lib.redlock_reply_integer(self._p(), byref(value))
        if rc == _ffi.NO_VALUE:
            return None
        _ffi.check(rc, "reply_integer")
        return int(value.value)

    @property
    def bytes(self) -> bytes | None:
        pointer, length = c_void_p(), c_size_t()
        rc = lib.redlock_reply_bytes(self._p(), byref(pointer), byref(length))
        if rc == _ffi.NO_VALUE:
            return None
        _ffi.check(rc, "reply_bytes")
        return _ffi.borrowed(pointer.value, length.value)

    def items(self) -> list[Reply]:
        """Copies of an array's elements (empty for other kinds)."""
        pointer = self._p()
        items = []
        for index in range(int(lib.redlock_reply_array_len(pointer))):
            out = _new_handle()
            _ffi.check(lib.redlock_reply_array_get(pointer, index, byref(out)), "reply_array_get")
            items.append(Reply(out.value))
        return items


class Decoder(_Handle):
    """An incremental RESP2/RESP3 decoder (``redlock_decoder``), for drivers that own
    a raw socket. A malformed stream raises :class:`~redlock_core.ProtocolError`."""

    __slots__ = ()
    _free_name = "redlock_decoder_free"

    def __init__(
        self,
        *,
        max_bulk: int | None = None,
        max_elements: int | None = None,
        max_depth: int | None = None,
        max_line: int | None = None,
    ) -> None:
        super().__init__(None)
        out = _new_handle()
        limits = (max_bulk, max_elements, max_depth, max_line)
        if all(limit is None for limit in limits):
            _ffi.check(lib.redlock_decoder_new(byref(out)), "decoder")
        else:
            defaults = (512 * 1024 * 1024, 1 << 20, 32, 64 * 1024)
            names = ("max_bulk", "max_elements", "max_depth", "max_line")
            values = [
                _size(default if limit is None else limit, name)
                for limit, default, name in zip(limits, defaults, names)
            ]
            _ffi.check(lib.redlock_decoder_new_with_limits(*values, byref(out)), "decoder")
        self._ptr = out.value

    def feed(self, data: bytes) -> None:
        chunk = _bytes(data, "data")
        _ffi.check(lib.redlock_decoder_feed(self._p(), chunk, len(chunk)), "decoder_feed")

    def next_reply(self) -> Reply | None:
        """The next complete reply, or ``None`` when more bytes are needed."""
        out = _new_handle()
        _ffi.check(lib.redlock_decoder_next_reply(self._p(), byref(out)), "decoder_next_reply")
        return Reply(out.value) if out.value else None

    @property
    def buffered(self) -> int:
        return int(lib.redlock_decoder_buffered(self._p()))


def micros(seconds: object, name: str) -> int:
    """A non-negative duration in seconds (``int``, ``float`` or ``timedelta``) as whole
    microseconds."""
    total = _seconds(seconds, name)
    return round(total * 1_000_000)


def millis(seconds: object, name: str) -> int:
    """A duration in seconds that must be a whole number of milliseconds, in ms."""
    total = _seconds(seconds, name)
    value = total * 1000
    whole = round(value)
    if abs(value - whole) > 1e-6 * max(1.0, abs(value)):
        raise ValueError(f"{name} must be a whole number of milliseconds, got {seconds!r} s")
    return whole


def _seconds(value: object, name: str) -> float:
    from datetime import timedelta

    if isinstance(value, timedelta):
        total = value.total_seconds()
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            f"{name} must be a number of seconds or a timedelta, not {type(value).__name__}"
        )
    else:
        total = float(value)
    if math.isnan(total) or math.isinf(total):
        raise ValueError(f"{name} must be a finite number of seconds, got {value!r}")
    if total < 0:
        raise ValueError(f"{name} must not be negative, got {value!r}")
    if total > 2**63 / 1_000_000:
        raise ValueError(f"{name} is too large: {value!r} s")
    return total
