"""The state of a held lock, shared by the synchronous and asyncio locks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Callable

from ._common import ReleaseResult
from ._errors import LockLostError, NodeResult
from .core import Lease, now_us

OnLost = Callable[[LockLostError], Any]


class LockState:
    """What a lock knows about itself. The lease's values are copied out whenever the
    lease changes, so reading them never touches a handle another thread may replace."""

    def __init__(
        self,
        resources: Sequence[str | bytes],
        lease: Lease,
        attempts: int | None,
        nodes: tuple[NodeResult, ...],
        on_lost: OnLost | None,
        auto_extend: bool,
    ) -> None:
        self._resources = tuple(resources)
        self._attempts = attempts
        self._nodes = nodes
        self._on_lost = on_lost
        self._auto_extend = auto_extend
        self._lost: LockLostError | None = None
        self._released: ReleaseResult | None = None
        self._token = lease.token
        self._set_lease(lease)

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
        seconds of validity left. Call it before acting on the lock's protection."""
        if self._lost is not None:
            raise self._lost
        if self._released is not None:
            raise LockLostError(
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
        return ", ".join(repr(resource) for resource in self._resources)

    def _expired_error(self) -> LockLostError:
        return LockLostError(
            f"lock on {self._describe()} expired: its lease ran out before it was extended",
            resources=self._resources,
            reason="expired",
            nodes=self._nodes,
        )

    def _exit_error(self) -> LockLostError | None:
        """Why the body of a ``with`` block ran without the lock, if it did."""
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
