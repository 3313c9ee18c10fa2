"""Loads ``libredlock`` with ctypes and declares every function of its C ABI.

The library is the one bundled in this package (``libredlock.so`` next to this file),
or the file ``$REDLOCK_LIBRARY`` names. Every exported function gets its ``argtypes``
and ``restype`` here, from ``ffi/include/redlock.h``; a test checks the table against
the header. :func:`check` turns a result code into the matching exception.
"""

from __future__ import annotations

import ctypes
import os
import sys
from ctypes import (
    POINTER,
    c_bool,
    c_char_p,
    c_double,
    c_int64,
    c_size_t,
    c_uint32,
    c_uint64,
    c_void_p,
)
from pathlib import Path
from typing import Any, NoReturn

from ._errors import (
    ConfigError,
    CoreError,
    InvalidArgumentError,
    LibraryNotFoundError,
    ProtocolError,
    UsageError,
)

ENVIRONMENT_VARIABLE = "REDLOCK_LIBRARY"

# ---- constants (redlock.h) --------------------------------------------------------

OK = 9000
NULL_PARAMETER = 9001
PANIC = 9002
BUFFER_TOO_SMALL = 9003
INVALID_INPUT = 9004
OUT_OF_RANGE = 9005
NO_VALUE = 9006
UNKNOWN_NODE = 9110
INVALID_FENCING_TOKEN = 9111

MAX_NODES = 255
MAX_RESOURCES = 64
MIN_TOKEN_BYTES = 16
MAX_TOKEN_BYTES = 64
MAX_TOKEN_TEXT = 256
MAX_ATTEMPTS = 1_000_000
SEED_LEN = 32
MESSAGE_MAX = 256

SCRIPT_ACQUIRE = 1
SCRIPT_RELEASE = 2
SCRIPT_EXTEND = 3
SCRIPT_FENCED_ACQUIRE = 4
SCRIPT_WRITE_BACK = 5
SCRIPT_FENCED_SET = 6
SCRIPT_QUEUED_ACQUIRE = 7

MAX_FENCING_TOKEN = 2**53 - 1

FENCED_PENDING = 0
FENCED_ACCEPTED = 1
FENCED_STALE = 2
FENCED_RETRY_AS_EVAL = 3
FENCED_FAILED = 4

OUTPUT_NONE = 0
OUTPUT_SEND = 1
OUTPUT_WAIT = 2
OUTPUT_OUTCOME = 3

OPERATION_ACQUIRE = 1
OPERATION_EXTEND = 2
OPERATION_RELEASE = 3
OPERATION_INSPECT = 4

OPERATION_NAMES = {
    OPERATION_ACQUIRE: "acquire",
    OPERATION_EXTEND: "extend",
    OPERATION_RELEASE: "release",
    OPERATION_INSPECT: "inspect",
}

EVENT_ACQUIRED = 1
EVENT_NOT_ACQUIRED = 2
EVENT_RETRY = 3
EVENT_EXTENDED = 4
EVENT_NOT_EXTENDED = 5
EVENT_LOST = 6
EVENT_RELEASED = 7
EVENT_NOT_RELEASED = 8
EVENT_INSPECTED = 9
EVENT_NOT_INSPECTED = 10
EVENT_NODE_FAILED = 11

COMMAND_SET = 1
COMMAND_ACQUIRE = 2
COMMAND_RELEASE = 3
COMMAND_EXTEND = 4
COMMAND_FENCED_ACQUIRE = 5
COMMAND_WRITE_BACK = 6
COMMAND_INSPECT = 7
COMMAND_QUEUED_ACQUIRE = 8

OUTCOME_ACQUIRED = 1
OUTCOME_NOT_ACQUIRED = 2
OUTCOME_EXTENDED = 3
OUTCOME_NOT_EXTENDED = 4
OUTCOME_RELEASED = 5
OUTCOME_NOT_RELEASED = 6
OUTCOME_INSPECTED = 7
OUTCOME_NOT_INSPECTED = 8

REASON_CONFLICT = 1
REASON_NODES_FAILED = 2
REASON_MIXED = 3
REASON_VALIDITY_TOO_SHORT = 4
REASON_NOT_HELD = 5

NODE_NOT_ASKED = 1
NODE_PENDING = 2
NODE_SUCCESS = 3
NODE_CONFLICT = 4
NODE_ERROR = 5
NODE_TIMEOUT = 6
NODE_MISSING = 7

REPLY_OK = 1
REPLY_STATUS = 2
REPLY_NIL = 3
REPLY_INTEGER = 4
REPLY_BULK = 5
REPLY_ARRAY = 6
REPLY_ERROR = 7
REPLY_TIMEOUT = 8
REPLY_CONNECTION_FAILED = 9

LINK_OUTPUT_NONE = 0
LINK_OUTPUT_CONNECT = 1
LINK_OUTPUT_WRITE = 2
LINK_OUTPUT_CLOSE = 3
LINK_OUTPUT_DELIVER = 4

LINK_CAUSE_REFUSED = 1
LINK_CAUSE_AUTH = 2
LINK_CAUSE_TLS = 3
LINK_CAUSE_TIMEOUT = 4
LINK_CAUSE_CLOSED = 5

LINK_MAX_IN_FLIGHT = 64
LINK_MAX_QUEUED = 1024

SUBSCRIBER_OUTPUT_NONE = 0
SUBSCRIBER_OUTPUT_OPEN = 1
SUBSCRIBER_OUTPUT_SUBSCRIBE = 2
SUBSCRIBER_OUTPUT_UNSUBSCRIBE = 3
SUBSCRIBER_OUTPUT_CLOSE = 4

KEEPALIVE_EXTEND = 1
KEEPALIVE_WAIT = 2
KEEPALIVE_LOST = 3
KEEPALIVE_STOPPED = 4

ERROR_CLASS_HELD_ELSEWHERE = 1
ERROR_CLASS_NODES_FAILING = 2
ERROR_CLASS_LOCK_LOST = 3
ERROR_CLASS_NOT_HELD = 4
ERROR_CLASS_INVALID_ARGUMENT = 5
ERROR_CLASS_USED_AFTER_CLOSE = 6
ERROR_CLASS_CANCELLED = 7

OUTCOME_NAMES = {
    OUTCOME_ACQUIRED: "acquired",
    OUTCOME_NOT_ACQUIRED: "not_acquired",
    OUTCOME_EXTENDED: "extended",
    OUTCOME_NOT_EXTENDED: "not_extended",
    OUTCOME_RELEASED: "released",
    OUTCOME_NOT_RELEASED: "not_released",
    OUTCOME_INSPECTED: "inspected",
    OUTCOME_NOT_INSPECTED: "not_inspected",
}
REASON_NAMES = {
    REASON_CONFLICT: "conflict",
    REASON_NODES_FAILED: "nodes_failed",
    REASON_MIXED: "mixed",
    REASON_VALIDITY_TOO_SHORT: "validity_too_short",
    REASON_NOT_HELD: "not_held",
}
NODE_NAMES = {
    NODE_NOT_ASKED: "not_asked",
    NODE_PENDING: "pending",
    NODE_SUCCESS: "success",
    NODE_CONFLICT: "conflict",
    NODE_ERROR: "error",
    NODE_TIMEOUT: "timeout",
    NODE_MISSING: "missing",
}
REPLY_NAMES = {
    REPLY_OK: "ok",
    REPLY_STATUS: "status",
    REPLY_NIL: "nil",
    REPLY_INTEGER: "integer",
    REPLY_BULK: "bulk",
    REPLY_ARRAY: "array",
    REPLY_ERROR: "error",
    REPLY_TIMEOUT: "timeout",
    REPLY_CONNECTION_FAILED: "connection_failed",
}
REPLY_KINDS = {name: kind for kind, name in REPLY_NAMES.items()}

# ---- declarations -----------------------------------------------------------------

HANDLE = c_void_p  # every opaque handle
OUT_HANDLE = POINTER(c_void_p)  # T **out
BYTES = c_char_p  # const uint8_t * (bytes or None)
BUFFER = c_void_p  # uint8_t * written by the library
OUT_PTR = POINTER(c_void_p)  # const uint8_t **out (borrowed)
BYTES_ARRAY = POINTER(c_char_p)  # const uint8_t *const *
SIZES = POINTER(c_size_t)
RESULT = c_uint32

OUT_BOOL = POINTER(c_bool)
OUT_U32 = POINTER(c_uint32)
OUT_U64 = POINTER(c_uint64)
OUT_I64 = POINTER(c_int64)
OUT_SIZE = POINTER(c_size_t)

# name: (restype, argtypes), in the header's order.
SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "redlock_client_new": (RESULT, [HANDLE, OUT_HANDLE]),
    "redlock_client_new_seeded": (RESULT, [HANDLE, BYTES, c_size_t, OUT_HANDLE]),
    "redlock_client_free": (None, [HANDLE]),
    "redlock_client_acquire": (
        RESULT,
        [HANDLE, BYTES_ARRAY, SIZES, c_size_t, c_uint64, OUT_HANDLE],
    ),
    "redlock_client_inspect": (
        RESULT,
        [HANDLE, BYTES_ARRAY, SIZES, c_size_t, c_uint64, OUT_HANDLE],
    ),
    "redlock_client_acquire_for": (
        RESULT,
        [HANDLE, BYTES_ARRAY, SIZES, c_size_t, c_uint64, c_uint64, OUT_HANDLE],
    ),
    "redlock_client_acquire_with_random": (
        RESULT,
        [HANDLE, BYTES_ARRAY, SIZES, c_size_t, BYTES, c_size_t, c_uint64, OUT_HANDLE],
    ),
    "redlock_client_acquire_with": (
        RESULT,
        [HANDLE, BYTES_ARRAY, SIZES, c_size_t, c_uint64, c_bool, c_uint64, c_uint64, OUT_HANDLE],
    ),
    "redlock_client_acquire_with_random_options": (
        RESULT,
        [
            HANDLE,
            BYTES_ARRAY,
            SIZES,
            c_size_t,
            c_uint64,
            c_bool,
            c_uint64,
            BYTES,
            c_size_t,
            c_uint64,
            OUT_HANDLE,
        ],
    ),
    "redlock_client_extend": (RESULT, [HANDLE, HANDLE, c_uint64, OUT_HANDLE]),
    "redlock_client_extend_for": (RESULT, [HANDLE, HANDLE, c_uint64, c_uint64, OUT_HANDLE]),
    "redlock_client_release": (RESULT, [HANDLE, HANDLE, c_uint64, OUT_HANDLE]),
    "redlock_client_check_ttl": (RESULT, [HANDLE, c_uint64]),
    "redlock_client_lease": (
        RESULT,
        [HANDLE, BYTES_ARRAY, SIZES, c_size_t, BYTES, c_size_t, c_uint64, OUT_HANDLE],
    ),
    "redlock_client_generate_token": (RESULT, [HANDLE, BUFFER, c_size_t, OUT_SIZE]),
    "redlock_token_from_random_bytes": (RESULT, [BYTES, c_size_t, BUFFER, c_size_t, OUT_SIZE]),
    "redlock_client_next_extension": (RESULT, [HANDLE, HANDLE, c_uint64, OUT_BOOL, OUT_U64]),
    "redlock_lease_free": (None, [HANDLE]),
    "redlock_lease_clone": (RESULT, [HANDLE, OUT_HANDLE]),
    "redlock_lease_token": (RESULT, [HANDLE, OUT_PTR, OUT_SIZE]),
    "redlock_lease_key_count": (c_size_t, [HANDLE]),
    "redlock_lease_key": (RESULT, [HANDLE, c_size_t, OUT_PTR, OUT_SIZE]),
    "redlock_lease_valid_until": (c_uint64, [HANDLE]),
    "redlock_lease_validity": (c_uint64, [HANDLE, c_uint64]),
    "redlock_lease_is_valid": (c_bool, [HANDLE, c_uint64]),
    "redlock_lease_ttl_ms": (c_uint64, [HANDLE]),
    "redlock_lease_fencing_token": (RESULT, [HANDLE, OUT_U64]),
    "redlock_lease_extensions": (c_uint32, [HANDLE]),
    "redlock_lease_key_ttl_ms": (RESULT, [HANDLE, OUT_U64]),
    "redlock_config_builder_new": (RESULT, [c_size_t, c_uint64, OUT_HANDLE]),
    "redlock_config_builder_free": (None, [HANDLE]),
    "redlock_config_builder_set_ttl_ms": (RESULT, [HANDLE, c_uint64]),
    "redlock_config_builder_set_drift_factor": (RESULT, [HANDLE, c_double]),
    "redlock_config_builder_set_drift_fixed_us": (RESULT, [HANDLE, c_uint64]),
    "redlock_config_builder_set_node_timeout_us": (RESULT, [HANDLE, c_uint64]),
    "redlock_config_builder_set_min_validity_us": (RESULT, [HANDLE, c_uint64]),
    "redlock_config_builder_set_attempts": (RESULT, [HANDLE, c_uint32]),
    "redlock_config_builder_set_retry_delay_us": (RESULT, [HANDLE, c_uint64]),
    "redlock_config_builder_set_retry_jitter_us": (RESULT, [HANDLE, c_uint64]),
    "redlock_config_builder_set_token_bytes": (RESULT, [HANDLE, c_size_t]),
    "redlock_config_builder_set_max_extensions": (RESULT, [HANDLE, c_uint32]),
    "redlock_config_builder_set_unbounded_extensions": (RESULT, [HANDLE]),
    "redlock_config_builder_set_fencing": (RESULT, [HANDLE, c_bool]),
    "redlock_config_builder_set_key_prefix": (RESULT, [HANDLE, BYTES, c_size_t]),
    "redlock_config_builder_build": (RESULT, [HANDLE, OUT_HANDLE]),
    "redlock_config_free": (None, [HANDLE]),
    "redlock_config_nodes": (c_size_t, [HANDLE]),
    "redlock_config_quorum": (c_size_t, [HANDLE]),
    "redlock_config_ttl_ms": (c_uint64, [HANDLE]),
    "redlock_config_drift_factor": (c_double, [HANDLE]),
    "redlock_config_drift_fixed_us": (c_uint64, [HANDLE]),
    "redlock_config_drift_us": (c_uint64, [HANDLE]),
    "redlock_config_node_timeout_us": (c_uint64, [HANDLE]),
    "redlock_config_min_validity_us": (c_uint64, [HANDLE]),
    "redlock_config_attempts": (c_uint32, [HANDLE]),
    "redlock_config_retry_delay_us": (c_uint64, [HANDLE]),
    "redlock_config_retry_jitter_us": (c_uint64, [HANDLE]),
    "redlock_config_token_bytes": (c_size_t, [HANDLE]),
    "redlock_config_key_prefix": (RESULT, [HANDLE, OUT_PTR, OUT_SIZE]),
    "redlock_config_max_extensions": (RESULT, [HANDLE, OUT_BOOL, OUT_U32]),
    "redlock_config_fencing": (c_bool, [HANDLE]),
    "redlock_version": (c_char_p, []),
    "redlock_max_ttl_ms": (c_uint64, []),
    "redlock_notice_channel_linger_ms": (c_uint64, []),
    "redlock_subscriber_reopen_first_ms": (c_uint64, []),
    "redlock_subscriber_reopen_max_ms": (c_uint64, []),
    "redlock_connect_timeout_default_ms": (c_uint64, []),
    "redlock_sentinel_query_timeout_default_ms": (c_uint64, []),
    "redlock_sentinel_connect_timeout_ms": (c_uint64, [c_size_t, c_uint64, c_uint64]),
    "redlock_script_text": (c_char_p, [c_uint32]),
    "redlock_script_sha1": (c_char_p, [c_uint32]),
    "redlock_result_name": (c_char_p, [c_uint32]),
    "redlock_result_message": (RESULT, [c_uint32, BUFFER, c_size_t, OUT_SIZE]),
    "redlock_fenced_set_new": (
        RESULT,
        [BYTES, c_size_t, BYTES, c_size_t, c_uint64, OUT_HANDLE],
    ),
    "redlock_fenced_set_free": (None, [HANDLE]),
    "redlock_fenced_set_args": (RESULT, [HANDLE, c_bool, OUT_PTR, SIZES, c_size_t, OUT_SIZE]),
    "redlock_fenced_set_handle_reply": (RESULT, [HANDLE, HANDLE, OUT_U32]),
    "redlock_fenced_set_result": (c_uint32, [HANDLE]),
    "redlock_fenced_set_seen": (RESULT, [HANDLE, OUT_U64]),
    "redlock_fenced_set_failure": (RESULT, [HANDLE, OUT_PTR, OUT_SIZE]),
    "redlock_operation_free": (None, [HANDLE]),
    "redlock_operation_handle_reply": (
        RESULT,
        [HANDLE, c_uint64, c_uint32, c_int64, BYTES, c_size_t, c_uint64],
    ),
    "redlock_operation_handle_reply_value": (RESULT, [HANDLE, c_uint64, HANDLE, c_uint64]),
    "redlock_operation_handle_timeout": (RESULT, [HANDLE, c_uint64]),
    "redlock_operation_poll_output": (RESULT, [HANDLE, OUT_U32]),
    "redlock_operation_command": (RESULT, [HANDLE, OUT_SIZE, OUT_U64, OUT_U64, OUT_SIZE]),
    "redlock_operation_command_arg": (RESULT, [HANDLE, c_size_t, OUT_PTR, OUT_SIZE]),
    "redlock_operation_command_args": (RESULT, [HANDLE, OUT_PTR, SIZES, c_size_t, OUT_SIZE]),
    "redlock_operation_command_resp": (RESULT, [HANDLE, OUT_PTR, OUT_SIZE]),
    "redlock_operation_command_kind": (RESULT, [HANDLE, OUT_U32, OUT_BOOL]),
    "redlock_operation_wait_until": (RESULT, [HANDLE, OUT_U64]),
    "redlock_operation_take_outcome": (RESULT, [HANDLE, OUT_HANDLE]),
    "redlock_operation_abandon": (RESULT, [HANDLE, c_uint64]),
    "redlock_operation_decline": (RESULT, [HANDLE, HANDLE, c_uint64]),
    "redlock_operation_handle_delivery": (RESULT, [HANDLE, HANDLE, c_uint64]),
    "redlock_operation_handle_notice": (RESULT, [HANDLE, c_size_t, c_uint64]),
    "redlock_operation_handle_subscribed": (RESULT, [HANDLE, c_size_t, c_uint64]),
    "redlock_operation_handle_notice_message": (
        RESULT,
        [HANDLE, c_size_t, BYTES, c_size_t, c_uint64],
    ),
    "redlock_operation_notice_channel_count": (c_size_t, [HANDLE]),
    "redlock_operation_listens": (c_bool, [HANDLE]),
    "redlock_operation_notice_channel": (RESULT, [HANDLE, c_size_t, BUFFER, c_size_t, OUT_SIZE]),
    "redlock_operation_poll_event": (RESULT, [HANDLE, OUT_U32]),
    "redlock_operation_event": (RESULT, [HANDLE, OUT_U64, OUT_U64, OUT_U32, OUT_U32]),
    "redlock_operation_event_reason": (RESULT, [HANDLE, OUT_U32]),
    "redlock_operation_event_retry_at": (RESULT, [HANDLE, OUT_U64]),
    "redlock_operation_event_node": (RESULT, [HANDLE, OUT_SIZE, OUT_U32]),
    "redlock_operation_event_node_count": (c_size_t, [HANDLE]),
    "redlock_operation_event_node_result": (
        RESULT,
        [HANDLE, c_size_t, OUT_U32, OUT_PTR, OUT_SIZE],
    ),
    "redlock_event_kind_name": (c_char_p, [c_uint32]),
    "redlock_operation_kind": (c_uint32, [HANDLE]),
    "redlock_operation_is_finished": (c_bool, [HANDLE]),
    "redlock_operation_attempt": (c_uint32, [HANDLE]),
    "redlock_operation_token": (RESULT, [HANDLE, OUT_PTR, OUT_SIZE]),
    "redlock_operation_node_count": (c_size_t, [HANDLE]),
    "redlock_operation_node": (RESULT, [HANDLE, c_size_t, OUT_U32, OUT_PTR, OUT_SIZE]),
    "redlock_outcome_free": (None, [HANDLE]),
    "redlock_outcome_kind": (c_uint32, [HANDLE]),
    "redlock_outcome_is_success": (c_bool, [HANDLE]),
    "redlock_outcome_reason": (RESULT, [HANDLE, OUT_U32]),
    "redlock_outcome_token": (RESULT, [HANDLE, OUT_PTR, OUT_SIZE]),
    "redlock_outcome_valid_until": (RESULT, [HANDLE, OUT_U64]),
    "redlock_outcome_validity": (RESULT, [HANDLE, OUT_U64]),
    "redlock_outcome_attempts": (RESULT, [HANDLE, OUT_U32]),
    "redlock_outcome_extensions": (RESULT, [HANDLE, OUT_U32]),
    "redlock_outcome_retry_at": (RESULT, [HANDLE, OUT_BOOL, OUT_U64]),
    "redlock_outcome_is_lost": (RESULT, [HANDLE, OUT_BOOL]),
    "redlock_outcome_released": (RESULT, [HANDLE, OUT_SIZE]),
    "redlock_outcome_lease": (RESULT, [HANDLE, OUT_HANDLE]),
    "redlock_outcome_fencing_token": (RESULT, [HANDLE, OUT_U64]),
    "redlock_outcome_holder": (RESULT, [HANDLE, OUT_PTR, OUT_SIZE]),
    "redlock_outcome_is_locked": (c_bool, [HANDLE]),
    "redlock_outcome_is_held_by": (c_bool, [HANDLE, HANDLE, c_uint64]),
    "redlock_outcome_node_count": (c_size_t, [HANDLE]),
    "redlock_outcome_node": (RESULT, [HANDLE, c_size_t, OUT_U32, OUT_PTR, OUT_SIZE]),
    "redlock_outcome_error_class": (c_uint32, [HANDLE]),
    "redlock_outcome_node_cause": (RESULT, [HANDLE, c_size_t, OUT_U32]),
    "redlock_reply_new": (RESULT, [c_uint32, c_int64, BYTES, c_size_t, OUT_HANDLE]),
    "redlock_reply_array_push": (RESULT, [HANDLE, HANDLE]),
    "redlock_reply_free": (None, [HANDLE]),
    "redlock_reply_kind": (c_uint32, [HANDLE]),
    "redlock_reply_integer": (RESULT, [HANDLE, OUT_I64]),
    "redlock_reply_bytes": (RESULT, [HANDLE, OUT_PTR, OUT_SIZE]),
    "redlock_reply_array_len": (c_size_t, [HANDLE]),
    "redlock_reply_array_get": (RESULT, [HANDLE, c_size_t, OUT_HANDLE]),
    "redlock_decoder_new": (RESULT, [OUT_HANDLE]),
    "redlock_decoder_new_with_limits": (
        RESULT,
        [c_size_t, c_size_t, c_size_t, c_size_t, OUT_HANDLE],
    ),
    "redlock_decoder_free": (None, [HANDLE]),
    "redlock_decoder_feed": (RESULT, [HANDLE, BYTES, c_size_t]),
    "redlock_decoder_next_reply": (RESULT, [HANDLE, OUT_HANDLE]),
    "redlock_decoder_buffered": (c_size_t, [HANDLE]),
    "redlock_subscriptions_new": (RESULT, [c_size_t, c_uint64, OUT_HANDLE]),
    "redlock_subscriptions_free": (None, [HANDLE]),
    "redlock_subscriptions_want": (RESULT, [HANDLE, BYTES, c_size_t, c_uint64]),
    "redlock_subscriptions_unwant": (RESULT, [HANDLE, BYTES, c_size_t, c_uint64]),
    "redlock_subscriptions_handle_opened": (RESULT, [HANDLE, c_size_t, c_uint64]),
    "redlock_subscriptions_handle_lost": (RESULT, [HANDLE, c_size_t, c_uint64]),
    "redlock_subscriptions_handle_refused": (RESULT, [HANDLE, c_size_t, c_uint64]),
    "redlock_subscriptions_handle_confirmed": (
        RESULT,
        [HANDLE, c_size_t, BYTES, c_size_t, c_uint64, OUT_BOOL],
    ),
    "redlock_subscriptions_handle_timeout": (RESULT, [HANDLE, c_uint64]),
    "redlock_subscriptions_poll_output": (RESULT, [HANDLE, OUT_U32, OUT_SIZE]),
    "redlock_subscriptions_channel": (RESULT, [HANDLE, OUT_PTR, OUT_SIZE]),
    "redlock_subscriptions_poll_timeout": (RESULT, [HANDLE, OUT_BOOL, OUT_U64]),
    "redlock_subscriptions_is_open": (c_bool, [HANDLE, c_size_t]),
    "redlock_subscriptions_channel_count": (c_size_t, [HANDLE]),
    "redlock_error_class_name": (c_char_p, [c_uint32]),
    "redlock_node_cause_name": (c_char_p, [c_uint32]),
    "redlock_result_error_class": (c_uint32, [c_uint32]),
    "redlock_duplicate_node": (
        RESULT,
        [BYTES_ARRAY, SIZES, c_size_t, OUT_BOOL, OUT_SIZE, OUT_SIZE],
    ),
    "redlock_link_new": (RESULT, [OUT_HANDLE]),
    "redlock_link_set_connect_timeout": (RESULT, [HANDLE, c_uint64]),
    "redlock_link_connect_timeout_ms": (c_uint64, [HANDLE]),
    "redlock_link_free": (None, [HANDLE]),
    "redlock_link_submit_current": (RESULT, [HANDLE, c_uint64, HANDLE, c_uint64]),
    "redlock_link_handle_connected": (RESULT, [HANDLE, c_uint64]),
    "redlock_link_handle_closed": (RESULT, [HANDLE, c_uint32, BYTES, c_size_t, c_uint64]),
    "redlock_link_handle_reply": (
        RESULT,
        [HANDLE, c_uint64, c_uint32, c_int64, BYTES, c_size_t, c_uint64],
    ),
    "redlock_link_handle_reply_value": (RESULT, [HANDLE, c_uint64, HANDLE, c_uint64]),
    "redlock_link_handle_timeout": (RESULT, [HANDLE, c_uint64]),
    "redlock_link_poll_output": (RESULT, [HANDLE, OUT_U32]),
    "redlock_link_write": (RESULT, [HANDLE, OUT_U64, OUT_SIZE]),
    "redlock_link_write_arg": (RESULT, [HANDLE, c_size_t, OUT_PTR, OUT_SIZE]),
    "redlock_link_write_args": (RESULT, [HANDLE, OUT_PTR, SIZES, c_size_t, OUT_SIZE]),
    "redlock_link_write_resp": (RESULT, [HANDLE, OUT_PTR, OUT_SIZE]),
    "redlock_link_delivery": (
        RESULT,
        [HANDLE, OUT_U64, OUT_U64, OUT_U32, OUT_I64, OUT_PTR, OUT_SIZE],
    ),
    "redlock_link_delivery_reply": (RESULT, [HANDLE, OUT_HANDLE]),
    "redlock_link_poll_timeout": (RESULT, [HANDLE, OUT_BOOL, OUT_U64]),
    "redlock_link_is_idle": (c_bool, [HANDLE]),
    "redlock_link_is_stalled": (c_bool, [HANDLE, c_uint64]),
    "redlock_link_is_open": (c_bool, [HANDLE]),
    "redlock_link_in_flight": (c_size_t, [HANDLE]),
    "redlock_link_queued": (c_size_t, [HANDLE]),
    "redlock_link_owed": (c_size_t, [HANDLE]),
    "redlock_keepalive_new": (RESULT, [HANDLE, HANDLE, OUT_HANDLE]),
    "redlock_keepalive_free": (None, [HANDLE]),
    "redlock_keepalive_poll": (RESULT, [HANDLE, c_uint64, OUT_U32, OUT_U64, OUT_U32]),
    "redlock_keepalive_handle_outcome": (RESULT, [HANDLE, HANDLE, c_uint64]),
    "redlock_keepalive_handle_failure": (RESULT, [HANDLE, c_uint64]),
    "redlock_keepalive_stop": (RESULT, [HANDLE]),
    "redlock_keepalive_lease": (RESULT, [HANDLE, OUT_HANDLE]),
    "redlock_keepalive_lost_reason": (c_uint32, [HANDLE]),
    "redlock_keepalive_is_extending": (c_bool, [HANDLE]),
    "redlock_lost_reason_name": (c_char_p, [c_uint32]),
}

# ---- loading ----------------------------------------------------------------------


def _library_file_name() -> str:
    if sys.platform == "darwin":
        return "libredlock.dylib"
    if sys.platform == "win32":
        return "redlock.dll"
    return "libredlock.so"


def library_path() -> Path:
    """The library this process loads: ``$REDLOCK_LIBRARY`` or the bundled file."""
    override = os.environ.get(ENVIRONMENT_VARIABLE)
    if override:
        path = Path(override)
        if not path.is_file():
            raise LibraryNotFoundError(
                f"{ENVIRONMENT_VARIABLE}={override!r} is not a file; point it at a "
                "libredlock built with `cargo build -p redlock-ffi --release`"
            )
        return path
    bundled = Path(__file__).with_name(_library_file_name())
    if not bundled.is_file():
        raise LibraryNotFoundError(
            f"{bundled} is missing: this copy of redlock_core was installed without its "
            "library. Build the package with bindings/python/build.sh, or set "
            f"{ENVIRONMENT_VARIABLE} to a libredlock built with "
            "`cargo build -p redlock-ffi --release`"
        )
    return bundled


def _load() -> ctypes.PyDLL:
    path = library_path()
    try:
        # PyDLL keeps the GIL during calls: every function here returns in well under a
        # microsecond and never blocks, so releasing and re-taking the GIL around each
        # would cost more than the call itself.
        library = ctypes.PyDLL(str(path))
    except OSError as error:
        raise LibraryNotFoundError(f"cannot load {path}: {error}") from error
    missing = []
    for name, (restype, argtypes) in SIGNATURES.items():
        try:
            function = getattr(library, name)
        except AttributeError:
            missing.append(name)
            continue
        function.restype = restype
        function.argtypes = argtypes
    if missing:
        raise LibraryNotFoundError(
            f"{path} lacks {', '.join(missing)}: it is not the libredlock this package "
            "was written for"
        )
    return library


lib: Any = _load()

# ---- results ----------------------------------------------------------------------

_NAMES: dict[int, str] = {}
_MESSAGES: dict[int, str] = {}


def result_name(result: int) -> str:
    """The core's stable snake_case name for ``result`` (``"unknown_result"`` if none)."""
    name = _NAMES.get(result)
    if name is None:
        raw = lib.redlock_result_name(result & 0xFFFFFFFF)
        name = raw.decode("ascii") if raw else "unknown_result"
        _NAMES[result] = name
    return name


def result_message(result: int) -> str:
    """The core's sentence for ``result``."""
    message = _MESSAGES.get(result)
    if message is None:
        buffer = ctypes.create_string_buffer(MESSAGE_MAX)
        length = c_size_t()
        rc = lib.redlock_result_message(
            result & 0xFFFFFFFF, buffer, MESSAGE_MAX, ctypes.byref(length)
        )
        if rc != OK:
            message = f"result {result}"
        else:
            message = buffer.raw[: length.value].decode("utf-8", "replace")
        _MESSAGES[result] = message
    return message


def error_class(result: int) -> type[CoreError]:
    """The exception class for a result code."""
    if result in (NULL_PARAMETER, INVALID_INPUT, OUT_OF_RANGE):
        return InvalidArgumentError
    if 9100 <= result < 9200:
        return UsageError
    if 9200 <= result < 9300:
        return ConfigError
    if 9300 <= result < 9400:
        return ProtocolError
    return CoreError


def error(result: int, context: str = "") -> CoreError:
    """The exception for a failed call's result code."""
    return error_class(result)(result, result_name(result), result_message(result), context)


def fail(result: int, context: str = "") -> NoReturn:
    raise error(result, context)


def check(result: int, context: str = "") -> None:
    """Raises the matching :class:`CoreError` unless ``result`` is ``REDLOCK_OK``."""
    if result != OK:
        raise error(result, context)


def borrowed(pointer: int | None, length: int) -> bytes:
    """A copy of ``length`` bytes the library lent at ``pointer``."""
    if not length:
        return b""
    if not pointer:
        raise CoreError(PANIC, "null_pointer", "the library returned NULL with a length")
    return ctypes.string_at(pointer, length)
