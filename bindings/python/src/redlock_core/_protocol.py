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
  also owns the core's :class:`~redlock_core.core.Subscriptions`, which decides the
  subscriber connections for release notices (which channels each node's connection
  subscribes to, when it opens, closes, and opens again after a failure): it tells it
  when acquisitions start and stop listening and what the connections report, turns
  its outputs into each node's subscriber I/O (``CONNECT``, ``WRITE``, ``CLOSE``, as
  for the links), and hands each notice, and each confirmation the core says counts,
  to the acquisitions that listen on its channel (``Operation.handle_notice_message``,
  ``Operation.handle_subscribed``).
- :class:`Subscriber` is one node's subscriber connection as its I/O sees it: which
  connection is current, and the notices and confirmations in what it reads.

The synchronous driver runs this on threads and sockets, the asyncio driver on asyncio
streams; neither decides anything about the lock or the subscriptions.
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
from .core import (
    Decoder,
    Link,
    Operation,
    OperationEvent,
    Outcome,
    Subscriptions,
    now_us,
)

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
    older connection (one the link already closed, or an attempt it gave up) is
    ignored. The link gives a connection attempt ``connect_timeout_ms`` (the client's
    connect timeout; ``None``: the core's default), then outputs ``CLOSE``.
    """

    def __init__(
        self,
        index: int,
        label: str,
        deliver: Callable[[Link, int], None],
        connect_timeout_ms: int | None = None,
    ) -> None:
        self.index = index
        self.label = label
        self.link = Link(connect_timeout_ms)
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
        "error",
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
        #: What polling it raised where a delivery arrived, for its waiter to raise.
        self.error: Exception | None = None
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

    ``io`` is called with each node's actions as they arise, ``subscriber_io`` with each
    node's subscriber actions: the driver's I/O adapters. Node ``i``'s link gives a
    connection attempt ``connect_timeout_ms[i]`` (``None``, or no list: the core's
    default) and then outputs ``CLOSE``. A subscriber connection that neither opens nor
    confirms a subscription within ``subscriber_timeout_ms`` (the driver's connect
    timeout) counts as lost, and the core's subscriptions output its ``CLOSE``.
    """

    def __init__(
        self,
        labels: Sequence[str],
        io: Callable[[NodeProtocol, list[Action]], None],
        subscriber_io: Callable[[Subscriber, list[Action]], None],
        *,
        connect_timeouts_ms: Sequence[int | None] | None = None,
        subscriber_timeout_ms: int,
    ) -> None:
        timeouts = list(connect_timeouts_ms or [None] * len(labels))
        if len(timeouts) != len(labels):
            raise ValueError("connect_timeouts_ms must have one entry per node")
        self.nodes = [
            NodeProtocol(i, label, self._deliver, timeouts[i]) for i, label in enumerate(labels)
        ]
        self.running: dict[int, Running] = {}
        self._io = io
        self._tags = itertools.count(1)
        #: Called with an operation that has something for its waiter: its outcome,
        #: events, or another wait (the driver wakes the waiter).
        self.on_change: Callable[[Running], None] = lambda running: None
        #: Operations a delivery changed, to poll once the node's outputs are handed
        #: out (:meth:`_settle`); ``_stepping`` inside :meth:`step`, ``_settling``
        #: inside :meth:`_settle`.
        self._stale: deque[Running] = deque()
        self._stepping = False
        self._settling = False
        #: Whether acquisitions listen for release notices once an attempt failed.
        self.notices = False
        #: The core's policy for the subscriber connections, and each node's connection.
        self.subscriptions = Subscriptions(len(labels), subscriber_timeout_ms)
        self.subscribers = [Subscriber(i) for i in range(len(labels))]
        self._subscriber_io = subscriber_io
        #: Called when :meth:`subscriber_timers` is due sooner than the driver was told.
        self.on_subscriber_timer: Callable[[], None] = lambda: None
        self._subscriber_due: int | None = None
        self._draining = False
        self._closed = False
        #: The acquisitions listening on each channel (tags), to hand its notices to.
        self._waiters: dict[bytes, set[int]] = {}

    def _deliver(self, link: Link, tag: int) -> None:
        running = self.running.get(tag)
        if running is None or running.outcome is not None:
            return  # a late reply to an operation that already decided
        try:
            running.operation.handle_delivery(link, now_us())
        except Exception:  # a duplicate: the core refused it and changed nothing
            return
        running.changed = True
        self._stale.append(running)

    def pump(self, node: NodeProtocol) -> None:
        actions = node.pump()
        if actions:
            self._io(node, actions)
        if not self._stepping:
            self._settle()

    def _settle(self) -> None:
        """Polls each operation a delivery changed, where the input arrived (a node's
        reader), not after its waiter wakes: the next round goes out at once, and the
        waiter is woken only when there is something for it (:meth:`_poll`). Never
        while a link's outputs are being handed out (a write the poll submits would
        overtake one collected before it) nor inside another poll."""
        if self._settling:
            return
        self._settling = True
        try:
            stale = self._stale
            while stale:
                running = stale.popleft()
                if (
                    running.changed
                    and running.outcome is None
                    and self.running.get(running.tag) is running
                ):
                    try:
                        self._poll(running)
                    except Exception as error:  # raised to the waiter, not in a reader
                        running.error = error
                        self.on_change(running)
        finally:
            self._settling = False

    def _poll(self, running: Running) -> None:
        """:meth:`step`, then wakes the waiter if the operation decided, has events, or
        waits for another instant than before (its waiter sleeps until the old one)."""
        wait_until = running.wait_until
        self.step(running)
        if running.outcome is not None or running.events or running.wait_until != wait_until:
            self.on_change(running)

    def start(self, operation: Operation, *, events: bool = False) -> Running:
        """Starts ``operation``. An acquisition listens for release notices while the
        core says so (:meth:`step`). With ``events`` its events are drained after every
        input (:meth:`step`) into ``running.events``."""
        running = Running(operation, next(self._tags))
        if events:
            running.events = []
        running.may_listen = self.notices and operation.kind == _ffi.OPERATION_ACQUIRE
        self.running[running.tag] = running
        self.step(running)
        return running

    # ---- release notices ------------------------------------------------------------

    def _listen(self, running: Running) -> None:
        """``running`` listens on its notice channels from now until it finishes (the
        core's ``Operation.listens`` said so). The core's subscriptions say what that
        takes of the subscriber connections."""
        running.may_listen = False
        running.channels = running.operation.notice_channels()
        now = now_us()
        for channel in running.channels:
            self._waiters.setdefault(channel, set()).add(running.tag)
            self.subscriptions.want(channel, now)
        self._subscriptions_changed()

    def _unlisten(self, running: Running) -> None:
        channels, running.channels = running.channels, []
        if self._closed:
            return
        now = now_us()
        for channel in channels:
            tags = self._waiters.get(channel)
            if tags is not None:
                tags.discard(running.tag)
                if not tags:
                    del self._waiters[channel]
            self.subscriptions.unwant(channel, now)
        self._subscriptions_changed()  # a channel lingers: the timer looks again

    # ---- the subscriber connections (inputs from the driver's I/O) ------------------

    def subscriber_opened(self, subscriber: Subscriber, generation: int) -> bool:
        """Connection ``generation`` of the node's subscriber opened. False when it is
        not wanted any more (the core closed it, or gave up on it, meanwhile): close it
        and report nothing more for it."""
        if generation != subscriber.generation or self._closed:
            return False
        self.subscriptions.handle_opened(subscriber.index, now_us())
        self._subscriptions_changed()
        return True

    def subscriber_failed(self, subscriber: Subscriber, generation: int) -> None:
        """Connection ``generation`` could not be opened, or dropped (ignored for one the
        core already closed)."""
        if generation != subscriber.generation or self._closed:
            return
        subscriber.reset()
        self.subscriptions.handle_lost(subscriber.index, now_us())
        self._subscriptions_changed()

    def subscriber_received(self, subscriber: Subscriber, generation: int, data: bytes) -> bool:
        """Bytes connection ``generation`` read: each confirmation goes to the core,
        and, when it counts, to the acquisitions listening on its channel; each notice
        to them. False when the connection is done with (refused, its stream out of
        step, or closed already): stop reading it and close it."""
        if generation != subscriber.generation or self._closed:
            return False
        try:
            replies = subscriber.received(data)
        except Exception:  # a malformed stream: never read it again
            self.subscriber_failed(subscriber, generation)
            return False
        node = subscriber.index
        for kind, channel, message in replies:
            if generation != subscriber.generation:
                return False
            if kind == REFUSED:
                # The core closes it (a CLOSE follows) and opens it again after a pause.
                subscriber.reset()
                self.subscriptions.handle_refused(node, now_us())
                self._subscriptions_changed()
                return False
            if kind == SUBSCRIBED:
                if self.subscriptions.handle_confirmed(node, channel, now_us()):
                    self._hand_notice(node, channel, None)
            else:
                self._hand_notice(node, channel, message)
        return True

    def subscriber_timers(self) -> int | None:
        """Hands the subscriptions the time when they are due; returns their next
        instant (when to call this again), or ``None``."""
        if self._closed:
            return None
        subscriptions = self.subscriptions
        due = subscriptions.poll_timeout()
        if due is not None and due <= now_us():
            subscriptions.handle_timeout(now_us())
            self._subscriptions_changed()
            due = subscriptions.poll_timeout()
        self._subscriber_due = due
        return due

    def _subscriptions_changed(self) -> None:
        """After every input to the subscriptions: does what they output (each node's
        subscriber I/O), and tells the driver when they are due sooner than it knew."""
        if self._draining:
            return  # an input the I/O reported while outputs are handed out: same loop
        self._draining = True
        try:
            subscriptions = self.subscriptions
            while True:
                output = subscriptions.poll_output()
                if output is None:
                    break
                subscriber = self.subscribers[output.node]
                action: Action
                if output.kind == _ffi.SUBSCRIBER_OUTPUT_OPEN:
                    subscriber.reset()
                    action = (CONNECT,)
                elif output.kind == _ffi.SUBSCRIBER_OUTPUT_CLOSE:
                    subscriber.reset()
                    action = (CLOSE,)
                else:
                    verb = (
                        b"SUBSCRIBE"
                        if output.kind == _ffi.SUBSCRIBER_OUTPUT_SUBSCRIBE
                        else b"UNSUBSCRIBE"
                    )
                    action = (WRITE, encode([verb, output.channel or b""]))
                self._subscriber_io(subscriber, [action])
        finally:
            self._draining = False
        due, known = self.subscriptions.poll_timeout(), self._subscriber_due
        if due is not None and (known is None or due < known):
            self._subscriber_due = due
            self.on_subscriber_timer()

    def _hand_notice(self, node: int, channel: bytes, message: bytes | None) -> None:
        """A release notice from ``node`` on ``channel`` carrying ``message`` (the id of
        the waiter first in that node's queue, or empty), or with ``None`` a
        confirmation of the subscription to ``channel`` there that the core says counts:
        each acquisition listening there gets it as received, and is polled (its waiter
        is woken to look)."""
        for tag in list(self._waiters.get(channel, ())):
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
            self._poll(running)

    def step(self, running: Running) -> None:
        """Polls the operation until it waits or decides, handing its commands to the
        links (the one output rule: ``WAIT`` is its only wake-up), then drains its
        events when they are wanted. Deliveries its commands meet at once are polled
        after it (:meth:`_settle`)."""
        outer = not self._stepping
        self._stepping = True
        try:
            self._step(running)
        finally:
            if outer:
                self._stepping = False
        if outer:
            self._settle()

    def _step(self, running: Running) -> None:
        op = running.operation
        running.changed = False
        # After every input, before its outputs go out: the core says when an
        # acquisition listens (with a wait limit from the first refusal by a held key,
        # or from its start after a recent wait for the resource; else as a failed
        # attempt's cleanup goes out).
        if running.may_listen and op.listens:
            self._listen(running)
        # The links write only once every command of the round is submitted: the nodes
        # get a round's commands back to back. A release written to one node before
        # the next command is even prepared lets its notice wake waiters (threads
        # taking the GIL in between) while the other nodes still hold the key.
        submitted: list[NodeProtocol] = []
        while running.outcome is None:
            kind = op.poll()
            if kind == _ffi.OUTPUT_SEND:
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
        due); True once it decided, False while it waits for a delivery or its wait.
        Raises what polling it raised where a delivery arrived."""
        error, running.error = running.error, None
        if error is not None:
            raise error
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
        an acquisition's token), the links send it; the operation is then forgotten. An
        outcome polled already, where a reply was read, that its caller never took is
        given back to the core (``decline``): an acquired lock is released the same
        way."""
        if running.operation.closed:  # its outcome reached the caller (handed)
            return
        running.may_listen = False
        outcome, running.outcome = running.outcome, None
        if outcome is None:
            running.operation.abandon(now_us())
        else:
            running.operation.decline(outcome, now_us())
        self.step(running)
        self.finish(running)

    def finish(self, running: Running) -> None:
        self._forget(running)
        running.operation.close()

    def _forget(self, running: Running) -> None:
        self.running.pop(running.tag, None)
        if running.channels:
            self._unlisten(running)

    def take_outcome(self, running: Running) -> Outcome:
        """The outcome of a finished operation; the operation is forgotten. It stays
        open until the driver says the outcome reached its caller (:meth:`handed`):
        until then :meth:`abandon` can still give the outcome back to the core."""
        outcome = running.outcome
        if outcome is None:
            raise RuntimeError("an operation taken before its outcome")  # a driver bug
        self._forget(running)
        return outcome

    @staticmethod
    def handed(running: Running) -> None:
        """The outcome :meth:`take_outcome` gave reached its caller: nothing can be
        given back any more, and the operation is closed."""
        running.operation.close()

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
        self._closed = True
        for running in list(self.running.values()):
            self.finish(running)
        for node in self.nodes:
            node.close()
        for subscriber in self.subscribers:
            subscriber.close()
        self.subscriptions.close()


def wake_at(running: Running, engine: Engine) -> int | None:
    """When the driver must next act for ``running``: its wait, or a link's timer."""
    links = [n.next_timeout for n in engine.nodes]
    candidates = [t for t in [running.wait_until, *links] if t is not None]
    return min(candidates) if candidates else None


# ---- release notices --------------------------------------------------------------

#: What :meth:`Subscriber.received` finds: a message, a confirmed subscription, or an
#: error reply (a node that refuses ``SUBSCRIBE``).
MESSAGE = "message"
SUBSCRIBED = "subscribed"
REFUSED = "refused"


def earliest(a: int | None, b: int | None) -> int | None:
    """The sooner of two instants (us), ``None`` meaning none."""
    if a is None:
        return b
    return a if b is None else min(a, b)


def encode(args: Sequence[bytes]) -> bytes:
    """``args`` as a RESP command."""
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        out.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(out)


class Subscriber:
    """One node's subscriber connection for release notices as its I/O sees it, with
    no I/O and no policy (the core's :class:`~redlock_core.core.Subscriptions` decides):
    ``generation`` numbers its connections, as :class:`NodeProtocol`'s do (what an I/O
    adapter reports for an older one is ignored), and :meth:`received` reads what the
    current one sends.

    The connection speaks RESP2: messages are then ordinary arrays the core's decoder
    returns (RESP3 pushes are out-of-band for it).
    """

    def __init__(self, index: int) -> None:
        self.index = index
        self.generation = 0
        self._decoder = Decoder()

    def reset(self) -> None:
        """A new connection starts (or the last one ended): nothing read on the old one
        counts."""
        self.generation += 1
        self._decoder.close()
        self._decoder = Decoder()

    def received(self, data: bytes) -> list[tuple[str, bytes, bytes]]:
        """What ``data`` completes, in order, as ``(kind, channel, payload)``:
        ``MESSAGE`` for a notice (its payload exactly as published: the waiter a
        release names, or empty), ``SUBSCRIBED`` for a confirmed subscription (a
        release published on that node before it took effect reached nobody:
        ``docs/bindings.md``, rule 13), and ``REFUSED`` (with the error's text) for an
        error reply, after which nothing more is read. Raises on a malformed stream."""
        events: list[tuple[str, bytes, bytes]] = []
        self._decoder.feed(data)
        while True:
            reply = self._decoder.next_reply()
            if reply is None:
                return events
            with reply:
                if reply.kind == _ffi.REPLY_ERROR:
                    events.append((REFUSED, b"", reply.bytes or b""))
                    return events
                items = reply.items()
            try:
                if len(items) == 3 and items[1].bytes is not None:
                    kind, channel = items[0].bytes, items[1].bytes
                    if kind == b"message":
                        events.append((MESSAGE, channel, items[2].bytes or b""))
                    elif kind == b"subscribe":
                        events.append((SUBSCRIBED, channel, b""))
                # The rest confirms an unsubscription.
            finally:
                for item in items:
                    item.close()

    def close(self) -> None:
        self._decoder.close()
