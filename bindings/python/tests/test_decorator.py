"""``@synchronized``: the decorated function runs only under the lock, for plain and
coroutine functions, with a fixed name or one computed from the call's arguments."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest
import redis.asyncio

from redlock_core import AsyncRedlock, LockHeldError, Redlock, synchronized

from .conftest import Nodes


@pytest.fixture
def redlock(nodes: Nodes) -> Iterator[Redlock]:
    with Redlock(nodes.clients(), attempts=1, ttl=5, node_timeout=0.5) as redlock:
        yield redlock


def test_the_function_runs_holding_the_lock_and_releases_it(
    redlock: Redlock, nodes: Nodes, resource: str
) -> None:
    seen: list[list[bytes | None]] = []

    @synchronized(redlock, resource)
    def work(x: int) -> int:
        seen.append(nodes.values(resource))
        return x * 2

    assert work(21) == 42
    assert work.__name__ == "work"
    # Held: decided at the quorum (the other nodes' SETs may still be on their way).
    assert sum(value is not None for value in seen[0]) >= 3
    assert nodes.values(resource) == [None] * nodes.count


def test_a_held_lock_keeps_the_function_from_running(redlock: Redlock, resource: str) -> None:
    ran = threading.Event()

    @synchronized(redlock, resource)
    def work() -> None:
        ran.set()

    with redlock.lock(resource), pytest.raises(LockHeldError):
        work()
    assert not ran.is_set()
    work()
    assert ran.is_set()


def test_the_name_can_come_from_the_arguments(
    redlock: Redlock, nodes: Nodes, resource: str
) -> None:
    @synchronized(redlock, lambda order: f"{resource}:{order}")
    def work(order: int) -> list[bytes | None]:
        return nodes.values(f"{resource}:{order}")

    assert all(value is not None for value in work(7))
    # Another order is another lock: holding order 7 does not block order 8.
    with redlock.lock(f"{resource}:7"):
        assert all(value is not None for value in work(8))
        with pytest.raises(LockHeldError):
            work(7)


def test_an_exception_still_releases(redlock: Redlock, nodes: Nodes, resource: str) -> None:
    @synchronized(redlock, resource)
    def work() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        work()
    assert nodes.values(resource) == [None] * nodes.count


def test_coroutine_functions_need_an_async_redlock(nodes: Nodes, resource: str) -> None:
    async def main() -> None:
        clients = [redis.asyncio.Redis(port=port) for port in nodes.ports]
        async with AsyncRedlock(clients, attempts=1, node_timeout=0.1) as redlock:

            @synchronized(redlock, resource, auto_extend=True, ttl=0.3)
            async def work() -> list[bytes | None]:
                await asyncio.sleep(0.5)  # longer than the TTL: extended meanwhile
                return nodes.values(resource)

            assert all(value is not None for value in await work())
            assert nodes.values(resource) == [None] * nodes.count
            with pytest.raises(TypeError, match="coroutine function"):
                synchronized(redlock, resource)(lambda: None)

    asyncio.run(main())


def test_mismatches_are_type_errors(redlock: Redlock, resource: str) -> None:
    async def coroutine() -> None:
        pass

    with pytest.raises(TypeError, match="AsyncRedlock"):
        synchronized(redlock, resource)(coroutine)
    with pytest.raises(TypeError, match="Redlock or an AsyncRedlock"):
        synchronized("not a redlock", resource)  # type: ignore[arg-type]
