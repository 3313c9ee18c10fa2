"""Observability against real local Redis nodes: the core's events handed to hooks
(acquired, retry, node_failed, released, lost, ...), and OpenTelemetry spans read back
from opentelemetry-sdk's in-memory exporter (installed by build.sh from
requirements-dev.txt: without it this module fails to import, it never skips)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
import redis
import redis.asyncio
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from redlock_core import (
    AsyncRedlock,
    Event,
    LockHeldError,
    NodesFailedError,
    Redlock,
)

from .conftest import Nodes

# No Redis server listens here (the project's range, above every node set the tests start).
CLOSED_PORT = 7399


class Recorder:
    """A hook that keeps every event, and lets a test wait for one kind."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._changed = threading.Condition()

    def __call__(self, event: Event) -> None:
        with self._changed:
            self.events.append(event)
            self._changed.notify_all()

    def kinds(self) -> list[str]:
        return [event.kind for event in self.events]

    def of(self, kind: str) -> list[Event]:
        return [event for event in self.events if event.kind == kind]

    def wait_for(self, kind: str, timeout: float) -> Event:
        with self._changed:
            self._changed.wait_for(lambda: bool(self.of(kind)), timeout)
        found = self.of(kind)
        assert found, f"no {kind} event within {timeout} s: {self.kinds()}"
        return found[0]

    def clear(self) -> None:
        self.events.clear()


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def redlock(nodes: Nodes, recorder: Recorder) -> Iterator[Redlock]:
    with Redlock(nodes.clients(), ttl=10, on_event=recorder) as redlock:
        yield redlock


# ---- hooks --------------------------------------------------------------------------


def test_acquire_and_release_report_their_events_with_timings(
    redlock: Redlock, recorder: Recorder, resource: str
) -> None:
    before = time.monotonic()
    lock = redlock.acquire(resource)
    after = time.monotonic()
    assert recorder.kinds() == ["acquired"]
    acquired = recorder.events[0]
    assert acquired.operation == "acquire" and acquired.resources == (resource,)
    assert acquired.attempt == 1 and acquired.reason is None and acquired.lost_reason is None
    assert before <= acquired.at <= after
    assert 0 < acquired.elapsed <= after - before
    assert [node.index for node in acquired.nodes] == [0, 1, 2, 3, 4]
    assert [node.label for node in acquired.nodes] == list(redlock.nodes)
    # Decided at the quorum: the others may still be on their way.
    assert sum(node.status == "success" for node in acquired.nodes) >= 3
    assert {node.status for node in acquired.nodes} <= {"success", "pending"}

    recorder.clear()
    lock.extend()
    lock.release()
    assert recorder.kinds() == ["extended", "released"]
    extended, released = recorder.events
    assert extended.operation == "extend" and released.operation == "release"
    assert extended.at <= released.at and released.at <= time.monotonic()
    assert 0 < released.elapsed < 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        released.kind = "acquired"  # type: ignore[misc]


def test_a_lock_held_elsewhere_reports_the_retry_then_the_failure(
    nodes: Nodes, recorder: Recorder, resource: str
) -> None:
    with Redlock(nodes.clients(), ttl=10) as other:
        theirs = other.acquire(resource)
        try:
            with Redlock(
                nodes.clients(),
                ttl=10,
                attempts=2,
                retry_delay=0.05,
                retry_jitter=0.02,
                on_event=recorder,
            ) as redlock:
                with pytest.raises(LockHeldError):
                    redlock.acquire(resource)
        finally:
            theirs.release()
    assert recorder.kinds() == ["retry", "not_acquired"]
    retry, failed = recorder.events
    assert retry.attempt == 1 and retry.reason == "conflict"
    assert retry.retry_at is not None and retry.retry_at > retry.at
    # The retry delay is 50 ms +- 20 ms, from the failed attempt's end.
    assert 0.029 <= retry.retry_at - retry.at <= 0.071
    assert sum(node.status == "conflict" for node in retry.nodes) >= 3
    assert failed.attempt == 2 and failed.reason == "conflict"
    assert failed.at >= retry.retry_at


def test_a_closed_port_reports_node_failed_refused(
    nodes: Nodes, recorder: Recorder, resource: str
) -> None:
    # Two nodes of which one refuses connections: the quorum (2) needs both, so the
    # failure is decided by that node's failure, and its event comes first.
    clients = [redis.Redis(port=nodes.ports[0]), redis.Redis(port=CLOSED_PORT)]
    with Redlock(clients, ttl=10, attempts=1, on_event=recorder) as redlock:
        with pytest.raises(NodesFailedError):
            redlock.acquire(resource)
    failed = recorder.of("node_failed")
    assert failed, recorder.kinds()
    assert recorder.kinds()[-1] == "not_acquired"
    event = failed[0]
    assert event.node == 1 and event.cause == "refused" and event.operation == "acquire"
    assert len(event.nodes) == 1
    assert event.nodes[0].index == 1 and event.nodes[0].label == f"localhost:{CLOSED_PORT}"
    assert event.nodes[0].status == "error" and event.nodes[0].cause == "refused"
    assert recorder.of("not_acquired")[0].reason == "nodes_failed"


def test_a_lock_survives_one_closed_port_and_reports_it(
    nodes: Nodes, recorder: Recorder, resource: str
) -> None:
    clients = [redis.Redis(port=port) for port in nodes.ports[:4]]
    clients.append(redis.Redis(port=CLOSED_PORT))
    with Redlock(clients, ttl=10, on_event=recorder) as redlock:
        for _ in range(3):
            with redlock.lock(resource):
                pass
            if recorder.of("node_failed"):
                break
    failed = recorder.of("node_failed")
    assert failed and {(event.node, event.cause) for event in failed} == {(4, "refused")}
    assert recorder.of("acquired") and recorder.of("released")


def test_lost_is_reported_when_the_keys_are_deleted_under_auto_extension(
    redlock: Redlock, nodes: Nodes, recorder: Recorder, resource: str
) -> None:
    lost = threading.Event()
    started = time.monotonic()
    lock = redlock.acquire(resource, ttl=1, auto_extend=True, on_lost=lambda error: lost.set())
    acquired = time.monotonic()
    for port in nodes.ports:
        with redis.Redis(port=port) as client:
            client.delete(resource)
    event = recorder.wait_for("lost", timeout=3.0)
    assert lost.wait(1.0)
    assert event.lost_reason == "not_held" and event.operation is None
    assert event.resources == (resource,)
    assert event.at <= time.monotonic()
    # elapsed counts from the acquisition: the loss shows at the keep-alive's first
    # extension, a good part of the 1 s TTL later.
    assert started <= event.at - event.elapsed <= acquired
    assert event.elapsed >= 0.2
    # The keep-alive's failed extension came first, from the auto-extension thread.
    not_extended = recorder.of("not_extended")
    assert not_extended and not_extended[0].reason == "not_held"
    assert lock.lost
    lock.release()


def test_a_hook_that_raises_is_logged_and_breaks_nothing(
    nodes: Nodes, recorder: Recorder, resource: str, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(event: Event) -> None:
        raise RuntimeError("a broken hook")

    with Redlock(nodes.clients(), ttl=10, on_event=broken) as redlock:
        redlock.add_listener(recorder)
        with caplog.at_level(logging.ERROR, logger="redlock_core"):
            with redlock.lock(resource) as lock:
                assert lock.owned()
        assert recorder.kinds() == ["acquired", "inspected", "released"]
        assert "an event hook raised" in caplog.text and "a broken hook" in caplog.text
        redlock.remove_listener(recorder)
        with redlock.lock(resource):
            pass
        assert len(recorder.events) == 3
        with pytest.raises(ValueError):
            redlock.remove_listener(recorder)
        with pytest.raises(TypeError):
            redlock.add_listener("not callable")  # type: ignore[arg-type]


def test_a_hook_may_use_the_redlock(nodes: Nodes, resource: str) -> None:
    seen: list[bool] = []
    with Redlock(nodes.clients(), ttl=10) as redlock:

        def ask(event: Event) -> None:
            if event.kind == "acquired":
                seen.append(redlock.locked(resource))

        redlock.add_listener(ask)
        with redlock.lock(resource):
            pass
    assert seen == [True]


def test_asyncio_hooks(nodes: Nodes, recorder: Recorder, resource: str) -> None:
    async def main() -> None:
        clients = [redis.asyncio.Redis(port=port) for port in nodes.ports]
        async with AsyncRedlock(clients, ttl=10) as redlock:
            redlock.add_listener(recorder)
            async with redlock.lock(resource) as lock:
                assert await redlock.locked(resource)
                await lock.extend()
        for client in clients:
            await client.aclose()

    asyncio.run(main())
    assert recorder.kinds() == ["acquired", "inspected", "extended", "released"]
    assert all(event.resources == (resource,) for event in recorder.events)


def test_asyncio_lost_is_reported(nodes: Nodes, recorder: Recorder, resource: str) -> None:
    async def main() -> None:
        clients = [redis.asyncio.Redis(port=port) for port in nodes.ports]
        async with AsyncRedlock(clients, ttl=10, on_event=recorder) as redlock:
            started = time.monotonic()
            lock = await redlock.acquire(resource, ttl=1, auto_extend=True)
            acquired = time.monotonic()
            for port in nodes.ports:
                with redis.Redis(port=port) as client:
                    client.delete(resource)
            deadline = time.monotonic() + 3
            while not recorder.of("lost") and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert lock.lost
            await lock.release()
        for client in clients:
            await client.aclose()
        (event,) = recorder.of("lost")
        assert started <= event.at - event.elapsed <= acquired  # from the acquisition
        assert event.elapsed >= 0.2

    asyncio.run(main())
    assert [event.lost_reason for event in recorder.of("lost")] == ["not_held"]


def test_readme_hooks(nodes: Nodes) -> None:
    clients = nodes.clients()
    timings: dict[str, list[float]] = {}

    def record(event: Event) -> None:
        # Every event, from the thread that runs the operation (or the auto-extension).
        timings.setdefault(event.kind, []).append(event.elapsed)
        if event.kind in ("node_failed", "lost"):
            print(event.kind, event.resources, event.cause or event.lost_reason)

    redlock = Redlock(clients, on_event=record)
    with redlock.lock("reports:weekly"):
        pass
    redlock.close()
    assert sorted(timings) == ["acquired", "released"]
    assert all(0 < elapsed < 1 for elapsed in timings["acquired"] + timings["released"])


# ---- OpenTelemetry ------------------------------------------------------------------


@pytest.fixture(scope="module")
def exporter() -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return exporter


@pytest.fixture
def spans(exporter: InMemorySpanExporter) -> Iterator[InMemorySpanExporter]:
    exporter.clear()
    yield exporter
    exporter.clear()


def named(exporter: InMemorySpanExporter, resource: str) -> list[ReadableSpan]:
    """The finished spans about ``resource``, oldest first."""
    return [
        span
        for span in exporter.get_finished_spans()
        if resource in (span.attributes or {}).get("redlock.resources", ())
    ]


def test_every_operation_is_a_span(
    redlock: Redlock, spans: InMemorySpanExporter, resource: str
) -> None:
    with redlock.lock(resource) as lock:
        lock.extend()
        assert redlock.locked(resource)
    found = named(spans, resource)
    assert [span.name for span in found] == [
        "redlock.acquire",
        "redlock.extend",
        "redlock.inspect",
        "redlock.release",
    ]
    acquire = found[0]
    attributes = acquire.attributes or {}
    assert attributes["redlock.resources"] == (resource,)
    assert attributes["redlock.outcome"] == "acquired"
    assert attributes["redlock.attempts"] == 1
    assert attributes["redlock.nodes"] == 5 and attributes["redlock.quorum"] == 3
    assert "error.type" not in attributes
    assert acquire.status.status_code != StatusCode.ERROR
    assert (found[2].attributes or {})["redlock.locked"] is True
    assert (found[3].attributes or {})["redlock.outcome"] == "released"
    for span in found:
        assert span.start_time is not None and span.end_time is not None
        assert span.start_time <= span.end_time


def test_readme_spans(nodes: Nodes, spans: InMemorySpanExporter) -> None:
    redlock = Redlock(nodes.clients())
    # With opentelemetry-api installed (the extra `otel`), each acquisition, extension,
    # release and inspection is a span, here under the caller's own.
    tracer = trace.get_tracer("billing")
    with tracer.start_as_current_span("close-month"):
        with redlock.lock("billing:month"):
            pass
    redlock.close()
    finished = {span.name: span for span in spans.get_finished_spans()}
    parent = finished["close-month"].context.span_id
    for name in ("redlock.acquire", "redlock.release"):
        assert finished[name].parent is not None and finished[name].parent.span_id == parent


def test_a_failed_acquisition_span_has_its_error_class_and_retries(
    nodes: Nodes, spans: InMemorySpanExporter, resource: str
) -> None:
    with Redlock(nodes.clients(), ttl=10) as other:
        theirs = other.acquire(resource)
        with Redlock(
            nodes.clients(), ttl=10, attempts=2, retry_delay=0.05, retry_jitter=0.02
        ) as redlock:
            with pytest.raises(LockHeldError):
                redlock.acquire(resource)
        theirs.release()
    failed = [
        span for span in named(spans, resource) if span.status.status_code == StatusCode.ERROR
    ]
    assert len(failed) == 1
    span = failed[0]
    attributes = span.attributes or {}
    assert span.name == "redlock.acquire"
    assert attributes["redlock.outcome"] == "not_acquired"
    assert attributes["error.type"] == "held_elsewhere"
    assert attributes["redlock.attempts"] == 2 and attributes["redlock.reason"] == "conflict"
    assert [event.name for event in span.events] == ["redlock.retry"]
    assert (span.events[0].attributes or {})["redlock.reason"] == "conflict"


def test_a_node_failure_is_a_span_event(
    nodes: Nodes, spans: InMemorySpanExporter, resource: str
) -> None:
    clients = [redis.Redis(port=nodes.ports[0]), redis.Redis(port=CLOSED_PORT)]
    with Redlock(clients, ttl=10, attempts=1) as redlock:
        with pytest.raises(NodesFailedError):
            redlock.acquire(resource)
    (span,) = named(spans, resource)
    assert (span.attributes or {})["error.type"] == "nodes_failing"
    failures = [event for event in span.events if event.name == "redlock.node_failed"]
    assert failures
    assert (failures[0].attributes or {})["redlock.cause"] == "refused"
    assert (failures[0].attributes or {})["redlock.node"] == 1


def test_asyncio_spans(nodes: Nodes, spans: InMemorySpanExporter, resource: str) -> None:
    async def main() -> None:
        clients = [redis.asyncio.Redis(port=port) for port in nodes.ports]
        async with AsyncRedlock(clients, ttl=10) as redlock:
            tracer = trace.get_tracer("test")
            with tracer.start_as_current_span("request"):
                async with redlock.lock(resource):
                    pass
        for client in clients:
            await client.aclose()

    asyncio.run(main())
    found = named(spans, resource)
    assert [span.name for span in found] == ["redlock.acquire", "redlock.release"]
    (parent,) = [span for span in spans.get_finished_spans() if span.name == "request"]
    # The lock's spans are children of the caller's current span.
    assert all(span.parent is not None for span in found)
    assert {span.parent.span_id for span in found if span.parent} == {parent.context.span_id}


def test_without_opentelemetry_nothing_is_imported_and_locks_work(nodes: Nodes) -> None:
    script = f"""
import sys
sys.modules["opentelemetry"] = None  # as if the extra were not installed
import redis
from redlock_core import Redlock, _observe
assert not _observe.tracing()
events = []
with Redlock([redis.Redis(port=p) for p in {nodes.ports!r}], on_event=events.append) as r:
    with r.lock("test:no-otel"):
        pass
assert [e.kind for e in events] == ["acquired", "released"], events
assert not any(name.startswith("opentelemetry") for name in sys.modules if sys.modules[name])
print("ok")
"""
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
