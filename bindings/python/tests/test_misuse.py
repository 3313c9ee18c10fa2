"""Bad arguments and use after close, both drivers (audit: every bad argument is an
``InvalidArgumentError`` naming the rule and the range; ``close()`` releases the locks
still held, and every later use raises ``UsedAfterCloseError``). Nodes on base ports
7370 and 7375."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import redis
import redis.asyncio

from redlock_core import (
    ArgumentTypeError,
    AsyncRedlock,
    InvalidArgumentError,
    LockHeldError,
    Redlock,
    RedlockError,
    UsedAfterCloseError,
)

from .conftest import Nodes

BAD_NUMBERS = [-1, -0.5, math.nan, math.inf, -math.inf, 1e300, timedelta(seconds=-1)]
DURATION_SETTINGS = ["ttl", "node_timeout", "retry_delay", "retry_jitter", "drift_fixed"]
DURATION_SETTINGS += ["min_validity"]


@pytest.fixture(scope="module")
def misuse_nodes() -> Iterator[Nodes]:
    """Five healthy nodes (base port 7370)."""
    set_ = Nodes(7370, 5)
    set_.start()
    try:
        yield set_
    finally:
        set_.stop()


@pytest.fixture
def killable_nodes() -> Iterator[Nodes]:
    """Five nodes (base port 7375) a test may kill; stopped after it."""
    set_ = Nodes(7375, 5)
    set_.start()
    try:
        yield set_
    finally:
        set_.stop()


def _assert_names_rule(error: BaseException, name: str) -> None:
    message = str(error)
    assert isinstance(error, InvalidArgumentError), repr(error)
    assert isinstance(error, RedlockError) and isinstance(error, ValueError)
    assert name in message, message
    assert " from " in message and " to " in message and "got" in message, message


@pytest.mark.parametrize("name", DURATION_SETTINGS)
@pytest.mark.parametrize("value", BAD_NUMBERS, ids=repr)
def test_a_bad_duration_setting_is_an_invalid_argument(
    misuse_nodes: Nodes, name: str, value: Any
) -> None:
    for redlock_class, clients in (
        (Redlock, misuse_nodes.clients()),
        (AsyncRedlock, [redis.asyncio.Redis(port=p) for p in misuse_nodes.ports]),
    ):
        with pytest.raises(InvalidArgumentError) as raised:
            redlock_class(clients, **{name: value})
        _assert_names_rule(raised.value, name)


@pytest.mark.parametrize("value", BAD_NUMBERS, ids=repr)
def test_bad_durations_of_a_call_are_invalid_arguments(misuse_nodes: Nodes, value: Any) -> None:
    resource = f"misuse:call:{abs(hash(repr(value)))}"
    with Redlock(misuse_nodes.clients()) as redlock:
        for keyword in ("ttl", "blocking_timeout"):
            with pytest.raises(InvalidArgumentError) as raised:
                redlock.acquire(resource, **{keyword: value})
            _assert_names_rule(raised.value, keyword)
            with pytest.raises(InvalidArgumentError):
                with redlock.lock(resource, **{keyword: value}):
                    pass
        lock = redlock.acquire(resource)
        with pytest.raises(InvalidArgumentError) as raised:
            lock.extend(value)
        _assert_names_rule(raised.value, "ttl")
        assert lock.check() > 0  # the refused call changed nothing
        lock.release()
    with pytest.raises(InvalidArgumentError) as raised:
        Redlock.from_sentinel("127.0.0.1:1", "mymaster", sentinel_timeout=value)
    _assert_names_rule(raised.value, "sentinel_timeout")

    async def run() -> None:
        clients = [redis.asyncio.Redis(port=p) for p in misuse_nodes.ports]
        async with AsyncRedlock(clients) as redlock:
            for keyword in ("ttl", "blocking_timeout"):
                with pytest.raises(InvalidArgumentError) as raised:
                    await redlock.acquire(resource, **{keyword: value})
                _assert_names_rule(raised.value, keyword)
            lock = await redlock.acquire(resource)
            with pytest.raises(InvalidArgumentError):
                await lock.extend(value)
            await lock.release()

    asyncio.run(run())


def test_the_ttl_message_gives_its_range(misuse_nodes: Nodes) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        Redlock(misuse_nodes.clients(), ttl=-1)
    message = str(raised.value)
    assert "ttl must be" in message and "from 0.001 to 1e+09" in message, message
    assert "got -1" in message and raised.value.code == "invalid_duration"


def test_wrong_types_are_invalid_arguments_and_type_errors(misuse_nodes: Nodes) -> None:
    for kwargs in ({"ttl": "10"}, {"retry_delay": b"1"}, {"attempts": 1.5}):
        with pytest.raises(ArgumentTypeError) as raised:
            Redlock(misuse_nodes.clients(), **kwargs)  # type: ignore[arg-type]
        assert isinstance(raised.value, InvalidArgumentError)
        assert isinstance(raised.value, TypeError)
    with Redlock(misuse_nodes.clients()) as redlock:
        with pytest.raises(ArgumentTypeError):
            redlock.acquire("misuse:type", ttl="5")  # type: ignore[arg-type]
        with pytest.raises(ArgumentTypeError):
            redlock.acquire(12)  # type: ignore[arg-type]
    for kwargs in ({"attempts": -1}, {"token_bytes": -3}, {"max_extensions": 2**40}):
        with pytest.raises(InvalidArgumentError) as raised:
            Redlock(misuse_nodes.clients(), **kwargs)  # type: ignore[arg-type]
        (name,) = kwargs
        _assert_names_rule(raised.value, name)
    with pytest.raises(InvalidArgumentError, match="at least one client"):
        Redlock([])


def test_a_huge_resource_name_is_not_copied_into_messages(misuse_nodes: Nodes) -> None:
    """A 1 MB name is quoted cut to about 64 bytes with "…" and its length."""
    for name in ("n" * 1_000_000, b"b" * 1_000_000):
        # A megabyte per node takes a while on a loaded machine: a node timeout of 1 s.
        holder = Redlock(misuse_nodes.clients(), node_timeout=1)
        other = Redlock(misuse_nodes.clients(), node_timeout=1, attempts=1)
        lock = holder.acquire(name)
        with pytest.raises(LockHeldError) as raised:
            other.acquire(name)
        message = str(raised.value)
        assert len(message) < 2000, len(message)
        assert "…" in message and "1000000" in message, message[:300]
        lock.release()
        other.close()
        holder.close()
        with pytest.raises(UsedAfterCloseError) as closed:
            lock.extend()
        assert len(str(closed.value)) < 1000


def _keys_gone(nodes: Nodes, *keys: str) -> None:
    for key in keys:
        nodes.settle(key, [None] * nodes.count)


def _misuse_sync(redlock: Redlock, lock: Any, resource: str) -> None:
    calls = [
        lock.extend,
        lock.release,
        lock.extend,
        lock.release,
        lock.owned,
        lock.check,
        lambda: redlock.acquire(resource),
        lambda: redlock.locked(resource),
        lambda: redlock.from_token(resource, lock.token),
    ]
    for call in calls:
        with pytest.raises(UsedAfterCloseError):
            call()


def test_close_releases_the_locks_held_then_every_use_raises(
    misuse_nodes: Nodes,
) -> None:
    redlock = Redlock(misuse_nodes.clients())
    plain = redlock.acquire("misuse:close:plain")
    kept = redlock.acquire(["misuse:close:a", "misuse:close:b"], auto_extend=True)
    done = redlock.acquire("misuse:close:done")
    done.release()
    detached = redlock.acquire("misuse:close:detached").detach()
    assert misuse_nodes.values("misuse:close:plain").count(plain.token.encode()) == 5
    redlock.close()
    # Gone from every node at once: close() waited for the releases.
    for key in ("misuse:close:plain", "misuse:close:a", "misuse:close:b"):
        assert misuse_nodes.values(key) == [None] * 5, key
    assert plain.released and kept.released and not plain.is_valid
    # A detached lock is left to its TTL (or to a release by its token).
    assert misuse_nodes.values("misuse:close:detached") == [detached.token.encode()] * 5
    assert not detached.released
    for port in misuse_nodes.ports:
        redis.Redis(port=port).delete("misuse:close:detached")
    for lock, resource in ((plain, "misuse:close:plain"), (kept, "misuse:close:a")):
        _misuse_sync(redlock, lock, resource)
        assert lock.released
    _misuse_sync(redlock, done, "misuse:close:done")
    with pytest.raises(UsedAfterCloseError):
        with redlock.lock("misuse:close:ctx"):
            pass
    redlock.close()  # idempotent


def test_close_releases_the_locks_held_asyncio(misuse_nodes: Nodes) -> None:
    async def run() -> None:
        clients = [redis.asyncio.Redis(port=p) for p in misuse_nodes.ports]
        redlock = AsyncRedlock(clients)
        plain = await redlock.acquire("misuse:aclose:plain")
        kept = await redlock.acquire("misuse:aclose:kept", auto_extend=True)
        await redlock.aclose()
        for key in ("misuse:aclose:plain", "misuse:aclose:kept"):
            assert misuse_nodes.values(key) == [None] * 5, key
        assert plain.released and kept.released
        for lock in (plain, kept):
            for call in (lock.extend, lock.release, lock.extend, lock.release, lock.owned):
                with pytest.raises(UsedAfterCloseError):
                    await call()
            with pytest.raises(UsedAfterCloseError):
                lock.check()
        with pytest.raises(UsedAfterCloseError):
            await redlock.acquire("misuse:aclose:plain")
        with pytest.raises(UsedAfterCloseError):
            await redlock.locked("misuse:aclose:plain")
        with pytest.raises(UsedAfterCloseError):
            async with redlock.lock("misuse:aclose:ctx"):
                pass
        await redlock.aclose()
        for client in clients:
            await client.aclose()

    asyncio.run(run())


def test_a_release_that_fails_never_marks_the_lock_released(killable_nodes: Nodes) -> None:
    """close() with a quorum of nodes down: the release is not confirmed, the lock is
    not marked released, and later calls still raise UsedAfterCloseError."""
    with Redlock(killable_nodes.clients()) as redlock:
        lock = redlock.acquire("misuse:unconfirmed")
        for index in (0, 1, 2):
            killable_nodes.kill(index)
        result = lock.release()
        assert not result.confirmed
        assert not lock.released  # may be released again
    assert not lock.released  # close() could not release it either
    for call in (lock.release, lock.extend, lock.release):
        with pytest.raises(UsedAfterCloseError):
            call()
    assert not lock.released
    # The two nodes still up had their key deleted by the releases.
    for port in killable_nodes.ports[3:]:
        assert redis.Redis(port=port).get("misuse:unconfirmed") is None
