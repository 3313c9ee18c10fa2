<?php

declare(strict_types=1);

namespace Redlock\Ffi;

/**
 * The C ABI's enumeration values as PHP constants (reading `$ffi->REDLOCK_*` on every
 * call costs a lookup each time). A test checks each one against the loaded library.
 */
final class Constants
{
    public const OK = 9000;
    public const NULL_PARAMETER = 9001;
    public const NO_VALUE = 9006;
    public const INVALID_TTL = 9109;

    public const OUTPUT_NONE = 0;
    public const OUTPUT_SEND = 1;
    public const OUTPUT_WAIT = 2;
    public const OUTPUT_OUTCOME = 3;

    public const OPERATION_ACQUIRE = 1;
    public const OPERATION_EXTEND = 2;
    public const OPERATION_RELEASE = 3;
    public const OPERATION_INSPECT = 4;

    public const COMMAND_SET = 1;
    public const COMMAND_ACQUIRE = 2;
    public const COMMAND_RELEASE = 3;
    public const COMMAND_EXTEND = 4;
    public const COMMAND_FENCED_ACQUIRE = 5;
    public const COMMAND_WRITE_BACK = 6;
    public const COMMAND_INSPECT = 7;
    public const COMMAND_QUEUED_ACQUIRE = 8;

    public const OUTCOME_ACQUIRED = 1;
    public const OUTCOME_NOT_ACQUIRED = 2;
    public const OUTCOME_EXTENDED = 3;
    public const OUTCOME_NOT_EXTENDED = 4;
    public const OUTCOME_RELEASED = 5;
    public const OUTCOME_NOT_RELEASED = 6;
    public const OUTCOME_INSPECTED = 7;
    public const OUTCOME_NOT_INSPECTED = 8;

    public const EVENT_ACQUIRED = 1;
    public const EVENT_NOT_ACQUIRED = 2;
    public const EVENT_RETRY = 3;
    public const EVENT_EXTENDED = 4;
    public const EVENT_NOT_EXTENDED = 5;
    public const EVENT_LOST = 6;
    public const EVENT_RELEASED = 7;
    public const EVENT_NOT_RELEASED = 8;
    public const EVENT_INSPECTED = 9;
    public const EVENT_NOT_INSPECTED = 10;
    public const EVENT_NODE_FAILED = 11;

    public const REASON_CONFLICT = 1;
    public const REASON_NODES_FAILED = 2;
    public const REASON_MIXED = 3;
    public const REASON_VALIDITY_TOO_SHORT = 4;
    public const REASON_NOT_HELD = 5;

    public const ERROR_CLASS_HELD_ELSEWHERE = 1;
    public const ERROR_CLASS_NODES_FAILING = 2;
    public const ERROR_CLASS_LOCK_LOST = 3;
    public const ERROR_CLASS_NOT_HELD = 4;
    public const ERROR_CLASS_INVALID_ARGUMENT = 5;
    public const ERROR_CLASS_USED_AFTER_CLOSE = 6;
    public const ERROR_CLASS_CANCELLED = 7;

    public const NODE_CAUSE_REFUSED = 1;
    public const NODE_CAUSE_AUTH = 2;
    public const NODE_CAUSE_TLS = 3;
    public const NODE_CAUSE_TIMEOUT = 4;
    public const NODE_CAUSE_STALLED = 5;
    public const NODE_CAUSE_CONNECTION = 6;
    public const NODE_CAUSE_ERROR = 7;

    public const KEEPALIVE_EXTEND = 1;
    public const KEEPALIVE_WAIT = 2;
    public const KEEPALIVE_LOST = 3;
    public const KEEPALIVE_STOPPED = 4;

    public const LOST_TAKEN = 1;
    public const LOST_NOT_HELD = 2;
    public const LOST_EXPIRED = 3;
    public const LOST_EXTENSION_LIMIT = 4;

    public const LINK_OUTPUT_NONE = 0;
    public const LINK_OUTPUT_CONNECT = 1;
    public const LINK_OUTPUT_WRITE = 2;
    public const LINK_OUTPUT_CLOSE = 3;
    public const LINK_OUTPUT_DELIVER = 4;

    public const LINK_CAUSE_REFUSED = 1;
    public const LINK_CAUSE_AUTH = 2;
    public const LINK_CAUSE_TLS = 3;
    public const LINK_CAUSE_TIMEOUT = 4;
    public const LINK_CAUSE_CLOSED = 5;

    public const SUBSCRIBER_OUTPUT_NONE = 0;
    public const SUBSCRIBER_OUTPUT_OPEN = 1;
    public const SUBSCRIBER_OUTPUT_SUBSCRIBE = 2;
    public const SUBSCRIBER_OUTPUT_UNSUBSCRIBE = 3;
    public const SUBSCRIBER_OUTPUT_CLOSE = 4;

    public const LINK_MAX_IN_FLIGHT = 64;
    public const LINK_MAX_QUEUED = 1024;

    public const NODE_NOT_ASKED = 1;
    public const NODE_PENDING = 2;
    public const NODE_SUCCESS = 3;
    public const NODE_CONFLICT = 4;
    public const NODE_ERROR = 5;
    public const NODE_TIMEOUT = 6;
    public const NODE_MISSING = 7;

    public const REPLY_OK = 1;
    public const REPLY_STATUS = 2;
    public const REPLY_NIL = 3;
    public const REPLY_INTEGER = 4;
    public const REPLY_BULK = 5;
    public const REPLY_ARRAY = 6;
    public const REPLY_ERROR = 7;
    public const REPLY_TIMEOUT = 8;
    public const REPLY_CONNECTION_FAILED = 9;

    public const SCRIPT_ACQUIRE = 1;
    public const SCRIPT_RELEASE = 2;
    public const SCRIPT_EXTEND = 3;
    public const SCRIPT_FENCED_ACQUIRE = 4;
    public const SCRIPT_WRITE_BACK = 5;
    public const SCRIPT_FENCED_SET = 6;
    public const SCRIPT_QUEUED_ACQUIRE = 7;

    public const MAX_FENCING_TOKEN = 9007199254740991;

    public const FENCED_PENDING = 0;
    public const FENCED_ACCEPTED = 1;
    public const FENCED_STALE = 2;
    public const FENCED_RETRY_AS_EVAL = 3;
    public const FENCED_FAILED = 4;

    public const REASONS = [
        self::REASON_CONFLICT => 'conflict',
        self::REASON_NODES_FAILED => 'nodes_failed',
        self::REASON_MIXED => 'mixed',
        self::REASON_VALIDITY_TOO_SHORT => 'validity_too_short',
        self::REASON_NOT_HELD => 'not_held',
    ];

    /** The transport's cause words (StreamConnection, PhpRedisDriver) as LinkCause values. */
    public const LINK_CAUSES = [
        'refused' => self::LINK_CAUSE_REFUSED,
        'auth' => self::LINK_CAUSE_AUTH,
        'tls' => self::LINK_CAUSE_TLS,
        'timeout' => self::LINK_CAUSE_TIMEOUT,
        'other' => self::LINK_CAUSE_CLOSED,
    ];

    public const NODE_STATUSES = [
        self::NODE_NOT_ASKED => 'not_asked',
        self::NODE_PENDING => 'pending',
        self::NODE_SUCCESS => 'success',
        self::NODE_CONFLICT => 'conflict',
        self::NODE_ERROR => 'error',
        self::NODE_TIMEOUT => 'timeout',
        self::NODE_MISSING => 'missing',
    ];

    public const OUTCOME_KINDS = [
        self::OUTCOME_ACQUIRED => 'acquired',
        self::OUTCOME_NOT_ACQUIRED => 'not_acquired',
        self::OUTCOME_EXTENDED => 'extended',
        self::OUTCOME_NOT_EXTENDED => 'not_extended',
        self::OUTCOME_RELEASED => 'released',
        self::OUTCOME_NOT_RELEASED => 'not_released',
        self::OUTCOME_INSPECTED => 'inspected',
        self::OUTCOME_NOT_INSPECTED => 'not_inspected',
    ];

    /** The operation kinds by name, as events report them. */
    public const OPERATION_KINDS = [
        self::OPERATION_ACQUIRE => 'acquire',
        self::OPERATION_EXTEND => 'extend',
        self::OPERATION_RELEASE => 'release',
        self::OPERATION_INSPECT => 'inspect',
    ];
}
