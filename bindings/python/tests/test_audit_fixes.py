"""The five audit fixes of the core (commits e7765d0 and b849529) on five real nodes
(base port 7870), through both drivers' public API: a shortening extension ends the
lease sooner and the keep-alive follows it, reserved auxiliary key names are refused
before anything is sent, a cancelled or interrupted wait leaves the queue at once, a
queue entry lives at most 5 s whatever the retry delay, and the release of a lock on
several resources names each resource's own first waiter. Each fails on the core
before the fixes."""

from __future__ import annotations

import _thread
import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import redis.asyncio

from redlock_core import AsyncRedlock, InvalidArgumentError, Redlock

from .conftest import Nodes


@pytest.fixture(scope="module")
def audit_nodes() -> Iterator[Nodes]:
    set_ = Nodes(7870, 5)
    set_.start()
    try:
        yield set_
    finally:
        set_.stop()


def wait_for(condition: Any, timeout: float = 8.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


async def until(condition: Any, timeout: float = 8.0) -> bool:
    """``wait_for`` on an event loop: the nodes are read on a thread, so that the loop
    (and the driver's I/O on it) is never blocked by the test."""
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(condition):
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.02)
    return True


def pttls(nodes: Nodes, key: str) -> list[int]:
    out = []
    for port in nodes.ports:
        with redis.Redis(port=port, socket_timeout=2) as client:
            out.append(int(client.pttl(key)))
    return out


def queues(nodes: Nodes, key: str) -> list[list[bytes]]:
    out = []
    for port in nodes.ports:
        with redis.Redis(port=port, socket_timeout=2) as client:
            out.append(list(client.zrange(key, 0, -1)))
    return out


def queued_on_a_quorum(nodes: Nodes, resource: str) -> bool:
    """Queued on 3 nodes or more: a node whose SET of the holder's acquisition was still on
    its way (the acquisition decided at the quorum) may have granted the waiter's first
    attempt instead of queuing it."""
    return sum(1 for q in queues(nodes, "{" + resource + "}:waiters") if q) >= 3


def left_the_queue(nodes: Nodes, resource: str) -> bool:
    order = queues(nodes, "{" + resource + "}:waiters")
    expiry = queues(nodes, "{" + resource + "}:waiters:expiry")
    return all(not q for q in order) and all(not q for q in expiry)


def key_exists_nowhere(nodes: Nodes, key: str) -> bool:
    for port in nodes.ports:
        with redis.Redis(port=port, socket_timeout=2) as client:
            if client.exists(key):
                return False
    return True


def sync_redlock(nodes: Nodes, **settings: Any) -> Redlock:
    return Redlock(nodes.clients(), **settings)


def async_redlock(nodes: Nodes, **settings: Any) -> AsyncRedlock:
    return AsyncRedlock([redis.asyncio.Redis(port=port) for port in nodes.ports], **settings)


# ---- 1. A shortening extension ---------------------------------------------------------


def check_shortened(nodes: Nodes, lock: Any, key: str, started: float) -> None:
    """Right after extending a 10 s lock to 1 s at ``started``. The quorum decided: the
    last nodes' PEXPIRE may still be on its way. A key may be gone already if this
    thread was kept waiting a second on a loaded machine; none has more than 1 s left."""
    assert 0.5 < lock.validity <= 1.0, lock.validity
    assert lock.valid_until <= started + 1.0
    assert lock.is_valid
    shortened = lambda: all(pttl == -2 or 0 < pttl <= 1000 for pttl in pttls(nodes, key))  # noqa: E731
    assert wait_for(shortened, 1.0), pttls(nodes, key)


def test_sync_extending_a_10s_lock_to_1s_leaves_about_1s(audit_nodes: Nodes) -> None:
    key = "audit:py:shorten"
    with sync_redlock(audit_nodes) as redlock:
        lock = redlock.acquire(key, ttl=10)
        assert lock.validity > 9
        started = time.monotonic()
        lock.extend(1)
        check_shortened(audit_nodes, lock, key, started)
        # Not valid 1.2 s after the extension started (read from the clock).
        time.sleep(max(0.0, started + 1.2 - time.monotonic()))
        assert not lock.is_valid
        assert lock.validity == 0
        assert wait_for(lambda: key_exists_nowhere(audit_nodes, key), 0.5)
        lock.release()


def test_asyncio_extending_a_10s_lock_to_1s_leaves_about_1s(audit_nodes: Nodes) -> None:
    key = "audit:py:shorten:async"

    async def run() -> None:
        async with async_redlock(audit_nodes) as redlock:
            lock = await redlock.acquire(key, ttl=10)
            assert lock.validity > 9
            started = time.monotonic()
            await lock.extend(1)
            await asyncio.to_thread(check_shortened, audit_nodes, lock, key, started)
            await asyncio.sleep(max(0.0, started + 1.2 - time.monotonic()))
            assert not lock.is_valid
            assert lock.validity == 0
            await lock.release()

    asyncio.run(asyncio.wait_for(run(), 20))


def check_kept_short(nodes: Nodes, lock: Any, key: str, started: float) -> None:
    """For 2.5 s after extending to 1 s: held, and every key's PTTL at most 1 s (the
    keep-alive extends by 1 s on the new lease's schedule; before the fix it kept the
    10 s lease's schedule and the keys expired)."""
    assert not lock.lost, lock.lost_error
    assert lock.is_valid, time.monotonic() - started
    assert lock.validity <= 1.0, lock.validity
    values = pttls(nodes, key)
    assert all(pttl <= 1000 for pttl in values), values
    assert sum(1 for pttl in values if pttl > 0) >= 3, (values, time.monotonic() - started)


def test_sync_keep_alive_follows_a_shortening_extension(audit_nodes: Nodes) -> None:
    key = "audit:py:shorten:kept"
    with sync_redlock(audit_nodes) as redlock:
        lock = redlock.acquire(key, ttl=10, auto_extend=True)
        started = time.monotonic()
        lock.extend(1)
        while time.monotonic() - started < 2.5:
            check_kept_short(audit_nodes, lock, key, started)
            time.sleep(0.05)
        assert lock.extensions >= 2, lock.extensions
        lock.release()


def test_asyncio_keep_alive_follows_a_shortening_extension(audit_nodes: Nodes) -> None:
    key = "audit:py:shorten:kept:async"

    async def run() -> None:
        async with async_redlock(audit_nodes) as redlock:
            lock = await redlock.acquire(key, ttl=10, auto_extend=True)
            started = time.monotonic()
            await lock.extend(1)
            while time.monotonic() - started < 2.5:
                await asyncio.to_thread(check_kept_short, audit_nodes, lock, key, started)
                await asyncio.sleep(0.05)
            assert lock.extensions >= 2, lock.extensions
            await lock.release()

    asyncio.run(asyncio.wait_for(run(), 20))


# ---- 2. Reserved names -------------------------------------------------------------------

RESERVED = ["{r}:waiters:turn", "{r}:fence", "lock:{order}:fence", "{r}:waiters"]


def test_sync_reserved_names_are_refused_and_nothing_is_sent(audit_nodes: Nodes) -> None:
    with sync_redlock(audit_nodes) as redlock:
        with sync_redlock(audit_nodes, key_prefix="app:") as prefixed:
            for resource in RESERVED:
                for blocking_timeout in (None, 1):
                    with pytest.raises(InvalidArgumentError) as raised:
                        redlock.acquire(resource, ttl=5, blocking_timeout=blocking_timeout)
                    assert raised.value.code == "reserved_resource", raised.value
                    assert key_exists_nowhere(audit_nodes, resource), resource
            with pytest.raises(InvalidArgumentError) as raised:
                prefixed.acquire("{r}:fence", ttl=5)
            assert raised.value.code == "reserved_resource"
            assert key_exists_nowhere(audit_nodes, "app:{r}:fence")
            for resource in ["r:fence", "orders:fence"]:
                lock = redlock.acquire(resource, ttl=5)
                assert sum(1 for v in audit_nodes.values(resource) if v) >= 3
                lock.release()


def test_asyncio_reserved_names_are_refused_and_nothing_is_sent(audit_nodes: Nodes) -> None:
    async def run() -> None:
        async with async_redlock(audit_nodes) as redlock:
            async with async_redlock(audit_nodes, key_prefix="app:") as prefixed:
                for resource in RESERVED:
                    with pytest.raises(InvalidArgumentError) as raised:
                        await redlock.acquire(resource, ttl=5, blocking_timeout=1)
                    assert raised.value.code == "reserved_resource", raised.value
                    assert key_exists_nowhere(audit_nodes, resource), resource
                with pytest.raises(InvalidArgumentError) as raised:
                    await prefixed.acquire("{r}:fence", ttl=5)
                assert raised.value.code == "reserved_resource"
                assert key_exists_nowhere(audit_nodes, "app:{r}:fence")
                for resource in ["r:fence", "orders:fence"]:
                    lock = await redlock.acquire(resource, ttl=5)
                    await lock.release()

    asyncio.run(asyncio.wait_for(run(), 20))


def test_a_lock_on_the_turn_key_of_a_waited_resource_is_refused(audit_nodes: Nodes) -> None:
    """While a waiter of r is queued, a release of r would give it the turn with
    SET {r}:waiters:turn PX 50: a lock of that name is refused."""
    resource = "audit:py:r"
    with sync_redlock(audit_nodes) as holder_side:
        with sync_redlock(audit_nodes, retry_delay=3, retry_jitter=0) as waiter_side:
            holder = holder_side.acquire(resource, ttl=10)
            got: dict[str, Any] = {}
            waiter = threading.Thread(
                target=lambda: got.update(lock=waiter_side.acquire(resource, blocking_timeout=10))
            )
            waiter.start()
            assert wait_for(lambda: queued_on_a_quorum(audit_nodes, resource))
            with pytest.raises(InvalidArgumentError) as raised:
                holder_side.acquire("{" + resource + "}:waiters:turn", ttl=10)
            assert raised.value.code == "reserved_resource"
            holder.release()
            waiter.join(10)
            got["lock"].release()


# ---- 3. A cancelled or interrupted wait leaves the queue --------------------------------


def test_asyncio_a_cancelled_wait_leaves_the_queue(audit_nodes: Nodes) -> None:
    resource = "audit:py:abandon:async"

    async def run() -> None:
        async with async_redlock(audit_nodes) as holder_side:
            async with async_redlock(audit_nodes, retry_delay=4, retry_jitter=0) as waiter_side:
                holder = await holder_side.acquire(resource, ttl=30)
                waiter = asyncio.ensure_future(waiter_side.acquire(resource, blocking_timeout=20))
                assert await until(lambda: queued_on_a_quorum(audit_nodes, resource)), queues(
                    audit_nodes, "{" + resource + "}:waiters"
                )
                queued = time.monotonic()
                await asyncio.sleep(0.3)  # between attempts (the retry delay is 4 s)
                waiter.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await waiter
                # Its entry lives about 5 s: only the abandon's release explains this.
                assert await until(lambda: left_the_queue(audit_nodes, resource), 2.5), queues(
                    audit_nodes, "{" + resource + "}:waiters"
                )
                assert time.monotonic() - queued < 4.0
                assert holder.is_valid
                await holder.release()

    asyncio.run(asyncio.wait_for(run(), 20))


def test_sync_an_interrupted_wait_leaves_the_queue(audit_nodes: Nodes) -> None:
    resource = "audit:py:abandon:sync"
    with sync_redlock(audit_nodes) as holder_side:
        with sync_redlock(audit_nodes, retry_delay=4, retry_jitter=0) as waiter_side:
            holder = holder_side.acquire(resource, ttl=30)
            at: dict[str, float] = {}

            def interrupt() -> None:
                # Ctrl-C in the waiting thread (this one) once it is queued on every node,
                # while it waits between attempts.
                if wait_for(lambda: queued_on_a_quorum(audit_nodes, resource)):
                    at["queued"] = time.monotonic()
                    time.sleep(0.3)
                _thread.interrupt_main()

            interrupter = threading.Thread(target=interrupt)
            interrupter.start()
            with pytest.raises(KeyboardInterrupt):
                waiter_side.acquire(resource, blocking_timeout=20)
            interrupter.join()
            assert "queued" in at, "the waiter was not queued on every node"
            assert wait_for(lambda: left_the_queue(audit_nodes, resource), 2.5), queues(
                audit_nodes, "{" + resource + "}:waiters"
            )
            assert time.monotonic() - at["queued"] < 4.0
            assert holder.is_valid
            holder.release()


# ---- 4. A queue entry lives at most 5 s ---------------------------------------------------


def test_a_queue_entry_lives_at_most_5s_whatever_the_retry_delay(audit_nodes: Nodes) -> None:
    resource = "audit:py:lifetime"
    expiry = "{" + resource + "}:waiters:expiry"

    async def run() -> None:
        async with async_redlock(audit_nodes) as holder_side:
            async with async_redlock(audit_nodes, retry_delay=60, retry_jitter=0) as waiter_side:
                holder = await holder_side.acquire(resource, ttl=30)
                waiter = asyncio.ensure_future(waiter_side.acquire(resource, blocking_timeout=120))
                assert await until(lambda: queued_on_a_quorum(audit_nodes, resource))
                checked = 0
                for port in audit_nodes.ports:
                    with redis.Redis(port=port, socket_timeout=2) as client:
                        members = client.zrange(expiry, 0, 0)
                        if not members:
                            continue  # a node that granted the attempt, or never had it
                        checked += 1
                        score = client.zscore(expiry, members[0])
                        seconds, micros = client.time()
                        assert score is not None
                        left = score - (seconds * 1000 + micros // 1000)
                        assert 0 < left <= 5000, (port, left)
                assert checked >= 3, checked
                waiter.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await waiter
                await holder.release()

    asyncio.run(asyncio.wait_for(run(), 20))


# ---- 5. The release of {a, b} names b's own first waiter ------------------------------


def test_sync_releasing_a_and_b_wakes_the_waiter_of_b(audit_nodes: Nodes) -> None:
    with sync_redlock(audit_nodes) as holder_side:
        with sync_redlock(audit_nodes, retry_delay=5, retry_jitter=0) as a_side:
            with sync_redlock(audit_nodes, retry_delay=5, retry_jitter=0) as b_side:
                holder = holder_side.acquire(["a", "b"], ttl=30)
                got: dict[str, float] = {}

                def wait(side: Redlock, resource: str) -> None:
                    lock = side.acquire(resource, blocking_timeout=10)
                    got[resource] = time.monotonic()
                    lock.release()

                # A waiter of a, first in a's queue: before the fix the release named it for b too.
                waiters = [threading.Thread(target=wait, args=(a_side, "a"))]
                waiters[0].start()
                assert wait_for(lambda: queued_on_a_quorum(audit_nodes, "a")), queues(
                    audit_nodes, "{a}:waiters"
                )
                waiters.append(threading.Thread(target=wait, args=(b_side, "b")))
                waiters[1].start()
                assert wait_for(lambda: queued_on_a_quorum(audit_nodes, "b")), queues(
                    audit_nodes, "{b}:waiters"
                )
                time.sleep(0.3)  # the waiters' subscriptions settle
                released = time.monotonic()
                holder.release()
                for waiter in waiters:
                    waiter.join(12)
                # Both retry every 5 s: only a notice explains these.
                assert got["b"] - released < 2.5, got["b"] - released
                assert got["a"] - released < 2.5, got["a"] - released


def test_asyncio_releasing_a_and_b_wakes_the_waiter_of_b(audit_nodes: Nodes) -> None:
    async def run() -> None:
        async with async_redlock(audit_nodes) as holder_side:
            async with async_redlock(audit_nodes, retry_delay=5, retry_jitter=0) as a_side:
                async with async_redlock(audit_nodes, retry_delay=5, retry_jitter=0) as b_side:
                    holder = await holder_side.acquire(["a", "b"], ttl=30)

                    async def wait(side: AsyncRedlock, resource: str) -> float:
                        lock = await side.acquire(resource, blocking_timeout=10)
                        at = time.monotonic()
                        await lock.release()
                        return at

                    async def queued(resource: str) -> None:
                        assert await until(lambda: queued_on_a_quorum(audit_nodes, resource)), (
                            queues(audit_nodes, "{" + resource + "}:waiters")
                        )

                    waiting_a = asyncio.ensure_future(wait(a_side, "a"))
                    await queued("a")
                    waiting_b = asyncio.ensure_future(wait(b_side, "b"))
                    await queued("b")
                    await asyncio.sleep(0.3)
                    released = time.monotonic()
                    await holder.release()
                    at_b = await waiting_b
                    at_a = await waiting_a
                    assert at_b - released < 2.5, at_b - released
                    assert at_a - released < 2.5, at_a - released

    asyncio.run(asyncio.wait_for(run(), 30))
