"""The core's configuration (``redlock_config``)."""

from __future__ import annotations

from ctypes import byref, c_bool, c_size_t, c_uint32, c_void_p
from typing import Any

from . import _ffi
from ._ffi import lib
from ._handle import (
    _bytes,
    _Handle,
    _new_handle,
    _size,
    _u32,
    _u64,
    wrong_type,
)


class Config(_Handle):
    """A checked configuration (``redlock_config``). Every setting is optional and
    defaults to the core's; durations are microseconds, the TTL milliseconds. An
    unacceptable setting raises :class:`~redlock_core.ConfigError`. With ``fencing``
    every acquisition also issues a fencing token (``docs/fencing.md``)."""

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
        fencing: bool | None = None,
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
                    raise wrong_type(
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
            if fencing is not None:
                if not isinstance(fencing, bool):
                    raise wrong_type(f"fencing must be a bool, not {type(fencing).__name__}")
                apply("redlock_config_builder_set_fencing", fencing)
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
        """N, the number of independent Redis nodes."""
        return int(lib.redlock_config_nodes(self._p()))

    @property
    def quorum(self) -> int:
        """Q = N/2 + 1, the nodes that must agree for any decision."""
        return int(lib.redlock_config_quorum(self._p()))

    @property
    def ttl_ms(self) -> int:
        """The TTL written with every key, in milliseconds (a lock may ask for another)."""
        return int(lib.redlock_config_ttl_ms(self._p()))

    @property
    def drift_factor(self) -> float:
        """The share of the TTL counted as clock drift (0.01 by default)."""
        return float(lib.redlock_config_drift_factor(self._p()))

    @property
    def drift_fixed_us(self) -> int:
        """The fixed part of the clock drift, in microseconds (2 ms by default)."""
        return int(lib.redlock_config_drift_fixed_us(self._p()))

    @property
    def drift_us(self) -> int:
        """The whole drift for the configured TTL (``ttl * drift_factor + drift_fixed``), in
        microseconds, taken off every validity."""
        return int(lib.redlock_config_drift_us(self._p()))

    @property
    def node_timeout_us(self) -> int:
        """How long one node may take to answer one command, in microseconds."""
        return int(lib.redlock_config_node_timeout_us(self._p()))

    @property
    def min_validity_us(self) -> int:
        """The smallest validity an acquisition accepts, in microseconds (less counts as
        a failure, ``validity_too_short``)."""
        return int(lib.redlock_config_min_validity_us(self._p()))

    @property
    def attempts(self) -> int:
        """How many attempts an acquisition without a wait limit makes."""
        return int(lib.redlock_config_attempts(self._p()))

    @property
    def retry_delay_us(self) -> int:
        """The mean delay between two attempts, in microseconds."""
        return int(lib.redlock_config_retry_delay_us(self._p()))

    @property
    def retry_jitter_us(self) -> int:
        """How far a retry delay may be drawn from its mean either way, in microseconds."""
        return int(lib.redlock_config_retry_jitter_us(self._p()))

    @property
    def token_bytes(self) -> int:
        """Random bytes in each token (written as twice as many hex digits)."""
        return int(lib.redlock_config_token_bytes(self._p()))

    @property
    def key_prefix(self) -> bytes:
        """What is put before every resource name to make its key (empty by default)."""
        pointer, length = c_void_p(), c_size_t()
        _ffi.check(lib.redlock_config_key_prefix(self._p(), byref(pointer), byref(length)))
        return _ffi.borrowed(pointer.value, length.value)

    @property
    def max_extensions(self) -> int | None:
        """The bound on extensions of one lock, or ``None`` when unbounded."""
        bounded, maximum = c_bool(), c_uint32()
        _ffi.check(lib.redlock_config_max_extensions(self._p(), byref(bounded), byref(maximum)))
        return int(maximum.value) if bounded.value else None

    @property
    def fencing(self) -> bool:
        """Whether acquisitions issue fencing tokens."""
        return bool(lib.redlock_config_fencing(self._p()))
