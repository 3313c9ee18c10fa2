"""Notice subscriptions: the core's policy for the subscriber connections
(``redlock_subscriptions``) through its wrapper, the shared protocol doing what it
outputs (no I/O, on a virtual clock), and both drivers on real nodes: a refused
``SUBSCRIBE`` reopened at the core's pace, and the subscriber connection closed once
the last channel's linger ended."""

from __future__ import annotations

import asyncio
import ctypes
import threading
import time
from collections.abc import Iterator
from typing import Any, Callable, Optional

import pytest
import redis
import redis.asyncio

from redlock_core import (
    AsyncRedlock,
    ConfigError,
    LockHeldError,
    Redlock,
    UsageError,
    UsedAfterCloseError,
    _asyncio,
    _protocol,
    _sync,
    core,
)
from redlock_core import _ffi as ffi
from redlock_core._handle import notice_channel_linger_ms, subscriber_reopen_ms
from redlock_core._operation import Operation
from redlock_core._protocol import CLOSE, CONNECT, WRITE, Action, Engine, Subscriber, encode
from redlock_core.core import SubscriberOutput, Subscriptions

from .conftest import Nodes

OPEN = ffi.SUBSCRIBER_OUTPUT_OPEN
SUBSCRIBE = ffi.SUBSCRIBER_OUTPUT_SUBSCRIBE
UNSUBSCRIBE = ffi.SUBSCRIBER_OUTPUT_UNSUBSCRIBE
CLOSE_OUTPUT = ffi.SUBSCRIBER_OUTPUT_CLOSE

FIRST_US, MAX_US = (ms * 1000 for ms in subscriber_reopen_ms())
LINGER_US = notice_channel_linger_ms() * 1000


def outputs(subscriptions: Subscriptions) -> list[SubscriberOutput]:
    return list(iter(subscriptions.poll_output, None))


# ---- the wrapper ------------------------------------------------------------------


def test_the_wrapper_drives_the_core_subscriptions() -> None:
    s = Subscriptions(2, 150)
    try:
        assert s.poll_timeout() is None and outputs(s) == []
        # A first listener opens every node; the opening must end within the timeout.
        s.want(b"ch", 0)
        assert outputs(s) == [SubscriberOutput(OPEN, 0), SubscriberOutput(OPEN, 1)]
        assert s.poll_timeout() == 150_000
        # Once open, the channel is subscribed there.
        s.handle_opened(0, 1_000)
        assert s.is_open(0) and not s.is_open(1)
        assert outputs(s) == [SubscriberOutput(SUBSCRIBE, 0, b"ch")]
        # Only the confirmation of what was asked for counts, once.
        assert s.handle_confirmed(0, b"ch", 2_000) is True
        assert s.handle_confirmed(0, b"ch", 2_000) is False
        assert s.handle_confirmed(0, b"other", 2_000) is False
        assert s.handle_confirmed(1, b"ch", 2_000) is False  # not open
        # A refusal closes the connection; it opens again after the core's pause, not
        # before.
        s.handle_opened(1, 3_000)
        assert outputs(s) == [SubscriberOutput(SUBSCRIBE, 1, b"ch")]
        s.handle_refused(1, 4_000)
        assert outputs(s) == [SubscriberOutput(CLOSE_OUTPUT, 1)]
        assert not s.is_open(1)
        assert s.poll_timeout() == 4_000 + FIRST_US
        s.want(b"ch", 5_000)  # a new waiter does not cut the pause short
        s.handle_timeout(4_000 + FIRST_US - 1)
        assert outputs(s) == []
        s.handle_timeout(4_000 + FIRST_US)
        assert outputs(s) == [SubscriberOutput(OPEN, 1)]
        s.handle_opened(1, 4_000 + FIRST_US)
        assert outputs(s) == [SubscriberOutput(SUBSCRIBE, 1, b"ch")]
        assert s.handle_confirmed(1, b"ch", 4_000 + FIRST_US)
        # The listeners leave: the channel lingers, then is unsubscribed and the
        # connections close.
        assert s.unwant(b"ch", 200_000) is True
        assert s.unwant(b"ch", 200_000) is True
        assert s.unwant(b"ch", 200_000) is False  # nobody listens any more
        assert s.unwant(b"never", 200_000) is False
        assert s.channel_count == 1 and s.poll_timeout() == 200_000 + LINGER_US
        s.handle_timeout(200_000 + LINGER_US - 1)
        assert outputs(s) == []
        s.handle_timeout(200_000 + LINGER_US)
        assert outputs(s) == [
            SubscriberOutput(UNSUBSCRIBE, 0, b"ch"),
            SubscriberOutput(UNSUBSCRIBE, 1, b"ch"),
            SubscriberOutput(CLOSE_OUTPUT, 0),
            SubscriberOutput(CLOSE_OUTPUT, 1),
        ]
        assert s.channel_count == 0 and s.poll_timeout() is None
    finally:
        s.close()


def test_the_wrapper_pauses_double_while_a_node_keeps_failing() -> None:
    with Subscriptions(1, 150) as s:
        s.want(b"ch", 0)
        now, pauses = 0, []
        for _ in range(8):
            assert outputs(s) == [SubscriberOutput(OPEN, 0)]
            s.handle_lost(0, now)  # could not open
            due = s.poll_timeout()
            assert due is not None
            pauses.append(due - now)
            now = due
            s.handle_timeout(now)
        assert pauses == [min(FIRST_US << i, MAX_US) for i in range(8)]
        # A confirmed subscription brings the pause back to the first.
        s.handle_opened(0, now)
        outputs(s)
        assert s.handle_confirmed(0, b"ch", now)
        s.handle_lost(0, now)
        assert s.poll_timeout() == now + FIRST_US


def test_the_wrapper_refuses_bad_input_with_the_binding_errors() -> None:
    with pytest.raises(ConfigError, match="no_nodes"):
        Subscriptions(0, 1_000)
    with pytest.raises(ConfigError, match="too_many_nodes"):
        Subscriptions(256, 1_000)
    with pytest.raises(ValueError):
        Subscriptions(-1, 1_000)
    s = Subscriptions(3, 1_000)
    for call in (
        lambda: s.handle_opened(3, 0),
        lambda: s.handle_lost(7, 0),
        lambda: s.handle_refused(3, 0),
        lambda: s.handle_confirmed(3, b"ch", 0),
    ):
        with pytest.raises(UsageError, match="unknown_node"):
            call()
    assert not s.is_open(3)
    with pytest.raises(ValueError):
        s.handle_opened(-1, 0)
    with pytest.raises(TypeError):
        s.want(1, 0)  # type: ignore[arg-type]
    # Closing frees it once; later calls raise instead of touching freed memory.
    s.close()
    s.close()
    assert s.closed
    with pytest.raises(UsedAfterCloseError):
        s.want(b"ch", 0)
    with pytest.raises(UsedAfterCloseError):
        s.poll_output()
    # The library itself takes NULL safely.
    ffi.lib.redlock_subscriptions_free(None)
    assert not ffi.lib.redlock_subscriptions_is_open(None, 0)
    assert ffi.lib.redlock_subscriptions_channel_count(None) == 0
    kind, node = ctypes.c_uint32(), ctypes.c_size_t()
    assert (
        ffi.lib.redlock_subscriptions_poll_output(None, ctypes.byref(kind), ctypes.byref(node))
        == ffi.NULL_PARAMETER
    )


# ---- the shared protocol, without I/O ------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = core.now_us()

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def engine(
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[Engine, core.Client, Clock, list[Any]]]:
    """An engine over three nodes whose links go nowhere, a client to start its
    operations, on a virtual clock; the list collects its subscriber actions as
    ``(node, action)``."""
    clock = Clock()
    monkeypatch.setattr(_protocol, "now_us", clock)
    done: list[Any] = []

    def subscriber_io(subscriber: Subscriber, actions: list[Action]) -> None:
        done.extend((subscriber.index, action) for action in actions)

    client = core.Client(core.Config(3, 10_000))
    engine = Engine(
        ["a", "b", "c"],
        lambda node, actions: None,
        subscriber_io,
        subscriber_timeout_ms=2000,
    )
    engine.notices = True
    try:
        yield engine, client, clock, done
    finally:
        engine.close()
        client.close()


def confirmation(channel: bytes) -> bytes:
    return b"*3\r\n$9\r\nsubscribe\r\n$%d\r\n%s\r\n:1\r\n" % (len(channel), channel)


def test_the_engine_does_what_the_core_subscriptions_say(
    engine: tuple[Engine, core.Client, Clock, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    engine_, client, clock, done = engine
    subscribed: list[int] = []
    heard: list[tuple[int, bytes]] = []
    monkeypatch.setattr(
        Operation, "handle_subscribed", lambda op, node, now: subscribed.append(node)
    )
    monkeypatch.setattr(
        Operation, "handle_notice_message", lambda op, node, msg, now: heard.append((node, msg))
    )
    timer_pokes: list[int] = []
    engine_.on_subscriber_timer = lambda: timer_pokes.append(clock.now)
    subs = engine_.subscribers

    # A waiting acquisition listens when the core says so: here from its start, as the
    # client waited for the resource a moment ago (a first wait listens from its first
    # conflict). The core opens every node.
    with client.acquire("res", clock.now, wait_us=5_000_000):
        pass
    op = client.acquire("res", clock.now, wait_us=5_000_000)
    running = engine_.start(op)
    # The resource's notice channel and the client's waiter channel of it.
    (channel, waiter_channel) = running.channels
    assert channel == b"redlock:released:res"
    assert waiter_channel.startswith(b"redlock:waiter:") and waiter_channel.endswith(b":res")
    assert done == [(0, (CONNECT,)), (1, (CONNECT,)), (2, (CONNECT,))]
    assert timer_pokes == [clock.now]  # the openings' deadline
    generations = [s.generation for s in subs]
    done.clear()

    # Node 0 opens: subscribed there; its confirmation counts once, and goes to the
    # waiting acquisition; a notice goes to it too.
    assert engine_.subscriber_opened(subs[0], generations[0])
    assert done == [
        (0, (WRITE, encode([b"SUBSCRIBE", channel]))),
        (0, (WRITE, encode([b"SUBSCRIBE", waiter_channel]))),
    ]
    assert engine_.subscriber_received(subs[0], generations[0], confirmation(channel))
    assert engine_.subscriber_received(subs[0], generations[0], confirmation(channel))
    assert subscribed == [0]
    assert engine_.subscriber_received(subs[0], generations[0], confirmation(waiter_channel))
    assert subscribed == [0, 0]
    for where, text in ((channel, b""), (waiter_channel, b"id")):
        message = b"*3\r\n$7\r\nmessage\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (
            len(where),
            where,
            len(text),
            text,
        )
        assert engine_.subscriber_received(subs[0], generations[0], message)
    assert heard == [(0, b""), (0, b"id")]
    # What an older connection reports is ignored.
    assert not engine_.subscriber_opened(subs[1], generations[1] - 1)
    assert not engine_.subscriber_received(subs[0], generations[0] - 1, confirmation(channel))
    assert subscribed == [0, 0]

    # Node 1 refuses SUBSCRIBE: the core closes it, and opens it again only after its
    # pause, however often the timers look.
    done.clear()
    assert engine_.subscriber_opened(subs[1], generations[1])
    assert not engine_.subscriber_received(subs[1], generations[1], b"-NOPERM no\r\n")
    assert done == [
        (1, (WRITE, encode([b"SUBSCRIBE", channel]))),
        (1, (WRITE, encode([b"SUBSCRIBE", waiter_channel]))),
        (1, (CLOSE,)),
    ]
    refused_at = clock.now
    done.clear()
    for _ in range(5):
        assert engine_.subscriber_timers() == refused_at + FIRST_US
    clock.now = refused_at + FIRST_US
    assert engine_.subscriber_timers() is not None
    assert done == [(1, (CONNECT,))]
    # Node 2 could not open: the same pause.
    done.clear()
    engine_.subscriber_failed(subs[2], generations[2])
    assert done == [] and subscribed == [0, 0]

    # The acquisition ends: its channel lingers, then is unsubscribed and the open
    # connection closed.
    ended = clock.now
    engine_.abandon(running)
    done.clear()
    clock.now = ended + LINGER_US - 1
    engine_.subscriber_timers()
    assert (0, (CLOSE,)) not in done
    clock.now = ended + LINGER_US
    engine_.subscriber_timers()
    assert done[:3] == [
        (0, (WRITE, encode([b"UNSUBSCRIBE", channel]))),
        (0, (WRITE, encode([b"UNSUBSCRIBE", waiter_channel]))),
        (0, (CLOSE,)),
    ]


# ---- both drivers on real nodes -------------------------------------------------------


#: Called after a wait ended, while its Redlock is still open: how long to sleep
#: before calling it again, or ``None`` when done.
Look = Callable[[], Optional[float]]


def sync_wait(nodes: Nodes, resource: str, limit: float, name: str, look: Look) -> None:
    """A sync waiter (its clients named ``name``) waits up to ``limit`` behind a
    holder; ``look`` runs after, its Redlock still open."""
    with Redlock(nodes.clients()) as holder_side:
        with Redlock(nodes.clients(client_name=name)) as waiter_side:
            with holder_side.lock(resource):
                with pytest.raises(LockHeldError):
                    waiter_side.acquire(resource, blocking_timeout=limit)
                while True:
                    delay = look()
                    if delay is None:
                        break
                    time.sleep(delay)


def asyncio_wait(nodes: Nodes, resource: str, limit: float, name: str, look: Look) -> None:
    """As :func:`sync_wait`, with AsyncRedlocks."""

    async def run() -> None:
        holder_side = AsyncRedlock([redis.asyncio.Redis(port=port) for port in nodes.ports])
        waiter_side = AsyncRedlock(
            [redis.asyncio.Redis(port=port, client_name=name) for port in nodes.ports]
        )
        async with holder_side, waiter_side:
            async with holder_side.lock(resource):
                with pytest.raises(LockHeldError):
                    await waiter_side.acquire(resource, blocking_timeout=limit)
                while True:
                    delay = look()
                    if delay is None:
                        break
                    await asyncio.sleep(delay)

    asyncio.run(asyncio.wait_for(run(), 30))


DRIVERS: dict[str, tuple[Any, Callable[[Nodes, str, float, str, Look], None]]] = {
    "sync": (_sync, sync_wait),
    "asyncio": (_asyncio, asyncio_wait),
}


@pytest.mark.parametrize("driver", sorted(DRIVERS))
def test_a_refused_subscriber_is_reopened_at_the_core_pace(
    nodes: Nodes, resource: str, driver: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    module, wait = DRIVERS[driver]
    name = f"refused-{driver}"
    opened: dict[int, list[float]] = {}
    original = module.subscriber_like

    def spy(client: Any, retry: Any) -> Any:
        kwargs = client.connection_pool.connection_kwargs
        if kwargs.get("client_name") == name:
            opened.setdefault(nodes.ports.index(kwargs["port"]), []).append(time.monotonic())
        return original(client, retry)

    monkeypatch.setattr(module, "subscriber_like", spy)
    ended: list[float] = []

    def look() -> float | None:
        # The wait is over: half a second more with the Redlock open.
        if ended:
            return None
        ended.append(time.monotonic())
        return 0.5

    admins = nodes.clients()
    try:
        # Every node refuses SUBSCRIBE (NOPERM): each subscriber connection opens, is
        # refused, and is closed.
        for admin in admins:
            admin.acl_setuser("default", enabled=True, commands=["-subscribe"])
        wait(nodes, resource, 1.7, name, look)
    finally:
        for admin in admins:
            admin.acl_setuser("default", enabled=True, commands=["+subscribe"])
            admin.close()
    assert sorted(opened) == [0, 1, 2, 3, 4], opened
    for node, times in opened.items():
        # Opened again after the core's pauses, doubling (100, 200, 400, 800 ms within
        # the 1.7 s wait): a few times, never in a loop.
        gaps = [b - a for a, b in zip(times, times[1:])]
        assert 2 <= len(times) <= 6, (node, gaps)
        for index, gap in enumerate(gaps):
            assert gap >= min(FIRST_US << index, MAX_US) / 1e6 - 0.002, (node, gaps)
        # Nobody waits any more: it is not opened again.
        assert times[-1] <= ended[0], (node, times, ended)


def subscriber_connections(nodes: Nodes, name: str) -> list[int]:
    """How many subscriber connections (their last command a (un)subscription) the
    clients named ``name`` hold open on each node."""
    counts = []
    for port in nodes.ports:
        with redis.Redis(port=port) as admin:
            counts.append(
                sum(
                    1
                    for client in admin.client_list()
                    if client.get("name") == name
                    and client.get("cmd") in ("subscribe", "unsubscribe")
                )
            )
    return counts


@pytest.mark.parametrize("driver", sorted(DRIVERS))
def test_the_subscriber_connection_closes_after_the_linger_once_nobody_waits(
    nodes: Nodes, resource: str, driver: str
) -> None:
    name = f"linger-{driver}"
    waiting: list[list[int]] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            waiting.append(subscriber_connections(nodes, name))
            time.sleep(0.05)

    # (seconds since the wait ended, the counts then), while the Redlock stays open.
    after: list[tuple[float, list[int]]] = []
    ended: list[float] = []

    def look() -> float | None:
        if not ended:
            stop.set()
            ended.append(time.monotonic())
        counts = subscriber_connections(nodes, name)
        after.append((time.monotonic() - ended[0], counts))
        if counts == [0] * 5 or after[-1][0] > 5:
            return None
        return 0.02

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        DRIVERS[driver][1](nodes, resource, 0.8, name, look)
    finally:
        stop.set()
        watcher.join(5)
    # While it waited, one subscriber connection per node.
    assert [1] * 5 in waiting, waiting
    # After: still there while the channel lingers, then closed (not just unsubscribed:
    # the connection is gone) once the core's linger ended, the Redlock still open.
    linger = LINGER_US / 1e6
    lingering = [counts for since, counts in after if since < linger - 0.1]
    assert lingering and all(counts == [1] * 5 for counts in lingering), after
    closed_at, closed = after[-1]
    assert closed == [0] * 5, after
    assert linger - 0.05 <= closed_at < linger + 1.0, after
