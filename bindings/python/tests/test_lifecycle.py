"""The lock's whole life as the core decides it, on real nodes with redis-py's default
client settings: node links, keep-alive, cancellation, and error classes. Each test
names the defect it guards against."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterator

import pytest
import redis
import redis.asyncio

from redlock_core import (
    AsyncRedlock,
    ConfigError,
    Event,
    LockLostError,
    LockNotHeldError,
    NodesFailedError,
    Redlock,
    UsageError,
    UsedAfterCloseError,
)
from redlock_core import _ffi as ffi
from redlock_core.core import now_us

from .conftest import Nodes


def _threads() -> int:
    return sum(1 for thread in threading.enumerate() if thread.name.startswith("redlock-"))


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _eventually(check: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.05)
    assert check()  # type: ignore[operator]


def test_a_node_restarted_empty_does_not_lose_the_lock(fault_nodes: Nodes, resource: str) -> None:
    """Defect 1: one node restarted empty answers the extension "key missing"; with the
    other four extending, the lock is not lost (not even for one TTL)."""
    with Redlock(fault_nodes.clients(), ttl=0.6) as redlock:
        lock = redlock.acquire(resource, auto_extend=True)
        fault_nodes.restart(1)
        time.sleep(2.0)  # more than three TTLs
        assert not lock.lost, lock.lost_error
        assert lock.extensions >= 3
        assert lock.check() > 0
        lock.release()


def test_a_frozen_node_bounds_what_is_in_flight(fault_nodes: Nodes, resource: str) -> None:
    """Defect 2: a frozen node does not pile commands up: once a command is past its
    deadline the link writes nothing new to it, so what is out stays within the
    core's bound however many cycles run."""
    with Redlock(fault_nodes.clients()) as redlock:
        with redlock.lock(f"{resource}:warm"):
            pass
        fault_nodes.pause(3)
        seen = []
        for i in range(300):
            with redlock.lock(f"{resource}:{i}") as lock:
                assert lock.nodes[3].status != "success"
            if i % 50 == 49:
                seen.append(redlock.in_flight()[3])
        assert max(seen) <= ffi.LINK_MAX_IN_FLIGHT, seen
        assert seen[-1] <= seen[0], seen  # not growing with the cycles
        link = redlock._engine.nodes[3].link
        assert link.is_stalled(now_us())
        # Queued: only releases owed for SETs the node may still apply.
        assert link.queued <= seen[0], (link.queued, seen)


def test_a_redlock_per_use_with_a_frozen_node_leaks_nothing(
    fault_nodes: Nodes, resource: str
) -> None:
    """Defect 3: Redlocks made and closed per use while a node is frozen leave no
    thread and no file descriptor behind."""
    threads, fds = _threads(), _fds()
    fault_nodes.pause(4)
    for i in range(4):
        with Redlock(fault_nodes.clients()) as redlock:
            with redlock.lock(f"{resource}:{i}"):
                pass
    fault_nodes.resume(4)
    _eventually(lambda: _threads() <= threads)
    _eventually(lambda: _fds() <= fds + 2)


def test_use_after_close_raises_used_after_close(nodes: Nodes, resource: str) -> None:
    """Defect 4: use after close is an error of the hierarchy, not a RuntimeError."""
    redlock = Redlock(nodes.clients())
    lock = redlock.acquire(resource)
    lock.release()
    redlock.close()
    with pytest.raises(UsedAfterCloseError):
        redlock.acquire(resource)
    with pytest.raises(UsedAfterCloseError):
        redlock.from_token(resource, "token")
    config = redlock.config
    assert not isinstance(UsedAfterCloseError("x"), RuntimeError)
    assert config.nodes == 5

    async def run() -> None:
        async_redlock = AsyncRedlock([redis.asyncio.Redis(port=port) for port in nodes.ports])
        await async_redlock.aclose()
        with pytest.raises(UsedAfterCloseError):
            await async_redlock.acquire(resource)

    asyncio.run(run())


def test_extend_after_release_is_not_held(nodes: Nodes, resource: str) -> None:
    """Defect 5: extending a released lock says "not held", not "held by someone
    else": from the lock itself, and from the core for a lock rebuilt from its token."""
    with Redlock(nodes.clients()) as redlock:
        lock = redlock.acquire(resource)
        token = lock.token
        lock.release()
        with pytest.raises(LockNotHeldError):
            lock.extend()
        rebuilt = redlock.from_token(resource, token)
        with pytest.raises(LockNotHeldError) as raised:
            rebuilt.extend()
        assert raised.value.reason == "not_held"
        assert isinstance(raised.value, LockLostError)
        assert "someone else" not in str(raised.value)


def test_the_same_node_twice_is_refused(nodes: Nodes) -> None:
    """Defect 6: the same server given twice (by another name) is refused by the core."""
    port = nodes.ports[0]
    clients = [redis.Redis(port=port), redis.Redis(host="LOCALHOST", port=port)]
    clients += [redis.Redis(port=p) for p in nodes.ports[1:3]]
    with pytest.raises(ConfigError) as raised:
        Redlock(clients)
    assert raised.value.code == "duplicate_node"
    assert "0 and 1" in str(raised.value)


def test_errors_name_each_nodes_cause(fault_nodes: Nodes, resource: str) -> None:
    """Defect 7: a failure names why each node failed: refused, timeout."""
    fault_nodes.kill(0)
    fault_nodes.kill(1)
    fault_nodes.pause(2)
    with Redlock(fault_nodes.clients(), attempts=1) as redlock:
        with pytest.raises(NodesFailedError) as raised:
            redlock.acquire(resource)
    causes = [node.cause for node in raised.value.nodes]
    assert causes[0] == causes[1] == "refused", raised.value
    assert causes[2] in ("timeout", "stalled"), raised.value
    assert causes[3] is None and causes[4] is None
    assert "refused" in str(raised.value)


@pytest.fixture(scope="module")
def password_node() -> Iterator[Nodes]:
    """Three nodes with a password (base port 7310)."""
    set_ = Nodes(7310, 3)
    set_._script("start", "--nodes", "3", "--requirepass", "secret")
    try:
        yield set_
    finally:
        set_.stop()


def test_a_wrong_password_is_an_auth_failure(password_node: Nodes, resource: str) -> None:
    """Defect 7: authentication failures are named as such."""
    clients = [redis.Redis(port=port, password="wrong") for port in password_node.ports]
    with Redlock(clients, attempts=1) as redlock:
        with pytest.raises(NodesFailedError) as raised:
            redlock.acquire(resource)
    causes = [node.cause for node in raised.value.nodes]
    assert causes.count("auth") >= 2 and set(causes) <= {"auth", None}, raised.value
    good = [redis.Redis(port=port, password="secret") for port in password_node.ports]
    with Redlock(good) as redlock, redlock.lock(resource) as lock:
        assert lock.check() > 0


def test_a_refused_ttl_names_the_rule_not_a_function(nodes: Nodes, resource: str) -> None:
    """Defect 8: a TTL the configuration does not allow is refused with the rule."""
    with Redlock(nodes.clients(), ttl=10) as redlock:
        with pytest.raises(UsageError) as raised:
            redlock.acquire(resource, ttl=0)
        message = str(raised.value)
        assert "redlock_" not in message and "check_ttl" not in message
        assert raised.value.code == "invalid_ttl"
        assert "TTL" in message


def test_cancelling_a_task_abandons_and_leaves_no_key(fault_nodes: Nodes, resource: str) -> None:
    """A cancelled acquisition's SETs are released through the links."""
    for port in fault_nodes.ports[:2]:
        redis.Redis(port=port).set(resource, "someone", px=10_000)
    fault_nodes.pause(4)

    async def run() -> None:
        clients = [redis.asyncio.Redis(port=port) for port in fault_nodes.ports]
        async with AsyncRedlock(clients, node_timeout=1.0, attempts=1) as redlock:
            task = asyncio.ensure_future(redlock.acquire(resource))
            await asyncio.sleep(0.2)  # two conflicts, two SETs; node 4 never answers
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        for client in clients:
            await client.aclose()

    asyncio.run(run())
    fault_nodes.resume(4)
    fault_nodes.settle(resource, [b"someone", b"someone", None, None, None])


class _SilentNode:
    """A TCP server that accepts connections and never answers: a connection to it never
    finishes its handshake, as one to an address that drops every packet. Records when
    each connection was accepted and when the client closed it."""

    def __init__(self) -> None:
        import socket

        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.connections: list[dict[str, float]] = []
        self._sockets: list[object] = []
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        import selectors

        selector = selectors.DefaultSelector()
        selector.register(self.server, selectors.EVENT_READ)
        while not self._stop:
            for key, _ in selector.select(0.05):
                if key.fileobj is self.server:
                    peer, _ = self.server.accept()
                    entry = {"opened": time.monotonic()}
                    self.connections.append(entry)
                    self._sockets.append(peer)
                    selector.register(peer, selectors.EVENT_READ, entry)
                else:
                    peer = key.fileobj
                    if not peer.recv(65536):  # type: ignore[union-attr]
                        key.data["closed"] = time.monotonic()
                        selector.unregister(peer)
                        peer.close()  # type: ignore[union-attr]
        selector.close()

    def close(self) -> None:
        self._stop = True
        self._thread.join(2)
        for peer in self._sockets:
            peer.close()  # type: ignore[attr-defined]
        self.server.close()


@pytest.mark.parametrize("driver", ["sync", "asyncio"])
def test_a_connection_that_never_opens_is_given_up_after_the_core_connect_timeout(
    driver: str,
) -> None:
    """A node that never finishes the handshake, through a client that bounds neither
    connecting nor reading (redis-py 8's own defaults are 5 s, and would apply): the
    node's link gives each connection up after the core's connect timeout
    (CONNECT_TIMEOUT_DEFAULT_MS, 2 s, as in every binding), not after minutes."""
    from redlock_core._handle import connect_timeout_default_ms

    silent = _SilentNode()
    try:
        if driver == "sync":
            client = redis.Redis(port=silent.port, socket_timeout=None, socket_connect_timeout=None)
            with Redlock([client], attempts=1) as redlock:
                with pytest.raises(NodesFailedError):
                    redlock.acquire("silent")
                _eventually(lambda: any("closed" in c for c in silent.connections), timeout=6)
        else:

            async def main() -> None:
                client = redis.asyncio.Redis(
                    port=silent.port, socket_timeout=None, socket_connect_timeout=None
                )
                async with AsyncRedlock([client], attempts=1) as r:
                    with pytest.raises(NodesFailedError):
                        await r.acquire("silent")
                    deadline = time.monotonic() + 6
                    while not any("closed" in c for c in silent.connections):
                        assert time.monotonic() < deadline, silent.connections
                        await asyncio.sleep(0.05)

            asyncio.run(main())
        first = next(c for c in silent.connections if "closed" in c)
        held = first["closed"] - first["opened"]
        limit = connect_timeout_default_ms() / 1000
        assert limit * 0.95 <= held < limit + 1.5, held
    finally:
        silent.close()


@pytest.mark.parametrize("driver", ["sync", "asyncio"])
def test_each_link_gets_its_clients_connect_timeout(driver: str) -> None:
    """Rule 4: a node's link gives a connection attempt the client's
    socket_connect_timeout (redis-py's default is its own 5 s), or the core's 2 s for a
    client that sets none; a subscriber connection the longest of them."""
    from redlock_core._handle import connect_timeout_default_ms

    module = redis if driver == "sync" else redis.asyncio
    redlock_class = Redlock if driver == "sync" else AsyncRedlock
    clients = [
        module.Redis(port=1, socket_connect_timeout=0.25),
        module.Redis(port=2),
        module.Redis(port=3, socket_connect_timeout=None),
        module.Redis.from_url("redis://127.0.0.1:4"),  # no timeout in its settings
        module.Redis(port=5, socket_connect_timeout=1.5),
        module.Redis(port=6, socket_connect_timeout=0.0004),  # rounded up to 1 ms
    ]
    redlock = redlock_class(clients)  # type: ignore[arg-type]
    try:
        timeouts = [node.link.connect_timeout_ms for node in redlock._engine.nodes]
        default = connect_timeout_default_ms()
        assert timeouts == [250, 5000, default, default, 1500, 1], timeouts
    finally:
        if driver == "sync":
            redlock.close()  # type: ignore[union-attr]
        else:
            asyncio.run(redlock.aclose())  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="socket_connect_timeout"):
        redlock_class([module.Redis(port=1, socket_connect_timeout=-1)])  # type: ignore[list-item]


@pytest.mark.parametrize("driver", ["sync", "asyncio"])
def test_a_connection_given_up_by_the_core_leaves_no_socket_open(driver: str) -> None:
    """A node that accepts and never answers, through a client whose connect timeout is
    0.3 s and whose handshake would wait 2 s (its socket_timeout unset: the core's
    default), the command allowed 1 s: the link gives the attempt up at 0.3 s (cause
    timeout, the core's text, which the command fails with),
    and the driver closes the socket then, not when redis-py's own bound ends it; no
    socket to the node is left open, and (sync) no thread opening one."""
    silent = _SilentNode()
    errors: list[NodesFailedError] = []
    failed_at: list[float] = []
    try:
        if driver == "sync":
            client = redis.Redis(port=silent.port, socket_timeout=None, socket_connect_timeout=0.3)
            with Redlock([client], attempts=1, node_timeout=1.0) as redlock:
                with pytest.raises(NodesFailedError) as raised:
                    redlock.acquire("silent")
                errors.append(raised.value)
                failed_at.append(time.monotonic())
                _eventually(lambda: any("closed" in c for c in silent.connections), timeout=3)
            _eventually(lambda: not [t for t in threading.enumerate() if "connect" in t.name])
        else:

            async def main() -> None:
                client = redis.asyncio.Redis(
                    port=silent.port, socket_timeout=None, socket_connect_timeout=0.3
                )
                async with AsyncRedlock([client], attempts=1, node_timeout=1.0) as r:
                    with pytest.raises(NodesFailedError) as raised:
                        await r.acquire("silent")
                    errors.append(raised.value)
                    failed_at.append(time.monotonic())
                    deadline = time.monotonic() + 3
                    while not any("closed" in c for c in silent.connections):
                        assert time.monotonic() < deadline, silent.connections
                        await asyncio.sleep(0.05)

            asyncio.run(main())
        (node,) = errors[0].nodes
        assert node.cause == "timeout", node
        assert "no connection within 300 ms; given up" in (node.error or ""), node
        # Closed as the core gave the attempt up (when the acquisition failed), not at
        # redis-py's 2 s. (The asyncio driver's first operation waits for the spare
        # connection first, up to the node timeout, before the link's attempt takes it.)
        first = min((c for c in silent.connections if "closed" in c), key=lambda c: c["closed"])
        assert abs(first["closed"] - failed_at[0]) < 0.8, (first, failed_at)
        assert first["closed"] - first["opened"] < 1.9, first
        # Every socket the Redlock opened to the node is closed (the node sees EOF).
        _eventually(lambda: all("closed" in c for c in silent.connections), timeout=3)
        assert silent.connections
    finally:
        silent.close()


@pytest.mark.parametrize("driver", ["sync", "asyncio"])
def test_a_subscriber_connection_given_up_by_the_core_leaves_no_socket_open(driver: str) -> None:
    """A waiter on a node that accepts and never answers, through a client whose
    connect timeout is 0.3 s and whose handshake would wait 2 s: the core's
    subscriptions give the subscriber connection up at 0.3 s (as the link gives up the
    command connection), and the driver closes its socket then; every connection the
    Redlock opened to the node is closed well before redis-py's own 2 s."""
    silent = _SilentNode()
    opened_subscriber: list[bool] = []
    try:
        if driver == "sync":
            client = redis.Redis(port=silent.port, socket_timeout=None, socket_connect_timeout=0.3)
            with Redlock([client]) as redlock:
                with pytest.raises(NodesFailedError):
                    redlock.acquire("silent", blocking_timeout=1.2)
                opened_subscriber.append(redlock._subscribers[0] is not None)
        else:

            async def main() -> None:
                client = redis.asyncio.Redis(
                    port=silent.port, socket_timeout=None, socket_connect_timeout=0.3
                )
                async with AsyncRedlock([client]) as r:
                    with pytest.raises(NodesFailedError):
                        await r.acquire("silent", blocking_timeout=1.2)
                    opened_subscriber.append(r._subscribers[0] is not None)

            asyncio.run(main())
        assert opened_subscriber == [True]  # the waiter listened: a subscriber was opened
        _eventually(lambda: all("closed" in c for c in silent.connections), timeout=3)
        held = [round(c["closed"] - c["opened"], 3) for c in silent.connections]
        # (Under 2 s with room for a loaded machine: redis-py's bound would be 2 s.)
        assert len(held) >= 2 and max(held) < 1.6, held
    finally:
        silent.close()


class _PollFailure(Exception):
    pass


def test_what_polling_raises_where_a_reply_is_read_reaches_the_caller(
    nodes: Nodes, resource: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader of a reply polls the operation it changed (the sync driver's reader
    thread, the asyncio driver's stream task). Whatever that raises is raised by the
    call waiting on the operation, which then abandons it (no key left behind); the
    reader goes on serving the next operations."""
    from redlock_core import _protocol

    def failing_poll(engine: _protocol.Engine, running: _protocol.Running) -> None:
        raise _PollFailure("polled where the reply was read")

    with Redlock(nodes.clients()) as redlock:
        with monkeypatch.context() as patch:
            patch.setattr(_protocol.Engine, "_poll", failing_poll)
            with pytest.raises(_PollFailure):
                redlock.acquire(resource)
        nodes.settle(resource, [None] * 5)
        assert redlock.workers_alive() == [True] * 5
        redlock.acquire(resource).release()

    async def run() -> None:
        clients = [redis.asyncio.Redis(port=port) for port in nodes.ports]
        async with AsyncRedlock(clients) as async_redlock:
            with monkeypatch.context() as patch:
                patch.setattr(_protocol.Engine, "_poll", failing_poll)
                with pytest.raises(_PollFailure):
                    await async_redlock.acquire(resource)
            nodes.settle(resource, [None] * 5)
            await (await async_redlock.acquire(resource)).release()
        for client in clients:
            await client.aclose()

    asyncio.run(run())
    nodes.settle(resource, [None] * 5)


class _Interrupt(BaseException):
    """What a signal handler raises in the waiting thread (as ``KeyboardInterrupt``)."""


def test_an_interrupt_after_the_lock_was_decided_leaves_no_key(nodes: Nodes, resource: str) -> None:
    """sync: the outcome was taken and the thread is interrupted before ``acquire``
    returns it (here by a hook hearing "acquired"; a signal can land there too): the
    caller never gets the lock, so the core is given it back and releases its keys."""
    interrupted: list[str] = []

    def interrupt_once(event: Event) -> None:
        if event.kind == "acquired" and not interrupted:
            interrupted.append(event.kind)
            raise _Interrupt

    with Redlock(nodes.clients(), on_event=interrupt_once) as redlock:
        with pytest.raises(_Interrupt):
            redlock.acquire(resource)
        assert interrupted == ["acquired"]
        nodes.settle(resource, [None] * 5)
        redlock.acquire(resource).release()


def test_a_wait_cancelled_as_its_lock_is_decided_leaves_no_key(nodes: Nodes, resource: str) -> None:
    """asyncio: the reader decides the acquisition ("acquired") and wakes the waiting
    task, which is cancelled before it resumes (a timeout, a task group): the caller
    never gets the lock, so its keys are released, not left until their TTL."""

    async def run() -> None:
        clients = [redis.asyncio.Redis(port=port) for port in nodes.ports]
        async with AsyncRedlock(clients) as redlock:
            await (await redlock.acquire(f"{resource}:warm")).release()
            engine = redlock._engine
            decided = engine.on_change
            acquiring: asyncio.Task[object] | None = None

            def cancel_once_acquired(running: object) -> None:
                decided(running)  # type: ignore[arg-type]
                outcome = getattr(running, "outcome", None)
                if acquiring is not None and outcome is not None and outcome.kind == "acquired":
                    acquiring.cancel()

            engine.on_change = cancel_once_acquired
            acquiring = asyncio.ensure_future(redlock.acquire(resource))
            with pytest.raises(asyncio.CancelledError):
                await acquiring
            engine.on_change = decided
            nodes.settle(resource, [None] * 5)
            await (await redlock.acquire(resource)).release()
        for client in clients:
            await client.aclose()

    asyncio.run(run())
