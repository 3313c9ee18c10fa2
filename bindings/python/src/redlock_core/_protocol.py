"""The one node protocol both drivers share, in the manner of h11: objects that consume
events and bytes and say what to do, with no I/O of their own.

- :class:`NodeProtocol` is one node: the core's :class:`~redlock_core.core.Link` (which
  decides everything about the node's commands: order, the bound in flight, what a
  stalled node still gets, what is written again after a reconnection, when to
  reconnect), the core's RESP decoder for what the node sends, and the write ids
  awaiting replies in order. Its :meth:`NodeProtocol.pump` returns the I/O to do:
  ``CONNECT``, ``WRITE`` (RESP bytes from the core), ``CLOSE``.
- :class:`Engine` is every node plus the operations under way, tagged: it starts
  operations, hands their commands to the links, delivers the links' replies to the
  operation they belong to, cancels (``abandon``), and says when each wants waking. It
  also keeps which release-notice channels waiting acquisitions listen on, and hands
  each notice, with its message, to the acquisitions that listen
  (``Operation.handle_notice_message``).
- :class:`Subscription` is one node's subscriber connection for release notices: what
  to write to subscribe to the channels wanted now, the messages read back, and when a
  lost connection may be opened again.

The synchronous driver runs this on threads and sockets, the asyncio driver on asyncio
streams; neither decides anything about the lock.
"""

from __future__ import annotations

import errno
import itertools
import socket
import ssl
from collections import deque
from collections.abc import Callable, Sequence
from typing import Union

from redis.exceptions import AuthenticationError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from . import _ffi
from ._handle import notice_channel_linger_ms, subscriber_reopen_ms
from .core import Client, Decoder, Link, Operation, OperationEvent, Outcome, now_us

#: What :meth:`NodeProtocol.pump` asks the I/O to do.
CONNECT = "connect"
WRITE = "write"
CLOSE = "close"

Action = Union[tuple[str], tuple[str, bytes]]


def cause_of(error: BaseException) -> int:
    """The core's ``LINK_CAUSE_*`` for a failed connection, from the exception and the
    ones it was raised from (client libraries wrap the socket's error)."""
    seen: BaseException | None = error
    depth = 0
    while seen is not None and depth < 8:
        if isinstance(seen, ConnectionRefusedError) or getattr(seen, "errno", None) == (
            errno.ECONNREFUSED
        ):
            return _ffi.LINK_CAUSE_REFUSED
        if isinstance(seen, AuthenticationError):
            return _ffi.LINK_CAUSE_AUTH
        if isinstance(seen, ResponseError) and str(seen).split(" ", 1)[0] in (
            "NOAUTH",
            "WRONGPASS",
            "invalid",
        ):
            return _ffi.LINK_CAUSE_AUTH
        if isinstance(seen, ssl.SSLError):
            return _ffi.LINK_CAUSE_TLS
        if isinstance(seen, (socket.timeout, TimeoutError, RedisTimeoutError)):
            return _ffi.LINK_CAUSE_TIMEOUT
        text = str(seen)
        if "Connection refused" in text:
            return _ffi.LINK_CAUSE_REFUSED
        if "SSL" in text or "certificate" in text:
            return _ffi.LINK_CAUSE_TLS
        if "AUTH" in text or "WRONGPASS" in text or "password" in text:
            return _ffi.LINK_CAUSE_AUTH
        seen = seen.__cause__ or seen.__context__
        depth += 1
    return _ffi.LINK_CAUSE_CLOSED


def describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


class NodeProtocol:
    """One node's protocol state: its link, its decoder, the writes awaiting replies.

    ``generation`` numbers the connections: an event an I/O adapter reports for an
    older connection (one the link already closed) is ignored.
    """

    def __init__(self, index: int, label: str, deliver: Callable[[Link, int], None]) -> None:
        self.index = index
        self.label = label
        self.link = Link()
        self._deliver = deliver
        self._decoder = Decoder()
        self._written: deque[int] = deque()
        self.generation = 0

    # ---- inputs -------------------------------------------------------------------

    def submit(self, tag: int, operation: Operation, now: int) -> None:
        self.link.submit(tag, operation, now)

    def connected(self, generation: int, now: int) -> None:
        if generation == self.generation:
            self.link.handle_connected(now)

    def failed(self, generation: int, error: BaseException, now: int) -> None:
        """The connection ``generation`` failed, or could not be opened."""
        if generation != self.generation:
            return
        self._reset()
        self.link.handle_closed(cause_of(error), describe(error), now)

    def data_received(self, generation: int, data: bytes, now: int) -> bool:
        """Bytes the node sent on connection ``generation``: each complete reply goes
        to its write. False when the stream is out of step (the connection failed)."""
        if generation != self.generation:
            return True
        try:
            self._decoder.feed(data)
            while True:
                reply = self._decoder.next_reply()
                if reply is None:
                    return True
                with reply:
                    if not self._written:
                        raise ValueError("a reply nobody asked for")
                    self.link.handle_reply_value(self._written.popleft(), reply, now)
        except Exception as error:  # a protocol error: never read this stream again
            self.failed(generation, error, now)
            return False

    def timeout(self, now: int) -> None:
        due = self.link.poll_timeout()
        if due is not None and due <= now:
            self.link.handle_timeout(now)

    # ---- outputs ------------------------------------------------------------------

    def pump(self) -> list[Action]:
        """Does what the link outputs: deliveries go to their operations at once; the
        I/O to do comes back in order."""
        actions: list[Action] = []
        link = self.link
        while True:
            kind = link.poll()
            if kind == _ffi.LINK_OUTPUT_NONE:
                return actions
            if kind == _ffi.LINK_OUTPUT_WRITE:
                write_id, resp = link.write()
                self._written.append(write_id)
                actions.append((WRITE, resp))
            elif kind == _ffi.LINK_OUTPUT_DELIVER:
                self._deliver(link, link.delivery().tag)
            elif kind == _ffi.LINK_OUTPUT_CONNECT:
                self._reset()
                actions.append((CONNECT,))
            elif kind == _ffi.LINK_OUTPUT_CLOSE:
                self._reset()
                actions.append((CLOSE,))

    def _reset(self) -> None:
        """A new connection starts (or the last one ended): nothing is owed on it."""
        self.generation += 1
        self._written.clear()
        self._decoder.close()
        self._decoder = Decoder()

    @property
    def next_timeout(self) -> int | None:
        return self.link.poll_timeout()

    def close(self) -> None:
        self.link.close()
        self._decoder.close()


class Running:
    """One operation under way: its tag, when it wants waking, whether a delivery or a
    notice came since it was last polled, the notice channels it listens on, and the
    events drained from it that the driver has not handed on yet (``None`` when nobody
    wants them)."""

    __slots__ = (
        "changed",
        "channels",
        "events",
        "last_deadline",
        "may_listen",
        "operation",
        "outcome",
        "tag",
        "wait_until",
    )

    def __init__(self, operation: Operation, tag: int) -> None:
        self.operation = operation
        self.tag = tag
        self.wait_until: int | None = None
        self.changed = False
        self.outcome: Outcome | None = None
        self.last_deadline = 0
        self.may_listen = False
        self.channels: list[bytes] = []
        self.events: list[OperationEvent] | None = None

    def take_events(self) -> list[OperationEvent]:
        """The events drained since the last call (handed on by the driver)."""
        events = self.events
        if not events:
            return []
        self.events = []
        return events


class Engine:
    """Every node of one Redlock and the operations under way. Not thread-safe: the
    synchronous driver calls it under one lock, the asyncio driver from its loop.

    ``io`` is called with each node's actions as they arise: the driver's I/O adapter.
    """

    def __init__(
        self,
        client: Client,
        labels: Sequence[str],
        io: Callable[[NodeProtocol, list[Action]], None],
    ) -> None:
        self.client = client
        self.nodes = [NodeProtocol(i, label, self._deliver) for i, label in enumerate(labels)]
        self.running: dict[int, Running] = {}
        self._io = io
        self._tags = itertools.count(1)
        #: Called with each operation a delivery changed (the driver wakes its waiter).
        self.on_change: Callable[[Running], None] = lambda running: None
        #: Whether acquisitions listen for release notices once an attempt failed.
        self.notices = False
        #: Called when the set of channels to subscribe to changed (:meth:`channels`).
        self.on_channels: Callable[[], None] = lambda: None
        self._listeners: dict[bytes, set[int]] = {}
        #: Channels nobody listens on any more, and since when (us): still subscribed
        #: for NOTICE_LINGER_US (see :meth:`channels`).
        self._idle: dict[bytes, int] = {}

    def _deliver(self, link: Link, tag: int) -> None:
        running = self.running.get(tag)
        if running is None or running.outcome is not None:
            return  # a late reply to an operation that already decided
        try:
            running.operation.handle_delivery(link, now_us())
        except Exception:  # a duplicate: the core refused it and changed nothing
            return
        running.changed = True
        self.on_change(running)

    def pump(self, node: NodeProtocol) -> None:
        actions = node.pump()
        if actions:
            self._io(node, actions)

    def start(self, operation: Operation, *, waits: bool = False, events: bool = False) -> Running:
        """Starts ``operation``. An acquisition with a wait limit (``waits``) listens
        for release notices from the start, so that it hears a release that comes
        while its first attempt is out; others from their first failed attempt. With
        ``events`` its events are drained after every input (:meth:`step`) into
        ``running.events``."""
        running = Running(operation, next(self._tags))
        if events:
            running.events = []
        running.may_listen = self.notices and operation.kind == _ffi.OPERATION_ACQUIRE
        self.running[running.tag] = running
        if waits and running.may_listen:
            self._listen(running)
        self.step(running)
        return running

    # ---- release notices ------------------------------------------------------------

    def _listen(self, running: Running) -> None:
        """``running`` listens on its notice channels from now until it finishes: from
        its start when it has a wait limit, else once an attempt failed (its release
        round goes out), which keeps a plain acquisition that wins at once free of it."""
        running.may_listen = False
        running.channels = running.operation.notice_channels()
        added = False
        for channel in running.channels:
            self._idle.pop(channel, None)
            added = added or channel not in self._listeners
            self._listeners.setdefault(channel, set()).add(running.tag)
        if added:
            self.on_channels()

    def _unlisten(self, running: Running) -> None:
        now = now_us()
        for channel in running.channels:
            tags = self._listeners.get(channel)
            if tags is not None:
                tags.discard(running.tag)
                if not tags:
                    self._idle[channel] = now
        running.channels = []
        if self._idle:
            self.on_channels()  # the subscriber looks again when the linger ends

    def channels(self, now: int) -> set[bytes]:
        """The channels to be subscribed to at ``now``: those some acquisition listens
        on, and those the last one left less than NOTICE_LINGER_US ago. A process that
        waits for the same resource again and again (release, then acquire at once)
        stays subscribed: otherwise its next attempt, refused and queued, can be named
        by a release before its SUBSCRIBE has landed, and it misses the notice that
        gives it the turn."""
        for channel, since in list(self._idle.items()):
            if now - since >= NOTICE_LINGER_US:
                del self._idle[channel]
                del self._listeners[channel]
        return set(self._listeners)

    def linger_us(self, now: int) -> int | None:
        """How long until the next lingering channel is due to be unsubscribed."""
        if not self._idle:
            return None
        return max(0, min(self._idle.values()) + NOTICE_LINGER_US - now)

    def notice(self, node: int, channel: bytes, message: bytes | None) -> None:
        """A release notice from ``node`` on ``channel`` carrying ``message`` (the id of
        the waiter first in that node's queue, or empty), or with ``None`` the
        confirmation of the subscription to ``channel`` there: each acquisition
        listening there gets it as received, and is polled (its waiter is woken to
        look)."""
        for tag in list(self._listeners.get(channel, ())):
            running = self.running.get(tag)
            if running is None or running.outcome is not None:
                continue
            try:
                if message is None:
                    running.operation.handle_subscribed(node, now_us())
                else:
                    running.operation.handle_notice_message(node, message, now_us())
            except Exception:  # the core refused it: a notice never matters for safety
                continue
            # Polled here, so that an attempt it starts goes out at once, not after the
            # waiter was woken to poll it.
            self.step(running)
            self.on_change(running)

    def step(self, running: Running) -> None:
        """Polls the operation until it waits or decides, handing its commands to the
        links (the one output rule: ``WAIT`` is its only wake-up), then drains its
        events when they are wanted."""
        op = running.operation
        running.changed = False
        # The links write only once every command of the round is submitted: the nodes
        # get a round's commands back to back. A release written to one node before
        # the next command is even prepared lets its notice wake waiters (threads
        # taking the GIL in between) while the other nodes still hold the key.
        submitted: list[NodeProtocol] = []
        while running.outcome is None:
            kind = op.poll()
            if kind == _ffi.OUTPUT_SEND:
                if running.may_listen and op.command_kind()[0] == _ffi.COMMAND_RELEASE:
                    self._listen(running)
                node_index, _, deadline = op.target()
                running.last_deadline = max(running.last_deadline, deadline)
                node = self.nodes[node_index]
                node.submit(running.tag, op, now_us())
                if node not in submitted:
                    submitted.append(node)
            elif kind == _ffi.OUTPUT_WAIT:
                running.wait_until = op.wait_until()
                break
            elif kind == _ffi.OUTPUT_OUTCOME:
                running.outcome = op.take_outcome()
                running.wait_until = None
            else:
                break
        for node in submitted:
            self.pump(node)
        events = running.events
        if events is not None:
            while True:
                event = op.poll_event()
                if event is None:
                    break
                events.append(event)

    def advance(self, running: Running) -> bool:
        """Does what is due for the operation now (a delivery to poll, its wait come
        due); True once it decided, False while it waits for a delivery or its wait."""
        while running.outcome is None:
            if running.changed:
                self.step(running)
                continue
            at = running.wait_until
            if at is not None and now_us() >= at:
                self.wake(running)
                continue
            return False
        return True

    def wake(self, running: Running) -> None:
        """The operation's wait came due (or a delivery changed it): hand in the time
        and poll it."""
        now = now_us()
        if running.wait_until is not None and now >= running.wait_until:
            running.wait_until = None
            running.operation.handle_timeout(now)
        self.step(running)

    def abandon(self, running: Running) -> None:
        """The caller cancelled: the core says what must still be sent (the release of
        an acquisition's token), the links send it; the operation is then forgotten."""
        if running.outcome is None:
            running.may_listen = False
            running.operation.abandon(now_us())
            self.step(running)
        self.finish(running)

    def finish(self, running: Running) -> None:
        self.running.pop(running.tag, None)
        if running.channels:
            self._unlisten(running)
        running.operation.close()

    def take_outcome(self, running: Running) -> Outcome:
        """The outcome of a finished operation; the operation is forgotten."""
        outcome = running.outcome
        if outcome is None:
            raise RuntimeError("an operation taken before its outcome")  # a driver bug
        self.finish(running)
        return outcome

    def timers(self) -> int | None:
        """Hands the due links their timeouts; returns the next link instant."""
        now = now_us()
        earliest: int | None = None
        for node in self.nodes:
            due = node.next_timeout
            if due is not None and due <= now:
                node.link.handle_timeout(now)
                self.pump(node)
                due = node.next_timeout
            if due is not None and (earliest is None or due < earliest):
                earliest = due
        return earliest

    def idle(self) -> bool:
        return all(node.link.is_idle for node in self.nodes)

    def in_flight(self) -> list[int]:
        return [node.link.in_flight for node in self.nodes]

    def close(self) -> None:
        for running in list(self.running.values()):
            self.finish(running)
        for node in self.nodes:
            node.close()


def wake_at(running: Running, engine: Engine) -> int | None:
    """When the driver must next act for ``running``: its wait, or a link's timer."""
    links = [n.next_timeout for n in engine.nodes]
    candidates = [t for t in [running.wait_until, *links] if t is not None]
    return min(candidates) if candidates else None


# ---- release notices --------------------------------------------------------------

#: How long a channel stays subscribed after the last acquisition listening on it ended
#: (the core's NOTICE_CHANNEL_LINGER_MS).
NOTICE_LINGER_US = notice_channel_linger_ms() * 1000

#: How long a subscriber connection that failed stays closed, at first and at most
#: (doubling in between; the core's SUBSCRIBER_REOPEN_FIRST_MS and _MAX_MS).
RESUBSCRIBE_FIRST_US, RESUBSCRIBE_MAX_US = (ms * 1000 for ms in subscriber_reopen_ms())


def earliest(a: int | None, b: int | None) -> int | None:
    """The sooner of two waits (us), ``None`` meaning no wait."""
    if a is None:
        return b
    return a if b is None else min(a, b)


def encode(args: Sequence[bytes]) -> bytes:
    """``args`` as a RESP command."""
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        out.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(out)


class Subscription:
    """One node's subscriber connection for release notices, with no I/O: what to
    write so that the connection listens on the channels wanted now, the notices in
    what it reads, and when a lost connection may be opened again.

    The connection speaks RESP2 (messages are then ordinary arrays the core's decoder
    returns; RESP3 pushes are out-of-band for it). A notice changes only how soon an
    acquisition tries again, so a lost connection is not urgent: it is opened again
    after a delay, and notices sent meanwhile are lost (the retry schedule covers them).
    """

    def __init__(self, index: int) -> None:
        self.index = index
        self.open = False
        self._sent: set[bytes] = set()
        self._decoder = Decoder()
        self._retry_at = 0
        self._delay = RESUBSCRIBE_FIRST_US

    def should_open(self, wanted: set[bytes], now: int) -> bool:
        return not self.open and bool(wanted) and now >= self._retry_at

    def wait_us(self, wanted: set[bytes], now: int) -> int | None:
        """How long the I/O may sleep before it must look again (``None``: until woken
        or the connection has data)."""
        if not self.open and wanted:
            return max(0, self._retry_at - now)
        return None

    def opened(self) -> None:
        self.open = True
        self._sent = set()
        self._decoder.close()
        self._decoder = Decoder()

    def lost(self, now: int) -> None:
        """The connection failed, could not be opened, or refused to subscribe."""
        self.open = False
        self._sent = set()
        self._retry_at = now + self._delay
        self._delay = min(2 * self._delay, RESUBSCRIBE_MAX_US)

    def commands(self, wanted: set[bytes]) -> bytes:
        """What to write now so that the connection listens on ``wanted`` only."""
        added = sorted(wanted - self._sent)
        removed = sorted(self._sent - wanted)
        self._sent = set(wanted)
        out = b""
        if added:
            out += encode([b"SUBSCRIBE", *added])
        if removed:
            out += encode([b"UNSUBSCRIBE", *removed])
        return out

    def received(self, data: bytes) -> list[tuple[bytes, bytes | None]]:
        """The notices in ``data``: each one's channel and payload (the payload exactly
        as published: the waiter a release names, or empty), and each confirmed
        subscription's channel with ``None``: a release published on that node before
        it took effect reached nobody (``docs/bindings.md``, rule 13). Raises on a
        malformed stream or an error reply (a server that refuses ``SUBSCRIBE``): the
        connection is then lost."""
        notices: list[tuple[bytes, bytes | None]] = []
        self._decoder.feed(data)
        while True:
            reply = self._decoder.next_reply()
            if reply is None:
                return notices
            with reply:
                if reply.kind == _ffi.REPLY_ERROR:
                    raise ConnectionError(f"the node refused to subscribe: {reply.bytes!r}")
                items = reply.items()
            try:
                if len(items) == 3 and items[0].bytes == b"message":
                    channel, message = items[1].bytes, items[2].bytes
                    if channel is not None:
                        notices.append((channel, b"" if message is None else message))
                elif len(items) == 3 and items[0].bytes == b"subscribe":
                    if items[1].bytes is not None:
                        notices.append((items[1].bytes, None))
                # The rest confirms an unsubscription.
                self._delay = RESUBSCRIBE_FIRST_US
            finally:
                for item in items:
                    item.close()

    def close(self) -> None:
        self._decoder.close()
