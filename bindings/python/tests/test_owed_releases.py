"""Releases a link owes a frozen node go out in the background once the node thaws,
with no further call on the Redlock (docs/bindings.md, rules 2 and 10; the link's owed
releases in core/src/link.rs). Both drivers: redis-py sync (the reader thread) and
asyncio (the event loop's tasks).

Three of five nodes frozen (SIGSTOP) while an acquisition's ``SET`` is on its way to
them: the acquisition fails (``NodesFailedError``). Once they thaw they answer that
``SET`` and so hold the key with its full TTL (30 s here) until the link writes the
release it owes them; this must happen without another call and without closing. The
same for the one frozen node of a successful acquire and release. Closing the Redlock
afterwards leaves nothing either.

Real redis-server processes on base ports 7960 (sync) and 7965 (asyncio)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import pytest
import redis
import redis.asyncio

from redlock_core import AsyncRedlock, NodesFailedError, Redlock

from .conftest import Nodes

TTL = 30
#: How long the keys may stay after the thaw: far below the TTL, far above what a
#: loaded machine needs to read a reply and write a release.
BOUND = 5.0
POLL = 0.05


@pytest.fixture(scope="module")
def sync_nodes() -> Iterator[Nodes]:
    set_ = Nodes(7960, 5)
    set_.start()
    try:
        yield set_
    finally:
        set_.heal()
        set_.stop()


@pytest.fixture(scope="module")
def async_nodes() -> Iterator[Nodes]:
    set_ = Nodes(7965, 5)
    set_.start()
    try:
        yield set_
    finally:
        set_.heal()
        set_.stop()


def present(nodes: Nodes, key: str) -> list[int]:
    """The nodes where ``key`` exists (asked on plain connections of our own)."""
    out = []
    for index, port in enumerate(nodes.ports):
        with redis.Redis(port=port, socket_timeout=2) as client:
            if client.exists(key):
                out.append(index)
    return out


def ttls(nodes: Nodes, key: str, indices: list[int]) -> dict[int, int]:
    out = {}
    for index in indices:
        with redis.Redis(port=nodes.ports[index], socket_timeout=2) as client:
            out[index] = int(client.pttl(key))
    return out


def wait_gone(nodes: Nodes, key: str) -> float:
    """Polls every 50 ms, at most ``BOUND``, until ``key`` exists on no node; how long
    it took. Fails naming the nodes that still hold it and their remaining TTL."""
    started = time.monotonic()
    while True:
        left = present(nodes, key)
        if not left:
            return time.monotonic() - started
        if time.monotonic() - started >= BOUND:
            pytest.fail(
                f"{key}: still on nodes {left} {BOUND} s after the thaw with no call "
                f"(remaining TTL, ms: {ttls(nodes, key, left)})"
            )
        time.sleep(POLL)


def set_calls(nodes: Nodes, indices: list[int]) -> dict[int, int]:
    """How many SET commands each node ran (INFO commandstats)."""
    out = {}
    for index in indices:
        with redis.Redis(port=nodes.ports[index], socket_timeout=2) as client:
            stats = client.info("commandstats")
            out[index] = int(stats.get("cmdstat_set", {}).get("calls", 0))
    return out


def wait_set_ran(nodes: Nodes, before: dict[int, int]) -> None:
    """Waits (at most ``BOUND``) until the thawed nodes ran the acquisition's SET: from
    then on they hold the key until a release removes it, so a key found gone afterwards
    was released (not merely not set yet)."""
    deadline = time.monotonic() + BOUND
    while True:
        after = set_calls(nodes, list(before))
        if all(after[i] > before[i] for i in before):
            return
        assert time.monotonic() < deadline, f"the thawed nodes never ran the SET: {before} {after}"
        time.sleep(0.01)


def thaw(nodes: Nodes, indices: list[int]) -> None:
    for index in indices:
        nodes.resume(index)


def freeze(nodes: Nodes, indices: list[int]) -> None:
    for index in indices:
        nodes.pause(index)


def key(case: str) -> str:
    return f"owed:{case}:{uuid.uuid4().hex[:8]}"


# ---- redis-py, sync ---------------------------------------------------------------


def warm(redlock: Redlock) -> None:
    """Connections open first, so that the SET is written to the nodes frozen next; and
    nothing of the warm-up still out (a release decides at a quorum), or a node frozen
    with it unanswered would be stalled already and never get the SET."""
    with redlock.lock(key("warm"), ttl=TTL):
        pass
    redlock.flush()


def test_sync_owed_releases_reach_thawed_nodes_without_a_call(sync_nodes: Nodes) -> None:
    redlock = Redlock(sync_nodes.clients())
    try:
        warm(redlock)
        three = key("three")
        sets = set_calls(sync_nodes, [2, 3, 4])
        try:
            freeze(sync_nodes, [2, 3, 4])
            with pytest.raises(NodesFailedError):
                redlock.acquire(three, ttl=TTL)
            # The SET is out to the frozen nodes: what the test is about.
            in_flight = redlock.in_flight()
            assert all(in_flight[i] >= 1 for i in (2, 3, 4)), in_flight
        finally:
            thaw(sync_nodes, [2, 3, 4])
        wait_set_ran(sync_nodes, sets)
        took = wait_gone(sync_nodes, three)
        print(f"sync, three frozen: keys gone {took:.3f} s after the SET ran")

        one = key("one")
        sets = set_calls(sync_nodes, [4])
        try:
            freeze(sync_nodes, [4])
            lock = redlock.acquire(one, ttl=TTL)
            lock.release()
            assert redlock.in_flight()[4] >= 1, redlock.in_flight()
        finally:
            thaw(sync_nodes, [4])
        wait_set_ran(sync_nodes, sets)
        took = wait_gone(sync_nodes, one)
        print(f"sync, one frozen: key gone {took:.3f} s after the SET ran")
    finally:
        sync_nodes.heal()
        redlock.close()
    # Closed later: still nothing left.
    assert present(sync_nodes, three) == []
    assert present(sync_nodes, one) == []


def test_sync_close_after_thaw_leaves_nothing(sync_nodes: Nodes) -> None:
    """The same failed acquisition, thawed, then closed at once instead of waiting:
    the close lets what is owed go out, and every key is gone within the bound."""
    redlock = Redlock(sync_nodes.clients())
    resource = key("close")
    try:
        warm(redlock)
        sets = set_calls(sync_nodes, [2, 3, 4])
        try:
            freeze(sync_nodes, [2, 3, 4])
            with pytest.raises(NodesFailedError):
                redlock.acquire(resource, ttl=TTL)
        finally:
            thaw(sync_nodes, [2, 3, 4])
        redlock.close()
        wait_set_ran(sync_nodes, sets)
        took = wait_gone(sync_nodes, resource)
        print(f"sync, thawed then closed: keys gone {took:.3f} s after the close")
    finally:
        sync_nodes.heal()
        redlock.close()


# ---- redis.asyncio ----------------------------------------------------------------


async def warm_async(redlock: AsyncRedlock) -> None:
    """As :func:`warm`."""
    async with redlock.lock(key("warm"), ttl=TTL):
        pass
    await redlock.flush()


async def await_gone(nodes: Nodes, key: str) -> float:
    # The plain connections block: off the event loop, which must keep running the
    # Redlock's tasks meanwhile (the caller only awaits, it makes no call).
    return await asyncio.to_thread(wait_gone, nodes, key)


def test_async_owed_releases_reach_thawed_nodes_without_a_call(async_nodes: Nodes) -> None:
    three = key("three")
    one = key("one")

    async def main() -> None:
        redlock = AsyncRedlock([redis.asyncio.Redis(port=port) for port in async_nodes.ports])
        try:
            await warm_async(redlock)
            sets = set_calls(async_nodes, [2, 3, 4])
            try:
                freeze(async_nodes, [2, 3, 4])
                with pytest.raises(NodesFailedError):
                    await redlock.acquire(three, ttl=TTL)
                in_flight = redlock.in_flight()
                assert all(in_flight[i] >= 1 for i in (2, 3, 4)), in_flight
            finally:
                thaw(async_nodes, [2, 3, 4])
            await asyncio.to_thread(wait_set_ran, async_nodes, sets)
            took = await await_gone(async_nodes, three)
            print(f"asyncio, three frozen: keys gone {took:.3f} s after the SET ran")

            sets = set_calls(async_nodes, [4])
            try:
                freeze(async_nodes, [4])
                lock = await redlock.acquire(one, ttl=TTL)
                await lock.release()
                assert redlock.in_flight()[4] >= 1, redlock.in_flight()
            finally:
                thaw(async_nodes, [4])
            await asyncio.to_thread(wait_set_ran, async_nodes, sets)
            took = await await_gone(async_nodes, one)
            print(f"asyncio, one frozen: key gone {took:.3f} s after the SET ran")
        finally:
            async_nodes.heal()
            await redlock.aclose()

    asyncio.run(main())
    assert present(async_nodes, three) == []
    assert present(async_nodes, one) == []


def test_async_close_after_thaw_leaves_nothing(async_nodes: Nodes) -> None:
    resource = key("close")

    async def main() -> None:
        redlock = AsyncRedlock([redis.asyncio.Redis(port=port) for port in async_nodes.ports])
        try:
            await warm_async(redlock)
            sets = set_calls(async_nodes, [2, 3, 4])
            try:
                freeze(async_nodes, [2, 3, 4])
                with pytest.raises(NodesFailedError):
                    await redlock.acquire(resource, ttl=TTL)
            finally:
                thaw(async_nodes, [2, 3, 4])
            await redlock.aclose()
            await asyncio.to_thread(wait_set_ran, async_nodes, sets)
            took = await await_gone(async_nodes, resource)
            print(f"asyncio, thawed then closed: keys gone {took:.3f} s after the close")
        finally:
            async_nodes.heal()
            await redlock.aclose()

    asyncio.run(main())
