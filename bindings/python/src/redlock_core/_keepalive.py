"""Keep-alive (``redlock_keepalive``): the core's one policy for when to extend a held
lock, when to retry a failed extension, and when the lock counts as lost."""

from __future__ import annotations

from ctypes import byref, c_uint32, c_uint64
from typing import NamedTuple

from . import _ffi
from ._client import Client
from ._ffi import lib
from ._handle import _Handle, _new_handle, _u64, lost_reason_name
from ._operation import Lease, Outcome


class KeepAliveAction(NamedTuple):
    """What to do: ``action`` is ``KEEPALIVE_EXTEND``, ``_WAIT`` (until ``until``),
    ``_LOST`` (``lost`` names why) or ``_STOPPED``."""

    action: int
    until: int | None
    lost: str | None


class KeepAlive(_Handle):
    """Keeps one lock alive. Poll it after creating it, after every outcome or failure
    handed in, and at every instant it names."""

    __slots__ = ()
    _free_name = "redlock_keepalive_free"

    def __init__(self, client: Client, lease: Lease) -> None:
        out = _new_handle()
        _ffi.check(lib.redlock_keepalive_new(client._p(), lease._p(), byref(out)), "keepalive")
        super().__init__(out.value)

    def poll(self, now: int) -> KeepAliveAction:
        """What to do at ``now``: extend, wait until an instant, or the lock is lost."""
        action, until, reason = c_uint32(), c_uint64(), c_uint32()
        _ffi.check(
            lib.redlock_keepalive_poll(
                self._p(), _u64(now, "now"), byref(action), byref(until), byref(reason)
            ),
            "keepalive_poll",
        )
        return KeepAliveAction(
            action.value,
            until.value if action.value == _ffi.KEEPALIVE_WAIT else None,
            lost_reason_name(reason.value) if reason.value else None,
        )

    def handle_outcome(self, outcome: Outcome, now: int) -> None:
        """The outcome of an extension of this lock, asked for or made by hand."""
        _ffi.check(
            lib.redlock_keepalive_handle_outcome(self._p(), outcome._p(), _u64(now, "now")),
            "keepalive_outcome",
        )

    def handle_failure(self, now: int) -> None:
        """The extension could not be run at all: retried like failing nodes."""
        _ffi.check(
            lib.redlock_keepalive_handle_failure(self._p(), _u64(now, "now")), "keepalive_failure"
        )

    def stop(self) -> None:
        """Stops keeping the lock alive (released, or no longer wanted)."""
        _ffi.check(lib.redlock_keepalive_stop(self._p()), "keepalive_stop")

    def lease(self) -> Lease:
        """The lease as it stands (a handle of its own)."""
        out = _new_handle()
        _ffi.check(lib.redlock_keepalive_lease(self._p(), byref(out)), "keepalive_lease")
        return Lease(out.value)

    @property
    def lost(self) -> str | None:
        """Why the lock was lost (the core's reason code), once it is."""
        reason = int(lib.redlock_keepalive_lost_reason(self._p()))
        return lost_reason_name(reason) if reason else None

    @property
    def is_extending(self) -> bool:
        """True while an extension this keep-alive asked for is under way."""
        return bool(lib.redlock_keepalive_is_extending(self._p()))
