//! Conversions between the core's values and what crosses JNI. The numeric codes here
//! are mirrored in `Native.java` and in the Java types that decode them.

use std::time::Duration;

use jni::objects::{JByteArray, JObject, JObjectArray, JValue};
use jni::sys::{jint, jlong, jobjectArray};
use jni::JNIEnv;

use redlock_core::resp::{Decoder, ProtocolError};
use redlock_core::{
    CommandKind, ConfigError, FailureReason, Lease, NodeCause, NodeResult, Outcome, Reply, Time,
    UsageError,
};

use crate::boundary::{into_handle, is_null, Failure, Result, NATIVE, PROTOCOL};
use crate::classes::{class, classes};

/// Reply type codes (`Reply.Type` in Java, in this order).
pub(crate) const REPLY_OK: jint = 0;
pub(crate) const REPLY_STATUS: jint = 1;
pub(crate) const REPLY_NIL: jint = 2;
pub(crate) const REPLY_INTEGER: jint = 3;
pub(crate) const REPLY_BULK: jint = 4;
pub(crate) const REPLY_ARRAY: jint = 5;
pub(crate) const REPLY_ERROR: jint = 6;
pub(crate) const REPLY_TIMEOUT: jint = 7;
pub(crate) const REPLY_CONNECTION_FAILED: jint = 8;

pub(crate) fn config_failure(error: ConfigError) -> Failure {
    Failure::argument(error.code(), error.to_string())
}

pub(crate) fn usage_failure(error: UsageError) -> Failure {
    match error {
        UsageError::UnknownRequest | UsageError::DuplicateReply | UsageError::ForeignOutcome => {
            Failure::state(error.code(), error.to_string())
        }
        UsageError::RandomSourceFailed => Failure::Throw {
            class: NATIVE,
            code: error.code(),
            message: error.to_string(),
        },
        _ => Failure::argument(error.code(), error.to_string()),
    }
}

pub(crate) fn protocol_failure(error: ProtocolError) -> Failure {
    Failure::Throw {
        class: PROTOCOL,
        code: error.code(),
        message: format!("the node's reply is not valid RESP: {error}"),
    }
}

/// A `Time` as a Java `long`, saturating (no real clock reaches 2^63 microseconds).
pub(crate) fn time_to_java(time: Time) -> jlong {
    jlong::try_from(time.as_micros()).unwrap_or(jlong::MAX)
}

pub(crate) fn duration_micros(duration: Duration) -> jlong {
    jlong::try_from(duration.as_micros()).unwrap_or(jlong::MAX)
}

pub(crate) fn command_kind(kind: CommandKind) -> jlong {
    match kind {
        CommandKind::Set => 0,
        CommandKind::Acquire => 1,
        CommandKind::Release => 2,
        CommandKind::Extend => 3,
        CommandKind::FencedAcquire => 4,
        CommandKind::WriteBack => 5,
        CommandKind::Inspect => 6,
        CommandKind::QueuedAcquire => 7,
        _ => -1,
    }
}

/// `byte[][]` to owned byte strings; null elements are refused.
pub(crate) fn byte_arrays(
    env: &mut JNIEnv<'_>,
    array: &JObjectArray<'_>,
    what: &str,
) -> Result<Vec<Vec<u8>>> {
    if is_null(array) {
        return Err(Failure::argument(
            "invalid_argument",
            format!("{what} must not be null"),
        ));
    }
    let length = env.get_array_length(array)?;
    let mut out = Vec::with_capacity(length as usize);
    for i in 0..length {
        let element = env.get_object_array_element(array, i)?;
        if is_null(&element) {
            return Err(Failure::argument(
                "invalid_argument",
                format!("{what} must not contain null"),
            ));
        }
        let bytes = env.convert_byte_array(jni::objects::JByteArray::from(element))?;
        out.push(bytes);
    }
    Ok(out)
}

/// The resource names of an acquisition or lease, as bytes (UTF-8 from Java).
pub(crate) fn resources(env: &mut JNIEnv<'_>, array: &JObjectArray<'_>) -> Result<Vec<Vec<u8>>> {
    byte_arrays(env, array, "the resources")
}

/// The one complete RESP reply in a Java byte array (refused if null, incomplete or
/// followed by more bytes).
pub(crate) fn one_reply(env: &mut JNIEnv<'_>, resp: &JByteArray<'_>) -> Result<Reply> {
    if is_null(resp) {
        return Err(Failure::argument(
            "invalid_argument",
            "the RESP bytes must not be null",
        ));
    }
    let bytes = env.convert_byte_array(resp)?;
    let mut decoder = Decoder::new();
    decoder.feed(&bytes);
    match decoder.next_reply() {
        Ok(Some(reply)) if decoder.buffered() == 0 => Ok(reply),
        Ok(_) => Err(Failure::argument(
            "invalid_argument",
            "the bytes must hold exactly one complete RESP reply",
        )),
        Err(error) => Err(protocol_failure(error)),
    }
}

pub(crate) fn reply_from_parts(kind: jint, integer: jlong, data: Vec<u8>) -> Result<Reply> {
    let text = || String::from_utf8_lossy(&data).into_owned();
    Ok(match kind {
        REPLY_OK => Reply::Ok,
        REPLY_STATUS => Reply::status(&text()),
        REPLY_NIL => Reply::Nil,
        REPLY_INTEGER => Reply::Integer(integer),
        REPLY_BULK => Reply::Bulk(data),
        REPLY_ERROR => Reply::Error(text()),
        REPLY_TIMEOUT => Reply::Timeout,
        REPLY_CONNECTION_FAILED => Reply::ConnectionFailed(text()),
        REPLY_ARRAY => {
            return Err(Failure::argument(
                "invalid_argument",
                "array replies are handed in as RESP bytes",
            ))
        }
        other => {
            return Err(Failure::argument(
                "invalid_argument",
                format!("unknown reply type {other}"),
            ))
        }
    })
}

pub(crate) fn reply_to_type(reply: &Reply) -> jint {
    match reply {
        Reply::Ok => REPLY_OK,
        Reply::Status(_) => REPLY_STATUS,
        Reply::Nil => REPLY_NIL,
        Reply::Integer(_) => REPLY_INTEGER,
        Reply::Bulk(_) => REPLY_BULK,
        Reply::Array(_) => REPLY_ARRAY,
        Reply::Error(_) => REPLY_ERROR,
        Reply::Timeout => REPLY_TIMEOUT,
        Reply::ConnectionFailed(_) => REPLY_CONNECTION_FAILED,
        _ => -1,
    }
}

/// A Java `io.github.redlockcore.core.Reply` built by its `fromNative` factory.
pub(crate) fn reply_to_java<'local>(
    env: &mut JNIEnv<'local>,
    reply: &Reply,
) -> Result<JObject<'local>> {
    let mut integer: jlong = 0;
    let mut data: &[u8] = &[];
    let mut elements = JObject::null();
    match reply {
        Reply::Status(text) | Reply::Error(text) | Reply::ConnectionFailed(text) => {
            data = text.as_bytes()
        }
        Reply::Bulk(bytes) => data = bytes,
        Reply::Integer(n) => integer = *n,
        Reply::Array(items) => {
            let array = env.new_object_array(
                items.len() as i32,
                "io/github/redlockcore/core/Reply",
                JObject::null(),
            )?;
            for (i, item) in items.iter().enumerate() {
                let element = reply_to_java(env, item)?;
                env.set_object_array_element(&array, i as i32, element)?;
            }
            elements = array.into();
        }
        _ => {}
    }
    let bytes = env.byte_array_from_slice(data)?;
    let object = env
        .call_static_method(
            "io/github/redlockcore/core/Reply",
            "fromNative",
            "(IJ[B[Lio/github/redlockcore/core/Reply;)Lio/github/redlockcore/core/Reply;",
            &[
                JValue::Int(reply_to_type(reply)),
                JValue::Long(integer),
                JValue::Object(&bytes),
                JValue::Object(&elements),
            ],
        )?
        .l()?;
    Ok(object)
}

pub(crate) fn node_code(result: &NodeResult) -> jint {
    match result {
        NodeResult::NotAsked => 0,
        NodeResult::Pending => 1,
        NodeResult::Success => 2,
        NodeResult::Conflict => 3,
        NodeResult::Error(_) => 4,
        NodeResult::Timeout => 5,
        NodeResult::Missing => 6,
        _ => -1,
    }
}

pub(crate) fn reason_code(reason: FailureReason) -> jlong {
    match reason {
        FailureReason::Conflict => 0,
        FailureReason::NodesFailed => 1,
        FailureReason::Mixed => 2,
        FailureReason::ValidityTooShort => 3,
        FailureReason::NotHeld => 4,
        _ => -1,
    }
}

/// An outcome's scalar parts: `numbers` = kind, reason (-1), attempts, valid_until (-1),
/// validity (us), retry_at (-1), released, extensions, 0 (where the lease handle goes),
/// lease TTL (ms), the core's error class number (0 for none), fencing token (-1 for
/// none); the token text; the lease, if the outcome has one.
pub(crate) struct OutcomeNumbers {
    pub(crate) numbers: [jlong; 12],
    pub(crate) token: String,
    pub(crate) lease: Option<Lease>,
}

pub(crate) fn outcome_numbers(outcome: &Outcome) -> OutcomeNumbers {
    let mut numbers: [jlong; 12] = [-1, -1, 0, -1, 0, -1, 0, 0, 0, 0, 0, -1];
    let mut token = String::new();
    let mut lease: Option<Lease> = None;
    numbers[0] = match outcome {
        Outcome::Acquired(a) => {
            numbers[2] = jlong::from(a.attempts);
            numbers[4] = duration_micros(a.validity);
            lease = Some(a.lease.clone());
            0
        }
        Outcome::NotAcquired(n) => {
            numbers[1] = reason_code(n.reason);
            numbers[2] = jlong::from(n.attempts);
            token = n.token.as_str().to_owned();
            1
        }
        Outcome::Extended(e) => {
            numbers[4] = duration_micros(e.validity);
            lease = Some(e.lease.clone());
            2
        }
        Outcome::NotExtended(n) => {
            numbers[1] = reason_code(n.reason);
            numbers[4] = duration_micros(n.validity);
            numbers[5] = n.retry_at.map_or(-1, time_to_java);
            lease = Some(n.lease.clone());
            3
        }
        Outcome::Released(r) => {
            numbers[6] = r.released as jlong;
            4
        }
        Outcome::NotReleased(r) => {
            numbers[6] = r.released as jlong;
            5
        }
        // Inspections: the holder (if any) as the token, its presence at index 6 (a
        // holder may be any bytes, even none).
        Outcome::Inspected(i) => {
            if let Some(holder) = &i.holder {
                numbers[6] = 1;
                token = String::from_utf8_lossy(holder).into_owned();
            }
            6
        }
        Outcome::NotInspected(_) => 7,
        // An outcome of a newer core than this binding knows: the Java side refuses it.
        _ => -1,
    };
    if let Some(lease) = &lease {
        numbers[3] = time_to_java(lease.valid_until());
        numbers[7] = jlong::from(lease.extensions());
        numbers[9] = jlong::try_from(lease.ttl_ms()).unwrap_or(jlong::MAX);
        numbers[11] = lease
            .fencing_token()
            .and_then(|t| jlong::try_from(t).ok())
            .unwrap_or(-1);
        token = lease.token().as_str().to_owned();
    }
    numbers[10] = outcome.error_class().map_or(0, |c| jlong::from(c.number()));
    OutcomeNumbers {
        numbers,
        token,
        lease,
    }
}

/// An outcome as `Object[] { long[] numbers, String token, int[] nodeCodes,
/// String[] nodeTexts, int[] nodeCauses }`, `numbers` as [`outcome_numbers`] gives them
/// with the lease handle at index 8 (0 if none). The lease handle belongs to the Java side
/// from here on.
pub(crate) fn outcome_to_java(env: &mut JNIEnv<'_>, outcome: Outcome) -> Result<jobjectArray> {
    let OutcomeNumbers {
        mut numbers,
        token,
        lease,
    } = outcome_numbers(&outcome);
    let token = if numbers[0] == 4 || numbers[0] == 5 || numbers[0] == 7 {
        None
    } else {
        Some(token)
    };
    let classes = classes(env)?;
    let nodes = outcome.nodes();
    let codes: Vec<jint> = nodes.iter().map(node_code).collect();
    // Per node, the core's cause (NodeCause in declaration order, from 1; 0 for none).
    let causes: Vec<jint> = nodes
        .iter()
        .map(|n| n.cause().map_or(0, cause_number))
        .collect();
    // Error texts only when some node has one (the common outcomes have none).
    let texts = if nodes.iter().any(|n| matches!(n, NodeResult::Error(_))) {
        let texts =
            env.new_object_array(nodes.len() as i32, class(&classes.string), JObject::null())?;
        for (i, node) in nodes.iter().enumerate() {
            if let NodeResult::Error(text) = node {
                let text = env.new_string(text)?;
                env.set_object_array_element(&texts, i as i32, text)?;
            }
        }
        JObject::from(texts)
    } else {
        JObject::null()
    };
    let code_array = env.new_int_array(codes.len() as i32)?;
    env.set_int_array_region(&code_array, 0, &codes)?;
    let token = match token {
        Some(token) => JObject::from(env.new_string(token)?),
        None => JObject::null(),
    };
    let cause_array = env.new_int_array(causes.len() as i32)?;
    env.set_int_array_region(&cause_array, 0, &causes)?;
    let result = env.new_object_array(5, class(&classes.object), JObject::null())?;
    // The lease handle is made last, once nothing else can fail, so it cannot leak.
    if let Some(lease) = lease {
        numbers[8] = into_handle(lease);
    }
    let number_array = env.new_long_array(numbers.len() as i32)?;
    env.set_long_array_region(&number_array, 0, &numbers)?;
    env.set_object_array_element(&result, 0, number_array)?;
    env.set_object_array_element(&result, 1, token)?;
    env.set_object_array_element(&result, 2, code_array)?;
    env.set_object_array_element(&result, 3, texts)?;
    env.set_object_array_element(&result, 4, cause_array)?;
    Ok(result.into_raw())
}

pub(crate) fn cause_number(cause: NodeCause) -> jint {
    match cause {
        NodeCause::Refused => 1,
        NodeCause::Auth => 2,
        NodeCause::Tls => 3,
        NodeCause::Timeout => 4,
        NodeCause::Stalled => 5,
        NodeCause::Connection => 6,
        _ => 7,
    }
}

/// `Object[] { String token, long[] { validUntil, extensions, ttlMs, fencingToken (-1 for
/// none) }, byte[][] keys }`.
pub(crate) fn lease_info(env: &mut JNIEnv<'_>, lease: &Lease) -> Result<jobjectArray> {
    let token = env.new_string(lease.token().as_str())?;
    let numbers = [
        time_to_java(lease.valid_until()),
        jlong::from(lease.extensions()),
        jlong::try_from(lease.ttl_ms()).unwrap_or(jlong::MAX),
        lease
            .fencing_token()
            .and_then(|t| jlong::try_from(t).ok())
            .unwrap_or(-1),
    ];
    let number_array = env.new_long_array(numbers.len() as i32)?;
    env.set_long_array_region(&number_array, 0, &numbers)?;
    let classes = classes(env)?;
    let keys = env.new_object_array(
        lease.keys().len() as i32,
        class(&classes.bytes),
        JObject::null(),
    )?;
    for (i, key) in lease.keys().iter().enumerate() {
        let bytes = env.byte_array_from_slice(key)?;
        env.set_object_array_element(&keys, i as i32, bytes)?;
    }
    let result = env.new_object_array(3, class(&classes.object), JObject::null())?;
    env.set_object_array_element(&result, 0, token)?;
    env.set_object_array_element(&result, 1, number_array)?;
    env.set_object_array_element(&result, 2, keys)?;
    Ok(result.into_raw())
}
