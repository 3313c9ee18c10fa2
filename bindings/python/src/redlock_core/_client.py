"""The client that starts operations (``redlock_client``)."""

from __future__ import annotations

import ctypes
from ctypes import byref, c_bool, c_size_t, c_uint64

from . import _ffi
from ._config import Config
from ._ffi import lib
from ._handle import (
    _U64_MAX,
    Resources,
    _byte_strings,
    _bytes,
    _Handle,
    _new_handle,
    _u64,
    invalid,
    resource_list,
)
from ._operation import Lease, Operation


class Client(_Handle):
    """Starts acquisitions, extensions and releases (``redlock_client``). Tokens come
    from the OS's CSPRNG, or from a ChaCha20 stream seeded with ``seed`` (32 bytes,
    which MUST be secret and random for real locks)."""

    __slots__ = ("_node_timeout_us", "_nodes", "_quorum", "_ttl_ms")
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
        self._nodes = config.nodes
        self._quorum = config.quorum
        self._ttl_ms = config.ttl_ms
        self._node_timeout_us = config.node_timeout_us

    @property
    def nodes(self) -> int:
        """N, the number of independent Redis nodes."""
        return self._nodes

    @property
    def quorum(self) -> int:
        """Q = N/2 + 1, the nodes that must agree for any decision."""
        return self._quorum

    @property
    def ttl_ms(self) -> int:
        """The configured TTL in milliseconds."""
        return self._ttl_ms

    @property
    def node_timeout_us(self) -> int:
        """How long one node may take to answer one command (microseconds)."""
        return self._node_timeout_us

    def acquire(
        self,
        resources: Resources,
        now: int,
        *,
        ttl_ms: int | None = None,
        wait_us: int | None = None,
    ) -> Operation:
        """Starts acquiring ``resources`` at ``now``, with the configured TTL or
        ``ttl_ms`` for this lock only. With ``wait_us`` the acquisition keeps trying
        until ``now + wait_us`` (a wait limit, instead of the configured attempts),
        and tries again early on release notices
        (:meth:`Operation.handle_notice_message`)."""
        pointers, lengths, count = _byte_strings(resource_list(resources))
        out = _new_handle()
        if wait_us is not None:
            rc = lib.redlock_client_acquire_with(
                self._p(),
                pointers,
                lengths,
                count,
                0 if ttl_ms is None else _nonzero_ttl(ttl_ms),
                True,
                _u64(wait_us, "wait_us"),
                _u64(now, "now"),
                byref(out),
            )
        elif ttl_ms is None:
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

    def inspect(self, resources: Resources, now: int) -> Operation:
        """Starts reading who holds the lock on ``resources`` at ``now``: one ``GET``
        (``MGET`` for several) per node, decided at the quorum. Its outcome is
        ``"inspected"`` (:attr:`Outcome.holder`, :attr:`Outcome.is_locked`,
        :meth:`Outcome.is_held_by`) or ``"not_inspected"`` (too many nodes failed to
        say). It never changes a key."""
        pointers, lengths, count = _byte_strings(resource_list(resources))
        out = _new_handle()
        _ffi.check(
            lib.redlock_client_inspect(
                self._p(), pointers, lengths, count, _u64(now, "now"), byref(out)
            ),
            "inspect",
        )
        return Operation(out.value)

    def acquire_with_random(
        self,
        resources: Resources,
        random: bytes,
        now: int,
        *,
        ttl_ms: int | None = None,
        wait_us: int | None = None,
    ) -> Operation:
        """Like :meth:`acquire`, drawing tokens and jitter from ``random`` (the
        conformance vectors' way; real locks MUST use CSPRNG bytes)."""
        pointers, lengths, count = _byte_strings(resource_list(resources))
        data = _bytes(random, "random")
        out = _new_handle()
        if ttl_ms is None and wait_us is None:
            rc = lib.redlock_client_acquire_with_random(
                self._p(), pointers, lengths, count, data, len(data), _u64(now, "now"), byref(out)
            )
        else:
            rc = lib.redlock_client_acquire_with_random_options(
                self._p(),
                pointers,
                lengths,
                count,
                0 if ttl_ms is None else _nonzero_ttl(ttl_ms),
                wait_us is not None,
                0 if wait_us is None else _u64(wait_us, "wait_us"),
                data,
                len(data),
                _u64(now, "now"),
                byref(out),
            )
        _ffi.check(rc, "acquire")
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


def _nonzero_ttl(ttl_ms: int) -> int:
    """A per-call TTL for the calls where 0 means "the configured TTL"."""
    value = _u64(ttl_ms, "ttl_ms")
    if value == 0:
        raise invalid(
            "out_of_range",
            f"ttl_ms must be a whole number of milliseconds from 1 to {_U64_MAX} (None: the "
            "configured TTL), got 0",
        )
    return value


def _lease_pointer(lease: object) -> int:
    if not isinstance(lease, Lease):
        raise TypeError(f"lease must be a Lease, not {type(lease).__name__}")
    return lease._p()
