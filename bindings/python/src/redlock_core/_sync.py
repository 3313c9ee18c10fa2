"""The synchronous driver: the core's operations over ``redis.Redis`` clients.

The node protocol is :mod:`redlock_core._protocol`'s, shared with the asyncio driver;
this module only does its I/O with threads and sockets. One daemon thread per Redlock
waits on every node's socket at once, reads what the nodes send into the core's
decoders and hands the links the time; each connection a link asks for is opened on a
short-lived thread (through the client's own connection class, so TLS, ``AUTH`` and
``SELECT`` are redis-py's), which the link gives up at its connect timeout. Writes are
the core's RESP bytes, written on the socket as the link emits them. Every core call
happens under one lock per Redlock; the thread that calls ``acquire``/``extend``/
``release`` waits on it until the operation decides (the reader polls the operation a
reply changed, and wakes that thread only for its outcome or another wait).
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import select
import socket
import ssl
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import redis
import redis.connection
import redis.sentinel
from redis.backoff import NoBackoff
from redis.retry import Retry

from ._common import MasterSearch, Procedure, RedlockBase, connection_like, subscriber_like
from ._errors import UsedAfterCloseError
from ._lock import KeepAlivePlan, LockContextBase, LockState
from ._observe import Observation
from ._protocol import CLOSE, CONNECT, WRITE, Action, NodeProtocol, Running, Subscriber
from .core import Outcome, Resources, now_us

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._common import AcquireOptions, Duration, ReleaseResult, Step, Steps, T

__all__ = ["Lock", "LockContext", "Redlock"]

#: The longest the reader sleeps without looking at the links' timers.
IDLE_POLL = 1.0
#: A node socket's timeout: how long a read the reader began on a ready socket (a TLS
#: record that came in part) or a write that finds the send buffer full may block.
_SOCKET_TIMEOUT = 0.05


class _Attempt:
    """One connection attempt, on a thread of its own: the connection being opened
    (once made), the generation it is for (``None``: a spare, opened ahead of the
    link's first ``CONNECT``), and whether it was given up. Changed under the Redlock's
    lock."""

    __slots__ = ("connection", "error", "generation", "given_up")

    def __init__(self, generation: int | None) -> None:
        self.connection: Any = None
        self.error: Exception | None = None
        self.generation = generation
        self.given_up = False

    def start(self, opener: Callable[[_Attempt], None], name: str) -> None:
        """Runs ``opener(self)`` on a daemon thread named ``name``."""
        threading.Thread(target=opener, args=(self,), name=name, daemon=True).start()

    def open(self, lock: threading.Condition, make: Callable[[], Any]) -> tuple[Any, bool]:
        """On the attempt's thread: the connection ``make()`` builds, opened (TCP, TLS, the
        client's handshake) unless the attempt was given up first, and whether that
        worked. ``lock`` is the Redlock's."""
        connection: Any = None
        try:
            connection = make()
            with lock:
                self.connection = connection
                given_up = self.given_up
            if given_up:
                raise ConnectionError("the connection attempt was given up")
            connection.connect()
            if connection._sock is None:
                raise ConnectionError("the client's connection has no socket")
        except Exception as error:
            self.error = error
            return connection, False
        return connection, True

    def give_up(self) -> None:
        """Under the lock: nothing the attempt learns counts any more. A handshake under
        way (its socket open) ends at once; a TCP connect cannot be interrupted and ends
        at the connection's own timeout, its socket closed then."""
        self.given_up = True
        sock = getattr(self.connection, "_sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes the handshake's read
            except OSError:
                pass


class _SocketIO:
    """One node's I/O: its connection and socket. Everything it learns goes to the
    node's protocol under the Redlock's lock.

    The Redlock's reader thread (:class:`_Reader`) reads the open connection and hands
    the link its time (the link gives up a connection attempt at its connect timeout,
    and stalled connections). Each connection attempt runs on a short-lived thread of
    its own, so that a connect that blocks never holds the link's timers back: when the
    link gives the attempt up (``CLOSE``), its later result is ignored and its
    connection closed."""

    def __init__(self, owner: Redlock, node: NodeProtocol, client: redis.Redis) -> None:
        self._owner = owner
        self._node = node
        self._client = client
        self._connection: Any = None
        self._sock: socket.socket | None = None
        self._generation = -1
        # The connection attempt under way, if any.
        self._attempt: _Attempt | None = None
        # A connection opened ahead of the link's first CONNECT, so that the first
        # operation does not pay for TCP and the client's handshake within its deadline.
        self._spare: Any = None

    # under the owner's lock ---------------------------------------------------------

    def act(self, actions: list[Action]) -> None:
        failure: BaseException | None = None
        for action in actions:
            if action[0] == CONNECT:
                self._drop()
                generation = self._node.generation
                spare, self._spare = self._spare, None
                if spare is not None:
                    self._adopt(spare, generation)
                    continue
                attempt = self._attempt
                if attempt is not None and attempt.generation is None:
                    attempt.generation = generation  # the spare under way is this one
                else:
                    self._begin(generation)
                self._owner._reader.poke()  # the reader times the attempt
            elif action[0] == WRITE and failure is None:
                sock = self._sock
                try:
                    if sock is None or self._generation != self._node.generation:
                        raise ConnectionError("no connection to write on")
                    sock.sendall(action[1])  # type: ignore[misc]
                except OSError as error:
                    failure = error
            elif action[0] == CLOSE:
                self._drop()  # the connection, or the attempt the link gave up
        if failure is not None:
            self._drop()
            self._node.failed(self._node.generation, failure, now_us())
            self._owner._engine.pump(self._node)

    def warm(self) -> None:
        """Opens a spare connection ahead of the first command."""
        if self._attempt is None and self._spare is None and self._sock is None:
            self._begin(None)

    def _begin(self, generation: int | None) -> None:
        """Starts a connection attempt for ``generation`` (``None``: a spare)."""
        attempt = _Attempt(generation)
        self._attempt = attempt
        attempt.start(self._open, f"redlock-{self._owner.serial}-node-{self._node.index}-connect")

    def _adopt(self, connection: Any, generation: int) -> None:
        """Makes ``connection`` the node's current one and tells the link."""
        self._connection, self._sock, self._generation = connection, connection._sock, generation
        # The socket's timeout bounds a read the reader starts on it (a TLS record that
        # came in part) and a write that finds the send buffer full.
        connection._sock.settimeout(_SOCKET_TIMEOUT)
        self._node.connected(generation, now_us())
        self._owner._engine.pump(self._node)
        self._owner._reader.poke()  # a socket to wait on

    def _drop(self) -> None:
        """Closes the current connection and gives up the link's attempt under way (a
        spare's too once the Redlock stops)."""
        sock, self._sock = self._sock, None
        connection, self._connection = self._connection, None
        stopped = self._owner._stopped
        attempt = self._attempt
        if attempt is not None and (attempt.generation is not None or stopped):
            self._attempt = None
            attempt.give_up()
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._owner._reader.poke()  # one socket less to wait on
        for stale in (connection, self._spare if stopped else None):
            if stale is not None:
                try:
                    stale.disconnect()
                except Exception:  # the socket is gone either way
                    pass

    # an attempt's thread -----------------------------------------------------------

    def _open(self, attempt: _Attempt) -> None:
        """Opens a connection made like the client's own for ``attempt``, then hands it
        over: to the link (as connected, or failed with why) if the attempt still counts,
        as the spare if it was one, otherwise it is closed."""
        owner, node = self._owner, self._node
        connection, opened = attempt.open(
            owner._cond, lambda: connection_like(self._client, Retry(NoBackoff(), 0))
        )
        kept = False
        with owner._cond:
            current = self._attempt is attempt and not owner._stopped
            if current:
                self._attempt = None
            generation = attempt.generation
            if not current:
                pass  # given up: nothing more is reported for it
            elif generation is None:
                if opened:
                    self._spare, kept = connection, True
                # A failed spare: the link's own CONNECT will try, and report why.
            elif generation != node.generation:
                pass  # the link moved on (it always gives the attempt up first)
            elif opened:
                self._adopt(connection, generation)
                kept = True
            else:
                error = attempt.error or ConnectionError("the connection failed")
                node.failed(generation, error, now_us())
                owner._engine.pump(node)
        if not kept and connection is not None:
            _disconnect(connection)

    def received(self, sock: socket.socket, generation: int, read: bytes | BaseException) -> None:
        """Under the owner's lock: what the reader read from ``sock`` (connection
        ``generation``), or why reading it failed."""
        owner, node = self._owner, self._node
        failure: BaseException | None = None
        if isinstance(read, BaseException):
            failure = read
        elif not read:
            failure = ConnectionError("the node closed the connection")
        elif node.data_received(generation, read, now_us()):
            owner._engine.pump(node)
            return
        # Out of step (the protocol failed the connection already), closed or failed.
        if self._sock is sock:
            self._drop()
            if failure is not None:
                node.failed(generation, failure, now_us())
        owner._engine.pump(node)


class _Reader:
    """The Redlock's reader: one daemon thread that waits on every open socket at once
    (``poll``: the nodes' connections and their subscriber connections), reads those
    that are ready, and hands what it read to their owners under the Redlock's lock, all
    of them in one go; between reads it hands the links and the subscriptions their
    time. One thread for all of them, rather than one per connection, because each
    thread woken by a reply costs a switch of the interpreter's lock: a round's five
    replies, or a release's five notices, usually wake it once or twice. :meth:`poke`
    (through a pipe) makes it look again at once: a socket came or went, a connection
    attempt began, a timer moved sooner, the Redlock stops."""

    def __init__(self, owner: Redlock) -> None:
        self._owner = owner
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        self._pipe_open = True  # changed under the owner's lock
        self._poked = False  # under the owner's lock: a poke not yet seen
        self.thread = threading.Thread(
            target=self._run, name=f"redlock-{owner.serial}-reader", daemon=True
        )
        self.thread.start()

    def poke(self) -> None:
        """Under the owner's lock: look again at the sockets and the timers."""
        if self._poked or not self._pipe_open:
            return
        self._poked = True
        try:
            os.write(self._wake_write, b"\0")
        except OSError:  # the pipe is full: already poked
            pass

    def _run(self) -> None:
        owner = self._owner
        try:
            self._loop(owner, owner._cond, owner._engine)
        finally:
            with owner._cond:
                for io in owner._io:
                    io._drop()
                for subscriber in owner._subscribers:
                    if subscriber is not None:
                        subscriber._stop()
                self._pipe_open = False
                os.close(self._wake_read)
                os.close(self._wake_write)

    def _loop(self, owner: Redlock, cond: threading.Condition, engine: Any) -> None:
        nodes = engine.nodes
        while True:
            with cond:
                if owner._stopped or (owner._closed and engine.idle()):
                    return
                self._poked = False
                now = now_us()
                due: int | None = None
                for node in nodes:
                    node.timeout(now)
                    engine.pump(node)
                    at = node.next_timeout
                    if at is not None and (due is None or at < due):
                        due = at
                at = engine.subscriber_timers()
                if at is not None and (due is None or at < due):
                    due = at
                # Each open socket, with its owner and the connection it belongs to.
                open_: list[tuple[_SocketIO | _SubscriberIO, socket.socket, int]] = [
                    (io, io._sock, io._generation) for io in owner._io if io._sock is not None
                ]
                open_ += [
                    (io, io._sock, io._generation)
                    for io in owner._subscribers
                    if io is not None and io._sock is not None
                ]
            ready = [
                entry
                for entry in open_
                if isinstance(entry[1], ssl.SSLSocket) and entry[1].pending()
            ]
            if not ready:
                poller = select.poll()
                poller.register(self._wake_read, select.POLLIN)
                for entry in open_:
                    try:
                        poller.register(entry[1], select.POLLIN)
                    except (OSError, ValueError):  # closed meanwhile: looked at again
                        ready.append(entry)
                timeout_ms = _seconds_until(due) * 1000
                fds = {fd for fd, _ in poller.poll(timeout_ms)}
                if self._wake_read in fds:
                    try:
                        while os.read(self._wake_read, 4096):
                            pass
                    except BlockingIOError:
                        pass
                ready += [entry for entry in open_ if _fileno(entry[1]) in fds]
            if not ready:
                continue
            reads: list[tuple[_SocketIO | _SubscriberIO, socket.socket, int, bytes | BaseException]]
            reads = []
            for io, sock, generation in ready:
                try:
                    reads.append((io, sock, generation, sock.recv(65536)))
                except (socket.timeout, TimeoutError, BlockingIOError, ssl.SSLWantReadError):
                    continue  # nothing whole yet
                except OSError as error:
                    reads.append((io, sock, generation, error))
            if not reads:
                continue
            with cond:
                if owner._stopped:
                    return
                for io, sock, generation, read in reads:
                    io.received(sock, generation, read)

    def join(self, timeout: float) -> None:
        with self._owner._cond:
            self.poke()
        self.thread.join(timeout)


def _fileno(sock: socket.socket) -> int:
    try:
        return sock.fileno()
    except OSError:
        return -1


class _SubscriberIO:
    """One node's subscriber connection for release notices (made like the client's
    own, speaking RESP2). The core's subscriptions say when to open, write and close it
    (:meth:`act`, under the Redlock's lock, done at once); the Redlock's reader reads it
    with the node sockets, hands what it reads to the engine, and hands the
    subscriptions their time. Each connection is opened on a short-lived thread: the
    subscriptions give up one that does not open in time (``CLOSE``), whose later
    result is then ignored and its connection closed. Made on the node's first
    ``CONNECT``."""

    def __init__(self, owner: Redlock, subscriber: Subscriber, client: redis.Redis) -> None:
        self._owner = owner
        self._subscriber = subscriber
        self._client = client
        # All under the owner's lock: the attempt to open a connection under way, the
        # open connection, and the generation it belongs to.
        self._opening: _Attempt | None = None
        self._connection: Any = None
        self._sock: socket.socket | None = None
        self._generation = -1

    def act(self, actions: list[Action]) -> None:
        """Under the owner's lock: the subscriptions' actions for this node."""
        generation = self._subscriber.generation
        for action in actions:
            if action[0] == CONNECT:
                self._stop()
                self._begin(generation)
            elif action[0] == WRITE:
                sock = self._sock
                if sock is None or generation != self._generation:
                    continue  # for a connection already gone
                try:
                    sock.sendall(action[1])  # type: ignore[misc]
                except OSError:
                    self._failed(generation)
            elif action[0] == CLOSE:
                self._stop()

    def _begin(self, generation: int) -> None:
        """Starts opening connection ``generation`` on a thread of its own."""
        attempt = _Attempt(generation)
        self._opening = attempt
        attempt.start(
            self._open, f"redlock-{self._owner.serial}-notices-{self._subscriber.index}-connect"
        )

    def _open(self, attempt: _Attempt) -> None:
        """An attempt's thread: opens the connection, then makes it the node's
        subscriber connection, or reports it failed, unless the attempt was given up."""
        owner = self._owner
        # A failure means no notices from this node for a while; waits go on.
        connection, opened = attempt.open(
            owner._cond, lambda: subscriber_like(self._client, Retry(NoBackoff(), 0))
        )
        generation = attempt.generation
        with owner._cond:
            if self._opening is attempt and not owner._stopped and generation is not None:
                self._opening = None
                if not opened:
                    owner._engine.subscriber_failed(self._subscriber, generation)
                else:
                    # Current before the engine hears of it: the subscriptions it writes
                    # at once are for this connection.
                    self._connection, self._sock = connection, connection._sock
                    self._generation = generation
                    connection._sock.settimeout(_SOCKET_TIMEOUT)
                    if owner._engine.subscriber_opened(self._subscriber, generation):
                        owner._reader.poke()  # a socket to wait on
                        return
                    self._drop()
                    return
        if connection is not None:
            _disconnect(connection)

    def received(self, sock: socket.socket, generation: int, read: bytes | BaseException) -> None:
        """Under the owner's lock: what the reader read from ``sock``, or why reading it
        failed."""
        if self._sock is not sock:
            return  # closed meanwhile
        if isinstance(read, BaseException) or not read:
            self._failed(generation)
        elif not self._owner._engine.subscriber_received(self._subscriber, generation, read):
            self._drop()  # refused, out of step, or closed by the subscriptions already

    def _failed(self, generation: int) -> None:
        self._drop()
        if not self._owner._stopped:
            self._owner._engine.subscriber_failed(self._subscriber, generation)

    def _stop(self) -> None:
        """The attempt under way (if any) counts no more, and the connection closes."""
        opening, self._opening = self._opening, None
        if opening is not None:
            opening.give_up()
        self._drop()

    def _drop(self) -> None:
        connection, self._connection, self._sock = self._connection, None, None
        if connection is not None:
            _disconnect(connection)
            self._owner._reader.poke()  # one socket less to wait on


def _disconnect(connection: Any) -> None:
    try:
        connection.disconnect()
    except Exception:  # closing a connection that failed anyway
        pass


class _SentinelConnection(redis.connection.Connection):
    """A connection to a Sentinel whose connecting, login and answer share one bound
    (its ``socket_timeout``, the Sentinel bound of ``from_sentinel``), counted from
    when a query takes the connection from its pool. redis-py gives the connect and
    each read the whole bound, so a Sentinel slow to connect and then slow to answer
    could take up to twice it."""

    #: When the current query's bound ends (``time.monotonic()``), or None: unbounded.
    _deadline: float | None = None

    def connect(self) -> None:
        # The pool calls this every time a command takes the connection: once per query.
        timeout = self.socket_timeout
        self._deadline = None if timeout is None else time.monotonic() + timeout
        super().connect()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped

    def _connect(self) -> Any:
        if self._deadline is not None:
            # At least a millisecond: a bound already over fails the connect at once.
            self.socket_connect_timeout = max(0.001, self._deadline - time.monotonic())
        return super()._connect()  # type: ignore[no-untyped-call]

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        if self._deadline is not None and "timeout" not in kwargs:
            left = self._deadline - time.monotonic()
            if left <= 0:
                self.disconnect()  # type: ignore[no-untyped-call]
                raise redis.TimeoutError(f"Timeout reading from {self.host}:{self.port}")
            kwargs["timeout"] = left
        return super().read_response(*args, **kwargs)


class _Sentinel(redis.sentinel.Sentinel):
    """redis-py's Sentinel, whose master search says what each Sentinel answered, and
    whose Sentinels each get one bound for connecting and answering together."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[no-untyped-call]
        for sentinel in self.sentinels:
            sentinel.connection_pool.connection_class = _SentinelConnection

    def discover_master(self, service_name: str) -> tuple[str, int]:
        search = MasterSearch(self, service_name)
        for sentinel in search:
            try:
                search.answer(sentinel.sentinel_get_master_addr_by_name(service_name))
            except redis.RedisError as error:
                search.answer(error)
        return search.master()


def _seconds_until(instant: int | None) -> float:
    if instant is None:
        return IDLE_POLL
    return min(IDLE_POLL, max(0.001, (instant - now_us()) / 1e6))


class Redlock(RedlockBase["Lock", "LockContext"]):
    """A Redlock over independent Redis nodes, one ``redis.Redis`` client per node.

    Settings (durations in seconds, as numbers or ``timedelta``) are checked by the
    core; :class:`ConfigError` names the rule broken (the same server given twice
    included). Defaults: ``ttl`` 10 s, drift 1 % + 2 ms, ``node_timeout`` the smaller
    of 50 ms and a tenth of the TTL, 3 attempts 200 ms +- 100 ms apart, 160-bit tokens,
    keys equal to the resource names. ``fencing=True`` gives every lock a fencing
    token (:attr:`Lock.fencing_token`); ``notices=False`` never subscribes to release
    notices (waits then end at the retry delays only). ``on_event`` is a hook called
    with every :class:`~redlock_core.Event` (see :meth:`add_listener`).

    Each node gets one connection made like its client's (opened on a short-lived
    thread, and given up by the node's link at the client's ``socket_connect_timeout``,
    or the core's 2 s when it sets none), and, from the first acquisition that waits, a
    subscriber connection for release notices; the Redlock's one long-lived reader
    thread reads them all. The clients' own timeouts and retries do not matter: the
    core's deadlines and node links decide.
    """

    _sentinel_class = _Sentinel
    _retry_class = Retry

    _client_class = redis.Redis
    _client_name = "redis.Redis"

    def __init__(self, clients: Sequence[redis.Redis], **settings: Any) -> None:
        super().__init__(clients, **settings)
        node_clients = self._node_clients
        self._cond = threading.Condition(threading.Lock())
        self._stopped = False
        self.serial = next(_serials)
        self._io = [
            _SocketIO(self, node, client) for node, client in zip(self._engine.nodes, node_clients)
        ]
        self._engine.on_change = lambda running: self._cond.notify_all()
        self._subscribers: list[_SubscriberIO | None] = [None] * len(node_clients)
        self._engine.on_subscriber_timer = self._subscriber_timer
        self._reader = _Reader(self)
        with self._cond:
            for io in self._io:
                io.warm()  # opens a spare connection ahead of the first command
        _live.add(self)

    def _act(self, node: NodeProtocol, actions: list[Action]) -> None:
        self._io[node.index].act(actions)

    def _act_subscriber(self, subscriber: Subscriber, actions: list[Action]) -> None:
        """Under the lock: the subscriptions' actions for a node's subscriber connection
        (made on the first)."""
        io = self._subscribers[subscriber.index]
        if io is None:
            if self._stopped:
                return
            io = _SubscriberIO(self, subscriber, self._node_clients[subscriber.index])
            self._subscribers[subscriber.index] = io
        io.act(actions)

    def _subscriber_timer(self) -> None:
        """Under the lock: the subscriptions are due sooner; the reader looks again."""
        self._reader.poke()

    @classmethod
    def from_urls(cls, urls: Sequence[str], **settings: Any) -> Redlock:
        """A Redlock over new clients made with ``redis.Redis.from_url``; they are
        closed with the Redlock. ``settings`` as for the constructor."""
        if isinstance(urls, str):
            urls = [url for url in urls.split(",") if url]
        clients = [redis.Redis.from_url(url) for url in urls]
        try:
            redlock = cls(clients, **settings)
        except BaseException:
            for client in clients:
                client.close()
            raise
        redlock._owned = clients
        return redlock

    def workers_alive(self) -> list[bool]:
        """Whether the thread that reads each node runs (for diagnostics)."""
        return [self._reader.thread.is_alive()] * len(self._io)

    def in_flight(self) -> list[int]:
        """Commands each node's link has written and awaits replies to."""
        with self._cond:
            return self._engine.in_flight()

    # ---- locking ------------------------------------------------------------------

    def acquire(self, resources: Resources, **options: Unpack[AcquireOptions]) -> Lock:
        """Acquires a lock on ``resources`` (one name or several, ``str`` or
        ``bytes``), retrying as configured, or waiting up to ``blocking_timeout``;
        the options are :class:`AcquireOptions`. Raises :class:`LockHeldError` when
        someone else holds it, :class:`NodesFailedError` when the nodes fail. An
        interrupt (``KeyboardInterrupt``) during it cancels it: the core's release of
        its token is sent, and the interrupt propagates. With ``auto_extend`` a
        background thread keeps the lock alive and calls ``on_lost``."""
        return self._run(self._acquire_steps(resources, options))

    def extend(self, lock: Lock, ttl: Duration | None = None) -> None:
        """``lock.extend(ttl)`` (see :meth:`Lock.extend`)."""
        lock.extend(ttl)

    def release(self, lock: Lock) -> ReleaseResult:
        """``lock.release()`` (see :meth:`Lock.release`)."""
        return lock.release()

    # ---- the driver loop ----------------------------------------------------------

    def _run(self, steps: Steps[T]) -> T:
        """Runs a procedure (see :class:`Procedure`): each of its steps to its outcome."""
        with Procedure(steps) as procedure:
            while procedure.step is not None:
                procedure.send(self._drive(procedure.step))
        return procedure.result

    def _drive(self, step: Step) -> Outcome:
        """Runs ``step``'s operation through the links until it decides; waits for
        nothing but its wait and the deliveries. Its events go to the hooks (and its
        span) from this thread, outside the Redlock's lock. An interrupt abandons it
        (the core's cleanup is sent)."""
        cond = self._cond
        with self._observe(step) as observation:
            with cond:
                running = self._engine.start(step.op, events=observation.wants_events)
            try:
                outcome = self._wait(running, observation)
            except BaseException:
                # Also once the outcome was taken: the caller never got it.
                with cond:
                    self._engine.abandon(running)
                raise
            self._engine.handed(running)
            observation.outcome(outcome)
            return outcome

    def _wait(self, running: Running, observation: Observation) -> Outcome:
        engine, cond = self._engine, self._cond
        while True:
            with cond:
                while True:
                    done = engine.advance(running)
                    events = running.take_events()
                    if done or events:
                        break
                    if self._stopped:
                        raise UsedAfterCloseError("this Redlock was closed while an operation ran")
                    cond.wait(_seconds_until(running.wait_until))
                outcome = engine.take_outcome(running) if done else None
            if events:
                observation.events(events)
            if outcome is not None:
                return outcome

    # ---- inspecting ---------------------------------------------------------------

    def locked(self, resources: Resources) -> bool:
        """Whether anyone holds the lock on ``resources`` now, as the core decides
        from the nodes' answers at the quorum (a token on every key of a quorum of
        nodes); keys left on fewer nodes, by a failed attempt or a holder that lost the
        lock, do not count. It never changes a key. Raises :class:`NodesFailedError`
        when too many nodes failed to say. The answer describes the moment the nodes
        answered: use it for monitoring, never instead of acquiring."""
        return self._run(self._inspecting(resources))

    # ---- closing ------------------------------------------------------------------

    def close(self) -> None:
        """Releases every lock of this Redlock still held (all at once, each within its
        release's deadlines), lets the commands still on their way finish (up to their
        deadlines), then stops the reader thread and closes the clients
        :meth:`from_urls` made. From the moment it starts, every call of the Redlock
        and of its locks (extend, release, owned, check, acquire) raises
        :class:`UsedAfterCloseError`. A lock the program no longer references is not
        released: its keys expire with their TTL."""
        if self._closing:
            return
        self._closing = True
        _live.discard(self)
        try:
            self._release_held()
        finally:
            self._closed = True
            self.flush()
            with self._cond:
                self._stopped = True
                for io in self._io:
                    io._drop()
                # A thread still opening a subscriber connection to an address that
                # never answers ends at the connection's connect timeout; close does not
                # wait that long for it (given up, its connection is closed then).
                for subscriber in self._subscribers:
                    if subscriber is not None:
                        subscriber._stop()
                self._cond.notify_all()
            self._reader.join(0.5)
            with self._cond:
                self._engine.close()
            self._close_owned()

    def _release_held(self) -> None:
        """close()'s releases: every lock still held, their operations all started
        before any is waited for, so that they take as long as the slowest one."""
        held = self._held_at_close()
        if not held:
            return
        with contextlib.ExitStack() as stack:
            started = []
            for lock, step in held:
                observation = stack.enter_context(self._observe(step))
                with self._cond:
                    running = self._engine.start(step.op, events=observation.wants_events)
                started.append((lock, running, observation))
            for index, (lock, running, observation) in enumerate(started):
                try:
                    outcome = self._wait(running, observation)
                except BaseException:
                    with self._cond:
                        for _, other, _ in started[index:]:
                            self._engine.abandon(other)
                    raise
                self._engine.handed(running)
                observation.outcome(outcome)
                lock._released_by(outcome)

    def flush(self) -> None:
        """Waits (at most until their deadlines, and no longer than a second) for the
        commands still on their way: after a decision at a quorum the other nodes'
        commands are still out, and a process that exits at once would leave those
        keys to their TTL. ``close`` and the interpreter's exit call it."""
        limit = now_us() + _FLUSH_LIMIT_US
        with self._cond:
            while not self._engine.idle() and now_us() < limit and not self._stopped:
                self._cond.wait(_seconds_until(limit))

    def __enter__(self) -> Redlock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# Redlocks not closed yet: their last commands are flushed when the interpreter exits
# (the reader thread is a daemon and would be stopped mid-read).
_live: weakref.WeakSet[Redlock] = weakref.WeakSet()
_FLUSH_LIMIT_US = 1_000_000
# Numbers the Redlocks of this process, for their threads' names.
_serials = itertools.count(1)


@atexit.register
def _flush_at_exit() -> None:
    for redlock in list(_live):
        try:
            redlock.flush()
        except Exception:  # never fail the interpreter's exit
            pass


class Lock(LockState):
    """A held lock. ``with lock:`` releases it at the end of the block; leaving the
    block raises :class:`LockLostError` if the lock was lost or ran past its validity
    meanwhile (unless the block is already raising)."""

    _redlock: Redlock

    def _setup(self) -> None:
        # Held while an extension or the release runs: one at a time per lock.
        self._op_lock = threading.Lock()
        self._wake = threading.Condition(threading.Lock())
        self._keeper: threading.Thread | None = None
        if self._auto_extend:
            self._keeper = threading.Thread(
                target=_keep_alive,
                args=(weakref.ref(self), self._wake),
                name="redlock-auto-extend",
                daemon=True,
            )
            self._keeper.start()

    def extend(self, ttl: Duration | None = None) -> None:
        """Extends the lock by its TTL (or ``ttl``) from now. Raises
        :class:`LockLostError` (:class:`LockNotHeldError` when its keys are gone) if it
        is lost, :class:`NodesFailedError` if the nodes failed (the lock then holds
        until ``error.valid_until``)."""
        with self._op_lock:
            error = self._redlock._run(self._extending(ttl))
        self._poke()
        self._signal()
        if error is not None:
            raise error

    def release(self) -> ReleaseResult:
        """Releases the lock on every node (also when lost: it deletes only keys that
        still hold this token). Never raises for node failures (``result.confirmed``
        says whether a quorum confirmed); once a quorum confirmed, later calls return
        that result, and before, the lock is not marked released (call it again). After
        the Redlock's ``close()``, :class:`UsedAfterCloseError`."""
        self._stop_keepalive()
        self._poke()
        with self._op_lock:
            return self._redlock._run(self._releasing())

    def owned(self) -> bool:
        """Whether we hold the lock now: an inspection finds this lock's token on every
        key of a quorum of nodes, and the lease is still valid on our clock (keys can
        outlive the validity by the clock drift; a holder must not count on them then).
        A lock rebuilt with :meth:`Redlock.from_token` is not owned until extended.
        Raises :class:`NodesFailedError` when too many nodes failed to say."""
        return self._redlock._run(self._owning())

    def _poke(self) -> None:
        with self._wake:
            self._wake.notify_all()

    def __enter__(self) -> Lock:
        return self

    def __exit__(self, *exc_info: object) -> None:
        error = self._exit_error(exc_info)
        self.release()
        if error is not None:
            raise error


def _keep_alive(lock_ref: weakref.ref[Lock], wake: threading.Condition) -> None:
    """The auto-extension thread: does what the core's keep-alive says. It holds the
    lock only weakly while it sleeps, so a lock its holder dropped is not kept alive
    forever (it then simply expires)."""
    while True:
        lock = lock_ref()
        if lock is None:
            return
        plan: KeepAlivePlan = lock._keepalive_plan()
        if plan.done:
            lock._signal()
            return
        if plan.extend:
            with lock._op_lock:
                lock._redlock._run(lock._keeping_alive())
            lock._signal()
            continue
        until = plan.until
        del lock
        with wake:
            left = (until - now_us()) / 1e6 if until is not None else 1.0
            if left > 0:
                wake.wait(min(left, 1.0))


class LockContext(LockContextBase):
    """What :meth:`Redlock.lock` returns: acquires on ``__enter__``, releases on
    ``__exit__``."""

    _redlock: Redlock
    _lock: Lock | None

    def __enter__(self) -> Lock:
        self._lock = self._redlock._run(self._entering())
        return self._lock

    def __exit__(self, *exc_info: object) -> None:
        lock = self._leaving()
        if lock is not None:
            lock.__exit__(*exc_info)


# The classes the shared lock() and from_token() make (defined after the Redlock).
Redlock._lock_class = Lock  # type: ignore[misc]
Redlock._context_class = LockContext  # type: ignore[misc]
