"""Interoperability with redis-py's own single-instance lock (redis.lock.Lock) on one
node, using the same key.

Compatible, and checked here:
- a lock held through this package (one resource, no key prefix) excludes redis-py's
  Lock on the same name, and redis-py's Lock excludes ours: both are
  `SET name token NX PX ttl`;
- neither one's release deletes the other's key (both compare the token first);
- tokens travel both ways: redis-py's Lock can extend and release a lock of ours given
  our token, and ours can release one of redis-py's given its token (uuid1 hex is
  printable ASCII), because both store the bare token under the bare name.

Not compatible, by design (also checked, so the difference is stated, not assumed):
- with `key_prefix` our key is `prefix + name`, so the two no longer meet;
- redis-py's Lock without a timeout sets no expiry; ours still refuses it, but such a
  key never expires.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from redis.exceptions import LockNotOwnedError

from redlock_core import LockHeldError, Redlock

from .conftest import Nodes


@pytest.fixture
def client(single_node: Nodes) -> redis.Redis:
    return redis.Redis(port=single_node.ports[0])


@pytest.fixture
def redlock(single_node: Nodes) -> Iterator[Redlock]:
    with Redlock(single_node.clients(), attempts=1, node_timeout=0.5) as redlock:
        yield redlock


def test_ours_excludes_redis_py_lock(redlock: Redlock, client: redis.Redis, resource: str) -> None:
    with redlock.lock(resource) as lock:
        theirs = client.lock(resource, timeout=5)
        assert theirs.acquire(blocking=False) is False
        assert client.get(resource) == lock.token.encode()
    assert theirs.acquire(blocking=False) is True
    theirs.release()


def test_redis_py_lock_excludes_ours(redlock: Redlock, client: redis.Redis, resource: str) -> None:
    theirs = client.lock(resource, timeout=5)
    assert theirs.acquire(blocking=False)
    with pytest.raises(LockHeldError) as raised:
        redlock.acquire(resource)
    assert [node.status for node in raised.value.nodes] == ["conflict"]
    theirs.release()
    with redlock.lock(resource):
        pass


def test_neither_release_deletes_the_others_key(
    redlock: Redlock, client: redis.Redis, resource: str
) -> None:
    theirs = client.lock(resource, timeout=5)
    assert theirs.acquire(blocking=False)
    token = client.get(resource)
    assert redlock.from_token(resource, "not-their-token").release().released == 0
    assert client.get(resource) == token
    theirs.release()

    with redlock.lock(resource) as ours:
        intruder = client.lock(resource, timeout=5)
        intruder.local.token = b"not-our-token"
        with pytest.raises(LockNotOwnedError):
            intruder.release()
        assert client.get(resource) == ours.token.encode()


def test_tokens_travel_both_ways(redlock: Redlock, client: redis.Redis, resource: str) -> None:
    ours = redlock.acquire(resource, ttl=2)
    theirs = client.lock(resource, timeout=2)
    theirs.local.token = ours.token.encode()
    assert theirs.extend(10, replace_ttl=True)
    assert client.pttl(resource) > 9000
    theirs.release()
    assert client.get(resource) is None

    other = client.lock(resource, timeout=5)
    assert other.acquire(blocking=False)
    their_token = client.get(resource)
    assert their_token is not None
    rebuilt = redlock.from_token(resource, their_token.decode())
    rebuilt.extend(ttl=7)
    assert 6000 < client.pttl(resource) <= 7000
    assert rebuilt.release().released == 1
    assert client.get(resource) is None


def test_a_key_prefix_separates_the_two(
    single_node: Nodes, client: redis.Redis, resource: str
) -> None:
    with Redlock(single_node.clients(), key_prefix="locks:", node_timeout=0.5) as prefixed:
        with prefixed.lock(resource) as lock:
            assert client.get(f"locks:{resource}") == lock.token.encode()
            theirs = client.lock(resource, timeout=5)
            assert theirs.acquire(blocking=False) is True  # not excluded: other key
            theirs.release()


def test_a_redis_py_lock_without_timeout_still_excludes_ours(
    redlock: Redlock, client: redis.Redis, resource: str
) -> None:
    theirs = client.lock(resource)  # no timeout: no expiry on the key
    assert theirs.acquire(blocking=False)
    assert client.pttl(resource) == -1
    with pytest.raises(LockHeldError):
        redlock.acquire(resource)
    theirs.release()
