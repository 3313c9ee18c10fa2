"""``@synchronized``: run a function only while holding a lock.

Built only on the public context managers (``Redlock.lock`` and ``AsyncRedlock.lock``):
every decision stays with the core, this only decides when to enter and leave.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, Union, cast

from ._asyncio import AsyncRedlock
from ._common import Duration
from ._sync import Redlock
from .core import Resources

F = TypeVar("F", bound=Callable[..., Any])

#: A resource name, several, or a function of the call's arguments giving them.
ResourceSpec = Union[Resources, Callable[..., Resources]]


def synchronized(
    redlock: Redlock | AsyncRedlock,
    resources: ResourceSpec,
    *,
    ttl: Duration | None = None,
    auto_extend: bool = False,
) -> Callable[[F], F]:
    """Decorates a function so that each call runs while holding a lock on ``resources``.

    ``resources`` is one name, several, or a callable that receives the call's arguments
    and returns them (``lambda order_id: f"orders:{order_id}"``), for a lock per call.
    A plain function needs a :class:`Redlock`; a coroutine function (``async def``) an
    :class:`AsyncRedlock`. Each call acquires (retrying as the Redlock is configured),
    runs the function, and releases, exactly as ``with redlock.lock(...)`` would: it
    raises :class:`LockHeldError` or :class:`NodesFailedError` if the lock cannot be
    had (the function does not run), and :class:`LockLostError` after the function
    returned if the lock was lost meanwhile. ``ttl`` and ``auto_extend`` are passed to
    ``lock()``; with ``auto_extend`` the lock is extended while the function runs.

    ::

        @synchronized(redlock, "nightly-report", auto_extend=True)
        def nightly_report() -> None: ...
    """
    if not isinstance(redlock, (Redlock, AsyncRedlock)):
        raise TypeError(f"synchronized() needs a Redlock or an AsyncRedlock, not {redlock!r}")

    def names(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Resources:
        if callable(resources):
            return resources(*args, **kwargs)
        return resources

    def decorate(function: F) -> F:
        if inspect.iscoroutinefunction(function):
            if not isinstance(redlock, AsyncRedlock):
                raise TypeError(
                    f"{function.__qualname__} is a coroutine function: use an AsyncRedlock"
                )
            async_redlock = redlock
            coroutine = cast(Callable[..., Awaitable[Any]], function)

            @functools.wraps(function)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                context = async_redlock.lock(names(args, kwargs), ttl=ttl, auto_extend=auto_extend)
                async with context:
                    return await coroutine(*args, **kwargs)

            return cast(F, async_wrapper)

        if not isinstance(redlock, Redlock):
            raise TypeError(f"{function.__qualname__} is not a coroutine function: use a Redlock")
        sync_redlock = redlock

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with sync_redlock.lock(names(args, kwargs), ttl=ttl, auto_extend=auto_extend):
                return function(*args, **kwargs)

        return cast(F, wrapper)

    return decorate
