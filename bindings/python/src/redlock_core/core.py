"""The core's objects over its C ABI: one Python class per handle.

Each class owns one handle and frees it exactly once: on :meth:`close`, at the end of a
``with`` block, or when the object is collected. Using a closed object raises
:class:`~redlock_core.UsedAfterCloseError`; arguments are checked before they reach C
(ctypes would silently wrap a negative number into a huge unsigned one), and every
result code the library returns is checked and raised as a
:class:`~redlock_core.CoreError`.

This is the layer the drivers (:mod:`redlock_core`'s ``Redlock`` and ``AsyncRedlock``)
are built on; use it directly to drive the core with another transport. Times are
microseconds on the caller's monotonic clock (see :func:`now_us`). The classes live in
modules by what they wrap: configuration (``_config``), client (``_client``),
operations, outcomes and leases (``_operation``), replies and the decoder
(``_reply``), node links (``_link``), notice subscriptions (``_subscriptions``), keep-alive
(``_keepalive``), the resource-side fencing check (``_guard``).

The library is loaded with ``ctypes.PyDLL``, which keeps the GIL during every call, so
no two threads are ever inside the library at once; objects that several threads share
(a :class:`Client`, a :class:`Lease`) need no lock of their own for single calls.
"""

from __future__ import annotations

from ._client import Client
from ._config import Config
from ._guard import FencedSet
from ._handle import (
    Resource,
    Resources,
    duplicate_node,
    error_class_name,
    lost_reason_name,
    max_ttl_ms,
    micros,
    millis,
    now_us,
    resource_list,
    script_sha1,
    script_text,
    token_from_random_bytes,
    version,
)
from ._keepalive import KeepAlive, KeepAliveAction
from ._link import Delivery, Link
from ._operation import Command, Lease, Operation, OperationEvent, Outcome, PackedCommand
from ._reply import Decoder, Reply
from ._subscriptions import SubscriberOutput, Subscriptions

__all__ = [
    "Client",
    "Command",
    "Config",
    "Decoder",
    "Delivery",
    "FencedSet",
    "KeepAlive",
    "KeepAliveAction",
    "Lease",
    "Link",
    "Operation",
    "OperationEvent",
    "Outcome",
    "PackedCommand",
    "Reply",
    "Resource",
    "Resources",
    "SubscriberOutput",
    "Subscriptions",
    "duplicate_node",
    "error_class_name",
    "lost_reason_name",
    "max_ttl_ms",
    "micros",
    "millis",
    "now_us",
    "resource_list",
    "script_sha1",
    "script_text",
    "token_from_random_bytes",
    "version",
]
