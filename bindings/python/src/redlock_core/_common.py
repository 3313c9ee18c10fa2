"""What the synchronous and asyncio drivers share: settings, replies, outcomes.

Nothing here decides anything about the lock: replies are translated into the core's
reply kinds, outcomes into results and exceptions, settings into a core
:class:`~redlock_core.core.Config`.
"""

from __future__ import annotations

import logging
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Callable, NamedTuple, Union

from redis.exceptions import (
    BusyLoadingError,
    ExecAbortError,
    NoPermissionError,
    NoScriptError,
    OutOfMemoryError,
    ReadOnlyError,
    ResponseError,
)

from . import _ffi
from ._errors import (
    LockError,
    LockHeldError,
    LockLostError,
    NodeResult,
    NodesFailedError,
)
from .core import Config, Operation, Outcome, Reply, micros, millis

logger = logging.getLogger("redlock_core")

#: A duration in seconds: a number or a ``timedelta``.
Duration = Union[int, float, timedelta]

# A reply as a node worker hands it over: (REPLY_* kind, integer, text or items).
Parts = tuple[int, int, Any]

NOT_SENT = "not sent: the node has not answered an earlier command within its deadline"


@dataclass(frozen=True)
class ReleaseResult:
    """How a release went: ``released`` nodes deleted a key holding the lock's token."""

    released: int
    nodes: tuple[NodeResult, ...]


def build_config(
    node_count: int,
    *,
    ttl: object,
    drift_factor: float | None,
    drift_fixed: object,
    node_timeout: object,
    min_validity: object,
    attempts: int | None,
    retry_delay: object,
    retry_jitter: object,
    key_prefix: str | bytes | None,
    token_bytes: int | None,
    max_extensions: int | None,
) -> Config:
    """A core configuration from the drivers' settings (durations in seconds)."""

    def us(value: object, name: str) -> int | None:
        return None if value is None else micros(value, name)

    return Config(
        node_count,
        millis(ttl, "ttl"),
        drift_factor=drift_factor,
        drift_fixed_us=us(drift_fixed, "drift_fixed"),
        node_timeout_us=us(node_timeout, "node_timeout"),
        min_validity_us=us(min_validity, "min_validity"),
        attempts=attempts,
        retry_delay_us=us(retry_delay, "retry_delay"),
        retry_jitter_us=us(retry_jitter, "retry_jitter"),
        token_bytes=token_bytes,
        max_extensions=max_extensions,
        key_prefix=key_prefix,
    )


def ttl_ms(ttl: object) -> int | None:
    return None if ttl is None else millis(ttl, "ttl")


def label_of(client: Any, index: int) -> str:
    """``host:port`` (or the socket path) of a redis-py client, for per-node detail."""
    try:
        kwargs = client.connection_pool.connection_kwargs
    except AttributeError:
        return f"node {index}"
    if "path" in kwargs:
        return str(kwargs["path"])
    return f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"


def check_clients(clients: Sequence[Any], kind: type, what: str) -> list[Any]:
    if isinstance(clients, (str, bytes)) or not hasattr(clients, "__iter__"):
        raise TypeError(f"clients must be a sequence of {what} clients")
    result = list(clients)
    if not result:
        raise ValueError("clients must hold at least one client (one per Redis node)")
    for index, client in enumerate(result):
        if not isinstance(client, kind):
            raise TypeError(f"clients[{index}] must be a {what}, not {type(client).__name__}")
        if not hasattr(client, "connection_pool"):
            raise TypeError(f"clients[{index}] has no connection pool")
    return result


# ---- replies ----------------------------------------------------------------------


def from_response(value: Any) -> Parts:
    """A redis-py reply (read with ``disable_decoding=True``) as the core's reply.

    redis-py hands status and bulk replies over alike, as bytes: ``b"OK"`` counts as the
    status ``OK`` (what ``SET`` answers), anything else as a bulk string.
    """
    if value is None:
        return (_ffi.REPLY_NIL, 0, None)
    if isinstance(value, bool):  # RESP3 boolean
        return (_ffi.REPLY_INTEGER, int(value), None)
    if isinstance(value, int):
        if -(2**63) <= value < 2**63:
            return (_ffi.REPLY_INTEGER, value, None)
        return (_ffi.REPLY_BULK, 0, str(value).encode())  # RESP3 big number
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        if data == b"OK":
            return (_ffi.REPLY_OK, 0, None)
        return (_ffi.REPLY_BULK, 0, data)
    if isinstance(value, str):
        if value == "OK":
            return (_ffi.REPLY_OK, 0, None)
        return (_ffi.REPLY_BULK, 0, value.encode("utf-8"))
    if isinstance(value, (list, tuple, set, frozenset)):
        return (_ffi.REPLY_ARRAY, 0, [from_response(item) for item in value])
    if isinstance(value, dict):
        flat: list[Parts] = []
        for key, item in value.items():
            flat.append(from_response(key))
            flat.append(from_response(item))
        return (_ffi.REPLY_ARRAY, 0, flat)
    if isinstance(value, ResponseError):
        return from_exception(value)
    return (_ffi.REPLY_BULK, 0, str(value).encode("utf-8"))


# What redis-py strips from an error line into the exception's class (for versions
# before 8, whose exceptions have no status_code).
_PREFIXES = [
    (NoScriptError, "NOSCRIPT"),
    (ReadOnlyError, "READONLY"),
    (ExecAbortError, "EXECABORT"),
    (BusyLoadingError, "LOADING"),
    (OutOfMemoryError, "OOM"),
    (NoPermissionError, "NOPERM"),
]


def error_text(error: ResponseError) -> str:
    """The node's full error line: redis-py strips known prefixes (``NOSCRIPT``,
    ``ERR``) into the exception's class and ``status_code``; the core needs them."""
    message = str(error.args[0]) if error.args else str(error)
    code = getattr(error, "status_code", None)
    if code:
        return f"{code} {message}"
    for kind, prefix in _PREFIXES:
        if isinstance(error, kind):
            return message if message.startswith(prefix) else f"{prefix} {message}"
    first = message.split(" ", 1)[0]
    if type(error) is ResponseError and not (first.isupper() and first.isalpha()):
        return f"ERR {message}"  # the generic prefix, stripped
    return message


def from_exception(error: BaseException) -> Parts:
    """An exception from a command as the core's reply: an error reply for the node's
    own errors, a connection failure for everything else."""
    if isinstance(error, ResponseError):
        return (_ffi.REPLY_ERROR, 0, error_text(error).encode("utf-8", "replace"))
    text = str(error) or type(error).__name__
    return (
        _ffi.REPLY_CONNECTION_FAILED,
        0,
        f"{type(error).__name__}: {text}".encode("utf-8", "replace"),
    )


def not_sent(last_error: str | None) -> Parts:
    text = NOT_SENT if last_error is None else f"{NOT_SENT} (last error: {last_error})"
    return (_ffi.REPLY_CONNECTION_FAILED, 0, text.encode("utf-8", "replace"))


def closed_reply() -> Parts:
    return (_ffi.REPLY_CONNECTION_FAILED, 0, b"not sent: the Redlock is closed")


# ---- one node's commands ----------------------------------------------------------

#: Releases queued for a node that stopped answering, at most.
MAX_QUEUED_WHILE_STALLED = 1024
#: Tokens a node queue remembers having sent an acquisition for, at most.
MAX_TRACKED_TOKENS = 4096


class Job(NamedTuple):
    """One command for one node: its reply goes to ``deliver(request_id, parts)``."""

    request_id: int
    deadline: int
    kind: int  # COMMAND_SET, _ACQUIRE, _RELEASE or _EXTEND, from the core
    token: str  # the operation's token, from the core
    resp: bytes  # the command, encoded by the core
    deliver: Callable[[tuple[int, Parts]], None]


def _preload() -> bytes:
    from .core import script_text

    commands = []
    for script in (_ffi.SCRIPT_ACQUIRE, _ffi.SCRIPT_RELEASE, _ffi.SCRIPT_EXTEND):
        text = script_text(script).encode()
        commands.append(b"*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n$%d\r\n%s\r\n" % (len(text), text))
    return b"".join(commands)


#: Written first on every new connection (three SCRIPT LOAD, in RESP), so that EVALSHA
#: finds the scripts: the core falls back to EVAL on NOSCRIPT, but not for a reply that
#: comes after it decided (a release decides at a quorum), which would leave that
#: node's key to its TTL.
PRELOAD_REPLIES = 3
PRELOAD = _preload()


class NodeQueue:
    """The commands of one node, sent on one connection in the order the core issued
    them, and which commands get in. (No I/O; each driver's worker does that.)

    Order matters: a failed attempt's release must reach a node after that attempt's
    ``SET``, or the ``SET`` could land last and leave a key behind; one connection per
    node, written in issue order, guarantees it.

    - An acquisition or extension whose deadline passed before it could be written is
      dropped: the core already counted it as timed out. A release is always written,
      however late: it only ever deletes this lock's own keys.
    - While the node has a command written and unanswered past its deadline (frozen,
      or its client blocks), new commands fail at once ("not sent"), so nothing piles
      up behind a node that does not answer; except a release of a token this queue
      took an acquisition for (and has not released since), which still queues, to
      clean up after a ``SET`` that may land when the node answers again.
    """

    def __init__(self) -> None:
        self.jobs: deque[Job] = deque()
        self.in_flight: deque[Job] = deque()
        self.last_error: str | None = None
        self.closed = False
        # Tokens of acquisitions taken for this node and not released since; bounded
        # (oldest forgotten first: a forgotten one's key ends with its TTL).
        self.acquired: OrderedDict[str, None] = OrderedDict()

    def stalled(self, now: int) -> bool:
        return any(job.deadline <= now for job in self.in_flight)

    def admit(self, job: Job, now: int) -> Parts | None:
        """Queues ``job``, or returns the reply it gets at once instead."""
        if self.closed:
            return closed_reply()
        # pop gives the stored None for a tracked token, 0 for another.
        needed = job.kind == _ffi.COMMAND_RELEASE and self.acquired.pop(job.token, 0) is None
        if self.in_flight and self.stalled(now):
            if job.kind != _ffi.COMMAND_RELEASE or not needed:
                return not_sent(self.last_error)
            if len(self.jobs) >= MAX_QUEUED_WHILE_STALLED:
                return not_sent(self.last_error)
        elif job.kind in (_ffi.COMMAND_SET, _ffi.COMMAND_ACQUIRE):
            self.acquired[job.token] = None
            if len(self.acquired) > MAX_TRACKED_TOKENS:
                self.acquired.popitem(last=False)
        self.jobs.append(job)
        return None

    def take_batch(self, now: int) -> list[Job]:
        """Every queued job still worth writing, moved in flight, in order."""
        batch = [job for job in self.jobs if job.deadline > now or job.kind == _ffi.COMMAND_RELEASE]
        self.jobs.clear()
        self.in_flight.extend(batch)
        return batch

    def settle_by(self) -> int | None:
        """The latest deadline of the commands queued or in flight (None: nothing
        waits). What is still owed an answer past it the core has given up on."""
        deadlines = [job.deadline for job in self.jobs] + [job.deadline for job in self.in_flight]
        return max(deadlines) if deadlines else None

    def answered(self, parts: Parts) -> Job:
        """The oldest job in flight got ``parts``; returns it."""
        job = self.in_flight.popleft()
        if parts[0] == _ffi.REPLY_CONNECTION_FAILED:
            self.last_error = parts[2].decode("utf-8", "replace")
        else:
            self.last_error = None
        return job


def _reply_value(parts: Parts) -> Reply:
    kind, integer, payload = parts
    if kind == _ffi.REPLY_ARRAY:
        array = Reply.new(_ffi.REPLY_ARRAY)
        try:
            for item in payload:
                with _reply_value(item) as element:
                    array.push(element)
        except BaseException:
            array.close()
            raise
        return array
    return Reply.new(kind, integer=integer, text=payload)


def hand_in(op: Operation, request_id: int, parts: Parts, now: int) -> None:
    """Hands one reply to the operation."""
    kind, integer, payload = parts
    if kind == _ffi.REPLY_ARRAY:
        with _reply_value(parts) as reply:
            op.handle_reply_value(request_id, reply, now)
    else:
        op._reply(request_id, kind, integer, payload, now)


# ---- outcomes ---------------------------------------------------------------------


def node_results(outcome: Outcome, labels: Sequence[str]) -> tuple[NodeResult, ...]:
    return tuple(
        NodeResult(index, labels[index] if index < len(labels) else f"node {index}", status, error)
        for index, (status, error) in enumerate(outcome.nodes())
    )


def _names(resources: Sequence[str | bytes]) -> str:
    return ", ".join(repr(resource) for resource in resources)


def acquire_error(
    outcome: Outcome, resources: Sequence[str | bytes], labels: Sequence[str]
) -> LockError:
    reason = outcome.reason or "unknown"
    nodes = node_results(outcome, labels)
    attempts = outcome.attempts
    if reason == "conflict":
        return LockHeldError(
            f"could not acquire {_names(resources)}: held by someone else",
            resources=resources,
            reason=reason,
            nodes=nodes,
            attempts=attempts,
        )
    why = {
        "nodes_failed": "too many nodes failed",
        "mixed": "conflicts and failing nodes left no quorum",
        "validity_too_short": "a quorum agreed too late (validity below the floor)",
    }.get(reason, reason)
    return NodesFailedError(
        f"could not acquire {_names(resources)}: {why}",
        resources=resources,
        reason=reason,
        nodes=nodes,
        attempts=attempts,
    )


def extend_error(
    outcome: Outcome, resources: Sequence[str | bytes], labels: Sequence[str]
) -> LockError:
    reason = outcome.reason or "unknown"
    nodes = node_results(outcome, labels)
    if outcome.is_lost:
        why = "another token holds it" if reason == "conflict" else "its lease ran out"
        return LockLostError(
            f"lock on {_names(resources)} is lost: {why}",
            resources=resources,
            reason=reason,
            nodes=nodes,
        )
    valid_until = outcome.valid_until
    retry_at = outcome.retry_at
    return NodesFailedError(
        f"could not extend {_names(resources)} ({reason}); still held on the old lease",
        resources=resources,
        reason=reason,
        nodes=nodes,
        valid_until_us=valid_until,
        retry_at_us=retry_at,
    )


def release_result(outcome: Outcome, labels: Sequence[str]) -> ReleaseResult:
    return ReleaseResult(outcome.released or 0, node_results(outcome, labels))


def call_on_lost(callback: Callable[[LockLostError], Any] | None, error: LockLostError) -> Any:
    logger.warning("%s", error)
    if callback is None:
        return None
    try:
        return callback(error)
    except Exception:  # a failing callback must not stop the signal
        logger.exception("the on_lost callback raised")
        return None
