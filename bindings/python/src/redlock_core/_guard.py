"""The resource-side check of a fencing token (``redlock_fenced_set``): one write of a
value to an item that the item's Redis server applies only if the writer's fencing
token is above every token the item accepted before."""

from __future__ import annotations

import ctypes
from ctypes import byref, c_size_t, c_uint64, c_void_p

from . import _ffi
from ._ffi import lib
from ._handle import _bytes, _Handle, _new_handle
from ._reply import Reply

_ARGS = 7  # EVALSHA sha 2 item guard token value


class FencedSet(_Handle):
    """A write of ``value`` to ``item`` under a fencing ``token`` (a lock's
    ``fencing_token``). Send :meth:`args` (``EVALSHA``), hand the reply to
    :meth:`handle_reply`, and on ``FENCED_RETRY_AS_EVAL`` send ``args(eval=True)`` and
    hand in that reply instead. A token of 0 or above ``MAX_FENCING_TOKEN`` raises
    :class:`~redlock_core.UsageError` (``invalid_fencing_token``)."""

    __slots__ = ()
    _free_name = "redlock_fenced_set_free"

    def __init__(self, item: str | bytes, value: str | bytes, token: int) -> None:
        super().__init__(None)
        if isinstance(token, bool) or not isinstance(token, int):
            raise TypeError(f"token must be an int, not {type(token).__name__}")
        if token < 0 or token >= 2**64:
            # Out of the C type's range: the same refusal the core gives for 0.
            _ffi.fail(_ffi.INVALID_FENCING_TOKEN, "fenced_set")
        name = _bytes(item, "item")
        data = _bytes(value, "value")
        out = _new_handle()
        _ffi.check(
            lib.redlock_fenced_set_new(name, len(name), data, len(data), token, byref(out)),
            "fenced_set",
        )
        self._ptr = out.value

    def args(self, eval: bool = False) -> tuple[bytes, ...]:
        """The command: ``EVALSHA <sha> 2 <item> <guard> <token> <value>``, or with
        ``eval`` the ``EVAL`` form carrying the script's text."""
        args = (c_void_p * _ARGS)()
        lens = (c_size_t * _ARGS)()
        argc = c_size_t()
        _ffi.check(
            lib.redlock_fenced_set_args(self._p(), bool(eval), args, lens, _ARGS, byref(argc)),
            "fenced_set_args",
        )
        return tuple(_ffi.borrowed(args[i], lens[i]) for i in range(argc.value))

    def handle_reply(self, reply: Reply) -> int:
        """Hands in the server's reply; returns what became of the write (a
        ``FENCED_*`` value)."""
        if not isinstance(reply, Reply):
            raise TypeError(f"reply must be a Reply, not {type(reply).__name__}")
        result = ctypes.c_uint32()
        _ffi.check(
            lib.redlock_fenced_set_handle_reply(self._p(), reply._p(), byref(result)),
            "fenced_set_reply",
        )
        return int(result.value)

    @property
    def result(self) -> int:
        """The last result, a ``FENCED_*`` value (``FENCED_PENDING`` before a reply)."""
        return int(lib.redlock_fenced_set_result(self._p()))

    @property
    def seen(self) -> int | None:
        """The token the item had accepted when the write was refused as stale."""
        out = c_uint64()
        rc = lib.redlock_fenced_set_seen(self._p(), byref(out))
        if rc == _ffi.NO_VALUE:
            return None
        _ffi.check(rc, "fenced_set_seen")
        return int(out.value)

    @property
    def failure(self) -> str | None:
        """What went wrong when the last result is ``FENCED_FAILED``."""
        pointer, length = c_void_p(), c_size_t()
        rc = lib.redlock_fenced_set_failure(self._p(), byref(pointer), byref(length))
        if rc == _ffi.NO_VALUE:
            return None
        _ffi.check(rc, "fenced_set_failure")
        return _ffi.borrowed(pointer.value, length.value).decode("utf-8", "replace")
