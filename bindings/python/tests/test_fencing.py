"""Fencing tokens on five real nodes: tokens that only grow, the Redis check at the
resource (redlock_core.fenced_set), the SQL pattern on SQLite (Python's standard
library), and a holder paused with SIGSTOP past its lease whose late write is refused."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
import redis.asyncio

from redlock_core import (
    AsyncRedlock,
    FencedResult,
    FencedWriteError,
    Redlock,
    UsageError,
    core,
    fenced_set,
    fenced_set_async,
)

from .conftest import Nodes


def test_fenced_acquisitions_carry_tokens_that_only_grow(nodes: Nodes, resource: str) -> None:
    with Redlock(nodes.clients(), fencing=True) as redlock:
        tokens = []
        for _ in range(3):
            with redlock.lock(resource) as lock:
                assert lock.fencing_token is not None
                tokens.append(lock.fencing_token)
        assert tokens == sorted(tokens) and len(set(tokens)) == 3
        # Per lock: fencing off for this one, and the fence key is on every node.
        with redlock.lock(resource, fencing=False) as lock:
            assert lock.fencing_token is None
        # The last token was written back to at least a quorum before it was handed out.
        fences = [int(v or 0) for v in nodes.values(f"{{{resource}}}:fence")]
        assert sum(fence >= tokens[-1] for fence in fences) >= 3, fences
    with Redlock(nodes.clients()) as redlock:
        with redlock.lock(resource) as lock:
            assert lock.fencing_token is None
        with redlock.lock(resource, fencing=True) as lock:
            assert lock.fencing_token is not None and lock.fencing_token > tokens[-1]
        assert redlock.from_token(resource, "t" * 40).fencing_token is None


def test_the_readme_example(nodes: Nodes) -> None:
    clients = nodes.clients()
    # <readme>
    redlock = Redlock(clients, fencing=True)
    with redlock.lock("orders:42", blocking_timeout=5) as lock:
        # The item lives on any Redis server; here, on the first node.
        result = fenced_set(clients[0], "orders:42:state", "paid", lock.fencing_token)
        if not result.accepted:  # a newer holder wrote first: this one is stale
            print("refused: the item has seen token", result.seen)
    redlock.close()
    # </readme>
    assert result.accepted and result.token == lock.fencing_token


def test_asyncio_fenced_acquisitions(nodes: Nodes, resource: str) -> None:
    async def run() -> list[int | None]:
        clients = [redis.asyncio.Redis(port=port) for port in nodes.ports]
        async with AsyncRedlock(clients, fencing=True) as redlock:
            tokens = []
            for fencing in (None, False, True):
                async with redlock.lock(resource, fencing=fencing) as lock:
                    tokens.append(lock.fencing_token)
            return tokens

    first, off, last = asyncio.run(run())
    assert first is not None and off is None and last is not None and last > first


def test_fenced_set_accepts_newer_tokens_and_refuses_stale_ones(
    nodes: Nodes, resource: str
) -> None:
    item = f"{resource}:item"
    with redis.Redis(port=nodes.ports[0]) as client:
        assert fenced_set(client, item, "v5", 5) == FencedResult(True, 5)
        assert client.get(item) == b"v5"
        stale = fenced_set(client, item, "v3", 3)
        assert not stale.accepted and stale.seen == 5
        equal = fenced_set(client, item, "again", 5)  # the same token twice is stale too
        assert not equal.accepted and equal.seen == 5
        assert client.get(item) == b"v5"
        # No script cached: EVALSHA is answered NOSCRIPT and the write goes again as EVAL.
        client.script_flush()
        noscript = int(client.info("errorstats").get("errorstat_NOSCRIPT", {}).get("count", 0))
        assert fenced_set(client, item, "v9", 9).accepted
        after = int(client.info("errorstats")["errorstat_NOSCRIPT"]["count"])
        assert after == noscript + 1
        assert client.get(item) == b"v9"
        with core.FencedSet(item, "", 1) as write:
            assert client.script_exists(write.args()[1]) == [True]
        # Bad tokens are refused before anything is sent.
        for bad in (0, 2**53, -1):
            with pytest.raises(UsageError) as raised:
                fenced_set(client, item, "x", bad)
            assert raised.value.code == "invalid_fencing_token"
        with pytest.raises(TypeError, match="fencing=True"):
            fenced_set(client, item, "x", None)  # type: ignore[arg-type]
        with pytest.raises(UsageError):
            fenced_set(client, "", "x", 10)
        assert client.get(item) == b"v9"
    with redis.Redis(port=nodes.ports[0], decode_responses=True) as text_client:
        # decode_responses changes nothing: the check reads integers.
        assert fenced_set(text_client, f"{item}:2", "v", 1).accepted


def test_fenced_set_reports_errors_and_unreachable_servers(nodes: Nodes, resource: str) -> None:
    with redis.Redis(port=nodes.ports[0]) as client:
        # A guard key of the wrong type: the server's error, not a verdict.
        client.hset(f"{{{resource}}}:fence:accepted", "f", "v")
        with pytest.raises(FencedWriteError, match="WRONGTYPE"):
            fenced_set(client, resource, "v", 1)
    with redis.Redis(port=1, socket_connect_timeout=1) as closed:
        with pytest.raises(FencedWriteError, match="connection failed"):
            fenced_set(closed, resource, "v", 1)


def test_fenced_set_async(nodes: Nodes, resource: str) -> None:
    async def run() -> tuple[FencedResult, FencedResult, FencedResult]:
        async with redis.asyncio.Redis(port=nodes.ports[1]) as client:
            first = await fenced_set_async(client, resource, "a", 7)
            stale = await fenced_set_async(client, resource, "b", 6)
            await client.script_flush()
            after_flush = await fenced_set_async(client, resource, "c", 8)
            with pytest.raises(UsageError):
                await fenced_set_async(client, resource, "d", 0)
            return first, stale, after_flush

    first, stale, after_flush = asyncio.run(run())
    assert first.accepted and not stale.accepted and stale.seen == 7 and after_flush.accepted


# <sql-pattern>
def fenced_update(db: sqlite3.Connection, item_id: int, value: str, token: int) -> bool:
    """Writes under a fencing token; False when a newer holder already wrote."""
    cursor = db.execute(
        "UPDATE items SET value = :value, fence = :token WHERE id = :id AND fence < :token",
        {"value": value, "token": token, "id": item_id},
    )
    db.commit()
    return cursor.rowcount == 1


# </sql-pattern>


def test_the_sql_pattern_refuses_a_stale_holder_on_sqlite(nodes: Nodes, resource: str) -> None:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, value TEXT, fence INTEGER)")
    db.execute("INSERT INTO items VALUES (1, 'initial', 0)")
    db.commit()
    with Redlock(nodes.clients(), fencing=True, ttl=0.3) as redlock:
        first = redlock.acquire(resource)
        time.sleep(0.35)  # the first holder's lease runs out while it is "paused"
        assert not first.is_valid
        with redlock.lock(resource) as second:
            assert first.fencing_token is not None and second.fencing_token is not None
            assert second.fencing_token > first.fencing_token
            assert fenced_update(db, 1, "second", second.fencing_token)
            # The first holder wakes up and writes late: zero rows updated.
            assert not fenced_update(db, 1, "first, late", first.fencing_token)
            # A retry with the same token changes nothing either.
            assert not fenced_update(db, 1, "second again", second.fencing_token)
        first.release()
    assert db.execute("SELECT value, fence FROM items WHERE id = 1").fetchone() == (
        "second",
        second.fencing_token,
    )


HOLDER = """
import json, sys
import redis
from redlock_core import Redlock, fenced_set
ports = json.loads(sys.argv[1])
redlock = Redlock([redis.Redis(port=p) for p in ports], fencing=True, ttl=1)
lock = redlock.acquire(sys.argv[2])
print(json.dumps({"token": lock.fencing_token}), flush=True)
sys.stdin.readline()  # about to write: this is where the process is paused
result = fenced_set(redis.Redis(port=ports[0]), sys.argv[3], "from the paused holder",
                    lock.fencing_token)
print(json.dumps({"accepted": result.accepted, "seen": result.seen, "valid": lock.is_valid}),
      flush=True)
lock.release()
redlock.close()
"""


def test_a_holder_paused_past_its_lease_has_its_late_write_refused(
    nodes: Nodes, resource: str, tmp_path: Path
) -> None:
    item = f"{resource}:item"
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    holder = subprocess.Popen(
        [sys.executable, str(script), json.dumps(nodes.ports), resource, item],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    assert holder.stdin is not None and holder.stdout is not None
    try:
        first = json.loads(holder.stdout.readline())["token"]
        os.kill(holder.pid, signal.SIGSTOP)  # a GC pause, a stopped VM
        holder.stdin.write("go\n")
        holder.stdin.flush()
        time.sleep(1.1)  # past its one-second lease
        with Redlock(nodes.clients(), fencing=True) as redlock:
            with redlock.lock(resource, blocking_timeout=2) as second:
                assert second.fencing_token is not None and second.fencing_token > first
                with redis.Redis(port=nodes.ports[0]) as client:
                    assert fenced_set(client, item, "from the second holder", second.fencing_token)
                os.kill(holder.pid, signal.SIGCONT)
                late = json.loads(holder.stdout.readline())
                assert late == {"accepted": False, "seen": second.fencing_token, "valid": False}
                with redis.Redis(port=nodes.ports[0]) as client:
                    assert client.get(item) == b"from the second holder"
        assert holder.wait(timeout=10) == 0
    finally:
        if holder.poll() is None:
            os.kill(holder.pid, signal.SIGCONT)
            holder.kill()
            holder.wait()
