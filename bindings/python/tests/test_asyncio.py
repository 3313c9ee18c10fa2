"""The asyncio driver against five real local Redis nodes."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import redis
import redis.asyncio

from redlock_core import AsyncRedlock, LockHeldError, LockLostError, UsedAfterCloseError

from .conftest import Nodes
from .test_sync import run_workers

T = TypeVar("T")


def run(main: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(main())  # type: ignore[arg-type]


def make(nodes: Nodes, **settings: Any) -> AsyncRedlock:
    return AsyncRedlock([redis.asyncio.Redis(port=port) for port in nodes.ports], **settings)


def test_acquire_extend_release(nodes: Nodes, resource: str) -> None:
    async def main() -> None:
        async with make(nodes, ttl=2) as redlock:
            async with redlock.lock(resource) as lock:
                assert lock.attempts == 1 and 1.5 < lock.check() <= 2.0
                assert nodes.values(resource).count(lock.token.encode()) >= 3
                before = lock.valid_until
                await asyncio.sleep(0.1)
                await lock.extend(ttl=4)
                assert lock.extensions == 1 and lock.valid_until > before + 1.5
            assert lock.released
            assert lock._released is not None and lock._released.released >= 3

    run(main)
    nodes.settle(resource, [None] * 5)


def test_a_held_lock_excludes_others(nodes: Nodes, resource: str) -> None:
    async def main() -> None:
        settings = dict(attempts=2, retry_delay=0.01, retry_jitter=0, node_timeout=0.5)
        async with make(nodes, **settings) as redlock:
            holder = await redlock.acquire(resource)
            with pytest.raises(LockHeldError) as raised:
                await redlock.acquire(resource)
            assert raised.value.attempts == 2
            assert [n.status for n in raised.value.nodes].count("conflict") >= 3
            nodes.settle(resource, [holder.token.encode()] * 5)
            await holder.release()

    run(main)
    nodes.settle(resource, [None] * 5)


def test_release_never_deletes_another_token(nodes: Nodes, resource: str) -> None:
    async def main() -> None:
        async with make(nodes, node_timeout=0.1) as redlock:
            first = await redlock.acquire(resource, ttl=0.3)
            await asyncio.sleep(0.4)
            second = await redlock.acquire(resource)
            nodes.settle(resource, [second.token.encode()] * 5)
            result = await first.release()
            assert result.released == 0
            with pytest.raises(LockLostError):
                await first.extend()
            await asyncio.sleep(0.1)
            assert nodes.values(resource) == [second.token.encode()] * 5
            await second.release()

    run(main)
    nodes.settle(resource, [None] * 5)


def test_auto_extension_keeps_the_lock_and_losing_it_is_loud(nodes: Nodes, resource: str) -> None:
    async def main() -> None:
        async with make(nodes) as redlock:
            kept = await redlock.acquire(f"{resource}:kept", ttl=0.3, auto_extend=True)
            await asyncio.sleep(0.9)
            assert kept.check() > 0 and kept.extensions >= 2
            await kept.release()

            lost: list[LockLostError] = []
            signalled = asyncio.Event()

            async def on_lost(error: LockLostError) -> None:  # a coroutine callback
                lost.append(error)
                signalled.set()

            with pytest.raises(LockLostError) as at_exit:
                async with redlock.lock(
                    resource, ttl=0.5, auto_extend=True, on_lost=on_lost
                ) as lock:
                    for port in nodes.ports:
                        redis.Redis(port=port).set(resource, "intruder", px=10_000)
                    await asyncio.wait_for(signalled.wait(), 2.0)
                    assert lock.lost
                    with pytest.raises(LockLostError) as checked:
                        lock.check()
                    assert checked.value is lost[0] and checked.value.reason == "conflict"
            assert at_exit.value is lost[0]

    run(main)
    assert nodes.values(resource) == [b"intruder"] * 5
    nodes.settle(f"{resource}:kept", [None] * 5)


def test_a_block_that_outlives_its_lock_raises_on_exit(nodes: Nodes, resource: str) -> None:
    async def main() -> None:
        async with make(nodes) as redlock:
            with pytest.raises(LockLostError, match="expired"):
                async with redlock.lock(resource, ttl=0.1):
                    await asyncio.sleep(0.15)

    run(main)


def test_tasks_exclude_each_other(nodes: Nodes, resource: str) -> None:
    holders = 0
    overlaps = 0
    count = 0

    async def main() -> None:
        settings = dict(attempts=10_000, retry_delay=0.004, retry_jitter=0.003)
        async with make(nodes, **settings) as redlock:

            async def work(seed: int) -> None:
                nonlocal holders, overlaps, count
                pause = random.Random(seed)
                for _ in range(10):
                    async with redlock.lock(resource, ttl=5):
                        holders += 1
                        overlaps += holders > 1
                        value = count
                        await asyncio.sleep(0.002)  # others run meanwhile
                        count = value + 1
                        holders -= 1
                    await asyncio.sleep(pause.uniform(0, 0.004))

            await asyncio.gather(*(work(seed) for seed in range(5)))

    run(main)
    assert overlaps == 0 and count == 50
    nodes.settle(resource, [None] * 5)


def test_processes_exclude_each_other(nodes: Nodes, resource: str, tmp_path: Path) -> None:
    # Three processes, each with two asyncio tasks contending.
    run_workers(nodes, resource, tmp_path, ["--asyncio", "--tasks", "2"])


def test_cancelling_an_acquisition_leaves_no_key(fault_nodes: Nodes, resource: str) -> None:
    # Two nodes hold the key for someone else and node 4 is frozen: the attempt has
    # written its token on nodes 2 and 3 and waits for node 4 when it is cancelled.
    for port in fault_nodes.ports[:2]:
        redis.Redis(port=port).set(resource, "someone", px=10_000)
    fault_nodes.pause(4)

    async def main() -> None:
        async with make(fault_nodes, ttl=10, node_timeout=1.0, attempts=1) as redlock:
            task = asyncio.ensure_future(redlock.acquire(resource))
            await asyncio.sleep(0.3)
            assert not task.done()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    run(main)
    fault_nodes.settle(resource, [b"someone", b"someone", None, None, None])


def test_bad_arguments(nodes: Nodes) -> None:
    with pytest.raises(TypeError, match=r"redis\.asyncio\.Redis"):
        AsyncRedlock(nodes.clients())  # type: ignore[arg-type]

    async def main() -> None:
        async with make(nodes) as redlock:
            with pytest.raises(TypeError):
                await redlock.acquire(None)  # type: ignore[arg-type]
            with pytest.raises(ValueError, match="negative"):
                await redlock.acquire("x", ttl=-1)
        with pytest.raises(UsedAfterCloseError, match="closed"):
            await redlock.acquire("x")

    run(main)


def test_timing_does_not_depend_on_client_timeouts(fault_nodes: Nodes, resource: str) -> None:
    """With one node frozen and clients left at redis-py's defaults (no socket timeout,
    default retries), every acquire + release still returns at the core's pace."""
    fault_nodes.pause(2)

    async def main() -> list[float]:
        async with make(fault_nodes) as redlock:
            times = []

            async def cycles(count: int, name: str) -> None:
                for i in range(count):
                    started = time.monotonic()
                    async with redlock.lock(f"{resource}:{name}:{i}") as lock:
                        assert lock.nodes[2].status in ("pending", "timeout", "error")
                    times.append(time.monotonic() - started)

            await cycles(30, "a")
            await asyncio.sleep(0.1)  # the first command to node 2 is now overdue
            waiting = redlock.in_flight()[2]
            await cycles(30, "b")
            # Nothing more queues behind the frozen node once it is overdue.
            assert redlock.in_flight()[2] == waiting
            return times

    times = run(main)
    assert max(times) < 0.5, f"slowest acquire+release {max(times):.3f} s"
