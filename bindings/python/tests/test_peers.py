"""Mutual exclusion with pottery's Redlock on the same five nodes.

pottery writes its lock under ``redlock:<key>`` (its ``_KEY_PREFIX``), so on "the same"
name the two do not meet: both hold it at once. With ``key_prefix="redlock:"`` ours
writes the very key pottery writes, and each refuses the other. docs/interop.md has the
table of every peer's key.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from pottery import Redlock as PotteryRedlock

from redlock_core import LockHeldError, Redlock

from .conftest import Nodes


@pytest.fixture
def ours(nodes: Nodes) -> Iterator[Redlock]:
    with Redlock(nodes.clients(), attempts=1, node_timeout=0.5) as redlock:
        yield redlock


@pytest.fixture
def prefixed(nodes: Nodes) -> Iterator[Redlock]:
    with Redlock(nodes.clients(), attempts=1, node_timeout=0.5, key_prefix="redlock:") as redlock:
        yield redlock


def pottery(nodes: Nodes, key: str) -> PotteryRedlock:
    return PotteryRedlock(key=key, masters=set(nodes.clients()), auto_release_time=5)


def test_pottery_writes_its_key_under_redlock_prefix(nodes: Nodes, resource: str) -> None:
    theirs = pottery(nodes, resource)
    assert theirs.acquire(blocking=False)
    try:
        assert all(value is not None for value in nodes.values(f"redlock:{resource}"))
        assert nodes.values(resource) == [None] * nodes.count
    finally:
        theirs.release()


def test_without_the_prefix_the_two_do_not_meet(ours: Redlock, nodes: Nodes, resource: str) -> None:
    with ours.lock(resource):
        theirs = pottery(nodes, resource)
        assert theirs.acquire(blocking=False), "pottery uses another key"
        theirs.release()


def test_with_the_prefix_ours_refuses_pottery_and_pottery_refuses_ours(
    prefixed: Redlock, nodes: Nodes, resource: str
) -> None:
    with prefixed.lock(resource) as lock:
        theirs = pottery(nodes, resource)
        assert not theirs.acquire(blocking=False)
        # Ours on a quorum (the SETs to a node still connecting may land after pottery's
        # attempt, and then find its key).
        assert nodes.values(f"redlock:{resource}").count(lock.token.encode()) >= 3

    theirs = pottery(nodes, resource)
    assert theirs.acquire(blocking=False)
    # Pottery decides at its quorum: its SET to the last node may land a moment later
    # on a loaded machine, so wait for it before reading what it holds.
    deadline = time.monotonic() + 5
    while None in nodes.values(f"redlock:{resource}") and time.monotonic() < deadline:
        time.sleep(0.01)
    held = nodes.values(f"redlock:{resource}")
    with pytest.raises(LockHeldError):
        prefixed.acquire(resource)
    # Our release of a token we do not hold deletes nothing of pottery's.
    assert prefixed.from_token(resource, "f" * 40).release().released == 0
    assert nodes.values(f"redlock:{resource}") == held
    theirs.release()
    assert nodes.values(f"redlock:{resource}") == [None] * nodes.count
