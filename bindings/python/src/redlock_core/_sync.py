"""The synchronous driver: the core's operations over ``redis.Redis`` clients.

The thread that calls ``acquire``/``extend``/``release`` drives the operation: it
queues each command the core emits for its node, waits for replies no later than the
instant the core names, and hands in replies and timeouts. Each node has one
long-lived daemon worker thread that only does I/O: it writes the node's queued
commands, in issue order, to one connection (pipelined, without redis-py's retries) and
reads the replies. Workers never touch a core handle.

The core's deadlines are enforced by the driving thread, whatever the clients' socket
settings: a node that does not answer in time counts as timed out and the operation
moves on. A blocked worker cannot be interrupted; what a node with an overdue command
still accepts is :class:`~redlock_core._common.NodeQueue`'s rule, so a frozen node
holds one thread and one connection, never a growing pile, and stalls no
acquisition.
"""

from __future__ import annotations

import atexit
import itertools
import queue
import threading
import weakref
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import redis
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

__all__ = ["Lock", "LockContext", "Redlock"]


class _Node:
    """One Redis node: its client, its queue, and the one worker thread (started on
    first use, long-lived) that writes the queue to one connection and reads the
    replies."""

    def __init__(self, index: int, client: redis.Redis, owner: int) -> None:
        self.index = index
        self.client = client
        self.label = label_of(client, index)
        self.thread_name = f"redlock-{owner}-node-{index}"
        self._cond = threading.Condition(threading.Lock())
        self._queue = NodeQueue()
        self._worker: threading.Thread | None = None
        self._connection: Any = None

    def submit(self, job: Job) -> None:
        with self._cond:
            reply = self._queue.admit(job, now_us())
            if reply is None:
                if self._worker is None:
                    self._worker = threading.Thread(
                        target=self._work, name=self.thread_name, daemon=True
                    )
                    self._worker.start()
                self._cond.notify()
                return
        job.deliver((job.request_id, reply))

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._queue.jobs:
                    if self._queue.closed:
                        self._disconnect()
                        return
                    self._cond.wait()
                batch = self._queue.take_batch(now_us())
            if batch:
                self._send(batch)

    def _send(self, batch: list[Job]) -> None:
        """Writes the batch in one go and hands out each reply as it is read. Each
        command is sent once: no retry (a retried SET could meet our own write)."""
        failure: Parts | None = None
        try:
            if self._connection is not None and not self._still_open(self._connection):
                self._disconnect()
            fresh = self._connection is None
            if fresh:
                self._connection = self.client.connection_pool.get_connection()
            connection = self._connection
            data = b"".join([PRELOAD] * fresh + [job.resp for job in batch])
            connection.send_packed_command([data])
            if fresh:
                for _ in range(PRELOAD_REPLIES):
                    try:
                        connection.read_response(disable_decoding=True)
                    except ResponseError:
                        pass  # scripts not allowed: the core's EVAL fallback still works
        except Exception as error:
            failure = from_exception(error)
        for _ in batch:
            if failure is None:
                try:
                    parts = from_response(connection.read_response(disable_decoding=True))
                except ResponseError as error:  # the node's error reply; still in step
                    parts = from_exception(error)
                except Exception as error:
                    failure = from_exception(error)
            if failure is not None:
                parts = failure
            with self._cond:
                job = self._queue.answered(parts)
                if not self._queue.in_flight and not self._queue.jobs:
                    self._cond.notify_all()  # for flush()
            job.deliver((job.request_id, parts))
        if failure is not None:
            self._disconnect()  # replies may still come: never reuse it out of step

    @staticmethod
    def _still_open(connection: Any) -> bool:
        """Whether a kept connection is still usable: nothing is owed on it, so any
        byte or end of stream to read means the server closed it (an idle timeout)."""
        try:
            return not connection.can_read(timeout=0)
        except Exception:
            return False

    def _disconnect(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.disconnect()
            finally:
                self.client.connection_pool.release(connection)

    def flush(self, limit: int) -> None:
        """Waits until every queued command is written and answered, but no later
        than their deadlines (nor ``limit``)."""
        with self._cond:
            while True:
                settle_by = self._queue.settle_by()
                if settle_by is None:
                    return
                left = min(settle_by, limit) - now_us()
                if left <= 0:
                    return
                self._cond.wait(left / 1e6)

    def close(self) -> None:
        # The worker ends once idle; one blocked on a frozen node, when its read returns.
        with self._cond:
            self._queue.closed = True
            self._cond.notify_all()

    @property
    def alive(self) -> bool:
        """Whether this node's worker thread runs."""
        worker = self._worker
        return worker is not None and worker.is_alive()


class Redlock:
    """A Redlock over independent Redis nodes, one ``redis.Redis`` client per node.

    Settings (durations in seconds, as numbers or ``timedelta``) are checked by the
    core; :class:`ConfigError` names the rule broken. Defaults: ``ttl`` 10 s, drift 1 %
    + 2 ms, ``node_timeout`` the smaller of 50 ms and a tenth of the TTL, 3 attempts
    200 ms +- 100 ms apart, 160-bit tokens, keys equal to the resource names.

    Each node gets one long-lived worker thread and one connection from its client's
    pool. The clients' own timeouts and retries do not matter for correctness: the
    core's deadlines are enforced here. Setting ``socket_timeout`` on the clients still
    frees a worker blocked on a frozen node sooner.
    """

    def __init__(
        self,
        clients: Sequence[redis.Redis],
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
        self._nodes: list[_Node] = []
        self._owned: list[redis.Redis] = []
        self._closed = False
        node_clients = check_clients(clients, redis.Redis, "redis.Redis")
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
        self.serial = next(_serials)
        self._nodes = [_Node(i, c, self.serial) for i, c in enumerate(node_clients)]
        self._labels = tuple(node.label for node in self._nodes)
        _live.add(self)

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

    # ---- properties ---------------------------------------------------------------

    @property
    def config(self) -> Config:
        """The core's configuration (read its settings; do not close it)."""
        return self._config

    @property
    def nodes(self) -> tuple[str, ...]:
        """Each node's label (``host:port``), as per-node detail names it."""
        return self._labels

    @property
    def quorum(self) -> int:
        return self._config.quorum

    def workers_alive(self) -> list[bool]:
        """Whether each node's worker thread runs (for diagnostics)."""
        return [node.alive for node in self._nodes]

    # ---- locking ------------------------------------------------------------------

    def acquire(
        self,
        resources: Resources,
        *,
        ttl: Duration | None = None,
        auto_extend: bool = False,
        on_lost: OnLost | None = None,
    ) -> Lock:
        """Acquires a lock on ``resources`` (one name or several, ``str`` or
        ``bytes``), retrying as configured. Raises :class:`LockHeldError` when someone
        else holds it, :class:`NodesFailedError` when the nodes fail.

        With ``auto_extend`` a background thread extends the lock when the core says;
        if the lock is lost, ``on_lost`` is called (from that thread) with the
        :class:`LockLostError`, ``lock.lost`` becomes true and ``lock.check()`` raises.
        """
        names = resource_list(resources)
        shown = _shown(resources, names)
        client = self._usable()
        with client.acquire(names, now_us(), ttl_ms=ttl_ms(ttl)) as op:
            try:
                outcome = self._run(op)
            except BaseException:
                # Interrupted mid-attempt: some nodes may hold its token; clean them.
                self._release_token(names, op.token)
                raise
        with outcome:
            if outcome.kind != "acquired":
                raise acquire_error(outcome, shown, self._labels)
            lease = outcome.lease()
            assert lease is not None  # an acquired outcome always has a lease
            return Lock(
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
    ) -> LockContext:
        """``with redlock.lock("name") as lock:`` acquires on entry and releases on
        exit (see :meth:`acquire`)."""
        return LockContext(self, resources, ttl=ttl, auto_extend=auto_extend, on_lost=on_lost)

    def from_token(self, resources: Resources, token: str) -> Lock:
        """A lock rebuilt from a token kept elsewhere (another process, a command
        line), to extend or release it. Its validity is unknown until extended."""
        names = resource_list(resources)
        lease = self._usable().lease(names, token, 0)
        return Lock(
            self, _shown(resources, names), lease, None, (), auto_extend=False, on_lost=None
        )

    def extend(self, lock: Lock, ttl: Duration | None = None) -> None:
        lock.extend(ttl)

    def release(self, lock: Lock) -> ReleaseResult:
        return lock.release()

    # ---- the driver loop ----------------------------------------------------------

    def _usable(self) -> Client:
        if self._closed:
            raise RuntimeError("this Redlock is closed")
        return self._client

    def _run(self, op: Operation) -> Outcome:
        """Drives ``op`` to its outcome: send what it says, hand in replies and
        timeouts at the instants it names."""
        replies: queue.SimpleQueue[tuple[int, Parts]] = queue.SimpleQueue()
        deliver = replies.put
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
                timeout = (wait_until - now_us()) / 1e6
                try:
                    if timeout > 0:
                        request_id, parts = replies.get(timeout=timeout)
                    else:
                        request_id, parts = replies.get_nowait()
                except queue.Empty:
                    op.handle_timeout(now_us())
                else:
                    hand_in(op, request_id, parts, now_us())
                wait_until = None

    def _drive(self, op: Operation) -> Outcome:
        """Drives ``op`` to its outcome and frees it."""
        with op:
            return self._run(op)

    def _release_token(self, names: list[bytes], token: str) -> None:
        try:
            with self._client.lease(names, token, 0) as lease:
                self._drive(self._client.release(lease, now_us())).close()
        except Exception:
            logger.exception("cleaning up after an interrupted acquisition failed")

    # ---- closing ------------------------------------------------------------------

    def close(self) -> None:
        """Stops the worker threads (one blocked on a frozen node ends when its call
        returns) and closes the clients :meth:`from_urls` made. Locks still held are
        not released: release them first."""
        if self._closed:
            return
        self._closed = True
        _live.discard(self)
        self.flush()
        for node in self._nodes:
            node.close()
        for client in self._owned:
            client.close()

    def flush(self) -> None:
        """Waits (at most until their deadlines) for the commands still on their way:
        after a decision at a quorum the other nodes' commands are still out, and a
        process that exits at once would leave those keys to their TTL. ``close`` and
        the interpreter's exit call it."""
        limit = now_us() + _FLUSH_LIMIT_US
        for node in self._nodes:
            node.flush(limit)

    def __enter__(self) -> Redlock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        ttl = self._config.ttl_ms
        return f"<Redlock {len(self._nodes)} nodes, quorum {self.quorum}, ttl {ttl} ms>"


# Redlocks not closed yet: their last commands are flushed when the interpreter exits
# (the worker threads are daemons and would be stopped mid-write).
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
            logger.exception("flushing a Redlock at exit failed")


def _shown(resources: Resources, names: list[bytes]) -> list[str | bytes]:
    """The resources as the caller named them, for messages and ``lock.resources``."""
    if isinstance(resources, (str, bytes)):
        return [resources]
    if isinstance(resources, (bytearray, memoryview)):
        return [bytes(resources)]
    return [item if isinstance(item, (str, bytes)) else bytes(item) for item in resources]


class Lock(LockState):
    """A held lock. ``with`` releases it at the end of the block, and raises
    :class:`LockLostError` there if the block ran past the lock's validity or the lock
    was lost (unless the block is already raising)."""

    def __init__(
        self,
        redlock: Redlock,
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
        # Held while an extension or the release runs: one at a time per lock.
        self._op_lock = threading.Lock()
        self._wake = threading.Condition(threading.Lock())
        self._stopping = False
        self._signal_owed = False
        self._keeper: threading.Thread | None = None
        if auto_extend:
            self._keeper = threading.Thread(
                target=_keep_alive,
                args=(weakref.ref(self), self._wake),
                name="redlock-auto-extend",
                daemon=True,
            )
            self._keeper.start()

    def extend(self, ttl: Duration | None = None) -> None:
        """Extends the lock by its TTL (or ``ttl``) from now. Raises
        :class:`LockLostError` if it is lost, :class:`NodesFailedError` if the nodes
        failed (the lock then holds until ``error.valid_until``)."""
        try:
            with self._op_lock:
                self._extend_locked(ttl_ms(ttl))
        finally:
            self._deliver_signal()
        self._poke()

    def _extend_locked(self, ttl: int | None) -> None:
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
        with redlock._drive(op) as outcome:
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
        """Records the loss; the callback runs later, outside ``_op_lock``, so that it
        may call :meth:`release`."""
        if self._lost is None:
            self._lost = error
            self._signal_owed = True

    def _deliver_signal(self) -> None:
        with self._wake:
            owed, self._signal_owed = self._signal_owed, False
        if owed and self._lost is not None:
            call_on_lost(self._on_lost, self._lost)

    def release(self) -> ReleaseResult:
        """Releases the lock on every node (also when lost: it deletes only keys that
        still hold this token). Never raises for node failures; idempotent."""
        self._stop()
        with self._op_lock:
            if self._released is not None:
                return self._released
            redlock = self._redlock
            with redlock._drive(redlock._usable().release(self._lease, now_us())) as outcome:
                result = release_result(outcome, redlock._labels)
            self._nodes = result.nodes
            self._released = result
            return result

    def _stop(self) -> None:
        with self._wake:
            self._stopping = True
            self._wake.notify_all()

    def _poke(self) -> None:
        with self._wake:
            self._wake.notify_all()

    def __enter__(self) -> Lock:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        error = self._exit_error()
        self.release()
        if exc_type is None and error is not None:
            raise error


# The auto-extension's plan after a failed extension with no time for another round.
_UNTIL_END = -1


def _keep_alive(lock_ref: weakref.ref[Lock], wake: threading.Condition) -> None:
    """The auto-extension thread: extends when the core says, retries when the core
    says, and signals the loss. It holds the lock only weakly while it sleeps, so a lock
    its holder dropped is not kept alive forever (it then simply expires)."""
    retry_at: int | None = None
    while True:
        plan = _plan(lock_ref, retry_at)
        if plan is None:
            return
        at, valid_until = plan
        woke = _sleep(lock_ref, wake, valid_until if at is None else at, valid_until)
        if woke == "stop":
            return
        if woke == "changed":  # extended by hand meanwhile: plan again
            retry_at = None
            continue
        retry_at, done = _act(lock_ref, at, valid_until)
        lock = lock_ref()
        if lock is not None:
            lock._deliver_signal()
        del lock
        if done:
            return


def _plan(lock_ref: weakref.ref[Lock], retry_at: int | None) -> tuple[int | None, int] | None:
    """(when to extend, or None to let the lease end; the lease's valid_until)."""
    lock = lock_ref()
    if lock is None:
        return None
    with lock._op_lock:
        if lock._stopping or lock._released is not None or lock._lost is not None:
            return None
        if retry_at == _UNTIL_END:
            at: int | None = None
        elif retry_at is not None:
            at = retry_at
        else:
            at = lock._redlock._client.next_extension(lock._lease, now_us())
        return at, lock._valid_until_us


def _sleep(
    lock_ref: weakref.ref[Lock], wake: threading.Condition, target: int, valid_until: int
) -> str:
    """Sleeps until ``target``: "due", or "stop" (released, dropped), or "changed"
    (the lease changed)."""
    with wake:
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
            wake.wait(left / 1e6)


def _act(lock_ref: weakref.ref[Lock], at: int | None, valid_until: int) -> tuple[int | None, bool]:
    """Extends (or, with ``at`` None, marks the lock expired). Returns the next
    ``retry_at`` (None: ask the core again; an instant; ``_UNTIL_END``) and whether the
    thread is done."""
    lock = lock_ref()
    if lock is None:
        return None, True
    with lock._op_lock:
        if lock._stopping or lock._released is not None or lock._lost is not None:
            return None, True
        if lock._valid_until_us != valid_until:
            return None, False  # extended by hand meanwhile: plan again
        if at is None:
            lock._mark_lost(lock._expired_error())
            return None, True
        try:
            lock._extend_locked(None)
            return None, False
        except LockLostError:
            return None, True  # _extend_locked marked it lost
        except NodesFailedError as error:
            if error.retry_at_us is None:
                return _UNTIL_END, False
            return error.retry_at_us, False
        except Exception as error:  # the Redlock was closed, or a bug: say so loudly
            lost = LockLostError(
                f"lock on {lock._describe()} could not be kept alive: {error}",
                resources=lock._resources,
                reason="error",
            )
            lost.__cause__ = error
            lock._mark_lost(lost)
            return None, True


class LockContext:
    """What :meth:`Redlock.lock` returns: acquires on ``__enter__``, releases on
    ``__exit__``."""

    def __init__(
        self,
        redlock: Redlock,
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
        self._lock: Lock | None = None

    def __enter__(self) -> Lock:
        if self._lock is not None:
            raise RuntimeError("this lock context is already entered")
        self._lock = self._redlock.acquire(
            self._resources, ttl=self._ttl, auto_extend=self._auto_extend, on_lost=self._on_lost
        )
        return self._lock

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.__exit__(exc_type, exc, traceback)
