"""Shared fixtures: real local Redis nodes started and stopped by the project's script
(scripts/redis-nodes.sh) on base ports 7300-7390, and helpers to read them."""

from __future__ import annotations

import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

REPO = Path(__file__).resolve().parents[3]
NODES_SCRIPT = REPO / "scripts" / "redis-nodes.sh"


class Nodes:
    """A set of local Redis nodes on ``base_port``.. (scripts/redis-nodes.sh)."""

    def __init__(self, base_port: int, count: int) -> None:
        self.base_port = base_port
        self.count = count
        self.ports = [base_port + i for i in range(count)]
        self.paused: set[int] = set()
        self.killed: set[int] = set()

    def _script(self, *args: str) -> str:
        result = subprocess.run(
            ["bash", str(NODES_SCRIPT), *args, "--base-port", str(self.base_port)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if result.returncode != 0:
            raise RuntimeError(f"redis-nodes.sh {' '.join(args)} failed: {result.stderr}")
        return result.stdout

    def start(self) -> None:
        self._script("start", "--nodes", str(self.count))

    def stop(self) -> None:
        self._script("stop")

    def pause(self, index: int) -> None:
        self._script("pause", str(index))
        self.paused.add(index)

    def resume(self, index: int) -> None:
        self._script("resume", str(index))
        self.paused.discard(index)

    def kill(self, index: int) -> None:
        self._script("kill", str(index))
        self.killed.add(index)

    def restart(self, index: int) -> None:
        self._script("restart", str(index))
        self.killed.discard(index)

    def heal(self) -> None:
        """Resumes paused nodes and restarts killed ones."""
        for index in sorted(self.paused):
            self.resume(index)
        for index in sorted(self.killed):
            self.restart(index)

    def clients(self, **kwargs: object) -> list[redis.Redis]:
        return [redis.Redis(port=port, **kwargs) for port in self.ports]  # type: ignore[arg-type]

    def urls(self) -> list[str]:
        return [f"redis://127.0.0.1:{port}" for port in self.ports]

    def values(self, key: str | bytes) -> list[bytes | None]:
        """The key's value on every live node (None: absent, or the node is down)."""
        out: list[bytes | None] = []
        for index, port in enumerate(self.ports):
            if index in self.paused or index in self.killed:
                out.append(None)
                continue
            with redis.Redis(port=port, socket_timeout=2) as client:
                out.append(client.get(key))
        return out

    def settle(self, key: str | bytes, expected: list[bytes | None], timeout: float = 2.0) -> None:
        """Waits until the key's values are ``expected``: commands the core no longer
        waits for (after a decision at a quorum) are still on their way to the others."""
        deadline = time.monotonic() + timeout
        while True:
            values = self.values(key)
            if values == expected or time.monotonic() > deadline:
                assert values == expected
                return
            time.sleep(0.01)

    def flush(self) -> None:
        for index, port in enumerate(self.ports):
            if index not in self.paused and index not in self.killed:
                with redis.Redis(port=port, socket_timeout=2) as client:
                    client.flushall()


@pytest.fixture(scope="session")
def nodes() -> Iterator[Nodes]:
    """Five healthy nodes for the whole session (base port 7300). Tests must leave
    them healthy; they use their own resource names."""
    set_ = Nodes(7300, 5)
    set_.start()
    try:
        yield set_
    finally:
        set_.stop()


@pytest.fixture(scope="session")
def _fault_set() -> Iterator[Nodes]:
    set_ = Nodes(7320, 5)
    set_.start()
    try:
        yield set_
    finally:
        set_.stop()


@pytest.fixture
def fault_nodes(_fault_set: Nodes) -> Iterator[Nodes]:
    """Five nodes (base port 7320) a test may pause and kill; healed and emptied after
    each test, whatever happened."""
    try:
        yield _fault_set
    finally:
        _fault_set.heal()
        _fault_set.flush()


@pytest.fixture(scope="session")
def single_node() -> Iterator[Nodes]:
    """One node (base port 7340), for interoperability with redis-py's Lock."""
    set_ = Nodes(7340, 1)
    set_.start()
    try:
        yield set_
    finally:
        set_.stop()


@pytest.fixture
def resource() -> str:
    """A resource name no other test uses."""
    return f"test:{uuid.uuid4().hex[:12]}"


def long_lived_threads(redlock: Any) -> list[str]:
    """The names of a sync Redlock's threads that live as long as it does (not its
    short-lived connection attempts')."""
    prefix = f"redlock-{redlock.serial}-"
    return [
        thread.name
        for thread in threading.enumerate()
        if thread.name.startswith(prefix) and not thread.name.endswith("-connect")
    ]
