"""A held lock, shared by the synchronous and asyncio locks: its state, and its
procedures (extend, release, inspect, one keep-alive extension; see
:mod:`redlock_core._common`), written once without I/O. The drivers add the waiting (a
thread, a task) and run the procedures' steps.

Keep-alive is the core's :class:`~redlock_core.core.KeepAlive`: when to extend, when to
retry, and when the lock is lost are its decisions; a driver error during an extension
is :meth:`KeepAlive.handle_failure` (retried while a round fits), never "lost at once".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

from . import _ffi
from ._common import (
    AcquirePlan,
    ReleaseResult,
    Step,
    Steps,
    call_on_lost,
    extend_error,
    node_results,
    release_result,
)
from ._errors import LockError, LockLostError, LockNotHeldError, NodeResult, UsedAfterCloseError
from ._handle import names_text
from .core import KeepAlive, Lease, Operation, Outcome, now_us, resource_list

if TYPE_CHECKING:
    from ._common import Duration, RedlockBase

OnLost = Callable[[LockLostError], Any]


class KeepAlivePlan(NamedTuple):
    """What the keep-alive task does next: extend now, sleep until ``until``, or stop
    (``done``)."""

    extend: bool
    until: int | None
    done: bool


_LOST_WHY = {
    "taken": "another token holds it",
    "not_held": "its keys are gone",
    "expired": "its lease ran out before it was extended",
    "extension_limit": "its lease ran out after the bound on extensions",
}


class LockState:
    """What a lock knows about itself. The lease's values are copied out whenever the
    lease changes, so reading them never touches a handle another thread may replace."""

    _redlock: Any  # the driver's Redlock (its own type in each driver's lock class)

    def __init__(
        self,
        redlock: RedlockBase[Any, Any],
        resources: Sequence[str | bytes],
        lease: Lease,
        attempts: int | None,
        nodes: tuple[NodeResult, ...],
        auto_extend: bool,
        on_lost: OnLost | None,
    ) -> None:
        self._owner = redlock
        self._redlock = redlock
        self._resources = tuple(resources)
        self._attempts = attempts
        self._nodes = nodes
        self._on_lost = on_lost
        self._auto_extend = auto_extend
        self._lost: LockLostError | None = None
        self._signal_owed = False
        self._released: ReleaseResult | None = None
        # When the lock was acquired (made right after the acquisition decided), or
        # rebuilt from its token: what a ``lost`` event's ``elapsed`` counts from.
        self._held_since_us = now_us()
        self._token = lease.token
        self._fencing_token = lease.fencing_token
        self._set_lease(lease)
        self._keepalive: KeepAlive | None = (
            KeepAlive(redlock._client, lease) if auto_extend else None
        )
        redlock._locks.add(self)
        self._setup()

    def _setup(self) -> None:
        """The driver's own state (its locks, its keep-alive thread or task)."""

    # ---- steps that do not wait ---------------------------------------------------

    def detach(self: Any) -> Any:
        """Leaves the lock out of its Redlock's ``close()``, which otherwise releases it:
        for a lock meant to outlive the Redlock (released later by its token, by another
        process). Everything else is unchanged while the Redlock is open. Returns the
        lock."""
        self._owner._locks.discard(self)
        return self

    def _check_open(self) -> None:
        """After the Redlock's close() every use of its locks raises the same
        :class:`UsedAfterCloseError` (the lock was released by close)."""
        if self._owner._closing:
            raise UsedAfterCloseError(
                f"the {type(self._owner).__name__} of the lock on {self._describe()} is "
                "closed (close() released the locks it held)"
            )

    def _start_extend(self, ttl: Duration | None) -> Operation:
        self._check_open()
        if self._lost is not None:
            raise self._lost
        if self._released is not None:
            raise LockNotHeldError(
                f"lock on {self._describe()} was released: it is not held",
                resources=self._resources,
                reason="released",
            )
        return self._owner._usable().extend(
            self._lease, now_us(), ttl_ms=self._owner._check_ttl(ttl)
        )

    def _extended(self, outcome: Outcome, by_keepalive: bool = False) -> LockError | None:
        """Takes an extension's outcome: the new lease, or the error to raise (a loss is
        recorded, and signalled once by :meth:`_signal`)."""
        with outcome:
            if self._keepalive is not None:
                self._keepalive.handle_outcome(outcome, now_us())
            lease = outcome.lease()
            if lease is not None:
                self._set_lease(lease)
            self._nodes = node_results(outcome, self._owner._labels)
            if outcome.kind == "extended":
                return None
            error = extend_error(outcome, self._resources, self._owner._labels)
        if isinstance(error, LockLostError):
            self._mark_lost(error)
        return None if by_keepalive and not isinstance(error, LockLostError) else error

    def _extending(self, ttl: Duration | None) -> Steps[LockError | None]:
        """The extension procedure: None, or the error to raise once the caller has
        signalled a loss."""
        outcome = yield Step(self._start_extend(ttl), self._resources)
        return self._extended(outcome)

    def _owning(self) -> Steps[bool]:
        """The inspection procedure behind ``owned()``."""
        self._check_open()
        with self._owner._start_inspect(resource_list(self._resources)) as op:
            outcome = yield Step(op, self._resources)
        # The lease as it stands now (an auto-extension may have renewed it meanwhile).
        return self._owner._inspected(outcome, self._resources, self._lease)

    def _releasing(self) -> Steps[ReleaseResult]:
        """The release procedure (once confirmed: later calls return that result). A
        release fewer than a quorum confirmed leaves the lock unreleased, so that it
        may be released again."""
        self._check_open()
        if self._released is not None:
            return self._released
        outcome = yield Step(self._owner._usable().release(self._lease, now_us()), self._resources)
        return self._released_by(outcome)

    def _released_by(self, outcome: Outcome) -> ReleaseResult:
        """Takes a release's outcome: the lock counts as released only when a quorum
        confirmed it."""
        with outcome:
            result = release_result(outcome, self._owner._labels)
        self._nodes = result.nodes
        if result.confirmed:
            self._released = result
        return result

    def _keeping_alive(self) -> Steps[None]:
        """One extension the keep-alive asked for (nothing when the lock is done
        with); a driver failure goes to the core's keep-alive, which decides what it
        means."""
        op = self._keepalive_extension()
        if op is None:
            return
        try:
            outcome = yield Step(op, self._resources)
        except Exception:  # not an interrupt or a cancellation: those propagate
            self._keepalive_failed()
        else:
            self._extended(outcome, by_keepalive=True)

    def _stop_keepalive(self) -> None:
        if self._keepalive is not None:
            self._keepalive.stop()

    def _keepalive_plan(self) -> KeepAlivePlan:
        """Asks the core's keep-alive what to do now."""
        keepalive = self._keepalive
        if keepalive is None or keepalive.closed or self._released is not None:
            return KeepAlivePlan(False, None, True)
        action = keepalive.poll(now_us())
        if action.action == _ffi.KEEPALIVE_EXTEND:
            return KeepAlivePlan(True, None, False)
        if action.action == _ffi.KEEPALIVE_WAIT:
            return KeepAlivePlan(False, action.until, False)
        if action.action == _ffi.KEEPALIVE_LOST:
            reason = action.lost or "expired"
            kind = LockNotHeldError if reason == "not_held" else LockLostError
            self._owner._report_lost(self._resources, reason, self._nodes, self._held_since_us)
            self._mark_lost(
                kind(
                    f"lock on {self._describe()} is lost: {_LOST_WHY.get(reason, reason)}",
                    resources=self._resources,
                    reason=reason,
                    nodes=self._nodes,
                )
            )
        return KeepAlivePlan(False, None, True)

    def _keepalive_extension(self) -> Operation | None:
        """The extension the keep-alive asked for, or None when the lock is done with."""
        keepalive = self._keepalive
        if keepalive is None or self._released is not None or self._lost is not None:
            return None
        try:
            with keepalive.lease() as lease:
                return self._owner._usable().extend(lease, now_us())
        except Exception:  # a closed Redlock: the core's failure policy applies
            keepalive.handle_failure(now_us())
            return None

    def _keepalive_failed(self) -> None:
        if self._keepalive is not None:
            self._keepalive.handle_failure(now_us())

    def _mark_lost(self, error: LockLostError) -> None:
        """Records the loss; the callback runs later (:meth:`_signal`), outside the
        lock's operation lock, so that it may call ``release``."""
        if self._lost is None:
            self._lost = error
            self._signal_owed = True

    def _signal(self) -> Any:
        owed, self._signal_owed = self._signal_owed, False
        if owed and self._lost is not None:
            return call_on_lost(self._on_lost, self._lost)
        return None

    def _set_lease(self, lease: Lease) -> None:
        self._lease = lease
        self._valid_until_us = lease.valid_until
        self._ttl_ms = lease.ttl_ms
        self._extensions = lease.extensions

    # ---- what the holder reads ----------------------------------------------------

    @property
    def resources(self) -> tuple[str | bytes, ...]:
        return self._resources

    @property
    def token(self) -> str:
        """The random value stored under every key."""
        return self._token

    @property
    def fencing_token(self) -> int | None:
        """The fencing token of a fenced acquisition (``fencing=True``): strictly
        greater than every token handed out before it for the same resources. Send it
        with every write to the protected resource, which refuses lower ones (see
        :func:`redlock_core.fenced_set`). ``None`` without fencing and for a lock
        rebuilt from its token."""
        return self._fencing_token

    @property
    def attempts(self) -> int | None:
        """Attempts the acquisition made (``None`` for a lock rebuilt from a token)."""
        return self._attempts

    @property
    def nodes(self) -> tuple[NodeResult, ...]:
        """How every node answered the last acquisition, extension or release."""
        return self._nodes

    @property
    def valid_until_us(self) -> int:
        """Until when the lock is held, in microseconds on :func:`redlock_core.now_us`."""
        return self._valid_until_us

    @property
    def valid_until(self) -> float:
        """Until when the lock is held, in seconds on ``time.monotonic()``."""
        return self._valid_until_us / 1e6

    @property
    def validity(self) -> float:
        """Seconds of validity left now (0 once expired)."""
        return max(0, self._valid_until_us - now_us()) / 1e6

    @property
    def is_valid(self) -> bool:
        """True while the lock is held: not lost, not released, lease not run out."""
        return self._lost is None and self._released is None and now_us() < self._valid_until_us

    @property
    def ttl(self) -> float:
        """The TTL (seconds) the lock was acquired or last extended with."""
        return self._ttl_ms / 1000

    @property
    def extensions(self) -> int:
        """Successful extensions since the lock was acquired."""
        return self._extensions

    @property
    def auto_extend(self) -> bool:
        return self._auto_extend

    @property
    def lost(self) -> bool:
        """True once the lock is known lost (the auto-extension or an extension found
        another token, or the lease ran out before it could be extended)."""
        return self._lost is not None

    @property
    def lost_error(self) -> LockLostError | None:
        return self._lost

    @property
    def released(self) -> bool:
        return self._released is not None

    def check(self) -> float:
        """Raises :class:`LockLostError` unless the lock is held right now; returns the
        seconds of validity left. Call it before acting on the lock's protection.
        After the Redlock's close(), :class:`UsedAfterCloseError`."""
        self._check_open()
        if self._lost is not None:
            raise self._lost
        if self._released is not None:
            raise LockNotHeldError(
                f"lock on {self._describe()} was released",
                resources=self._resources,
                reason="released",
            )
        left = self._valid_until_us - now_us()
        if left <= 0:
            raise LockLostError(
                f"lock on {self._describe()} expired: its lease ran out",
                resources=self._resources,
                reason="expired",
            )
        return left / 1e6

    def _describe(self) -> str:
        return names_text(self._resources)

    def _expired_error(self) -> LockLostError:
        return LockLostError(
            f"lock on {self._describe()} expired: its lease ran out before it was extended",
            resources=self._resources,
            reason="expired",
            nodes=self._nodes,
        )

    def _exit_error(self, exc_info: tuple[object, ...]) -> LockLostError | None:
        """Why the body of a ``with`` block ran without the lock, if it did and is not
        raising already (``exc_info``: what ``__exit__`` got)."""
        if exc_info and exc_info[0] is not None:
            return None
        if self._lost is not None:
            return self._lost
        if now_us() >= self._valid_until_us:
            return LockLostError(
                f"lock on {self._describe()} expired before the block ended",
                resources=self._resources,
                reason="expired",
                nodes=self._nodes,
            )
        return None

    def __repr__(self) -> str:
        state = "lost" if self._lost else "released" if self._released else "held"
        return (
            f"<{type(self).__name__} {self._describe()} {state}, "
            f"validity {self.validity:.3f} s, token {self._token[:8]}...>"
        )


class LockContextBase:
    """What the drivers' ``lock()`` returns, before it is entered: the acquisition's
    plan, and the lock while entered. The sync and asyncio contexts add entering and
    leaving."""

    _lock: Any = None

    def __init__(self, redlock: RedlockBase[Any, Any], plan: AcquirePlan) -> None:
        self._redlock = redlock
        self._plan = plan

    def _entering(self) -> Steps[Any]:
        """The acquisition procedure of entering (not while entered)."""
        if self._lock is not None:
            raise UsedAfterCloseError("this lock context is already entered")
        return self._redlock._acquiring(self._plan)

    def _leaving(self) -> Any:
        """The lock to leave, if the context was entered."""
        lock, self._lock = self._lock, None
        return lock
