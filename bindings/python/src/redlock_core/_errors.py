"""The package's exceptions.

The core decides what kind of failure each one is (its error classes); each class maps
to exactly one exception here, and nothing outside this hierarchy is raised for a
documented failure or misuse:

============================  =====================================================
core error class              exception
============================  =====================================================
``held_elsewhere``            :class:`LockHeldError`
``nodes_failing``             :class:`NodesFailedError` (each node's ``cause``)
``lock_lost``                 :class:`LockLostError`
``not_held``                  :class:`LockNotHeldError` (a :class:`LockLostError`)
``invalid_argument``          :class:`InvalidArgumentError` (:class:`ConfigError`,
                              :class:`UsageError` for the core's codes)
``used_after_close``          :class:`UsedAfterCloseError`
``cancelled``                 the caller's own ``asyncio.CancelledError`` or
                              ``KeyboardInterrupt``, re-raised after the core's
                              cleanup (Python's convention)
============================  =====================================================

:class:`CoreError` carries the core's stable code name and sentence for a call into
the core that failed; :class:`LockError` carries why a lock operation did not succeed
(``reason``) and how every node answered (``nodes``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "ArgumentTypeError",
    "ConfigError",
    "CoreError",
    "InvalidArgumentError",
    "LibraryNotFoundError",
    "LockError",
    "LockHeldError",
    "LockLostError",
    "LockNotHeldError",
    "NodeResult",
    "NodesFailedError",
    "ProtocolError",
    "RedlockError",
    "UsageError",
    "UsedAfterCloseError",
]


class RedlockError(Exception):
    """Any error of this package. ``code`` is a stable snake_case name."""

    code: str = "redlock_error"


class LibraryNotFoundError(RedlockError, ImportError):
    """``libredlock`` could not be found or loaded."""

    code = "library_not_found"


class CoreError(RedlockError):
    """A call into the core failed.

    ``code`` is the core's name for the result (``"ttl_zero"``, ``"unknown_request"``,
    ...), ``result`` its number, ``message`` the core's sentence.
    """

    def __init__(self, result: int, code: str, message: str, context: str = "") -> None:
        self.result = result
        self.code = code
        self.message = message
        self.context = context
        text = f"{message} ({code})"
        super().__init__(f"{context}: {text}" if context else text)


class InvalidArgumentError(CoreError, ValueError):
    """An argument broke a rule (the core's class ``invalid_argument``): out of range,
    not acceptable, a configuration or usage rule broken. ``code`` names the rule, the
    message the rule and the range allowed. Checked by the package before anything
    reaches the core (a negative, NaN or infinite duration, a number out of range) or
    by the core itself. It is also a ``ValueError``, what Python code catches for a bad
    value."""


class ArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument of the wrong Python type (``code`` ``wrong_type``). It is an
    :class:`InvalidArgumentError`, inside the package's hierarchy, and a ``TypeError``,
    which is what Python code catches for a wrong type."""


class UsageError(InvalidArgumentError):
    """Misuse of the core (a reply for an unknown request, a duplicate resource, a TTL
    the configuration does not allow, ...); the operation or client is unchanged."""


class ConfigError(InvalidArgumentError):
    """A configuration the core does not accept (``ttl_zero``, ``no_nodes``, the same
    node given twice, ...)."""


class UsedAfterCloseError(RedlockError, ValueError):
    """A call on a Redlock, lock or core object after it was closed (the core's class
    ``used_after_close``)."""

    code = "used_after_close"


class ProtocolError(CoreError):
    """A malformed RESP stream: the connection it came from is out of step."""


@dataclass(frozen=True)
class NodeResult:
    """How one node answered the round an outcome reports on.

    ``status`` is one of ``"success"``, ``"conflict"``, ``"missing"`` (an extension
    found the key gone there), ``"error"``, ``"timeout"``, ``"pending"``,
    ``"not_asked"``; ``error`` is the text for ``"error"``; ``cause``
    is why it failed, as the core classifies it (``"refused"``, ``"auth"``, ``"tls"``,
    ``"timeout"``, ``"stalled"``, ``"connection"``, ``"error"``), ``None`` otherwise.
    """

    index: int
    label: str
    status: str
    error: str | None = None
    cause: str | None = None

    def __str__(self) -> str:
        detail = f"{self.status}: {self.error}" if self.error else self.status
        if self.cause and self.cause != self.status:
            detail = f"{self.cause} ({detail})"
        return f"node {self.index} ({self.label}) {detail}"


class LockError(RedlockError):
    """A lock operation did not succeed.

    ``reason`` is the core's reason (``"conflict"``, ``"nodes_failed"``, ``"mixed"``,
    ``"validity_too_short"``) or ``"expired"``/``"released"`` for a lock that ran out;
    ``nodes`` holds every node's answer.
    """

    code = "lock_error"

    def __init__(
        self,
        summary: str,
        *,
        resources: Sequence[str | bytes] = (),
        reason: str = "",
        nodes: Sequence[NodeResult] = (),
        attempts: int | None = None,
    ) -> None:
        self.resources: tuple[str | bytes, ...] = tuple(resources)
        self.reason = reason
        self.nodes: tuple[NodeResult, ...] = tuple(nodes)
        self.attempts = attempts
        parts = [summary]
        if attempts is not None:
            parts.append(f"attempts: {attempts}")
        if self.nodes:
            parts.append("; ".join(str(node) for node in self.nodes))
        super().__init__(" | ".join(parts))


class LockHeldError(LockError):
    """The lock is held by someone else: conflicts alone made the quorum impossible."""

    code = "lock_held"


class NodesFailedError(LockError):
    """Nodes failed (errors, timeouts), alone or together with conflicts, or a quorum
    came too late. ``code`` is the reason.

    After a failed extension the lock is still held until ``valid_until`` (seconds on
    ``time.monotonic()``; ``valid_until_us`` on :func:`redlock_core.now_us`), and
    ``retry_at`` says when the core would try again (``None`` when no time is left for
    another round).
    """

    def __init__(
        self,
        summary: str,
        *,
        valid_until_us: int | None = None,
        retry_at_us: int | None = None,
        **kwargs: object,
    ) -> None:
        super().__init__(summary, **kwargs)  # type: ignore[arg-type]
        self.code = self.reason or "nodes_failed"
        self.valid_until_us = valid_until_us
        self.retry_at_us = retry_at_us

    @property
    def valid_until(self) -> float | None:
        """After a failed extension: until when the old lease holds, in seconds on
        ``time.monotonic()`` (``None`` for an acquisition)."""
        return None if self.valid_until_us is None else self.valid_until_us / 1e6

    @property
    def retry_at(self) -> float | None:
        """After a failed extension: when the core would try again, in seconds on
        ``time.monotonic()`` (``None`` when no time is left for another round)."""
        return None if self.retry_at_us is None else self.retry_at_us / 1e6


class LockLostError(LockError):
    """The lock is lost: another token holds a key, or the lease ran out before it
    could be extended, or it was released."""

    code = "lock_lost"


class LockNotHeldError(LockLostError):
    """The lock's keys are gone (expired, released, or the node restarted empty) and
    nobody else holds them: it is not held, and not held by someone else either."""

    code = "not_held"
