"""The asyncio driver: the core's operations over ``redis.asyncio.Redis`` clients.

The node protocol is :mod:`redlock_core._protocol`'s, shared with the synchronous
driver; this module only runs it on the event loop. A link's ``CONNECT`` starts a task
that opens a connection made like the client's own (TLS, ``AUTH``, ``SELECT``), then
reads the node's bytes into the core's decoder; ``WRITE`` puts the core's RESP bytes on
the stream at once; ``CLOSE`` closes it, or cancels the task while it is still opening
(the link gives an attempt up at its connect timeout). One timer task per Redlock hands
the links their time. The coroutine that acquires, extends or releases awaits a wake-up
until its operation decides; cancelling it abandons the operation (the core's release
of an acquisition's token goes to the links) and the ``CancelledError`` propagates.
"""

from __future__ import annotations

import asyncio
import inspect
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import redis.asyncio
import redis.asyncio.sentinel
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff

from ._common import MasterSearch, Procedure, RedlockBase, connection_like, subscriber_like
from ._lock import LockContextBase, LockState
from ._protocol import (
    CLOSE,
    CONNECT,
    WRITE,
    Action,
    NodeProtocol,
    Running,
    Subscriber,
    earliest,
)
from .core import Outcome, Resources, now_us

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._common import AcquireOptions, Duration, ReleaseResult, Step, Steps, T

__all__ = ["AsyncLock", "AsyncLockContext", "AsyncRedlock"]


# Tasks the package started and must not lose to garbage collection.
_background: set[asyncio.Task[Any]] = set()


def _spawn(coroutine: Any) -> asyncio.Task[Any]:
    task = asyncio.get_running_loop().create_task(coroutine)
    _background.add(task)
    task.add_done_callback(_background.discard)
    return task


class _ActionIO:
    """What a node's command connection and its subscriber connection share: the task
    that opens and reads the connection, the writer the actions' bytes go to, and how
    the actions are carried out (``CONNECT`` starts the task, ``WRITE`` puts the bytes
    on the connection at once, ``CLOSE`` ends it)."""

    _writer: asyncio.StreamWriter | None
    _task: asyncio.Task[None] | None

    def _open(self) -> None:
        """Starts the task that opens the connection and reads it."""
        raise NotImplementedError

    def _not_connected(self) -> None:
        """A write found no open connection: reports it failed."""
        raise NotImplementedError

    def act(self, actions: list[Action]) -> None:
        for action in actions:
            if action[0] == CONNECT:
                self._forget()
                self._open()
            elif action[0] == WRITE:
                writer = self._writer
                if writer is None or writer.is_closing():
                    self._not_connected()
                    return
                writer.write(action[1])  # type: ignore[misc]
            elif action[0] == CLOSE:
                self._forget()

    def _forget(self) -> None:
        """Drops the current connection (the link or the subscriptions already count it
        closed)."""
        task, self._task = self._task, None
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
        if task is not None and task is not asyncio.current_task():
            task.cancel()


class _StreamIO(_ActionIO):
    """One node's streams: the task that opens and reads its connection, and the
    writer the link's writes go to."""

    def __init__(self, owner: AsyncRedlock, node: NodeProtocol, client: Any) -> None:
        self._owner = owner
        self._node = node
        self._client = client
        self._writer: asyncio.StreamWriter | None = None
        self._connection: Any = None
        self._task: asyncio.Task[None] | None = None
        # A connection opened ahead of the link's first CONNECT (see AsyncRedlock._warm),
        # and the task opening it: the link's first CONNECT takes it over.
        self._spare: Any = None
        self._warming: asyncio.Task[Any] | None = None

    def _new_connection(self) -> Any:
        return connection_like(self._client, AsyncRetry(NoBackoff(), 0))

    def warm(self) -> asyncio.Task[Any]:
        """Starts opening the spare connection."""
        task = self._warming = _spawn(self._warm_up())
        task.add_done_callback(self._warm_done)
        return task

    async def _warm_up(self) -> Any:
        connection = self._new_connection()
        try:
            await connection.connect()
        except BaseException:  # failed, or cancelled: nothing is left open
            await _quietly(connection.disconnect())
            raise
        return connection

    def _warm_done(self, task: asyncio.Task[Any]) -> None:
        """The spare is open (or could not be): kept if no CONNECT took it over."""
        if task.cancelled():
            return
        error = task.exception()  # retrieved either way
        if task is not self._warming:
            return  # taken over: its CONNECT's task has it
        self._warming = None
        if error is not None:
            return  # the link's own CONNECT will try again and say why
        connection = task.result()
        if self._spare is None and self._task is None and not self._owner._closed:
            self._spare = connection
        else:
            _spawn(_quietly(connection.disconnect()))

    def _open(self) -> None:
        spare, self._spare = self._spare, None
        warming, self._warming = self._warming, None
        self._task = _spawn(self._serve(self._node.generation, spare, warming))

    def _not_connected(self) -> None:
        self._node.failed(self._node.generation, ConnectionError("not connected"), now_us())
        self._owner._pump(self._node)

    async def _serve(self, generation: int, spare: Any, warming: asyncio.Task[Any] | None) -> None:
        """Opens the connection (or takes the spare, or the spare being opened), then
        reads it. Cancelled (a ``CLOSE``: the link gave the attempt up, or closed the
        connection), it closes what it opened."""
        node, owner = self._node, self._owner
        connection = spare
        try:
            if connection is None and warming is not None:
                connection = await warming  # cancelled with this task
            if connection is None:
                connection = self._new_connection()
                await connection.connect()
            reader, writer = connection._reader, connection._writer
            if reader is None or writer is None:
                raise ConnectionError("the client's connection has no streams")
        except asyncio.CancelledError:
            if connection is None and warming is not None:
                connection = _opened(warming)  # cancelled just as the spare opened
            if connection is not None:
                await _quietly(connection.disconnect())
            raise
        except Exception as error:
            node.failed(generation, error, now_us())
            owner._pump(node)
            if connection is not None:
                await _quietly(connection.disconnect())
            return
        if generation != node.generation:
            await _quietly(connection.disconnect())
            return
        self._connection, self._writer = connection, writer
        node.connected(generation, now_us())
        owner._pump(node)
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    raise ConnectionError("the node closed the connection")
                if not node.data_received(generation, data, now_us()):
                    owner._pump(node)
                    break
                owner._pump(node)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            if self._writer is writer:
                self._writer = None
                node.failed(generation, error, now_us())
                owner._pump(node)
        finally:
            writer.close()
            self._connection = None

    async def aclose(self) -> None:
        task = self._task
        self._forget()
        warming, self._warming = self._warming, None
        if warming is not None:
            warming.cancel()
            await asyncio.gather(warming, return_exceptions=True)
            opened = _opened(warming)  # it opened before the cancel
            if opened is not None:
                await _quietly(opened.disconnect())
        spare, self._spare = self._spare, None
        if spare is not None:
            await _quietly(spare.disconnect())
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)

    def is_open(self) -> bool:
        return self._writer is not None


class _SubscriberIO(_ActionIO):
    """One node's subscriber connection for release notices (made like the client's
    own, speaking RESP2), as the core's subscriptions say: ``CONNECT`` starts a task
    that opens it and reads it into the engine, ``WRITE`` puts their bytes on it at
    once, ``CLOSE`` ends it."""

    def __init__(self, owner: AsyncRedlock, subscriber: Subscriber, client: Any) -> None:
        self._owner = owner
        self._subscriber = subscriber
        self._client = client
        self._writer: asyncio.StreamWriter | None = None
        self._task: asyncio.Task[None] | None = None

    def _open(self) -> None:
        if not self._owner._closed:
            self._task = _spawn(self._serve(self._subscriber.generation))

    def _not_connected(self) -> None:
        self._forget()
        self._owner._engine.subscriber_failed(self._subscriber, self._subscriber.generation)

    async def _serve(self, generation: int) -> None:
        engine, subscriber = self._owner._engine, self._subscriber
        connection = subscriber_like(self._client, AsyncRetry(NoBackoff(), 0))
        try:
            await connection.connect()
            reader, writer = connection._reader, connection._writer
            if reader is None or writer is None:
                raise ConnectionError("the client's connection has no streams")
        except asyncio.CancelledError:
            await _quietly(connection.disconnect())
            raise
        except Exception:  # no notices from this node for a while; waits go on
            await _quietly(connection.disconnect())
            engine.subscriber_failed(subscriber, generation)
            return
        try:
            if generation != subscriber.generation or self._owner._closed:
                return
            # Current before the engine hears of it: the subscriptions it writes at once
            # go on this connection.
            self._writer = writer
            if not engine.subscriber_opened(subscriber, generation):
                return
            while True:
                data = await reader.read(65536)
                if not data:
                    raise ConnectionError("the node closed the connection")
                if not engine.subscriber_received(subscriber, generation, data):
                    return  # refused, out of step, or closed by the subscriptions already
        except asyncio.CancelledError:
            raise
        except Exception:  # the connection is lost
            engine.subscriber_failed(subscriber, generation)
        finally:
            if self._writer is writer:
                self._writer = None
            await _quietly(connection.disconnect())

    async def aclose(self) -> None:
        task = self._task
        self._forget()
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _opened(task: asyncio.Task[Any]) -> Any:
    """The connection ``task`` opened, or ``None`` (not done, failed or cancelled)."""
    if not task.done() or task.cancelled() or task.exception() is not None:
        return None
    return task.result()


async def _quietly(awaitable: Any) -> None:
    try:
        await awaitable
    except Exception:  # closing a connection that failed anyway
        pass


class _Sentinel(redis.asyncio.sentinel.Sentinel):
    """redis-py's Sentinel, whose master search says what each Sentinel answered, and
    whose Sentinels each get one bound (their ``socket_timeout``, the Sentinel bound of
    ``from_sentinel``) for connecting and answering together: redis-py gives the
    connect and the read each the whole bound."""

    async def discover_master(self, service_name: str) -> tuple[str, int]:
        search = MasterSearch(self, service_name)
        bound = self.sentinel_kwargs.get("socket_timeout")
        for sentinel in search:
            try:
                query = sentinel.sentinel_get_master_addr_by_name(service_name)
                search.answer(await asyncio.wait_for(query, bound))
            except redis.RedisError as error:
                search.answer(error)
            except asyncio.TimeoutError:
                # Cancelled mid-command, redis-py drops that connection.
                search.answer(redis.TimeoutError(f"no answer within {bound} s"))
        return search.master()


class AsyncRedlock(RedlockBase["AsyncLock", "AsyncLockContext"]):
    """A Redlock over independent Redis nodes, one ``redis.asyncio.Redis`` client per
    node. Settings as for :class:`redlock_core.Redlock`."""

    _sentinel_class = _Sentinel
    _retry_class = AsyncRetry

    _client_class = redis.asyncio.Redis
    _client_name = "redis.asyncio.Redis"

    def __init__(self, clients: Sequence[redis.asyncio.Redis], **settings: Any) -> None:
        super().__init__(clients, **settings)
        node_clients = self._node_clients
        self._streams = [
            _StreamIO(self, node, client) for node, client in zip(self._engine.nodes, node_clients)
        ]
        self._wakers: dict[int, asyncio.Future[None]] = {}
        self._engine.on_change = self._changed
        self._subscribers: list[_SubscriberIO | None] = [None] * len(node_clients)
        self._engine.on_subscriber_timer = self._poke_timer
        self._timer: asyncio.Task[None] | None = None
        self._timer_poke: asyncio.Event | None = None
        self._warmed = False

    async def _warm(self) -> None:
        """Before the first operation is created, opens one connection per node (at
        most a node timeout's wait), so that the first round does not pay for TCP and
        the client's handshake within its deadline."""
        if self._warmed or self._closed:
            return
        self._warmed = True
        tasks = [stream.warm() for stream in self._streams]
        await asyncio.wait(tasks, timeout=self._config.node_timeout_us / 1e6)

    @classmethod
    def from_urls(cls, urls: Sequence[str], **settings: Any) -> AsyncRedlock:
        """An AsyncRedlock over new clients made with ``redis.asyncio.Redis.from_url``;
        they are closed by :meth:`aclose`."""
        if isinstance(urls, str):
            urls = [url for url in urls.split(",") if url]
        clients = [redis.asyncio.Redis.from_url(url) for url in urls]
        redlock = cls(clients, **settings)
        redlock._owned = clients
        return redlock

    def in_flight(self) -> list[int]:
        """Commands each node's link has written and awaits replies to."""
        return self._engine.in_flight()

    # ---- the engine's callbacks -----------------------------------------------------

    def _act(self, node: NodeProtocol, actions: list[Action]) -> None:
        self._streams[node.index].act(actions)
        if any(action[0] == CONNECT for action in actions):
            # The link gives the attempt up at its connect timeout: the timer task must
            # look at its instant, whoever pumped the link.
            self._poke_timer()

    def _act_subscriber(self, subscriber: Subscriber, actions: list[Action]) -> None:
        io = self._subscribers[subscriber.index]
        if io is None:
            io = _SubscriberIO(self, subscriber, self._node_clients[subscriber.index])
            self._subscribers[subscriber.index] = io
        io.act(actions)

    def _pump(self, node: NodeProtocol) -> None:
        self._engine.pump(node)
        self._poke_timer()

    def _changed(self, running: Running) -> None:
        waker = self._wakers.pop(running.tag, None)
        if waker is not None and not waker.done():
            waker.set_result(None)

    def _poke_timer(self) -> None:
        """Makes sure the timer task runs and looks at the links' instants again."""
        if self._timer is None or self._timer.done():
            self._timer_poke = asyncio.Event()
            self._timer = _spawn(self._tick())
        elif self._timer_poke is not None and not self._timer_poke.is_set():
            self._timer_poke.set()

    async def _tick(self) -> None:
        """Hands the links and the subscriptions their time, at the instants they
        name."""
        poke = self._timer_poke
        assert poke is not None
        engine = self._engine
        while not self._closed or not engine.idle():
            due = engine.timers()
            if not self._closed:
                due = earliest(due, engine.subscriber_timers())
            if due is None and engine.idle():
                return
            delay = 1.0 if due is None else min(1.0, max(0.0, (due - now_us()) / 1e6))
            poke.clear()
            try:
                await asyncio.wait_for(poke.wait(), delay)
            except asyncio.TimeoutError:
                pass

    # ---- locking ------------------------------------------------------------------

    async def acquire(self, resources: Resources, **options: Unpack[AcquireOptions]) -> AsyncLock:
        """Acquires a lock on ``resources`` (see :meth:`redlock_core.Redlock.acquire`
        and :class:`AcquireOptions`). Cancelling the task abandons the acquisition:
        the core's release of its token goes out, and the ``CancelledError``
        propagates. With ``auto_extend`` a task keeps the lock alive."""
        return await self._run(self._acquire_steps(resources, options))

    async def extend(self, lock: AsyncLock, ttl: Duration | None = None) -> None:
        """``await lock.extend(ttl)`` (see :meth:`AsyncLock.extend`)."""
        await lock.extend(ttl)

    async def release(self, lock: AsyncLock) -> ReleaseResult:
        """``await lock.release()`` (see :meth:`AsyncLock.release`)."""
        return await lock.release()

    async def _run(self, steps: Steps[T]) -> T:
        """Runs a procedure (see :class:`Procedure`) on the event loop, after the
        first operation's connections are warm."""
        await self._warm()
        with Procedure(steps) as procedure:
            while procedure.step is not None:
                procedure.send(await self._drive(procedure.step))
        return procedure.result

    async def _drive(self, step: Step) -> Outcome:
        """Awaits ``step``'s outcome; wakes at its wait and at deliveries only. Its
        events go to the hooks (and its span) from this task."""
        engine = self._engine
        loop = asyncio.get_running_loop()
        with self._observe(step) as observation:
            running = engine.start(step.op, events=observation.wants_events)
            self._poke_timer()
            try:
                while True:
                    done = engine.advance(running)
                    events = running.take_events()
                    if events:
                        observation.events(events)
                    if done:
                        break
                    # One future per wait, resolved by a delivery or at the operation's
                    # wait.
                    waker: asyncio.Future[None] = loop.create_future()
                    self._wakers[running.tag] = waker
                    at = running.wait_until
                    timer = None
                    if at is not None:
                        timer = loop.call_later(max(0.0, (at - now_us()) / 1e6), _resolve, waker)
                    try:
                        await waker
                    finally:
                        if timer is not None:
                            timer.cancel()
            except BaseException:
                self._wakers.pop(running.tag, None)
                engine.abandon(running)
                self._poke_timer()
                raise
            self._wakers.pop(running.tag, None)
            outcome = engine.take_outcome(running)
            # No await between taking the outcome and returning it: nothing can cancel
            # this task in between.
            engine.handed(running)
            observation.outcome(outcome)
            return outcome

    # ---- inspecting ---------------------------------------------------------------

    async def locked(self, resources: Resources) -> bool:
        """Whether anyone holds the lock on ``resources`` now, as the core decides at
        the quorum (see :meth:`redlock_core.Redlock.locked`). Raises
        :class:`NodesFailedError` when too many nodes failed to say."""
        return await self._run(self._inspecting(resources))

    # ---- closing ------------------------------------------------------------------

    async def aclose(self) -> None:
        """Releases every lock of this Redlock still held (all at once, each within its
        release's deadlines), lets the commands on their way finish (up to their
        deadlines, at most a second), closes the connections, and closes the clients
        :meth:`from_urls` made. From the moment it starts, every call of the Redlock
        and of its locks raises :class:`UsedAfterCloseError`. A lock the program no
        longer references is not released: its keys expire with their TTL."""
        if self._closing:
            return
        self._closing = True
        try:
            held = self._held_at_close()
            if held:
                await self._warm()
                outcomes = await asyncio.gather(
                    *(self._drive(step) for _, step in held), return_exceptions=True
                )
                for (lock, _), outcome in zip(held, outcomes):
                    if isinstance(outcome, Outcome):
                        lock._released_by(outcome)
        finally:
            self._closed = True
            await self.flush()
            for subscriber in self._subscribers:
                if subscriber is not None:
                    await subscriber.aclose()
            for stream in self._streams:
                await stream.aclose()
            if self._timer is not None:
                self._timer.cancel()
                await asyncio.gather(self._timer, return_exceptions=True)
            self._engine.close()
            for client in self._owned:
                await client.aclose()

    async def flush(self) -> None:
        """Waits (at most until their deadlines, and a second) for the commands still
        on their way (see :meth:`redlock_core.Redlock.flush`); ``aclose`` calls it."""
        limit = now_us() + 1_000_000
        while not self._engine.idle() and now_us() < limit:
            self._poke_timer()
            await asyncio.sleep(0.005)

    async def __aenter__(self) -> AsyncRedlock:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class AsyncLock(LockState):
    """A held lock of an :class:`AsyncRedlock`: as :class:`redlock_core.Lock`, left
    with ``async with`` and with coroutine methods."""

    _redlock: AsyncRedlock

    def _setup(self) -> None:
        self._op_lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._keeper: asyncio.Task[None] | None = None
        if self._auto_extend:
            self._keeper = _spawn(_keep_alive(weakref.ref(self), self._wake))

    async def extend(self, ttl: Duration | None = None) -> None:
        """Extends the lock (see :meth:`redlock_core.Lock.extend`)."""
        async with self._op_lock:
            error = await self._redlock._run(self._extending(ttl))
        self._wake.set()
        await _awaited(self._signal())
        if error is not None:
            raise error

    async def release(self) -> ReleaseResult:
        """Releases the lock on every node (see :meth:`redlock_core.Lock.release`)."""
        self._stop_keepalive()
        self._wake.set()
        async with self._op_lock:
            return await self._redlock._run(self._releasing())

    async def owned(self) -> bool:
        """Whether we hold the lock now (see :meth:`redlock_core.Lock.owned`). Raises
        :class:`NodesFailedError` when too many nodes failed to say."""
        return await self._redlock._run(self._owning())

    async def __aenter__(self) -> AsyncLock:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        error = self._exit_error(exc_info)
        await self.release()
        if error is not None:
            raise error


async def _awaited(value: Any) -> None:
    if inspect.isawaitable(value):
        await value


async def _keep_alive(lock_ref: weakref.ref[AsyncLock], wake: asyncio.Event) -> None:
    """The auto-extension task: does what the core's keep-alive says."""
    while True:
        lock = lock_ref()
        if lock is None:
            return
        plan = lock._keepalive_plan()
        if plan.done:
            await _awaited(lock._signal())
            return
        if plan.extend:
            async with lock._op_lock:
                await lock._redlock._run(lock._keeping_alive())
            await _awaited(lock._signal())
            continue
        until = plan.until
        del lock
        wake.clear()
        delay = 1.0 if until is None else min(1.0, max(0.0, (until - now_us()) / 1e6))
        try:
            await asyncio.wait_for(wake.wait(), delay)
        except asyncio.TimeoutError:
            pass


class AsyncLockContext(LockContextBase):
    """What :meth:`AsyncRedlock.lock` returns: acquires on ``__aenter__``, releases on
    ``__aexit__``."""

    _redlock: AsyncRedlock
    _lock: AsyncLock | None

    async def __aenter__(self) -> AsyncLock:
        lock: AsyncLock = await self._redlock._run(self._entering())
        self._lock = lock
        return lock

    async def __aexit__(self, *exc_info: object) -> None:
        lock = self._leaving()
        if lock is not None:
            await lock.__aexit__(*exc_info)


# The classes the shared lock() and from_token() make (defined after the Redlock).
AsyncRedlock._lock_class = AsyncLock  # type: ignore[misc]
AsyncRedlock._context_class = AsyncLockContext  # type: ignore[misc]
