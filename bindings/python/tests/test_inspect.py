"""``locked()`` and ``owned()`` against real local Redis nodes: the core decides at the
quorum who holds a lock (docs/inspection.md); the drivers only ask and report."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
import redis
import redis.asyncio

from redlock_core import AsyncRedlock, LockHeldError, NodesFailedError, Redlock

from .conftest import Nodes


@pytest.fixture
def redlock(nodes: Nodes) -> Iterator[Redlock]:
    with Redlock(nodes.clients(), ttl=10) as redlock:
        yield redlock


def write_by_hand(nodes: Nodes, key: str, value: str, indexes: list[int]) -> None:
    for index in indexes:
        with redis.Redis(port=nodes.ports[index]) as client:
            client.set(key, value, px=10_000)


def test_a_lock_we_hold_is_locked_and_owned(redlock: Redlock, resource: str) -> None:
    assert not redlock.locked(resource)
    lock = redlock.acquire(resource)
    assert redlock.locked(resource)
    assert lock.owned()
    lock.release()
    assert not redlock.locked(resource)
    assert not lock.owned()


def test_a_lock_held_by_another_client_is_locked_but_not_ours(
    redlock: Redlock, nodes: Nodes, resource: str
) -> None:
    with Redlock(nodes.clients(), ttl=10) as other:
        theirs = other.acquire(resource)
        try:
            assert redlock.locked(resource)
            with pytest.raises(LockHeldError):
                redlock.acquire(resource, blocking_timeout=0)
            # A lock of ours on the same name, with another token.
            ours = redlock.from_token(resource, redlock._client.generate_token())
            assert not ours.owned()
            assert theirs.owned()
        finally:
            theirs.release()
    assert not redlock.locked(resource)


def test_our_lock_whose_lease_ran_out_is_not_owned_even_with_its_keys(
    nodes: Nodes, resource: str
) -> None:
    # A drift of 100 ms: the keys outlive the validity by about that much.
    with Redlock(nodes.clients(), ttl=1, drift_fixed=0.1) as redlock:
        lock = redlock.acquire(resource)
        assert lock.owned()
        time.sleep(max(0.0, lock.valid_until - time.monotonic()) + 0.005)
        # Still held by our token on the nodes, but not ours to count on any more.
        assert redlock.locked(resource)
        assert not lock.owned()
        lock.release()


def test_leftovers_on_fewer_than_a_quorum_are_free(
    redlock: Redlock, nodes: Nodes, resource: str
) -> None:
    write_by_hand(nodes, resource, "left-by-a-failed-attempt", [0, 3])
    assert not redlock.locked(resource)
    # The same token on a third node makes a quorum: held.
    write_by_hand(nodes, resource, "left-by-a-failed-attempt", [4])
    assert redlock.locked(resource)
    nodes.flush()


def test_different_tokens_on_every_node_are_free(
    redlock: Redlock, nodes: Nodes, resource: str
) -> None:
    for index in range(5):
        write_by_hand(nodes, resource, f"token-{index}", [index])
    assert not redlock.locked(resource)
    nodes.flush()


def test_several_resources_are_held_only_when_one_token_holds_every_key(
    redlock: Redlock, nodes: Nodes, resource: str
) -> None:
    names = [f"{resource}:a", f"{resource}:b"]
    lock = redlock.acquire(names)
    assert redlock.locked(names)
    assert lock.owned()
    assert redlock.locked(names[0])
    lock.release()
    write_by_hand(nodes, names[0], "t", [0, 1, 2])
    write_by_hand(nodes, names[1], "u", [0, 1, 2])
    assert not redlock.locked(names)
    assert redlock.locked(names[0])
    nodes.flush()


def test_one_node_down_still_decides(fault_nodes: Nodes, resource: str) -> None:
    with Redlock(fault_nodes.clients(), ttl=10) as redlock:
        lock = redlock.acquire(resource)
        fault_nodes.kill(0)
        assert redlock.locked(resource)
        assert lock.owned()
        lock.release()
        assert not redlock.locked(resource)


def test_too_many_nodes_down_cannot_say(fault_nodes: Nodes, resource: str) -> None:
    with Redlock(fault_nodes.clients(), ttl=10) as redlock:
        lock = redlock.acquire(resource)
        for index in (0, 1, 2):
            fault_nodes.kill(index)
        with pytest.raises(NodesFailedError, match="could not tell") as raised:
            redlock.locked(resource)
        assert raised.value.code == "nodes_failed"
        assert sum(node.status in ("error", "timeout") for node in raised.value.nodes) >= 3
        assert {node.cause for node in raised.value.nodes if node.cause} <= {
            "refused",
            "connection",
        }
        with pytest.raises(NodesFailedError):
            lock.owned()
        lock.release()


def test_inspection_never_changes_a_key(redlock: Redlock, nodes: Nodes, resource: str) -> None:
    lock = redlock.acquire(resource)
    nodes.settle(resource, [lock.token.encode()] * 5)
    for _ in range(3):
        assert redlock.locked(resource)
    nodes.settle(resource, [lock.token.encode()] * 5)
    lock.release()
    assert not redlock.locked(resource)
    assert nodes.values(resource) == [None] * 5


def test_asyncio_locked_and_owned(nodes: Nodes, resource: str) -> None:
    async def main() -> None:
        clients = [redis.asyncio.Redis(port=port) for port in nodes.ports]
        async with AsyncRedlock(clients, ttl=10) as redlock:
            assert not await redlock.locked(resource)
            lock = await redlock.acquire(resource)
            assert await redlock.locked(resource)
            assert await lock.owned()
            async with AsyncRedlock(
                [redis.asyncio.Redis(port=port) for port in nodes.ports], ttl=10
            ) as other:
                assert await other.locked(resource)
                stranger = other.from_token(resource, lock.token[::-1])
                assert not await stranger.owned()
            await lock.release()
            assert not await redlock.locked(resource)
            assert not await lock.owned()
        for client in clients:
            await client.aclose()

    asyncio.run(main())


def test_asyncio_too_many_nodes_down_cannot_say(fault_nodes: Nodes, resource: str) -> None:
    for index in (2, 3, 4):
        fault_nodes.kill(index)

    async def main() -> None:
        clients = [redis.asyncio.Redis(port=port) for port in fault_nodes.ports]
        async with AsyncRedlock(clients, ttl=10) as redlock:
            with pytest.raises(NodesFailedError, match="could not tell"):
                await redlock.locked(resource)
        for client in clients:
            await client.aclose()

    asyncio.run(main())


def test_readme_locked_and_owned(nodes: Nodes, capsys: pytest.CaptureFixture[str]) -> None:
    clients = nodes.clients()
    redlock = Redlock(clients)
    lock = redlock.acquire("reports:daily")
    print(redlock.locked("reports:daily"))  # True: someone holds it, decided at the quorum
    print(lock.owned())  # True: our token on a quorum, and our lease still valid
    lock.release()
    print(redlock.locked("reports:daily"))  # False
    redlock.close()
    assert capsys.readouterr().out.split() == ["True", "True", "False"]
    assert lock.released
    assert nodes.values("reports:daily") == [None] * 5
