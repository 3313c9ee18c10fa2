"""Operations, their outcomes, and leases (``redlock_operation``, ``redlock_outcome``,
``redlock_lease``)."""

from __future__ import annotations

import ctypes
from ctypes import byref, c_bool, c_size_t, c_uint32, c_uint64, c_void_p
from typing import Any, NamedTuple

from . import _ffi
from ._ffi import lib
from ._handle import (
    _bytes,
    _Handle,
    _i64,
    _new_handle,
    _size,
    _u32,
    _u64,
)
from ._reply import Reply


class Command(NamedTuple):
    """A command to send: to node ``node``, under ``request_id``, waiting for its reply
    no later than ``deadline`` (microseconds); ``argv[0]`` is the command's name."""

    node: int
    request_id: int
    deadline: int
    argv: tuple[bytes, ...]


class PackedCommand(NamedTuple):
    """A command to send, as RESP bytes (see :class:`Command`)."""

    node: int
    request_id: int
    deadline: int
    resp: bytes


class OperationEvent(NamedTuple):
    """One event an operation reported (``redlock_operation_poll_event``), as the core
    gives it: times in microseconds on the caller's clock, nodes as ``(status, error
    text)`` pairs. ``node`` and ``cause`` are set for ``"node_failed"`` (whose
    ``nodes`` holds that node's result only), ``reason`` for failures and retries,
    ``retry_at`` for retries."""

    kind: str
    operation: str
    at: int
    elapsed: int
    attempt: int
    reason: str | None
    retry_at: int | None
    node: int | None
    cause: str | None
    nodes: tuple[tuple[str, str | None], ...]


_ARGV_CAPACITY = 80  # EVALSHA sha1 numkeys + up to 64 keys + token + ttl, with room


class Operation(_Handle):
    """One acquisition, extension or release (``redlock_operation``).

    After it is created and after every input (:meth:`handle_reply`,
    :meth:`handle_timeout`, :meth:`abandon`), call :meth:`poll` until it returns
    ``OUTPUT_WAIT``, ``OUTPUT_OUTCOME`` or ``OUTPUT_NONE``, acting on each output:
    ``OUTPUT_SEND`` (:meth:`command`, or hand it to its node's :class:`Link`),
    ``OUTPUT_WAIT`` (:meth:`wait_until`: the only wake-up), ``OUTPUT_OUTCOME``
    (:meth:`take_outcome`).
    """

    __slots__ = (
        "_argc",
        "_args",
        "_capacity",
        "_command_kind",
        "_command_kind_refs",
        "_command_refs",
        "_deadline",
        "_kind",
        "_kind_ref",
        "_lens",
        "_node",
        "_request",
        "_resp",
        "_resp_length",
        "_resp_refs",
    )
    _free_name = "redlock_operation_free"

    def __init__(self, pointer: int | None) -> None:
        super().__init__(pointer)
        # Output slots, and references to them, made once per operation.
        self._kind = c_uint32()
        self._kind_ref = byref(self._kind)
        self._node = c_size_t()
        self._request = c_uint64()
        self._deadline = c_uint64()
        self._argc = c_size_t()
        self._command_refs = (
            byref(self._node),
            byref(self._request),
            byref(self._deadline),
            byref(self._argc),
        )
        self._resp = c_void_p()
        self._resp_length = c_size_t()
        self._resp_refs = (byref(self._resp), byref(self._resp_length))
        self._command_kind = (c_uint32(), c_bool())
        self._command_kind_refs = (byref(self._command_kind[0]), byref(self._command_kind[1]))
        self._capacity = 0
        self._args: Any = None
        self._lens: Any = None

    # inputs

    def handle_reply(
        self,
        request_id: int,
        kind: int,
        now: int,
        *,
        integer: int = 0,
        text: bytes | None = None,
    ) -> None:
        """Hands in the reply to ``request_id``: a ``REPLY_*`` kind other than
        ``REPLY_ARRAY`` with its integer or text."""
        data = b"" if text is None else _bytes(text, "text")
        _ffi.check(
            lib.redlock_operation_handle_reply(
                self._p(),
                _u64(request_id, "request_id"),
                _u32(kind, "kind"),
                _i64(integer, "integer"),
                data,
                len(data),
                _u64(now, "now"),
            ),
            "handle_reply",
        )

    def _reply(
        self, request_id: int, kind: int, integer: int, text: bytes | None, now: int
    ) -> None:
        """:meth:`handle_reply` for the drivers, whose arguments need no checking."""
        rc = lib.redlock_operation_handle_reply(
            self._p(), request_id, kind, integer, text, len(text) if text else 0, now
        )
        if rc != _ffi.OK:
            _ffi.fail(rc, "handle_reply")

    def handle_reply_value(self, request_id: int, reply: Reply, now: int) -> None:
        """Hands in the reply to ``request_id`` as a :class:`Reply` (arrays included)."""
        if not isinstance(reply, Reply):
            raise TypeError(f"reply must be a Reply, not {type(reply).__name__}")
        _ffi.check(
            lib.redlock_operation_handle_reply_value(
                self._p(), _u64(request_id, "request_id"), reply._p(), _u64(now, "now")
            ),
            "handle_reply",
        )

    def handle_timeout(self, now: int) -> None:
        """Time has reached ``now``: requests past their deadline time out, a due retry
        starts. Calling it early is harmless."""
        _ffi.check(
            lib.redlock_operation_handle_timeout(self._p(), _u64(now, "now")), "handle_timeout"
        )

    # outputs

    def poll(self) -> int:
        """The next output's kind: ``OUTPUT_NONE``, ``_SEND``, ``_WAIT`` or ``_OUTCOME``."""
        rc = lib.redlock_operation_poll_output(self._p(), self._kind_ref)
        if rc != _ffi.OK:
            _ffi.fail(rc, "poll")
        return self._kind.value

    def target(self) -> tuple[int, int, int]:
        """The current ``OUTPUT_SEND`` output's node, request id and deadline (what a
        driver needs to hand it to its node's link), without copying its arguments."""
        rc = lib.redlock_operation_command(self._p(), *self._command_refs)
        if rc != _ffi.OK:
            _ffi.fail(rc, "command")
        return self._node.value, self._request.value, self._deadline.value

    def command(self) -> Command:
        """The current ``OUTPUT_SEND`` output's command."""
        pointer = self._p()
        rc = lib.redlock_operation_command(pointer, *self._command_refs)
        if rc != _ffi.OK:
            _ffi.fail(rc, "command")
        argc = self._argc.value
        if argc > self._capacity:
            self._capacity = max(argc, _ARGV_CAPACITY)
            self._args = (c_void_p * self._capacity)()
            self._lens = (c_size_t * self._capacity)()
        rc = lib.redlock_operation_command_args(
            pointer, self._args, self._lens, self._capacity, byref(self._argc)
        )
        if rc != _ffi.OK:
            _ffi.fail(rc, "command")
        string_at = ctypes.string_at
        args, lens = self._args, self._lens
        return Command(
            self._node.value,
            self._request.value,
            self._deadline.value,
            # The library lends argc (pointer, length) pairs, none of them NULL.
            tuple([string_at(args[i], lens[i]) for i in range(argc)]),
        )

    def packed_command(self) -> PackedCommand:
        """The current ``OUTPUT_SEND`` output's command, encoded in RESP by the core
        (what the drivers write to the socket: byte-identical in every binding)."""
        pointer = self._p()
        rc = lib.redlock_operation_command(pointer, *self._command_refs)
        if rc != _ffi.OK:
            _ffi.fail(rc, "command")
        rc = lib.redlock_operation_command_resp(pointer, *self._resp_refs)
        if rc != _ffi.OK:
            _ffi.fail(rc, "command_resp")
        return PackedCommand(
            self._node.value,
            self._request.value,
            self._deadline.value,
            # Lent by the library: never NULL for a command.
            ctypes.string_at(self._resp.value, self._resp_length.value),  # type: ignore[arg-type]
        )

    def command_arg(self, index: int) -> bytes:
        """Argument ``index`` of the current command."""
        pointer, length = c_void_p(), c_size_t()
        _ffi.check(
            lib.redlock_operation_command_arg(
                self._p(), _size(index, "index"), byref(pointer), byref(length)
            ),
            "command_arg",
        )
        return _ffi.borrowed(pointer.value, length.value)

    def command_resp(self) -> bytes:
        """The current command encoded in RESP, ready for a socket."""
        pointer, length = c_void_p(), c_size_t()
        _ffi.check(
            lib.redlock_operation_command_resp(self._p(), byref(pointer), byref(length)),
            "command_resp",
        )
        return _ffi.borrowed(pointer.value, length.value)

    def command_kind(self) -> tuple[int, bool]:
        """What the current command does (a ``COMMAND_*`` value) and whether it is an
        ``EVAL`` carrying the script's text."""
        rc = lib.redlock_operation_command_kind(self._p(), *self._command_kind_refs)
        if rc != _ffi.OK:
            _ffi.fail(rc, "command_kind")
        kind, is_eval = self._command_kind
        return kind.value, is_eval.value

    def wait_until(self) -> int:
        """The instant of the current ``OUTPUT_WAIT`` output."""
        until = c_uint64()
        _ffi.check(lib.redlock_operation_wait_until(self._p(), byref(until)), "wait_until")
        return int(until.value)

    def take_outcome(self) -> Outcome:
        """Takes the current ``OUTPUT_OUTCOME`` output's outcome."""
        out = _new_handle()
        _ffi.check(lib.redlock_operation_take_outcome(self._p(), byref(out)), "take_outcome")
        return Outcome(out.value)

    def abandon(self, now: int) -> None:
        """The caller cancelled the operation at ``now``: poll afterwards as after any
        input; an acquisition whose commands are out gives the sends of a release of
        its token, then ``OUTPUT_NONE``. No outcome follows."""
        _ffi.check(lib.redlock_operation_abandon(self._p(), _u64(now, "now")), "abandon")

    def decline(self, outcome: Outcome, now: int) -> None:
        """Gives back, at ``now``, the outcome :meth:`take_outcome` handed out when its
        caller stopped waiting as it was decided: an acquired lock is nobody's, so
        polling afterwards gives the sends of its release, then ``OUTPUT_NONE``; any
        other outcome emits nothing. ``outcome`` is consumed (closed) either way."""
        at, operation = _u64(now, "now"), self._p()
        pointer, outcome._ptr = outcome._p(), None
        _ffi.check(lib.redlock_operation_decline(operation, pointer, at), "decline")

    def handle_notice(self, node: int, now: int) -> None:
        """A release notice for this acquisition's resource from node ``node`` (a
        message on one of :meth:`notice_channels` from that node's subscriber
        connection), received at ``now``. It may make a waiting acquisition try again at
        once; it never decides anything by itself. Poll afterwards."""
        rc = lib.redlock_operation_handle_notice(self._p(), _size(node, "node"), _u64(now, "now"))
        if rc != _ffi.OK:
            _ffi.fail(rc, "handle_notice")

    def handle_subscribed(self, node: int, now: int) -> None:
        """Node ``node`` confirmed, at ``now``, the subscription to one of
        :meth:`notice_channels`: a release published there before it took effect
        reached nobody, and the core may count it as a release naming this waiter (one
        first in the queue on nodes that refused it: at once when a quorum of them
        confirmed, after the spread window when fewer did). Poll afterwards."""
        rc = lib.redlock_operation_handle_subscribed(
            self._p(), _size(node, "node"), _u64(now, "now")
        )
        if rc != _ffi.OK:
            _ffi.fail(rc, "handle_subscribed")

    def handle_notice_message(self, node: int, message: bytes, now: int) -> None:
        """As :meth:`handle_notice`, with the message the notice carried, exactly as the
        subscriber received it: the id of the waiter first in the resource's queue on
        that node, or empty when nobody waits there. The core decides from it when the
        next attempt starts (at once for the waiter it names; the others keep their
        retry schedule). Poll afterwards."""
        data = _bytes(message, "message")
        rc = lib.redlock_operation_handle_notice_message(
            self._p(), _size(node, "node"), data, len(data), _u64(now, "now")
        )
        if rc != _ffi.OK:
            _ffi.fail(rc, "handle_notice_message")

    def notice_channels(self) -> list[bytes]:
        """The channels on which releases of this acquisition's keys are announced
        (one per resource; empty for other operations and once finished)."""
        pointer = self._p()
        channels = []
        for index in range(int(lib.redlock_operation_notice_channel_count(pointer))):
            length = c_size_t()
            rc = lib.redlock_operation_notice_channel(pointer, index, None, 0, byref(length))
            if rc not in (_ffi.OK, _ffi.BUFFER_TOO_SMALL):
                _ffi.fail(rc, "notice_channel")
            buffer = ctypes.create_string_buffer(max(length.value, 1))
            _ffi.check(
                lib.redlock_operation_notice_channel(
                    pointer, index, buffer, len(buffer), byref(length)
                ),
                "notice_channel",
            )
            channels.append(buffer.raw[: length.value])
        return channels

    def poll_event(self) -> OperationEvent | None:
        """The operation's next event (oldest first), or ``None`` when there is none.
        Drain them after each input, next to :meth:`poll`; an operation keeps at most
        64 unread ones. Events only report: nothing depends on reading them."""
        pointer = self._p()
        kind = c_uint32()
        rc = lib.redlock_operation_poll_event(pointer, byref(kind))
        if rc == _ffi.NO_VALUE:
            return None
        _ffi.check(rc, "poll_event")
        at, elapsed, attempt, operation = c_uint64(), c_uint64(), c_uint32(), c_uint32()
        _ffi.check(
            lib.redlock_operation_event(
                pointer, byref(at), byref(elapsed), byref(attempt), byref(operation)
            ),
            "event",
        )
        reason_code = c_uint32()
        rc = lib.redlock_operation_event_reason(pointer, byref(reason_code))
        reason = None
        if rc != _ffi.NO_VALUE:
            _ffi.check(rc, "event_reason")
            code = reason_code.value
            reason = _ffi.REASON_NAMES.get(code, f"unknown_{code}")
        retry = c_uint64()
        rc = lib.redlock_operation_event_retry_at(pointer, byref(retry))
        retry_at = None
        if rc != _ffi.NO_VALUE:
            _ffi.check(rc, "event_retry_at")
            retry_at = int(retry.value)
        node_index, cause_code = c_size_t(), c_uint32()
        rc = lib.redlock_operation_event_node(pointer, byref(node_index), byref(cause_code))
        node = cause = None
        if rc != _ffi.NO_VALUE:
            _ffi.check(rc, "event_node")
            node = int(node_index.value)
            name = lib.redlock_node_cause_name(cause_code.value)
            cause = name.decode("ascii") if name else "error"
        nodes = []
        status, text, length = c_uint32(), c_void_p(), c_size_t()
        for index in range(int(lib.redlock_operation_event_node_count(pointer))):
            _ffi.check(
                lib.redlock_operation_event_node_result(
                    pointer, index, byref(status), byref(text), byref(length)
                ),
                "event_node_result",
            )
            nodes.append(_node_parts(status.value, text.value, length.value))
        name = lib.redlock_event_kind_name(kind.value)
        return OperationEvent(
            name.decode("ascii") if name else f"unknown_{kind.value}",
            _ffi.OPERATION_NAMES.get(operation.value, f"unknown_{operation.value}"),
            int(at.value),
            int(elapsed.value),
            int(attempt.value),
            reason,
            retry_at,
            node,
            cause,
            tuple(nodes),
        )

    def handle_delivery(self, link: Any, now: int) -> None:
        """Hands ``link``'s current delivery (its reply, any kind) to this operation."""
        rc = lib.redlock_operation_handle_delivery(self._p(), link._p(), now)
        if rc != _ffi.OK:
            _ffi.fail(rc, "handle_delivery")

    # getters

    @property
    def kind(self) -> int:
        """``OPERATION_ACQUIRE``, ``_EXTEND``, ``_RELEASE`` or ``_INSPECT``."""
        return int(lib.redlock_operation_kind(self._p()))

    @property
    def is_finished(self) -> bool:
        """True once the outcome is decided, polled or not."""
        return bool(lib.redlock_operation_is_finished(self._p()))

    @property
    def listens(self) -> bool:
        """Whether the driver should listen for this acquisition's release notices now:
        the core decides (with a wait limit from the first refusal by a held key or a
        failed attempt, or from its start when the client waited for one of its
        resources a moment ago; otherwise once an attempt failed and another may
        follow); once true, true until it finishes."""
        return bool(lib.redlock_operation_listens(self._p()))

    @property
    def attempt(self) -> int:
        """The current attempt, from 1."""
        return int(lib.redlock_operation_attempt(self._p()))

    @property
    def token(self) -> str:
        """The current attempt's token (for an extension or release, the lease's)."""
        rc = lib.redlock_operation_token(self._p(), *self._resp_refs)
        if rc != _ffi.OK:
            _ffi.fail(rc, "token")
        return _ffi.borrowed(self._resp.value, self._resp_length.value).decode("ascii")

    @property
    def node_count(self) -> int:
        """N, the number of nodes the operation talks to."""
        return int(lib.redlock_operation_node_count(self._p()))

    def node(self, index: int) -> tuple[str, str | None]:
        """The live view of node ``index``: its status name and error text."""
        kind, pointer, length = c_uint32(), c_void_p(), c_size_t()
        _ffi.check(
            lib.redlock_operation_node(
                self._p(), _size(index, "index"), byref(kind), byref(pointer), byref(length)
            ),
            "node",
        )
        return _node_parts(kind.value, pointer.value, length.value)


def _node_parts(kind: int, pointer: int | None, length: int) -> tuple[str, str | None]:
    status = _ffi.NODE_NAMES.get(kind, f"unknown_{kind}")
    if kind == _ffi.NODE_ERROR:
        return status, _ffi.borrowed(pointer, length).decode("utf-8", "replace")
    return status, None


class Outcome(_Handle):
    """A finished operation's outcome (``redlock_outcome``). Getters return ``None``
    for values this kind of outcome does not have."""

    __slots__ = ()
    _free_name = "redlock_outcome_free"

    def _optional(self, function: str, out: Any) -> Any | None:
        rc = getattr(lib, function)(self._p(), byref(out))
        if rc == _ffi.NO_VALUE:
            return None
        _ffi.check(rc, function)
        return out.value

    @property
    def kind(self) -> str:
        """``"acquired"``, ``"not_acquired"``, ``"extended"``, ``"not_extended"``,
        ``"released"``, ``"not_released"``, ``"inspected"`` or ``"not_inspected"``."""
        kind = int(lib.redlock_outcome_kind(self._p()))
        return _ffi.OUTCOME_NAMES.get(kind, f"unknown_{kind}")

    @property
    def is_success(self) -> bool:
        """True for acquired, extended, released and inspected."""
        return bool(lib.redlock_outcome_is_success(self._p()))

    @property
    def reason(self) -> str | None:
        """Why the operation failed (``"conflict"``, ``"nodes_failed"``, ``"mixed"``,
        ``"validity_too_short"``, ``"not_held"``), ``None`` for a success."""
        reason = self._optional("redlock_outcome_reason", c_uint32())
        return None if reason is None else _ffi.REASON_NAMES.get(reason, f"unknown_{reason}")

    @property
    def token(self) -> str | None:
        """The lease's token (acquired, extended, not extended), or the last attempt's,
        already released (not acquired); ``None`` for releases and inspections."""
        pointer, length = c_void_p(), c_size_t()
        rc = lib.redlock_outcome_token(self._p(), byref(pointer), byref(length))
        if rc == _ffi.NO_VALUE:
            return None
        _ffi.check(rc, "token")
        return _ffi.borrowed(pointer.value, length.value).decode("ascii")

    @property
    def valid_until(self) -> int | None:
        """Until when the lock is held (microseconds, the caller's clock)."""
        return self._optional("redlock_outcome_valid_until", c_uint64())

    @property
    def validity(self) -> int | None:
        """Validity left when the outcome was decided, in microseconds (acquired,
        extended, not extended)."""
        return self._optional("redlock_outcome_validity", c_uint64())

    @property
    def attempts(self) -> int | None:
        """Attempts made (acquired, not acquired)."""
        return self._optional("redlock_outcome_attempts", c_uint32())

    @property
    def extensions(self) -> int | None:
        """Successful extensions of the lease (acquired, extended, not extended)."""
        return self._optional("redlock_outcome_extensions", c_uint32())

    @property
    def retry_at(self) -> int | None:
        """For not extended: when to try again, or ``None`` (no time left, lost, or
        another kind of outcome)."""
        due, at = c_bool(), c_uint64()
        rc = lib.redlock_outcome_retry_at(self._p(), byref(due), byref(at))
        if rc == _ffi.NO_VALUE:
            return None
        _ffi.check(rc, "retry_at")
        return int(at.value) if due.value else None

    @property
    def is_lost(self) -> bool | None:
        """For not extended: whether the lock is already lost, not merely unextended."""
        lost = self._optional("redlock_outcome_is_lost", c_bool())
        return None if lost is None else bool(lost)

    @property
    def released(self) -> int | None:
        """For releases: the nodes that deleted at least one key holding the token."""
        return self._optional("redlock_outcome_released", c_size_t())

    @property
    def fencing_token(self) -> int | None:
        """A fenced acquisition's fencing token (also on its lease), else ``None``."""
        return self._optional("redlock_outcome_fencing_token", c_uint64())

    @property
    def holder(self) -> str | None:
        """An inspection's answer: the token a quorum of nodes hold on every key, or
        ``None`` when nobody holds the lock (and for other outcomes)."""
        pointer, length = c_void_p(), c_size_t()
        rc = lib.redlock_outcome_holder(self._p(), byref(pointer), byref(length))
        if rc == _ffi.NO_VALUE:
            return None
        _ffi.check(rc, "holder")
        return _ffi.borrowed(pointer.value, length.value).decode("ascii", "replace")

    @property
    def is_locked(self) -> bool:
        """Whether an inspection found the lock held by anyone (false for other
        outcomes)."""
        return bool(lib.redlock_outcome_is_locked(self._p()))

    def is_held_by(self, lease: Lease, now: int) -> bool:
        """Whether an inspection found the lock held by ``lease`` at ``now``: a quorum
        hold its token and its validity has not run out on our clock."""
        if not isinstance(lease, Lease):
            raise TypeError(f"lease must be a Lease, not {type(lease).__name__}")
        return bool(lib.redlock_outcome_is_held_by(self._p(), lease._p(), _u64(now, "now")))

    def lease(self) -> Lease | None:
        """A copy of the lease (acquired, extended, not extended), else ``None``."""
        out = _new_handle()
        rc = lib.redlock_outcome_lease(self._p(), byref(out))
        if rc == _ffi.NO_VALUE:
            return None
        _ffi.check(rc, "lease")
        return Lease(out.value)

    @property
    def node_count(self) -> int:
        """N, the number of per-node results."""
        return int(lib.redlock_outcome_node_count(self._p()))

    @property
    def error_class(self) -> int:
        """The core's error class of a failed outcome (``ERROR_CLASS_*``), 0 for a
        success."""
        return int(lib.redlock_outcome_error_class(self._p()))

    def node_cause(self, index: int) -> str | None:
        """Why node ``index`` failed (``"refused"``, ``"auth"``, ``"timeout"``, ...), or
        ``None`` when it did not."""
        cause = c_uint32()
        _ffi.check(
            lib.redlock_outcome_node_cause(self._p(), _size(index, "index"), byref(cause)),
            "node_cause",
        )
        if not cause.value:
            return None
        name = lib.redlock_node_cause_name(cause.value)
        return name.decode("ascii") if name else "error"

    def node(self, index: int) -> tuple[str, str | None]:
        """How node ``index`` answered: its status name and error text."""
        kind, pointer, length = c_uint32(), c_void_p(), c_size_t()
        _ffi.check(
            lib.redlock_outcome_node(
                self._p(), _size(index, "index"), byref(kind), byref(pointer), byref(length)
            ),
            "node",
        )
        return _node_parts(kind.value, pointer.value, length.value)

    def nodes(self) -> list[tuple[str, str | None]]:
        """How every node answered: ``(status, error text)`` per node, in order."""
        return [self.node(index) for index in range(self.node_count)]


class Lease(_Handle):
    """A held lock's keys, token, ``valid_until`` and TTL (``redlock_lease``)."""

    __slots__ = ()
    _free_name = "redlock_lease_free"

    def clone(self) -> Lease:
        """A copy of the lease, a handle of its own."""
        out = _new_handle()
        _ffi.check(lib.redlock_lease_clone(self._p(), byref(out)), "lease_clone")
        return Lease(out.value)

    @property
    def token(self) -> str:
        """The random value stored under every key."""
        pointer, length = c_void_p(), c_size_t()
        _ffi.check(lib.redlock_lease_token(self._p(), byref(pointer), byref(length)), "lease_token")
        return _ffi.borrowed(pointer.value, length.value).decode("ascii")

    @property
    def keys(self) -> list[bytes]:
        """The keys the lock holds (resource names with the key prefix)."""
        pointer = self._p()
        keys = []
        for index in range(int(lib.redlock_lease_key_count(pointer))):
            key, length = c_void_p(), c_size_t()
            _ffi.check(
                lib.redlock_lease_key(pointer, index, byref(key), byref(length)), "lease_key"
            )
            keys.append(_ffi.borrowed(key.value, length.value))
        return keys

    @property
    def valid_until(self) -> int:
        """The instant (our clock) until which the lock is held."""
        return int(lib.redlock_lease_valid_until(self._p()))

    def validity(self, now: int) -> int:
        """Microseconds of validity left at ``now`` (0 once expired)."""
        return int(lib.redlock_lease_validity(self._p(), _u64(now, "now")))

    def is_valid(self, now: int) -> bool:
        """Whether the lease is still valid at ``now`` (before ``valid_until``)."""
        return bool(lib.redlock_lease_is_valid(self._p(), _u64(now, "now")))

    @property
    def ttl_ms(self) -> int:
        """The TTL of the last acquisition or extension, in milliseconds."""
        return int(lib.redlock_lease_ttl_ms(self._p()))

    @property
    def extensions(self) -> int:
        """Successful extensions since the lock was acquired."""
        return int(lib.redlock_lease_extensions(self._p()))

    @property
    def fencing_token(self) -> int | None:
        """The fencing token (strictly greater than every one handed out before it for
        the same resource), or ``None`` without fencing and for a lease rebuilt from
        its parts."""
        out = c_uint64()
        rc = lib.redlock_lease_fencing_token(self._p(), byref(out))
        if rc == _ffi.NO_VALUE:
            return None
        _ffi.check(rc, "fencing_token")
        return int(out.value)

    @property
    def key_ttl_ms(self) -> int | None:
        """The longest TTL any of the lock's keys may carry (``None`` for a lease
        rebuilt from its parts)."""
        out = c_uint64()
        rc = lib.redlock_lease_key_ttl_ms(self._p(), byref(out))
        if rc == _ffi.NO_VALUE:
            return None
        _ffi.check(rc, "key_ttl_ms")
        return int(out.value)
