"""The asyncio driver: the core's operations over ``redis.asyncio.Redis`` clients.

The coroutine that calls ``acquire``/``extend``/``release`` drives the operation: it
queues each command the core emits for its node, replies land in an inbox, and the
driver waits on it no later than the instant the core names, then hands in the
timeout. The core's deadlines are enforced here whatever the clients' settings.

Each node has one pump task writing its queued commands, in issue order, to one
connection and reading the replies; what a node with an overdue command still accepts
is :class:`~redlock_core._common.NodeQueue`'s rule, as in the synchronous driver.
"""

from __future__ import annotations

import asyncio
import inspect
import weakref
from collections import deque
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import redis.asyncio
from redis.exceptions import ResponseError

from . import _ffi
from ._common import (
    PRELOAD,
    PRELOAD_REPLIES,
    Duration,
    Job,
    NodeQueue,
    Parts,
    ReleaseResult,
    acquire_error,
    build_config,
    call_on_lost,
    check_clients,
    extend_error,
    from_exception,
    from_response,
    hand_in,
    label_of,
    logger,
    node_results,
    release_result,
    ttl_ms,
)
from ._errors import CoreError, LockLostError, NodesFailedError
from ._lock import LockState, OnLost
from ._sync import _shown
from .core import (
    Client,
    Config,
    Lease,
    Operation,
    Outcome,
    Resources,
    now_us,
    resource_list,
)

__all__ = ["AsyncLock", "AsyncLockContext", "AsyncRedlock"]

# Tasks the package started and must not lose to garbage collection.
_background: set[asyncio.Task[Any]] = set()


def _spawn(coroutine: Any) -> asyncio.Task[Any]:
    task = asyncio.get_running_loop().create_task(coroutine)
    _background.add(task)
    task.add_done_callback(_background.discard)
    return task


class _Inbox:
    """Replies of one operation, and a way to wait for the next until an instant."""

    __slots__ = ("_items", "_waiter")

    def __init__(self) -> None:
        self._items: deque[tuple[int, Parts]] = deque()
        self._waiter: asyncio.Future[None] | None = None

    def put(self, item: tuple[int, Parts]) -> None:
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def get(self, timeout: float) -> tuple[int, Parts] | None:
        """The next reply, or ``None`` if none came within ``timeout`` seconds."""
        if not self._items and timeout > 0:
            loop = asyncio.get_running_loop()
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiter = waiter
            timer = loop.call_later(timeout, _resolve, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                self._waiter = None
        return self._items.popleft() if self._items else None


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class _AsyncNode:
    """One Redis node: its client, its queue, and the one pump task (started on first
    use) that writes the queue to one connection and reads the replies."""

    def __init__(self, index: int, client: redis.asyncio.Redis) -> None:
        self.index = index
        self.client = client
        self.label = label_of(client, index)
        self._queue = NodeQueue()
        self._wake: asyncio.Event | None = None
        self._pump: asyncio.Task[None] | None = None
        self._connection: Any = None

    def submit(self, job: Job) -> None:
        reply = self._queue.admit(job, now_us())
        if reply is not None:
            job.deliver((job.request_id, reply))
            return
        pump = self._pump
        if pump is None or pump.done() or pump.get_loop() is not asyncio.get_running_loop():
            if pump is not None and not pump.done():
                self._connection = None  # bound to a loop that no longer runs
            self._wake = asyncio.Event()
            self._pump = _spawn(self._run_pump(self._wake))
        assert self._wake is not None  # set with the pump
        self._wake.set()

    async def _run_pump(self, wake: asyncio.Event) -> None:
        try:
            while True:
                while not self._queue.jobs:
                    if self._queue.closed:
                        return
                    wake.clear()
                    await wake.wait()
                batch = self._queue.take_batch(now_us())
                if batch:
                    await self._send(batch)
        finally:
            await self._disconnect()

    async def _send(self, batch: list[Job]) -> None:
        """Writes the batch in one go and hands out each reply as it is read. Each
        command is sent once: no retry (a retried SET could meet our own write)."""
        failure: Parts | None = None
        try:
            if self._connection is not None and not await self._still_open(self._connection):
                await self._disconnect()
            fresh = self._connection is None
            if fresh:
                pool: Any = self.client.connection_pool
                self._connection = await pool.get_connection()
            connection = self._connection
            data = b"".join([PRELOAD] * fresh + [job.resp for job in batch])
            await connection.send_packed_command([data])
            if fresh:
                for _ in range(PRELOAD_REPLIES):
                    try:
                        await connection.read_response(disable_decoding=True)
                    except ResponseError:
                        pass  # scripts not allowed: the core's EVAL fallback still works
        except Exception as error:
            failure = from_exception(error)
        for _ in batch:
            if failure is None:
                try:
                    parts = from_response(await connection.read_response(disable_decoding=True))
                except ResponseError as error:  # the node's error reply; still in step
                    parts = from_exception(error)
                except Exception as error:
                    failure = from_exception(error)
            if failure is not None:
                parts = failure
            job = self._queue.answered(parts)
            job.deliver((job.request_id, parts))
        if failure is not None:
            await self._disconnect()  # replies may still come: never reuse it out of step

    @staticmethod
    async def _still_open(connection: Any) -> bool:
        """Whether a kept connection is still usable (see the synchronous driver)."""
        try:
            # redis-py 8 names it can_read; earlier versions can_read_destructive.
            check = getattr(connection, "can_read", None) or connection.can_read_destructive
            return not await check()
        except Exception:
            return False

    async def _disconnect(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                await connection.disconnect(nowait=True)
            finally:
                await self.client.connection_pool.release(connection)

    @property
    def in_flight(self) -> int:
        return len(self._queue.in_flight) + len(self._queue.jobs)

    async def flush(self, limit: int) -> None:
        """Waits until every queued command is answered, but no later than their
        deadlines (nor ``limit``)."""
        while True:
            settle_by = self._queue.settle_by()
            if settle_by is None or min(settle_by, limit) <= now_us():
                return
            await asyncio.sleep(0.001)

    async def close(self) -> None:
        self._queue.closed = True
        pump = self._pump
        if pump is None or pump.done():
            return
        if pump.get_loop() is not asyncio.get_running_loop():
            return  # its loop is gone; nothing to wait for
        # A pump blocked on a frozen node is cancelled (its connection is dropped).
        pump.cancel()
        await asyncio.gather(pump, return_exceptions=True)


class AsyncRedlock:
    """A Redlock over independent Redis nodes, one ``redis.asyncio.Redis`` client per
    node. Settings as for :class:`redlock_core.Redlock`."""

    def __init__(
        self,
        clients: Sequence[redis.asyncio.Redis],
        *,
        ttl: Duration = 10.0,
        drift_factor: float | None = None,
        drift_fixed: Duration | None = None,
        node_timeout: Duration | None = None,
        min_validity: Duration | None = None,
        attempts: int | None = None,
        retry_delay: Duration | None = None,
        retry_jitter: Duration | None = None,
        key_prefix: str | bytes | None = None,
        token_bytes: int | None = None,
        max_extensions: int | None = None,
        seed: bytes | None = None,
    ) -> None:
        self._owned: list[redis.asyncio.Redis] = []
        self._closed = False
        node_clients = check_clients(clients, redis.asyncio.Redis, "redis.asyncio.Redis")
        self._config: Config = build_config(
            len(node_clients),
            ttl=ttl,
            drift_factor=drift_factor,
            drift_fixed=drift_fixed,
            node_timeout=node_timeout,
            min_validity=min_validity,
            attempts=attempts,
            retry_delay=retry_delay,
            retry_jitter=retry_jitter,
            key_prefix=key_prefix,
            token_bytes=token_bytes,
            max_extensions=max_extensions,
        )
        self._client = Client(self._config, seed=seed)
        self._nodes = [_AsyncNode(i, c) for i, c in enumerate(node_clients)]
        self._labels = tuple(node.label for node in self._nodes)

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

    @property
    def config(self) -> Config:
        return self._config

    @property
    def nodes(self) -> tuple[str, ...]:
        return self._labels

    @property
    def quorum(self) -> int:
        return self._config.quorum

    def in_flight(self) -> list[int]:
        """Commands in flight per node (for diagnostics)."""
        return [node.in_flight for node in self._nodes]

    # ---- locking ------------------------------------------------------------------

    async def acquire(
        self,
        resources: Resources,
        *,
        ttl: Duration | None = None,
        auto_extend: bool = False,
        on_lost: OnLost | None = None,
    ) -> AsyncLock:
        """Acquires a lock (see :meth:`redlock_core.Redlock.acquire`). With
        ``auto_extend`` a task keeps it alive; ``on_lost`` may be a plain function or
        a coroutine function."""
        names = resource_list(resources)
        shown = _shown(resources, names)
        client = self._usable()
        with client.acquire(names, now_us(), ttl_ms=ttl_ms(ttl)) as op:
            try:
                outcome = await self._run(op)
            except BaseException:
                # Cancelled mid-attempt: some nodes may hold its token; clean them.
                await self._release_token(names, op.token)
                raise
        with outcome:
            if outcome.kind != "acquired":
                raise acquire_error(outcome, shown, self._labels)
            lease = outcome.lease()
            assert lease is not None  # an acquired outcome always has a lease
            return AsyncLock(
                self,
                shown,
                lease,
                outcome.attempts,
                node_results(outcome, self._labels),
                auto_extend=auto_extend,
                on_lost=on_lost,
            )

    def lock(
        self,
        resources: Resources,
        *,
        ttl: Duration | None = None,
        auto_extend: bool = False,
        on_lost: OnLost | None = None,
    ) -> AsyncLockContext:
        """``async with redlock.lock("name") as lock:`` acquires on entry, releases on
        exit."""
        return AsyncLockContext(self, resources, ttl=ttl, auto_extend=auto_extend, on_lost=on_lost)

    def from_token(self, resources: Resources, token: str) -> AsyncLock:
        """A lock rebuilt from a token kept elsewhere, to extend or release it."""
        names = resource_list(resources)
        lease = self._usable().lease(names, token, 0)
        return AsyncLock(
            self, _shown(resources, names), lease, None, (), auto_extend=False, on_lost=None
        )

    async def extend(self, lock: AsyncLock, ttl: Duration | None = None) -> None:
        await lock.extend(ttl)

    async def release(self, lock: AsyncLock) -> ReleaseResult:
        return await lock.release()

    # ---- the driver loop ----------------------------------------------------------

    def _usable(self) -> Client:
        if self._closed:
            raise RuntimeError("this AsyncRedlock is closed")
        return self._client

    async def _run(self, op: Operation) -> Outcome:
        """Drives ``op`` to its outcome."""
        inbox = _Inbox()
        deliver = inbox.put
        nodes = self._nodes
        wait_until: int | None = None
        while True:
            kind = op.poll()
            if kind == _ffi.OUTPUT_SEND:
                node, request_id, deadline, resp = op.packed_command()
                job = Job(request_id, deadline, op.command_kind()[0], op.token, resp, deliver)
                nodes[node].submit(job)
            elif kind == _ffi.OUTPUT_WAIT:
                wait_until = op.wait_until()
            elif kind == _ffi.OUTPUT_OUTCOME:
                return op.take_outcome()
            else:
                if wait_until is None:
                    wait_until = op.poll_timeout()
                    if wait_until is None:
                        raise CoreError(
                            _ffi.PANIC, "stalled", "the operation neither waits nor ends"
                        )
                item = await inbox.get((wait_until - now_us()) / 1e6)
                if item is None:
                    op.handle_timeout(now_us())
                else:
                    hand_in(op, item[0], item[1], now_us())
                wait_until = None

    async def _drive(self, op: Operation) -> Outcome:
        """Drives ``op`` to its outcome and frees it."""
        with op:
            return await self._run(op)

    async def _release_token(self, names: list[bytes], token: str) -> None:
        try:
            with self._client.lease(names, token, 0) as lease:
                (await self._drive(self._client.release(lease, now_us()))).close()
        except Exception:
            logger.exception("cleaning up after an interrupted acquisition failed")

    async def aclose(self) -> None:
        """Flushes, cancels what still waits for a node that does not answer, and
        closes the clients :meth:`from_urls` made. Locks still held are not released."""
        if self._closed:
            return
        self._closed = True
        await self.flush()
        for node in self._nodes:
            await node.close()
        for client in self._owned:
            await client.aclose()

    async def flush(self) -> None:
        """Waits (at most until their deadlines) for the commands still on their way
        (see :meth:`redlock_core.Redlock.flush`); ``aclose`` calls it."""
        limit = now_us() + 1_000_000
        for node in self._nodes:
            await node.flush(limit)

    async def __aenter__(self) -> AsyncRedlock:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        ttl = self._config.ttl_ms
        return f"<AsyncRedlock {len(self._nodes)} nodes, quorum {self.quorum}, ttl {ttl} ms>"


class AsyncLock(LockState):
    """A held lock. ``async with`` releases it at the end of the block and raises
    :class:`LockLostError` there if the block ran past the lock's validity or the lock
    was lost (unless the block is already raising)."""

    def __init__(
        self,
        redlock: AsyncRedlock,
        resources: Sequence[str | bytes],
        lease: Lease,
        attempts: int | None,
        nodes: tuple[Any, ...],
        *,
        auto_extend: bool,
        on_lost: OnLost | None,
    ) -> None:
        super().__init__(resources, lease, attempts, nodes, on_lost, auto_extend)
        self._redlock = redlock
        self._op_lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._stopping = False
        self._signal_owed = False
        self._keeper: asyncio.Task[None] | None = None
        if auto_extend:
            self._keeper = _spawn(_keep_alive(weakref.ref(self), self._wake))

    async def extend(self, ttl: Duration | None = None) -> None:
        """Extends the lock (see :meth:`redlock_core.Lock.extend`)."""
        try:
            async with self._op_lock:
                await self._extend_locked(ttl_ms(ttl))
        finally:
            await self._deliver_signal()
        self._wake.set()

    async def _extend_locked(self, ttl: int | None) -> None:
        if self._lost is not None:
            raise self._lost
        if self._released is not None:
            raise LockLostError(
                f"lock on {self._describe()} was released",
                resources=self._resources,
                reason="released",
            )
        redlock = self._redlock
        op = redlock._usable().extend(self._lease, now_us(), ttl_ms=ttl)
        with await redlock._drive(op) as outcome:
            lease = outcome.lease()
            if lease is not None:
                self._set_lease(lease)
            self._nodes = node_results(outcome, redlock._labels)
            if outcome.kind == "extended":
                return
            error = extend_error(outcome, self._resources, redlock._labels)
        if isinstance(error, LockLostError):
            self._mark_lost(error)
        raise error

    def _mark_lost(self, error: LockLostError) -> None:
        if self._lost is None:
            self._lost = error
            self._signal_owed = True

    async def _deliver_signal(self) -> None:
        owed, self._signal_owed = self._signal_owed, False
        if owed and self._lost is not None:
            result = call_on_lost(self._on_lost, self._lost)
            if inspect.isawaitable(result):
                try:
                    await result
                except Exception:
                    logger.exception("the on_lost callback raised")

    async def release(self) -> ReleaseResult:
        """Releases the lock on every node; never raises for node failures; idempotent."""
        self._stopping = True
        self._wake.set()
        async with self._op_lock:
            if self._released is not None:
                return self._released
            redlock = self._redlock
            with await redlock._drive(redlock._usable().release(self._lease, now_us())) as outcome:
                result = release_result(outcome, redlock._labels)
            self._nodes = result.nodes
            self._released = result
            return result

    async def __aenter__(self) -> AsyncLock:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        error = self._exit_error()
        await self.release()
        if exc_type is None and error is not None:
            raise error


_UNTIL_END = -1


async def _keep_alive(lock_ref: weakref.ref[AsyncLock], wake: asyncio.Event) -> None:
    """The auto-extension task (the same plan as the synchronous driver's thread)."""
    retry_at: int | None = None
    while True:
        lock = lock_ref()
        if lock is None or lock._stopping or lock._released is not None or lock._lost is not None:
            return
        if retry_at == _UNTIL_END:
            at: int | None = None
        elif retry_at is not None:
            at = retry_at
        else:
            at = lock._redlock._client.next_extension(lock._lease, now_us())
        valid_until = lock._valid_until_us
        del lock
        woke = await _sleep(lock_ref, wake, valid_until if at is None else at, valid_until)
        if woke == "stop":
            return
        if woke == "changed":
            retry_at = None
            continue
        lock = lock_ref()
        if lock is None:
            return
        done = False
        async with lock._op_lock:
            if lock._stopping or lock._released is not None or lock._lost is not None:
                return
            if lock._valid_until_us != valid_until:
                retry_at = None
                continue
            if at is None:
                lock._mark_lost(lock._expired_error())
                done = True
            else:
                try:
                    await lock._extend_locked(None)
                    retry_at = None
                except LockLostError:
                    done = True
                except NodesFailedError as error:
                    retry_at = _UNTIL_END if error.retry_at_us is None else error.retry_at_us
                except Exception as error:  # the AsyncRedlock was closed, or a bug
                    lost = LockLostError(
                        f"lock on {lock._describe()} could not be kept alive: {error}",
                        resources=lock._resources,
                        reason="error",
                    )
                    lost.__cause__ = error
                    lock._mark_lost(lost)
                    done = True
        await lock._deliver_signal()
        del lock
        if done:
            return


async def _sleep(
    lock_ref: weakref.ref[AsyncLock], wake: asyncio.Event, target: int, valid_until: int
) -> str:
    while True:
        lock = lock_ref()
        if lock is None or lock._stopping:
            return "stop"
        if lock._valid_until_us != valid_until:
            return "changed"
        del lock
        left = target - now_us()
        if left <= 0:
            return "due"
        wake.clear()
        try:
            await asyncio.wait_for(wake.wait(), left / 1e6)
        except asyncio.TimeoutError:
            pass


class AsyncLockContext:
    """What :meth:`AsyncRedlock.lock` returns: acquires on ``__aenter__``, releases on
    ``__aexit__``."""

    def __init__(
        self,
        redlock: AsyncRedlock,
        resources: Resources,
        *,
        ttl: Duration | None,
        auto_extend: bool,
        on_lost: OnLost | None,
    ) -> None:
        self._redlock = redlock
        self._resources = resources
        self._ttl = ttl
        self._auto_extend = auto_extend
        self._on_lost = on_lost
        self._lock: AsyncLock | None = None

    async def __aenter__(self) -> AsyncLock:
        if self._lock is not None:
            raise RuntimeError("this lock context is already entered")
        self._lock = await self._redlock.acquire(
            self._resources, ttl=self._ttl, auto_extend=self._auto_extend, on_lost=self._on_lost
        )
        return self._lock

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        lock, self._lock = self._lock, None
        if lock is not None:
            await lock.__aexit__(exc_type, exc, traceback)
