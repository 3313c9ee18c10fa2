"""Replies as values and the RESP decoder (``redlock_reply``, ``redlock_decoder``)."""

from __future__ import annotations

from collections.abc import Iterable
from ctypes import byref, c_int64, c_size_t, c_void_p

from . import _ffi
from ._ffi import lib
from ._handle import (
    _bytes,
    _Handle,
    _i64,
    _new_handle,
    _size,
    _u32,
)


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
        """The reply's ``REPLY_*`` kind."""
        return int(lib.redlock_reply_kind(self._p()))

    @property
    def integer(self) -> int | None:
        """An integer reply's value (``None`` for other kinds)."""
        value = c_int64()
        rc = lib.redlock_reply_integer(self._p(), byref(value))
        if rc == _ffi.NO_VALUE:
            return None
        _ffi.check(rc, "reply_integer")
        return int(value.value)

    @property
    def bytes(self) -> bytes | None:
        """The bytes of a status, bulk, error or connection-failed reply (``None`` for
        other kinds)."""
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
        """Appends bytes read from the node; read the replies with :meth:`next_reply`."""
        chunk = _bytes(data, "data")
        _ffi.check(lib.redlock_decoder_feed(self._p(), chunk, len(chunk)), "decoder_feed")

    def next_reply(self) -> Reply | None:
        """The next complete reply, or ``None`` when more bytes are needed."""
        out = _new_handle()
        _ffi.check(lib.redlock_decoder_next_reply(self._p(), byref(out)), "decoder_next_reply")
        return Reply(out.value) if out.value else None

    @property
    def buffered(self) -> int:
        """Bytes fed and not yet part of a reply returned."""
        return int(lib.redlock_decoder_buffered(self._p()))
