"""Notice subscriptions (``redlock_subscriptions``): the core's policy for a client's
subscriber connections, one per node.

A driver keeps one :class:`Subscriptions` for as long as its client lives. It says
when an acquisition starts and stops listening on a channel (:meth:`Subscriptions.want`,
:meth:`Subscriptions.unwant`) and what happens to each node's subscriber connection
(``handle_opened``, ``handle_lost``, ``handle_refused``, ``handle_confirmed``, time
passing with ``handle_timeout`` at :meth:`Subscriptions.poll_timeout`), and after every
input does what :meth:`Subscriptions.poll_output` says until it gives ``None``: open a
node's subscriber connection, subscribe or unsubscribe a channel on it, or close it.
Which channels, when a connection opens, closes, and opens again after a failure (the
pause, its doubling) is decided here, once for every driver; handing notices and
confirmations to the waiting operations stays with the driver.
"""

from __future__ import annotations

from ctypes import byref, c_bool, c_size_t, c_uint32, c_uint64, c_void_p
from typing import NamedTuple

from . import _ffi
from ._ffi import lib
from ._handle import _bytes, _Handle, _new_handle, _size, _u64


class SubscriberOutput(NamedTuple):
    """What to do for node ``node``'s subscriber connection: ``kind`` is a
    ``SUBSCRIBER_OUTPUT_*`` value (``OPEN``, ``SUBSCRIBE``, ``UNSUBSCRIBE``, ``CLOSE``);
    ``channel`` is the channel to subscribe or unsubscribe (``None`` otherwise)."""

    kind: int
    node: int
    channel: bytes | None = None


class Subscriptions(_Handle):
    """A client's notice subscriptions over ``nodes`` nodes. A subscriber connection
    that neither opens nor confirms a subscription within ``timeout_ms`` (the driver's
    connect timeout) counts as lost. A bad node count raises :class:`ConfigError`; a
    node outside ``0..nodes`` :class:`UsageError`."""

    __slots__ = ("_counts", "_kind", "_len_out", "_node", "_ptr_out")
    _free_name = "redlock_subscriptions_free"

    def __init__(self, nodes: int, timeout_ms: int) -> None:
        out = _new_handle()
        _ffi.check(
            lib.redlock_subscriptions_new(
                _size(nodes, "nodes"), _u64(timeout_ms, "timeout_ms"), byref(out)
            ),
            "subscriptions_new",
        )
        super().__init__(out.value)
        self._kind = c_uint32()
        self._node = c_size_t()
        self._counts = c_bool()
        self._ptr_out = c_void_p()
        self._len_out = c_size_t()

    # inputs

    def want(self, channel: bytes, now: int) -> None:
        """One more listener on ``channel`` (an acquisition started listening)."""
        data = _bytes(channel, "channel")
        _ffi.check(
            lib.redlock_subscriptions_want(self._p(), data, len(data), _u64(now, "now")), "want"
        )

    def unwant(self, channel: bytes, now: int) -> bool:
        """One listener fewer on ``channel``: once none is left it lingers, then is
        unsubscribed. False (nothing changes) for a channel nobody listens on."""
        data = _bytes(channel, "channel")
        rc = lib.redlock_subscriptions_unwant(self._p(), data, len(data), _u64(now, "now"))
        if rc == _ffi.NO_VALUE:
            return False
        _ffi.check(rc, "unwant")
        return True

    def handle_opened(self, node: int, now: int) -> None:
        """Node ``node``'s subscriber connection opened (after an ``OPEN``)."""
        _ffi.check(
            lib.redlock_subscriptions_handle_opened(
                self._p(), _size(node, "node"), _u64(now, "now")
            ),
            "subscriber_opened",
        )

    def handle_lost(self, node: int, now: int) -> None:
        """Node ``node``'s subscriber connection could not be opened, or dropped."""
        _ffi.check(
            lib.redlock_subscriptions_handle_lost(self._p(), _size(node, "node"), _u64(now, "now")),
            "subscriber_lost",
        )

    def handle_refused(self, node: int, now: int) -> None:
        """Node ``node`` refused a ``SUBSCRIBE``: its connection is closed (a ``CLOSE``
        follows) and counts as lost."""
        _ffi.check(
            lib.redlock_subscriptions_handle_refused(
                self._p(), _size(node, "node"), _u64(now, "now")
            ),
            "subscriber_refused",
        )

    def handle_confirmed(self, node: int, channel: bytes, now: int) -> bool:
        """Node ``node`` confirmed the subscription to ``channel``. True when it
        confirms one asked for on the current connection: hand it to the channel's
        waiting operations then (:meth:`Operation.handle_subscribed`); false for a
        stale one."""
        data = _bytes(channel, "channel")
        _ffi.check(
            lib.redlock_subscriptions_handle_confirmed(
                self._p(),
                _size(node, "node"),
                data,
                len(data),
                _u64(now, "now"),
                byref(self._counts),
            ),
            "subscriber_confirmed",
        )
        return bool(self._counts.value)

    def handle_timeout(self, now: int) -> None:
        """Time has reached ``now``: lingering channels come due, connections that did
        not open or confirm in time count as lost, paused ones open again."""
        _ffi.check(
            lib.redlock_subscriptions_handle_timeout(self._p(), _u64(now, "now")),
            "subscriptions_timeout",
        )

    # outputs

    def poll_output(self) -> SubscriberOutput | None:
        """The next thing to do, or ``None`` until the next input."""
        pointer = self._p()
        _ffi.check(
            lib.redlock_subscriptions_poll_output(pointer, byref(self._kind), byref(self._node)),
            "subscriptions_poll",
        )
        kind = self._kind.value
        if kind == _ffi.SUBSCRIBER_OUTPUT_NONE:
            return None
        channel = None
        if kind in (_ffi.SUBSCRIBER_OUTPUT_SUBSCRIBE, _ffi.SUBSCRIBER_OUTPUT_UNSUBSCRIBE):
            _ffi.check(
                lib.redlock_subscriptions_channel(
                    pointer, byref(self._ptr_out), byref(self._len_out)
                ),
                "subscriptions_channel",
            )
            channel = _ffi.borrowed(self._ptr_out.value, self._len_out.value)
        return SubscriberOutput(kind, int(self._node.value), channel)

    def poll_timeout(self) -> int | None:
        """When :meth:`handle_timeout` is next due, or ``None``."""
        due, at = c_bool(), c_uint64()
        _ffi.check(
            lib.redlock_subscriptions_poll_timeout(self._p(), byref(due), byref(at)),
            "subscriptions_poll_timeout",
        )
        return int(at.value) if due.value else None

    # getters

    def is_open(self, node: int) -> bool:
        """Whether node ``node``'s subscriber connection is open (false for a node
        outside ``0..nodes``)."""
        return bool(lib.redlock_subscriptions_is_open(self._p(), _size(node, "node")))

    @property
    def channel_count(self) -> int:
        """The number of channels wanted or lingering."""
        return int(lib.redlock_subscriptions_channel_count(self._p()))
