"""Writing to a Redis item under a fencing token, with the user's redis-py client.

The check (``docs/fencing.md``) is the core's :class:`~redlock_core.core.FencedSet`:
one script, sent as ``EVALSHA`` and once more as ``EVAL`` when the server answers
``NOSCRIPT``, exactly as the core's result says. This module only sends it and turns
the client's reply back into a core reply.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from . import _ffi
from ._errors import RedlockError
from ._guard import FencedSet
from ._reply import Reply

__all__ = ["FencedResult", "FencedWriteError", "fenced_set", "fenced_set_async"]


@dataclass(frozen=True)
class FencedResult:
    """What became of a fenced write: ``accepted`` when the item took the value;
    otherwise the writer is stale and ``seen`` is the token the item had already
    accepted (at least ``token``)."""

    accepted: bool
    token: int
    seen: int | None = None

    def __bool__(self) -> bool:
        return self.accepted


class FencedWriteError(RedlockError):
    """The fenced write got an error or no answer (``failure`` says which). After a
    timeout or a lost connection, whether the write happened is not known."""

    code = "fenced_write_failed"

    def __init__(self, failure: str) -> None:
        self.failure = failure
        super().__init__(f"fenced write failed: {failure}")


# The codes redis-py takes off the front of an error reply (before it had
# ``status_code``), by exception class name.
_STRIPPED = {
    "NoScriptError": "NOSCRIPT",
    "BusyLoadingError": "LOADING",
    "ReadOnlyError": "READONLY",
    "ExecAbortError": "EXECABORT",
    "NoPermissionError": "NOPERM",
    "OutOfMemoryError": "OOM",
    "AuthenticationError": "NOAUTH",
}


def error_text(error: ResponseError) -> str:
    """An error reply's full text, its code first, as the server sent it."""
    text = str(error)
    code = getattr(error, "status_code", None) or _STRIPPED.get(type(error).__name__)
    if code is None:
        first = text.split(" ", 1)[0]
        # redis-py strips ERR; it keeps codes it does not know (all capitals).
        code = "" if first and first.isupper() else "ERR"
    return f"{code} {text}" if code else text


def reply_of(value: Any) -> Reply:
    """A redis-py reply value as a core reply (the one mapping of docs/bindings.md)."""
    if value is None:
        return Reply.new(_ffi.REPLY_NIL)
    if isinstance(value, bool):
        return Reply.new(_ffi.REPLY_INTEGER, integer=int(value))
    if isinstance(value, int):
        return Reply.new(_ffi.REPLY_INTEGER, integer=value)
    if isinstance(value, (bytes, str)):
        text = value if isinstance(value, bytes) else value.encode()
        return Reply.new(_ffi.REPLY_BULK, text=text)
    if isinstance(value, ResponseError):
        return Reply.new(_ffi.REPLY_ERROR, text=error_text(value).encode("utf-8", "replace"))
    if isinstance(value, (list, tuple)):
        items = [reply_of(item) for item in value]
        try:
            return Reply.array(items)
        finally:
            for item in items:
                item.close()
    return Reply.new(_ffi.REPLY_ERROR, text=f"unexpected reply {value!r}".encode())


def _error_reply(error: Exception) -> Reply:
    """The core reply for what the client raised: an error reply, or no reply at all
    (a failed connection, a timeout). Anything else is not the server's answer."""
    if isinstance(error, ResponseError):
        return reply_of(error)
    if isinstance(error, (RedisTimeoutError, TimeoutError)):
        return Reply.new(_ffi.REPLY_TIMEOUT)
    if isinstance(error, (RedisConnectionError, OSError)):
        text = f"{type(error).__name__}: {error}".encode()
        return Reply.new(_ffi.REPLY_CONNECTION_FAILED, text=text)
    raise error


def _start(item: str | bytes, value: str | bytes, token: int | None) -> FencedSet:
    if token is None:
        raise TypeError(
            "token is None: the lock has no fencing token (acquire it with fencing=True)"
        )
    return FencedSet(item, value, token)


def _result(write: FencedSet, result: int, token: int | None) -> FencedResult:
    assert token is not None  # _start refused None
    if result == _ffi.FENCED_ACCEPTED:
        return FencedResult(True, token)
    if result == _ffi.FENCED_STALE:
        return FencedResult(False, token, write.seen)
    raise FencedWriteError(write.failure or f"result {result}")


def _exchange(
    item: str | bytes, value: str | bytes, token: int | None
) -> Generator[tuple[bytes, ...], Reply, FencedResult]:
    """The fenced write as the core runs it: yields each command to send and takes its
    reply (``EVALSHA``, then ``EVAL`` once if the core says so); returns the result."""
    with _start(item, value, token) as write:
        result = _ffi.FENCED_RETRY_AS_EVAL
        for as_eval in (False, True):
            reply = yield write.args(as_eval)
            with reply:
                result = write.handle_reply(reply)
            if result != _ffi.FENCED_RETRY_AS_EVAL:
                break
        return _result(write, result, token)


def fenced_set(
    client: Any, item: str | bytes, value: str | bytes, token: int | None
) -> FencedResult:
    """Sets ``item`` to ``value`` on ``client``'s server (a ``redis.Redis``) only if
    ``token`` is above every fencing token the item accepted before, recording it.

    Returns a :class:`FencedResult`: ``accepted``, or stale with the token ``seen``.
    A token of 0, above 2^53 - 1 or ``None`` raises :class:`UsageError` (or
    ``TypeError``); an error reply or no reply raises :class:`FencedWriteError`.
    """
    exchange = _exchange(item, value, token)
    args = next(exchange)
    while True:
        try:
            reply = reply_of(client.execute_command(*args))
        except Exception as error:
            reply = _error_reply(error)
        try:
            args = exchange.send(reply)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


async def fenced_set_async(
    client: Any, item: str | bytes, value: str | bytes, token: int | None
) -> FencedResult:
    """:func:`fenced_set` with a ``redis.asyncio.Redis`` client."""
    exchange = _exchange(item, value, token)
    args = next(exchange)
    while True:
        try:
            reply = reply_of(await client.execute_command(*args))
        except Exception as error:
            reply = _error_reply(error)
        try:
            args = exchange.send(reply)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
