"""The synchronous driver against five real local Redis nodes."""

from __future__ import annotations

import gc
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from redlock_core import (
    LockHeldError,
    LockLostError,
    Redlock,
    UsedAfterCloseError,
)

from .conftest import Nodes, long_lived_threads

WORKER = Path(__file__).resolve().parents[1] / "examples" / "worker.py"


@pytest.fixture
def redlock(nodes: Nodes) -> Iterator[Redlock]:
    with Redlock(nodes.clients(), ttl=10) as redlock:
        yield redlock


def test_acquire_writes_the_token_on_every_node_and_release_deletes_it(
    redlock: Redlock, nodes: Nodes, resource: str
) -> None:
    lock = redlock.acquire(resource)
    assert lock.is_valid and 9.0 < lock.validity <= 10.0
    assert abs(lock.valid_until - (time.monotonic() + lock.validity)) < 0.05
    assert lock.attempts == 1 and lock.extensions == 0 and lock.ttl == 10.0
    nodes.settle(resource, [lock.token.encode()] * 5)  # commands after the quorum land too
    assert len(lock.token) == 40  # 160 random bits in hex
    result = lock.release()
    # The core decides a release once a quorum confirmed the key gone.
    assert result.released >= 3
    assert {node.status for node in result.nodes} <= {"success", "pending"}
    nodes.settle(resource, [None] * 5)
    assert lock.released and not lock.is_valid
    assert lock.release() is result  # idempotent


def test_with_block_acquires_and_releases(redlock: Redlock, nodes: Nodes, resource: str) -> None:
    with redlock.lock(resource, ttl=2) as lock:
        assert lock.ttl == 2.0
        assert lock.check() > 1.5
        assert nodes.values(resource).count(lock.token.encode()) >= 3
    assert lock.released
    nodes.settle(resource, [None] * 5)
    with pytest.raises(LockLostError, match="released"):
        lock.check()


def test_a_held_lock_excludes_others_with_per_node_detail(nodes: Nodes, resource: str) -> None:
    settings = dict(attempts=2, retry_delay=0.01, retry_jitter=0, node_timeout=0.5)
    with Redlock(nodes.clients(), **settings) as redlock:  # type: ignore[arg-type]
        holder = redlock.acquire(resource)
        with pytest.raises(LockHeldError) as raised:
            redlock.acquire(resource)
        error = raised.value
        assert error.code == "lock_held" and error.reason == "conflict"
        assert error.attempts == 2 and error.resources == (resource,)
        statuses = [node.status for node in error.nodes]
        assert statuses.count("conflict") >= 3
        assert {node.label for node in error.nodes} == set(redlock.nodes)
        assert "held by someone else" in str(error)
        # The loser cleaned up: only the holder's token is anywhere.
        nodes.settle(resource, [holder.token.encode()] * 5)
        holder.release()
        nodes.settle(resource, [None] * 5)


def test_extend_renews_the_lease_on_every_node(
    redlock: Redlock, nodes: Nodes, resource: str
) -> None:
    with redlock.lock(resource, ttl=1) as lock:
        before = lock.valid_until
        time.sleep(0.2)
        lock.extend(ttl=3)
        assert lock.extensions == 1 and lock.ttl == 3.0
        assert lock.valid_until > before + 1.5
        for port in nodes.ports:
            assert redis.Redis(port=port).pttl(resource) > 2500
        lock.extend()
        assert lock.extensions == 2


def test_several_resources_in_one_lock(redlock: Redlock, nodes: Nodes, resource: str) -> None:
    names = [f"{resource}:a", f"{resource}:b", f"{resource}:c".encode()]
    with redlock.lock(names) as lock:
        assert lock.resources == tuple(names)
        for name in names:
            assert nodes.values(name).count(lock.token.encode()) >= 3
        with pytest.raises(LockHeldError):
            redlock.acquire(f"{resource}:b")
        lock.extend()
    for name in names:
        nodes.settle(name, [None] * 5)


def test_release_never_deletes_another_token(nodes: Nodes, resource: str) -> None:
    with Redlock(nodes.clients(), node_timeout=0.1) as redlock:
        first = redlock.acquire(resource, ttl=0.3)
        time.sleep(0.4)  # first's lease ran out; its keys expired
        second = redlock.acquire(resource)
        nodes.settle(resource, [second.token.encode()] * 5)
        result = first.release()
        assert result.released == 0
        statuses = [node.status for node in result.nodes]
        assert statuses.count("conflict") >= 3 and "success" not in statuses
        time.sleep(0.1)  # every release command has landed by now
        assert nodes.values(resource) == [second.token.encode()] * 5
        with pytest.raises(LockLostError):
            first.extend()  # never re-creates or steals the key
        assert nodes.values(resource) == [second.token.encode()] * 5
        second.release()


def test_a_block_that_outlives_its_lock_raises_on_exit(redlock: Redlock, resource: str) -> None:
    with pytest.raises(LockLostError, match="expired before the block ended"):
        with redlock.lock(resource, ttl=0.1):
            time.sleep(0.15)


def test_an_exception_in_the_block_is_not_masked(
    redlock: Redlock, nodes: Nodes, resource: str
) -> None:
    with pytest.raises(KeyError):
        with redlock.lock(resource, ttl=0.1):
            time.sleep(0.15)
            raise KeyError("mine")
    nodes.settle(resource, [None] * 5)


def test_auto_extension_keeps_the_lock_past_its_ttl(
    redlock: Redlock, nodes: Nodes, resource: str
) -> None:
    lost: list[LockLostError] = []
    with redlock.lock(resource, ttl=0.3, auto_extend=True, on_lost=lost.append) as lock:
        time.sleep(1.0)
        assert lock.check() > 0
        assert lock.extensions >= 3
        assert nodes.values(resource).count(lock.token.encode()) >= 3
    assert not lost and not lock.lost
    nodes.settle(resource, [None] * 5)


def test_losing_an_auto_extended_lock_is_loud(
    redlock: Redlock, nodes: Nodes, resource: str
) -> None:
    lost: list[LockLostError] = []
    signalled = threading.Event()

    def on_lost(error: LockLostError) -> None:
        lost.append(error)
        signalled.set()

    with pytest.raises(LockLostError) as at_exit:
        with redlock.lock(resource, ttl=0.5, auto_extend=True, on_lost=on_lost) as lock:
            # Someone else takes the keys (an operator, a clock jump, a failover).
            for port in nodes.ports:
                redis.Redis(port=port).set(resource, "intruder", px=10_000)
            assert signalled.wait(2.0), "on_lost was not called"
            assert lock.lost and not lock.is_valid
            with pytest.raises(LockLostError) as checked:
                lock.check()
            assert checked.value is lost[0]
            assert checked.value.reason == "conflict"
            assert [node.status for node in checked.value.nodes].count("conflict") >= 3
    assert at_exit.value is lost[0]
    assert len(lost) == 1
    # Releasing the lost lock left the intruder's keys alone.
    assert nodes.values(resource) == [b"intruder"] * 5


def test_a_callback_may_release_the_lost_lock(
    redlock: Redlock, nodes: Nodes, resource: str
) -> None:
    released = threading.Event()
    lock = redlock.acquire(
        resource,
        ttl=0.3,
        auto_extend=True,
        on_lost=lambda error: (lock.release(), released.set()),
    )
    for port in nodes.ports:
        redis.Redis(port=port).set(resource, "intruder", px=10_000)
    assert released.wait(2.0)
    assert lock.released and lock.lost


def test_auto_extension_stops_at_max_extensions_and_signals(nodes: Nodes, resource: str) -> None:
    lost: list[LockLostError] = []
    with Redlock(nodes.clients(), ttl=0.3, max_extensions=1) as redlock:
        lock = redlock.acquire(resource, auto_extend=True, on_lost=lost.append)
        time.sleep(0.9)
        assert lock.extensions == 1
        assert lock.lost and lost and lost[0].reason == "extension_limit"
        lock.release()


def test_threads_exclude_each_other(nodes: Nodes, resource: str) -> None:
    holders = 0
    overlaps = 0
    count = 0
    guard = threading.Lock()
    settings = dict(attempts=10_000, retry_delay=0.004, retry_jitter=0.003)
    with Redlock(nodes.clients(), **settings) as redlock:  # type: ignore[arg-type]

        def work(seed: int) -> None:
            nonlocal holders, overlaps, count
            pause = random.Random(seed)
            for _ in range(10):
                with redlock.lock(resource, ttl=5):
                    with guard:
                        holders += 1
                        overlaps += holders > 1
                    value = count
                    time.sleep(0.002)
                    count = value + 1
                    with guard:
                        holders -= 1
                time.sleep(pause.uniform(0, 0.004))  # work outside the lock

        threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert overlaps == 0 and count == 40
        # One long-lived reader for every node, whatever the contention.
        assert all(redlock.workers_alive())
        threads = long_lived_threads(redlock)
        assert threads == [f"redlock-{redlock.serial}-reader"], threads
    nodes.settle(resource, [None] * 5)


def run_workers(nodes: Nodes, resource: str, tmp_path: Path, extra: list[str]) -> None:
    counter = tmp_path / "counter"
    counter.write_text("0\n")
    intervals = tmp_path / "intervals"
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                str(WORKER),
                "--nodes",
                ",".join(nodes.urls()),
                "--resource",
                resource,
                "--counter",
                str(counter),
                "--rounds",
                "10",
                "--sleep",
                "0.002",
                "--intervals",
                str(intervals),
                *extra,
            ]
        )
        for _ in range(3)
    ]
    for process in processes:
        assert process.wait(timeout=120) == 0
    sections = sorted(
        tuple(map(float, line.split())) for line in intervals.read_text().splitlines()
    )
    assert len(sections) == int(counter.read_text()) == 3 * 10 * (2 if extra else 1)
    for (_, end), (start, _) in zip(sections, sections[1:]):
        assert start >= end, "two holders overlapped"
    nodes.settle(resource, [None] * 5)


def test_processes_exclude_each_other(nodes: Nodes, resource: str, tmp_path: Path) -> None:
    run_workers(nodes, resource, tmp_path, [])


def test_bad_arguments_raise_clear_errors(nodes: Nodes) -> None:
    with pytest.raises(ValueError, match="at least one client"):
        Redlock([])
    with pytest.raises(TypeError, match=r"clients\[0\] must be a redis.Redis"):
        Redlock(["redis://localhost"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="must be a sequence"):
        Redlock(redis.Redis())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="whole number of milliseconds"):
        Redlock(nodes.clients(), ttl=0.0001)
    with Redlock(nodes.clients()) as redlock:
        with pytest.raises(TypeError, match="resources must be a str, bytes"):
            redlock.acquire(12)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            redlock.acquire("")  # the core: empty_resource
        with pytest.raises(TypeError, match="ttl"):
            redlock.acquire("x", ttl="5")  # type: ignore[arg-type]
    with pytest.raises(UsedAfterCloseError, match="closed"):
        redlock.acquire("x")


def test_a_lock_rebuilt_from_its_token_can_be_extended_and_released(
    redlock: Redlock, nodes: Nodes, resource: str
) -> None:
    original = redlock.acquire(resource, ttl=2)
    with Redlock.from_urls(",".join(nodes.urls())) as elsewhere:
        rebuilt = elsewhere.from_token(resource, original.token)
        assert rebuilt.validity == 0  # unknown until extended
        rebuilt.extend(ttl=5)
        assert rebuilt.validity > 4
        assert rebuilt.release().released >= 3
    nodes.settle(resource, [None] * 5)


def test_scripts_missing_from_the_nodes_are_loaded_by_the_core(
    redlock: Redlock, nodes: Nodes, resource: str
) -> None:
    for port in nodes.ports:
        redis.Redis(port=port).script_flush()
    with redlock.lock([f"{resource}:1", f"{resource}:2"]) as lock:
        lock.extend()  # EVALSHA answered NOSCRIPT: the core falls back to EVAL
        assert lock.extensions == 1
    assert lock.release().released >= 3
    nodes.settle(f"{resource}:1", [None] * 5)


def test_a_dropped_auto_extended_lock_expires(
    redlock: Redlock, nodes: Nodes, resource: str
) -> None:
    lock = redlock.acquire(resource, ttl=0.3, auto_extend=True)
    keeper = lock._keeper
    assert keeper is not None and keeper.is_alive()
    del lock
    gc.collect()
    keeper.join(1.0)
    assert not keeper.is_alive()  # the thread held it weakly, and ended
    nodes.settle(resource, [None] * 5)  # its keys expired with their TTL
