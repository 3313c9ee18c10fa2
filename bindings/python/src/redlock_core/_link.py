"""Node links (``redlock_link``): the core's policy for one node's commands.

A driver keeps one :class:`Link` per node for as long as its client lives, hands it
every command an operation emits for that node (:meth:`Link.submit`) and every event of
the node's connection, and does what :meth:`Link.poll` says: ``LINK_OUTPUT_CONNECT``,
``_WRITE`` (:meth:`Link.write`), ``_CLOSE``, ``_DELIVER`` (:meth:`Link.delivery`,
then :meth:`Operation.handle_delivery`). It calls :meth:`Link.handle_timeout` at
:meth:`Link.poll_timeout`.

The link owns the connection attempt's deadline: an attempt not reported open
(:meth:`Link.handle_connected`) within its connect timeout (the core's
``CONNECT_TIMEOUT_DEFAULT_MS`` unless the driver sets the user's client's,
:meth:`Link.set_connect_timeout`) is given up at :meth:`Link.handle_timeout`: the link
outputs ``LINK_OUTPUT_CLOSE`` and counts the attempt failed with cause ``timeout``. The
driver then gives the attempt up (closes or cancels what it was opening) and reports
nothing more for it.
"""

from __future__ import annotations

from ctypes import byref, c_bool, c_int64, c_size_t, c_uint32, c_uint64, c_void_p
from typing import NamedTuple

from . import _ffi
from ._ffi import lib
from ._handle import _bytes, _Handle, _i64, _new_handle, _u32, _u64
from ._operation import Operation
from ._reply import Reply


class Delivery(NamedTuple):
    """A reply for the operation tagged ``tag``, to its request ``request_id``:
    ``kind`` is a ``REPLY_*`` value; ``integer`` and ``text`` as for the reply."""

    tag: int
    request_id: int
    kind: int
    integer: int
    text: bytes


class Link(_Handle):
    """One node's command policy and connection state. ``connect_timeout_ms``, when
    given, is :meth:`set_connect_timeout`'s (otherwise the core's default)."""

    __slots__ = ("_argc", "_id", "_kind", "_kind_ref", "_len_out", "_ptr_out")
    _free_name = "redlock_link_free"

    def __init__(self, connect_timeout_ms: int | None = None) -> None:
        timeout = None if connect_timeout_ms is None else _u64(connect_timeout_ms, "timeout_ms")
        out = _new_handle()
        _ffi.check(lib.redlock_link_new(byref(out)), "link_new")
        super().__init__(out.value)
        self._kind = c_uint32()
        self._kind_ref = byref(self._kind)
        self._id = c_uint64()
        self._argc = c_size_t()
        self._ptr_out = c_void_p()
        self._len_out = c_size_t()
        if timeout is not None:
            self.set_connect_timeout(timeout)

    # settings

    def set_connect_timeout(self, timeout_ms: int) -> None:
        """How long a connection attempt (TCP, TLS, ``AUTH``, ``SELECT``) may take, in
        milliseconds, before the link gives it up with ``LINK_OUTPUT_CLOSE`` and counts
        it failed with ``timeout``: the user's client's connect timeout when it has one
        (a new link has the core's ``CONNECT_TIMEOUT_DEFAULT_MS``). 0 is taken as 1 ms;
        an attempt already under way keeps its limit."""
        _ffi.check(
            lib.redlock_link_set_connect_timeout(self._p(), _u64(timeout_ms, "timeout_ms")),
            "link_set_connect_timeout",
        )

    @property
    def connect_timeout_ms(self) -> int:
        """The link's connect timeout in milliseconds (see :meth:`set_connect_timeout`)."""
        return int(lib.redlock_link_connect_timeout_ms(self._p()))

    # inputs

    def submit(self, tag: int, operation: Operation, now: int) -> None:
        """Hands ``operation``'s current ``OUTPUT_SEND`` command to this link (the link
        of its node), tagged ``tag``."""
        rc = lib.redlock_link_submit_current(self._p(), tag, operation._p(), now)
        if rc != _ffi.OK:
            _ffi.fail(rc, "link_submit")

    def handle_connected(self, now: int) -> None:
        """A new or re-opened connection is ready: the scripts are written first."""
        _ffi.check(lib.redlock_link_handle_connected(self._p(), _u64(now, "now")), "connected")

    def handle_closed(self, cause: int, text: str | bytes, now: int) -> None:
        """The connection closed or could not be opened: ``cause`` is a
        ``LINK_CAUSE_*`` value."""
        data = _bytes(text.encode("utf-8", "replace") if isinstance(text, str) else text, "text")
        _ffi.check(
            lib.redlock_link_handle_closed(
                self._p(), _u32(cause, "cause"), data, len(data), _u64(now, "now")
            ),
            "closed",
        )

    def handle_reply(
        self, write_id: int, kind: int, integer: int = 0, text: bytes | None = None, *, now: int
    ) -> None:
        """The reply to write ``write_id`` (any ``REPLY_*`` kind but arrays)."""
        data = b"" if text is None else text
        rc = lib.redlock_link_handle_reply(
            self._p(), write_id, kind, _i64(integer, "integer"), data, len(data), now
        )
        if rc != _ffi.OK:
            _ffi.fail(rc, "link_handle_reply")

    def handle_reply_value(self, write_id: int, reply: Reply, now: int) -> None:
        """The reply to write ``write_id``, as a reply object (arrays included)."""
        rc = lib.redlock_link_handle_reply_value(self._p(), write_id, reply._p(), now)
        if rc != _ffi.OK:
            _ffi.fail(rc, "link_handle_reply")

    def handle_timeout(self, now: int) -> None:
        """Time has reached ``now``: what is past its time is dropped or closed."""
        _ffi.check(lib.redlock_link_handle_timeout(self._p(), _u64(now, "now")), "link_timeout")

    # outputs

    def poll(self) -> int:
        """The next output's kind: ``LINK_OUTPUT_NONE``, ``_CONNECT``, ``_WRITE``,
        ``_CLOSE`` or ``_DELIVER``."""
        rc = lib.redlock_link_poll_output(self._p(), self._kind_ref)
        if rc != _ffi.OK:
            _ffi.fail(rc, "link_poll")
        return self._kind.value

    def write(self) -> tuple[int, bytes]:
        """The current ``LINK_OUTPUT_WRITE``: its id and its RESP bytes."""
        pointer = self._p()
        rc = lib.redlock_link_write(pointer, byref(self._id), byref(self._argc))
        if rc == _ffi.OK:
            rc = lib.redlock_link_write_resp(pointer, byref(self._ptr_out), byref(self._len_out))
        if rc != _ffi.OK:
            _ffi.fail(rc, "link_write")
        return self._id.value, _ffi.borrowed(self._ptr_out.value, self._len_out.value)

    def write_args(self) -> tuple[bytes, ...]:
        """The current write's arguments (the command's name first)."""
        pointer = self._p()
        _ffi.check(lib.redlock_link_write(pointer, byref(self._id), byref(self._argc)), "write")
        args = []
        for index in range(self._argc.value):
            _ffi.check(
                lib.redlock_link_write_arg(
                    pointer, index, byref(self._ptr_out), byref(self._len_out)
                ),
                "write_arg",
            )
            args.append(_ffi.borrowed(self._ptr_out.value, self._len_out.value))
        return tuple(args)

    def delivery(self) -> Delivery:
        """The current ``LINK_OUTPUT_DELIVER``."""
        tag, request, kind, integer = c_uint64(), c_uint64(), c_uint32(), c_int64()
        rc = lib.redlock_link_delivery(
            self._p(),
            byref(tag),
            byref(request),
            byref(kind),
            byref(integer),
            byref(self._ptr_out),
            byref(self._len_out),
        )
        if rc != _ffi.OK:
            _ffi.fail(rc, "delivery")
        text = _ffi.borrowed(self._ptr_out.value, self._len_out.value)
        return Delivery(tag.value, request.value, kind.value, integer.value, text)

    def poll_timeout(self) -> int | None:
        """When :meth:`handle_timeout` is next due, or ``None``."""
        due, at = c_bool(), c_uint64()
        _ffi.check(lib.redlock_link_poll_timeout(self._p(), byref(due), byref(at)), "poll_timeout")
        return int(at.value) if due.value else None

    # getters

    @property
    def is_idle(self) -> bool:
        """True when nothing is queued or awaiting a reply."""
        return bool(lib.redlock_link_is_idle(self._p()))

    def is_stalled(self, now: int) -> bool:
        """True while a written command is unanswered past its deadline."""
        return bool(lib.redlock_link_is_stalled(self._p(), _u64(now, "now")))

    @property
    def is_open(self) -> bool:
        """True while a connection is open."""
        return bool(lib.redlock_link_is_open(self._p()))

    @property
    def in_flight(self) -> int:
        """Writes awaiting their replies (the script loads included)."""
        return int(lib.redlock_link_in_flight(self._p()))

    @property
    def queued(self) -> int:
        """Commands queued, not yet written."""
        return int(lib.redlock_link_queued(self._p()))

    @property
    def owed(self) -> int:
        """Tokens whose release this link still owes."""
        return int(lib.redlock_link_owed(self._p()))
