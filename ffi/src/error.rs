//! Result codes: one per reserved condition of the boundary and one per core error, so
//! that callers branch on a number and show a sentence.

use std::ffi::c_char;

use redlock_core::resp::ProtocolError;
use redlock_core::{ConfigError, UsageError};

use crate::boundary::{copy_out, guard};

/// What a call did. `REDLOCK_OK` is success; every other value is an error whose
/// snake_case name `redlock_result_name` gives and whose sentence
/// `redlock_result_message` writes.
///
/// 9001-9099 are the boundary's own; 9100-9199 misuse of the core (the operation or
/// client is unchanged); 9200-9299 configuration errors; 9300-9399 RESP protocol errors
/// (the connection is out of step and must be closed).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum redlock_result {
    /// Success.
    REDLOCK_OK = 9000,
    /// A required pointer was NULL (or a byte string's pointer with a non-zero length).
    REDLOCK_NULL_PARAMETER = 9001,
    /// A bug inside the library was caught at the boundary; the handles involved may be
    /// in any state and should be freed.
    REDLOCK_PANIC = 9002,
    /// The caller's buffer is too small; nothing was written.
    REDLOCK_BUFFER_TOO_SMALL = 9003,
    /// An argument is not acceptable (an unknown enumeration value, a seed that is not
    /// 32 bytes, a reply kind that needs another function, a length too large).
    REDLOCK_INVALID_INPUT = 9004,
    /// An index past the end.
    REDLOCK_OUT_OF_RANGE = 9005,
    /// This output or outcome has no such value (a command asked of a wait, a token
    /// asked of a release).
    REDLOCK_NO_VALUE = 9006,
    /// A core error this version of the library has no code for.
    REDLOCK_UNKNOWN_ERROR = 9007,

    /// A reply for a request id this operation never issued.
    REDLOCK_UNKNOWN_REQUEST = 9100,
    /// A second reply for the same request.
    REDLOCK_DUPLICATE_REPLY = 9101,
    /// An acquisition of no resources.
    REDLOCK_NO_RESOURCES = 9102,
    /// A resource whose key (prefix included) would be empty.
    REDLOCK_EMPTY_RESOURCE = 9103,
    /// More than `REDLOCK_MAX_RESOURCES` resources in one lock.
    REDLOCK_TOO_MANY_RESOURCES = 9104,
    /// The same resource named twice in one lock.
    REDLOCK_DUPLICATE_RESOURCE = 9105,
    /// A token that is empty, too long, or not printable ASCII without spaces.
    REDLOCK_INVALID_TOKEN = 9106,
    /// Caller-supplied random bytes too few for every attempt of the acquisition.
    REDLOCK_NOT_ENOUGH_RANDOM_BYTES = 9107,
    /// The operating system's random source failed.
    REDLOCK_RANDOM_SOURCE_FAILED = 9108,
    /// A TTL given for one operation that the configuration does not allow with it;
    /// `redlock_client_check_ttl` says which rule it breaks.
    REDLOCK_INVALID_TTL = 9109,
    /// A node index outside `0..N` (a release notice from a node the client does not have).
    REDLOCK_UNKNOWN_NODE = 9110,
    /// A fencing token of 0 or above `REDLOCK_MAX_FENCING_TOKEN` given to a fenced write.
    REDLOCK_INVALID_FENCING_TOKEN = 9111,
    /// An outcome given back (`redlock_operation_decline`) to an operation that did not
    /// hand it out: another operation's, one not polled yet, or one given back already.
    REDLOCK_FOREIGN_OUTCOME = 9112,
    /// A resource whose key (prefix included) is another resource's fence or waiters key
    /// (one ending in `:fence`, `:waiters`, `:waiters:expiry` or `:waiters:turn` right
    /// after a hash tag): refused, so that one lock's scripts never write over another's
    /// keys.
    REDLOCK_RESERVED_RESOURCE = 9113,

    /// No nodes: N must be at least 1.
    REDLOCK_CONFIG_NO_NODES = 9200,
    /// More than `REDLOCK_MAX_NODES` nodes.
    REDLOCK_CONFIG_TOO_MANY_NODES = 9201,
    /// A TTL of zero.
    REDLOCK_CONFIG_TTL_ZERO = 9202,
    /// A TTL with a fraction of a millisecond (cannot arise through this API).
    REDLOCK_CONFIG_TTL_NOT_WHOLE_MILLISECONDS = 9203,
    /// A TTL above `redlock_max_ttl_ms()`.
    REDLOCK_CONFIG_TTL_TOO_LARGE = 9204,
    /// A drift factor that is not a number in [0, 1).
    REDLOCK_CONFIG_DRIFT_FACTOR_INVALID = 9205,
    /// A drift (ttl * drift_factor + drift_fixed) that eats the whole TTL.
    REDLOCK_CONFIG_DRIFT_TOO_LARGE = 9206,
    /// A minimum validity not below ttl - drift.
    REDLOCK_CONFIG_MIN_VALIDITY_TOO_LARGE = 9207,
    /// A node timeout of zero.
    REDLOCK_CONFIG_NODE_TIMEOUT_ZERO = 9208,
    /// node_timeout + min_validity not below ttl - drift.
    REDLOCK_CONFIG_NODE_TIMEOUT_TOO_LARGE = 9209,
    /// Zero attempts.
    REDLOCK_CONFIG_ATTEMPTS_ZERO = 9210,
    /// More than `REDLOCK_MAX_ATTEMPTS` attempts.
    REDLOCK_CONFIG_TOO_MANY_ATTEMPTS = 9211,
    /// A retry jitter larger than the retry delay.
    REDLOCK_CONFIG_JITTER_TOO_LARGE = 9212,
    /// Fewer than `REDLOCK_MIN_TOKEN_BYTES` random bytes per token.
    REDLOCK_CONFIG_TOKEN_TOO_SHORT = 9213,
    /// More than `REDLOCK_MAX_TOKEN_BYTES` random bytes per token.
    REDLOCK_CONFIG_TOKEN_TOO_LONG = 9214,
    /// With more than one attempt, a retry delay below 1 ms.
    REDLOCK_CONFIG_RETRY_DELAY_TOO_SHORT = 9215,

    /// A RESP frame starts with a byte that is no RESP type.
    REDLOCK_PROTOCOL_UNKNOWN_TYPE = 9300,
    /// A RESP length, count or integer that is not a valid decimal number.
    REDLOCK_PROTOCOL_BAD_NUMBER = 9301,
    /// A RESP line or bulk string not terminated by CRLF.
    REDLOCK_PROTOCOL_BAD_TERMINATOR = 9302,
    /// A RESP frame larger than the decoder's limits.
    REDLOCK_PROTOCOL_TOO_LARGE = 9303,
    /// RESP aggregates nested deeper than the decoder's limit.
    REDLOCK_PROTOCOL_TOO_DEEP = 9304,
    /// An invalid RESP3 boolean or verbatim string.
    REDLOCK_PROTOCOL_BAD_VALUE = 9305,
}

use redlock_result as R;

/// Every code with its stable name, in order.
const NAMES: &[(redlock_result, &std::ffi::CStr)] = &[
    (R::REDLOCK_OK, c"ok"),
    (R::REDLOCK_NULL_PARAMETER, c"null_parameter"),
    (R::REDLOCK_PANIC, c"panic"),
    (R::REDLOCK_BUFFER_TOO_SMALL, c"buffer_too_small"),
    (R::REDLOCK_INVALID_INPUT, c"invalid_input"),
    (R::REDLOCK_OUT_OF_RANGE, c"out_of_range"),
    (R::REDLOCK_NO_VALUE, c"no_value"),
    (R::REDLOCK_UNKNOWN_ERROR, c"unknown_error"),
    (R::REDLOCK_UNKNOWN_REQUEST, c"unknown_request"),
    (R::REDLOCK_DUPLICATE_REPLY, c"duplicate_reply"),
    (R::REDLOCK_NO_RESOURCES, c"no_resources"),
    (R::REDLOCK_EMPTY_RESOURCE, c"empty_resource"),
    (R::REDLOCK_TOO_MANY_RESOURCES, c"too_many_resources"),
    (R::REDLOCK_DUPLICATE_RESOURCE, c"duplicate_resource"),
    (R::REDLOCK_INVALID_TOKEN, c"invalid_token"),
    (
        R::REDLOCK_NOT_ENOUGH_RANDOM_BYTES,
        c"not_enough_random_bytes",
    ),
    (R::REDLOCK_RANDOM_SOURCE_FAILED, c"random_source_failed"),
    (R::REDLOCK_INVALID_TTL, c"invalid_ttl"),
    (R::REDLOCK_UNKNOWN_NODE, c"unknown_node"),
    (R::REDLOCK_INVALID_FENCING_TOKEN, c"invalid_fencing_token"),
    (R::REDLOCK_FOREIGN_OUTCOME, c"foreign_outcome"),
    (R::REDLOCK_RESERVED_RESOURCE, c"reserved_resource"),
    (R::REDLOCK_CONFIG_NO_NODES, c"no_nodes"),
    (R::REDLOCK_CONFIG_TOO_MANY_NODES, c"too_many_nodes"),
    (R::REDLOCK_CONFIG_TTL_ZERO, c"ttl_zero"),
    (
        R::REDLOCK_CONFIG_TTL_NOT_WHOLE_MILLISECONDS,
        c"ttl_not_whole_milliseconds",
    ),
    (R::REDLOCK_CONFIG_TTL_TOO_LARGE, c"ttl_too_large"),
    (
        R::REDLOCK_CONFIG_DRIFT_FACTOR_INVALID,
        c"drift_factor_invalid",
    ),
    (R::REDLOCK_CONFIG_DRIFT_TOO_LARGE, c"drift_too_large"),
    (
        R::REDLOCK_CONFIG_MIN_VALIDITY_TOO_LARGE,
        c"min_validity_too_large",
    ),
    (R::REDLOCK_CONFIG_NODE_TIMEOUT_ZERO, c"node_timeout_zero"),
    (
        R::REDLOCK_CONFIG_NODE_TIMEOUT_TOO_LARGE,
        c"node_timeout_too_large",
    ),
    (R::REDLOCK_CONFIG_ATTEMPTS_ZERO, c"attempts_zero"),
    (R::REDLOCK_CONFIG_TOO_MANY_ATTEMPTS, c"too_many_attempts"),
    (R::REDLOCK_CONFIG_JITTER_TOO_LARGE, c"jitter_too_large"),
    (R::REDLOCK_CONFIG_TOKEN_TOO_SHORT, c"token_too_short"),
    (R::REDLOCK_CONFIG_TOKEN_TOO_LONG, c"token_too_long"),
    (
        R::REDLOCK_CONFIG_RETRY_DELAY_TOO_SHORT,
        c"retry_delay_too_short",
    ),
    (R::REDLOCK_PROTOCOL_UNKNOWN_TYPE, c"unknown_type"),
    (R::REDLOCK_PROTOCOL_BAD_NUMBER, c"bad_number"),
    (R::REDLOCK_PROTOCOL_BAD_TERMINATOR, c"bad_terminator"),
    (R::REDLOCK_PROTOCOL_TOO_LARGE, c"too_large"),
    (R::REDLOCK_PROTOCOL_TOO_DEEP, c"too_deep"),
    (R::REDLOCK_PROTOCOL_BAD_VALUE, c"bad_value"),
];

const USAGE: &[(redlock_result, UsageError)] = &[
    (R::REDLOCK_UNKNOWN_REQUEST, UsageError::UnknownRequest),
    (R::REDLOCK_DUPLICATE_REPLY, UsageError::DuplicateReply),
    (R::REDLOCK_NO_RESOURCES, UsageError::NoResources),
    (R::REDLOCK_EMPTY_RESOURCE, UsageError::EmptyResource),
    (R::REDLOCK_TOO_MANY_RESOURCES, UsageError::TooManyResources),
    (R::REDLOCK_DUPLICATE_RESOURCE, UsageError::DuplicateResource),
    (R::REDLOCK_INVALID_TOKEN, UsageError::InvalidToken),
    (
        R::REDLOCK_NOT_ENOUGH_RANDOM_BYTES,
        UsageError::NotEnoughRandomBytes,
    ),
    (
        R::REDLOCK_RANDOM_SOURCE_FAILED,
        UsageError::RandomSourceFailed,
    ),
    (R::REDLOCK_UNKNOWN_NODE, UsageError::UnknownNode),
    (
        R::REDLOCK_INVALID_FENCING_TOKEN,
        UsageError::InvalidFencingToken,
    ),
    (R::REDLOCK_FOREIGN_OUTCOME, UsageError::ForeignOutcome),
    (R::REDLOCK_RESERVED_RESOURCE, UsageError::ReservedResource),
];

const CONFIG: &[(redlock_result, ConfigError)] = &[
    (R::REDLOCK_CONFIG_NO_NODES, ConfigError::NoNodes),
    (R::REDLOCK_CONFIG_TOO_MANY_NODES, ConfigError::TooManyNodes),
    (R::REDLOCK_CONFIG_TTL_ZERO, ConfigError::TtlZero),
    (
        R::REDLOCK_CONFIG_TTL_NOT_WHOLE_MILLISECONDS,
        ConfigError::TtlNotWholeMilliseconds,
    ),
    (R::REDLOCK_CONFIG_TTL_TOO_LARGE, ConfigError::TtlTooLarge),
    (
        R::REDLOCK_CONFIG_DRIFT_FACTOR_INVALID,
        ConfigError::DriftFactorInvalid,
    ),
    (
        R::REDLOCK_CONFIG_DRIFT_TOO_LARGE,
        ConfigError::DriftTooLarge,
    ),
    (
        R::REDLOCK_CONFIG_MIN_VALIDITY_TOO_LARGE,
        ConfigError::MinValidityTooLarge,
    ),
    (
        R::REDLOCK_CONFIG_NODE_TIMEOUT_ZERO,
        ConfigError::NodeTimeoutZero,
    ),
    (
        R::REDLOCK_CONFIG_NODE_TIMEOUT_TOO_LARGE,
        ConfigError::NodeTimeoutTooLarge,
    ),
    (R::REDLOCK_CONFIG_ATTEMPTS_ZERO, ConfigError::AttemptsZero),
    (
        R::REDLOCK_CONFIG_TOO_MANY_ATTEMPTS,
        ConfigError::TooManyAttempts,
    ),
    (
        R::REDLOCK_CONFIG_JITTER_TOO_LARGE,
        ConfigError::JitterTooLarge,
    ),
    (
        R::REDLOCK_CONFIG_TOKEN_TOO_SHORT,
        ConfigError::TokenTooShort,
    ),
    (R::REDLOCK_CONFIG_TOKEN_TOO_LONG, ConfigError::TokenTooLong),
    (
        R::REDLOCK_CONFIG_RETRY_DELAY_TOO_SHORT,
        ConfigError::RetryDelayTooShort,
    ),
];

const PROTOCOL: &[(redlock_result, ProtocolError)] = &[
    // The offending byte is not kept in the code; the message names the rule.
    (
        R::REDLOCK_PROTOCOL_UNKNOWN_TYPE,
        ProtocolError::UnknownType(0),
    ),
    (R::REDLOCK_PROTOCOL_BAD_NUMBER, ProtocolError::BadNumber),
    (
        R::REDLOCK_PROTOCOL_BAD_TERMINATOR,
        ProtocolError::BadTerminator,
    ),
    (R::REDLOCK_PROTOCOL_TOO_LARGE, ProtocolError::TooLarge),
    (R::REDLOCK_PROTOCOL_TOO_DEEP, ProtocolError::TooDeep),
    (R::REDLOCK_PROTOCOL_BAD_VALUE, ProtocolError::BadValue),
];

/// Longest message `redlock_result_message` writes, its NUL terminator included.
pub const REDLOCK_MESSAGE_MAX: usize = 256;

impl redlock_result {
    /// The code with this number, if there is one.
    pub fn from_u32(value: u32) -> Option<redlock_result> {
        NAMES
            .iter()
            .map(|&(code, _)| code)
            .find(|&code| code as u32 == value)
    }

    fn name(self) -> &'static std::ffi::CStr {
        NAMES
            .iter()
            .find(|(code, _)| *code == self)
            .map_or(c"unknown_result", |(_, name)| name)
    }

    fn message(self) -> String {
        if let Some((_, error)) = USAGE.iter().find(|(code, _)| *code == self) {
            return error.to_string();
        }
        if let Some((_, error)) = CONFIG.iter().find(|(code, _)| *code == self) {
            return error.to_string();
        }
        if let Some((_, error)) = PROTOCOL.iter().find(|(code, _)| *code == self) {
            return match error {
                ProtocolError::UnknownType(_) => "unknown RESP type byte".to_string(),
                other => other.to_string(),
            };
        }
        let text = match self {
            R::REDLOCK_OK => "success",
            R::REDLOCK_NULL_PARAMETER => "a required pointer argument was NULL",
            R::REDLOCK_PANIC => "internal error: a panic was caught at the C boundary",
            R::REDLOCK_BUFFER_TOO_SMALL => "the output buffer is too small",
            R::REDLOCK_INVALID_INPUT => "an argument has a value this function does not accept",
            R::REDLOCK_OUT_OF_RANGE => "the index is out of range",
            R::REDLOCK_NO_VALUE => "this output or outcome has no such value",
            R::REDLOCK_UNKNOWN_ERROR => "an error this version of the library has no code for",
            R::REDLOCK_INVALID_TTL => {
                "invalid TTL for this operation: it must be a whole number of milliseconds from 1 to 10^12, longer than the drift (ttl * drift_factor + drift_fixed) and the minimum validity, and at least three node timeouts"
            }
            _ => "unknown result code",
        };
        text.to_string()
    }
}

impl From<UsageError> for redlock_result {
    fn from(error: UsageError) -> redlock_result {
        if let UsageError::InvalidTtl(_) = error {
            return R::REDLOCK_INVALID_TTL;
        }
        USAGE
            .iter()
            .find(|(_, e)| *e == error)
            .map_or(R::REDLOCK_UNKNOWN_ERROR, |(code, _)| *code)
    }
}

impl From<ConfigError> for redlock_result {
    fn from(error: ConfigError) -> redlock_result {
        CONFIG
            .iter()
            .find(|(_, e)| *e == error)
            .map_or(R::REDLOCK_UNKNOWN_ERROR, |(code, _)| *code)
    }
}

impl From<ProtocolError> for redlock_result {
    fn from(error: ProtocolError) -> redlock_result {
        if let ProtocolError::UnknownType(_) = error {
            return R::REDLOCK_PROTOCOL_UNKNOWN_TYPE;
        }
        PROTOCOL
            .iter()
            .find(|(_, e)| *e == error)
            .map_or(R::REDLOCK_UNKNOWN_ERROR, |(code, _)| *code)
    }
}

/// `REDLOCK_OK` or the error's code.
pub(crate) fn code_of<E: Into<redlock_result>>(result: Result<(), E>) -> redlock_result {
    match result {
        Ok(()) => R::REDLOCK_OK,
        Err(error) => error.into(),
    }
}

/// The stable snake_case name of `result` (`"ok"`, `"null_parameter"`,
/// `"unknown_request"`, `"no_nodes"`, `"bad_number"`, ...): the names the core and the
/// conformance vectors use. `"unknown_result"` for a number that is no code. Static,
/// NUL-terminated; never freed.
#[no_mangle]
pub extern "C" fn redlock_result_name(result: u32) -> *const c_char {
    crate::boundary::guard_value(c"unknown_result".as_ptr(), || {
        redlock_result::from_u32(result)
            .map_or(c"unknown_result", redlock_result::name)
            .as_ptr()
    })
}

/// Writes a sentence describing `result` into `buf` (`buf_len` bytes), followed by a
/// NUL, and its length without the NUL into `*out_len`. A buffer of
/// `REDLOCK_MESSAGE_MAX` bytes always suffices; a shorter one that cannot hold the
/// sentence gives `REDLOCK_BUFFER_TOO_SMALL` and nothing is written.
#[no_mangle]
pub unsafe extern "C" fn redlock_result_message(
    result: u32,
    buf: *mut u8,
    buf_len: usize,
    out_len: *mut usize,
) -> redlock_result {
    guard(|| {
        let text = redlock_result::from_u32(result).map_or_else(
            || "unknown result code".to_string(),
            redlock_result::message,
        );
        // SAFETY: `buf` is NULL or writable for `buf_len` bytes by the crate's contract.
        unsafe { copy_out(text.as_bytes(), true, buf, buf_len, out_len) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_have_distinct_names() {
        for (i, (code, name)) in NAMES.iter().enumerate() {
            assert_eq!(redlock_result::from_u32(*code as u32), Some(*code));
            assert!(code.message().len() < REDLOCK_MESSAGE_MAX, "{name:?}");
            for (other, other_name) in &NAMES[i + 1..] {
                assert_ne!(code, other);
                assert_ne!(name, other_name);
            }
        }
        assert_eq!(redlock_result::from_u32(0), None);
    }

    #[test]
    fn names_are_the_cores_codes() {
        for (code, error) in USAGE {
            assert_eq!(code.name().to_str().unwrap(), error.code());
            assert_eq!(redlock_result::from(*error), *code);
        }
        for (code, error) in CONFIG {
            assert_eq!(code.name().to_str().unwrap(), error.code());
            assert_eq!(redlock_result::from(*error), *code);
        }
        for (code, error) in PROTOCOL {
            assert_eq!(code.name().to_str().unwrap(), error.code());
            assert_eq!(redlock_result::from(*error), *code);
        }
        assert_eq!(
            redlock_result::from(UsageError::InvalidTtl(ConfigError::TtlZero)),
            R::REDLOCK_INVALID_TTL
        );
        assert_eq!(
            R::REDLOCK_INVALID_TTL.name().to_str().unwrap(),
            UsageError::InvalidTtl(ConfigError::TtlZero).code()
        );
        assert_eq!(
            redlock_result::from(ProtocolError::UnknownType(b'?')),
            R::REDLOCK_PROTOCOL_UNKNOWN_TYPE
        );
    }
}
