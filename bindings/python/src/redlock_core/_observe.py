"""Observability: the core's events handed to the user's hooks, and OpenTelemetry spans.

The events are the core's (``Operation.poll_event``, docs/observability.md): the engine
drains them after every input, next to the operation's outputs, and the driver hands
each to the hooks outside its own locks, in the thread (or task) that runs the
operation. ``lost`` is the one event the package makes itself, when the core's
keep-alive reports the lock lost. Nothing about the lock depends on the hooks: one that
raises is logged (logger ``redlock_core``) and the others still run.

When ``opentelemetry-api`` is importable, every acquisition, extension, release and
inspection is also a span (``redlock.acquire``, ...) on the tracer ``redlock_core``,
with the retries and node failures as span events; without it nothing is imported and
nothing is done.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable

from ._errors import NodeResult
from .core import OperationEvent, Outcome, error_class_name, now_us

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

try:
    from opentelemetry import trace as _trace
except ImportError:  # the optional extra `otel` is not installed: no spans
    _trace = None  # type: ignore[assignment]

logger = logging.getLogger("redlock_core")


@dataclass(frozen=True)
class Event:
    """One thing that happened to a lock, as the core reports it (the same names and
    fields in every package of the project).

    ``kind`` is ``"acquired"``, ``"not_acquired"``, ``"retry"``, ``"extended"``,
    ``"not_extended"``, ``"lost"``, ``"released"``, ``"not_released"``,
    ``"inspected"``, ``"not_inspected"`` or ``"node_failed"``; ``operation`` the
    operation it belongs to (``"acquire"``, ``"extend"``, ``"release"``,
    ``"inspect"``; ``None`` for ``"lost"``). ``at`` is when it happened (seconds on
    ``time.monotonic()``), ``elapsed`` how long after the operation started (seconds;
    for ``"lost"``, how long after the lock was acquired), ``attempt`` the attempt it
    concerns (from 1).

    ``reason`` says why an attempt or operation failed (``"conflict"``,
    ``"nodes_failed"``, ``"mixed"``, ``"validity_too_short"``, ``"not_held"``);
    ``retry_at`` when the next attempt starts (``"retry"``); ``node`` and ``cause``
    which node failed and why (``"node_failed"``: ``"refused"``, ``"auth"``,
    ``"tls"``, ``"timeout"``, ``"stalled"``, ``"connection"``, ``"error"``);
    ``nodes`` the per-node results the event carries (every node for outcomes and
    retries, the failed one for ``"node_failed"``, the lock's last ones for
    ``"lost"``); ``lost_reason`` how the lock was lost (``"taken"``, ``"not_held"``,
    ``"expired"``, ``"extension_limit"``).
    """

    kind: str
    operation: str | None
    resources: tuple[str | bytes, ...]
    attempt: int | None
    elapsed: float
    at: float
    reason: str | None = None
    retry_at: float | None = None
    node: int | None = None
    cause: str | None = None
    nodes: tuple[NodeResult, ...] = ()
    lost_reason: str | None = None


#: A hook: called with every :class:`Event`; what it returns is ignored.
Hook = Callable[[Event], Any]


def _label(labels: Sequence[str], index: int) -> str:
    return labels[index] if index < len(labels) else f"node {index}"


def event_from(
    raw: OperationEvent, resources: tuple[str | bytes, ...], labels: Sequence[str]
) -> Event:
    """The public event for one the core reported."""
    if raw.node is not None:
        nodes = tuple(
            NodeResult(raw.node, _label(labels, raw.node), status, error, raw.cause)
            for status, error in raw.nodes
        )
    else:
        nodes = tuple(
            NodeResult(index, _label(labels, index), status, error)
            for index, (status, error) in enumerate(raw.nodes)
        )
    return Event(
        kind=raw.kind,
        operation=raw.operation,
        resources=resources,
        attempt=raw.attempt,
        elapsed=raw.elapsed / 1e6,
        at=raw.at / 1e6,
        reason=raw.reason,
        retry_at=None if raw.retry_at is None else raw.retry_at / 1e6,
        node=raw.node,
        cause=raw.cause,
        nodes=nodes,
    )


def lost_event(
    resources: tuple[str | bytes, ...],
    reason: str,
    nodes: tuple[NodeResult, ...],
    held_since_us: int,
) -> Event:
    """The event of a lock the keep-alive reports lost: ``elapsed`` counts from the
    lock's acquisition (``held_since_us``, on :func:`now_us`)."""
    now = now_us()
    return Event(
        kind="lost",
        operation=None,
        resources=resources,
        attempt=None,
        elapsed=max(0, now - held_since_us) / 1e6,
        at=now / 1e6,
        nodes=nodes,
        lost_reason=reason,
    )


class Hooks:
    """The hooks of one Redlock."""

    def __init__(self) -> None:
        self._hooks: tuple[Hook, ...] = ()

    def add(self, hook: Hook) -> None:
        if not callable(hook):
            raise TypeError(f"a hook must be callable, not {type(hook).__name__}")
        self._hooks = (*self._hooks, hook)

    def remove(self, hook: Hook) -> None:
        hooks = list(self._hooks)
        hooks.remove(hook)  # ValueError for a hook never added, as list.remove says
        self._hooks = tuple(hooks)

    def __bool__(self) -> bool:
        return bool(self._hooks)

    def emit(self, event: Event) -> None:
        """Calls every hook with ``event``; one that raises is logged and skipped."""
        for hook in self._hooks:
            try:
                hook(event)
            except Exception:  # a hook never breaks the lock
                logger.exception("an event hook raised for %s; the lock is unaffected", event.kind)


# ---- OpenTelemetry ------------------------------------------------------------------

_tracer: Tracer | None = None


def tracing() -> bool:
    """Whether spans are made (``opentelemetry-api`` importable)."""
    return _trace is not None


def _get_tracer() -> Tracer:
    global _tracer
    if _tracer is None:
        assert _trace is not None
        from . import __version__

        _tracer = _trace.get_tracer("redlock_core", __version__)
    return _tracer


def _text(resource: str | bytes) -> str:
    return resource if isinstance(resource, str) else resource.decode("utf-8", "replace")


class Observation:
    """One operation seen from outside: its events go to the hooks and, as span events,
    to its span (when tracing); its outcome ends the span. A context manager around the
    driver's loop (the span is current inside it)."""

    __slots__ = ("_hooks", "_labels", "_resources", "_scope", "_span", "wants_events")

    def __init__(
        self,
        hooks: Hooks,
        labels: Sequence[str],
        operation: str,
        resources: Sequence[str | bytes],
        quorum: int,
    ) -> None:
        self._hooks = hooks
        self._labels = labels
        self._resources = tuple(resources)
        self._span: Span | None = None
        self._scope: Any = None
        if _trace is not None:
            span = _get_tracer().start_span(
                f"redlock.{operation}",
                attributes={
                    "redlock.operation": operation,
                    "redlock.resources": [_text(r) for r in self._resources],
                    "redlock.nodes": len(labels),
                    "redlock.quorum": quorum,
                },
            )
            # No tracer provider configured (the API's default): nothing to record.
            if span.is_recording():
                self._span = span
            else:
                span.end()
        #: Whether the engine should drain the operation's events at all.
        self.wants_events = bool(hooks) or self._span is not None

    def __enter__(self) -> Observation:
        if self._span is not None and _trace is not None:
            self._scope = _trace.use_span(
                self._span, end_on_exit=True, record_exception=True, set_status_on_exception=True
            )
            self._scope.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        scope, self._scope = self._scope, None
        if scope is not None:
            scope.__exit__(exc_type, exc, traceback)

    def events(self, raw_events: list[OperationEvent]) -> None:
        """Hands the operation's events to the hooks and the span."""
        span = self._span
        for raw in raw_events:
            event = event_from(raw, self._resources, self._labels)
            if span is not None and event.kind in ("retry", "node_failed"):
                attributes: dict[str, Any] = {"redlock.attempt": event.attempt or 0}
                if event.reason is not None:
                    attributes["redlock.reason"] = event.reason
                if event.retry_at is not None:
                    attributes["redlock.retry_in"] = max(0.0, event.retry_at - event.at)
                if event.node is not None:
                    attributes["redlock.node"] = event.node
                    attributes["redlock.node_label"] = _label(self._labels, event.node)
                if event.cause is not None:
                    attributes["redlock.cause"] = event.cause
                span.add_event(f"redlock.{event.kind}", attributes, timestamp=None)
            if self._hooks:
                self._hooks.emit(event)

    def outcome(self, outcome: Outcome) -> None:
        """Records the operation's outcome on its span."""
        span = self._span
        if span is None or _trace is None:
            return
        kind = outcome.kind
        span.set_attribute("redlock.outcome", kind)
        attempts = outcome.attempts
        if attempts is not None:
            span.set_attribute("redlock.attempts", attempts)
        if kind == "inspected":
            span.set_attribute("redlock.locked", outcome.is_locked)
        error_class = outcome.error_class
        if error_class:
            name = error_class_name(error_class) or str(error_class)
            span.set_attribute("error.type", name)
            reason = outcome.reason
            if reason is not None:
                span.set_attribute("redlock.reason", reason)
            span.set_status(_trace.Status(_trace.StatusCode.ERROR, f"{kind}: {reason or name}"))
