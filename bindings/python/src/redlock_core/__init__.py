"""redlock-core: the Redlock distributed lock for Python, over one audited core.

The decisions (quorum, validity, deadlines, retries, release, when to extend) are made
by ``libredlock``, the C ABI of the project's Rust core, loaded through ctypes; this
package sends the commands the core emits with redis-py and hands the replies back.

::

    import redis
    from redlock_core import Redlock, LockHeldError

    redlock = Redlock([redis.Redis(port=port) for port in (7000, 7001, 7002)], ttl=10)
    with redlock.lock("orders:42") as lock:
        ...  # lock.check() before acting on the lock's protection

``AsyncRedlock`` does the same over ``redis.asyncio.Redis`` clients (``async with``);
``@synchronized(redlock, "name")`` runs a function (or coroutine function) under a lock.
``redlock.locked(name)`` and ``lock.owned()`` ask the nodes who holds a lock;
``Redlock(..., on_event=hook)`` (or ``redlock.add_listener(hook)``) reports every
:class:`Event`, and with ``opentelemetry-api`` installed every operation is a span.
The low-level objects (``Config``, ``Client``, ``Operation``, ...) are in
:mod:`redlock_core.core`. ``$REDLOCK_LIBRARY`` loads another build of the library.
"""

from ._asyncio import AsyncLock, AsyncLockContext, AsyncRedlock
from ._common import AcquireOptions, ReleaseResult
from ._decorator import synchronized
from ._errors import (
    ArgumentTypeError,
    ConfigError,
    CoreError,
    InvalidArgumentError,
    LibraryNotFoundError,
    LockError,
    LockHeldError,
    LockLostError,
    LockNotHeldError,
    NodeResult,
    NodesFailedError,
    ProtocolError,
    RedlockError,
    UsageError,
    UsedAfterCloseError,
)
from ._fenced import FencedResult, FencedWriteError, fenced_set, fenced_set_async
from ._ffi import library_path
from ._observe import Event, Hook
from ._sync import Lock, LockContext, Redlock
from .core import now_us, version

__version__ = "0.1.0"

__all__ = [
    "AcquireOptions",
    "ArgumentTypeError",
    "AsyncLock",
    "AsyncLockContext",
    "AsyncRedlock",
    "ConfigError",
    "CoreError",
    "Event",
    "FencedResult",
    "FencedWriteError",
    "Hook",
    "InvalidArgumentError",
    "LibraryNotFoundError",
    "Lock",
    "LockContext",
    "LockError",
    "LockHeldError",
    "LockLostError",
    "LockNotHeldError",
    "NodeResult",
    "NodesFailedError",
    "ProtocolError",
    "Redlock",
    "RedlockError",
    "ReleaseResult",
    "UsageError",
    "UsedAfterCloseError",
    "fenced_set",
    "fenced_set_async",
    "library_path",
    "now_us",
    "synchronized",
    "version",
]
