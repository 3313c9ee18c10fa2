//! JNI glue between `redlock-core` and the Java binding.
//!
//! Every function here is a `native` method of `io.github.redlockcore.internal.Native`
//! and does no more than convert arguments, call the core and convert results back.
//! Nothing is decided here: the core decides, the Java drivers move bytes.
//!
//! Why a Rust `cdylib` over the core rather than a C shim over the C ABI: the JNI
//! conversions are written once in Rust with the `jni` crate (no second native toolchain
//! or JNI headers at build time), panics are caught where they happen, and errors turn
//! into typed Java exceptions directly, with the core's stable codes, instead of going
//! through the C ABI's result codes and message buffers first.
//!
//! Calling conventions shared with `Native.java`:
//! - handles are `long`s (see the `boundary` module); 0 is refused with `used_after_close`;
//! - `now` and every instant is microseconds on the caller's monotonic clock (`Time`);
//! - optional numbers use a negative value for "not given".

mod boundary;
mod classes;
mod convert;

use std::time::Duration;

use jni::objects::{JByteArray, JClass, JLongArray, JObject, JObjectArray, JString};
use jni::sys::{jboolean, jbyteArray, jdouble, jint, jlong, jobject, jobjectArray, jstring};
use jni::JNIEnv;

use redlock_core::resp::Decoder;
use redlock_core::{Command, Config, Lease, Operation, Outcome, Output, Redlock, Reply, Time};

use crate::boundary::{free, guard, handle, into_handle, is_null, Failure, Result};
use crate::convert::{
    config_failure, outcome_to_java, reply_from_parts, reply_to_type, resources, usage_failure,
};

/// An operation and what its last poll produced, for the calls that read it.
pub(crate) struct OperationBox {
    operation: Operation,
    command: Option<Command>,
    outcome: Option<Outcome>,
    /// The outcome the operation handed out last (kept once `operationOutcome` took it),
    /// for `keepAliveHandleOutcome`.
    last_outcome: Option<Outcome>,
    /// Outputs polled from the core that `operationDrainInto` has not handed over yet.
    pending: std::collections::VecDeque<Output>,
}

fn time(now: jlong) -> Result<Time> {
    u64::try_from(now)
        .map(Time::from_micros)
        .map_err(|_| Failure::argument("invalid_time", "a time must not be negative"))
}

fn micros(value: jlong, what: &str) -> Result<Duration> {
    u64::try_from(value)
        .map(Duration::from_micros)
        .map_err(|_| Failure::argument("invalid_argument", format!("{what} must not be negative")))
}

macro_rules! export {
    ($name:ident ( $env:ident $(, $arg:ident : $ty:ty)* ) -> $ret:ty = $fallback:expr, $body:block) => {
        #[no_mangle]
        pub extern "system" fn $name<'local>(
            mut env: jni::JNIEnv<'local>,
            _class: jni::objects::JClass<'local>,
            $($arg: $ty),*
        ) -> $ret {
            $crate::boundary::guard(&mut env, $fallback, |$env| $body)
        }
    };
}

// The loop's engine and keep-alive use `export!` too (declared after it to see it).
pub mod engine;
mod keepalive;
mod subscriptions;

// ---- library ------------------------------------------------------------------------

export!(Java_io_github_redlockcore_internal_Native_version(env) -> jstring = std::ptr::null_mut(), {
    Ok(env.new_string(redlock_core::VERSION)?.into_raw())
});

export!(Java_io_github_redlockcore_internal_Native_scripts(env) -> jobjectArray = std::ptr::null_mut(), {
    let texts = [
        redlock_core::ACQUIRE_SCRIPT,
        redlock_core::RELEASE_SCRIPT,
        redlock_core::EXTEND_SCRIPT,
        redlock_core::ACQUIRE_SHA1,
        redlock_core::RELEASE_SHA1,
        redlock_core::EXTEND_SHA1,
        redlock_core::FENCED_ACQUIRE_SCRIPT,
        redlock_core::WRITE_BACK_SCRIPT,
        redlock_core::FENCED_SET_SCRIPT,
        redlock_core::FENCED_ACQUIRE_SHA1,
        redlock_core::WRITE_BACK_SHA1,
        redlock_core::FENCED_SET_SHA1,
        redlock_core::QUEUED_ACQUIRE_SCRIPT,
        redlock_core::QUEUED_ACQUIRE_SHA1,
    ];
    let string = classes::class(&classes::classes(env)?.string);
    let array = env.new_object_array(texts.len() as i32, string, JObject::null())?;
    for (i, text) in texts.iter().enumerate() {
        let string = env.new_string(text)?;
        env.set_object_array_element(&array, i as i32, string)?;
    }
    Ok(array.into_raw())
});

export!(Java_io_github_redlockcore_internal_Native_noticeChannelLingerMs(env) -> jlong = 0, {
    let _ = env;
    Ok(redlock_core::NOTICE_CHANNEL_LINGER_MS as jlong)
});

export!(Java_io_github_redlockcore_internal_Native_subscriberReopenFirstMs(env) -> jlong = 0, {
    let _ = env;
    Ok(redlock_core::SUBSCRIBER_REOPEN_FIRST_MS as jlong)
});

export!(Java_io_github_redlockcore_internal_Native_subscriberReopenMaxMs(env) -> jlong = 0, {
    let _ = env;
    Ok(redlock_core::SUBSCRIBER_REOPEN_MAX_MS as jlong)
});

export!(Java_io_github_redlockcore_internal_Native_connectTimeoutDefaultMs(env) -> jlong = 0, {
    let _ = env;
    Ok(redlock_core::CONNECT_TIMEOUT_DEFAULT_MS as jlong)
});

export!(Java_io_github_redlockcore_internal_Native_sentinelQueryTimeoutDefaultMs(env) -> jlong = 0, {
    let _ = env;
    Ok(redlock_core::SENTINEL_QUERY_TIMEOUT_DEFAULT_MS as jlong)
});

export!(Java_io_github_redlockcore_internal_Native_sentinelConnectTimeoutMs(
    env,
    sentinels: jint,
    query_ms: jlong,
    connect_ms: jlong
) -> jlong = 0, {
    let _ = env;
    let sentinels = usize::try_from(sentinels).map_err(|_| {
        Failure::argument("invalid_argument", "the number of Sentinels must not be negative")
    })?;
    let query_ms = u64::try_from(query_ms).map_err(|_| {
        Failure::argument("invalid_argument", "the Sentinel query timeout must not be negative")
    })?;
    let connect_ms = u64::try_from(connect_ms).map_err(|_| {
        Failure::argument("invalid_argument", "the connect timeout must not be negative")
    })?;
    let composed = redlock_core::sentinel_connect_timeout_ms(sentinels, query_ms, connect_ms);
    // Saturating, as the core's: beyond a long is as long as a long can say.
    Ok(jlong::try_from(composed).unwrap_or(jlong::MAX))
});

export!(Java_io_github_redlockcore_internal_Native_liveHandles(env) -> jlong = -1, {
    let _ = env;
    Ok(boundary::live_handles())
});

export!(Java_io_github_redlockcore_internal_Native_panicForTest(env) -> jlong = 0, {
    let _ = env;
    // Proves the panic boundary from Java (the tests call it); the core itself never
    // panics on any input.
    panic!("deliberate panic to test the JNI boundary")
});

export!(Java_io_github_redlockcore_internal_Native_encodeCommand(env, args: JObjectArray<'local>) -> jbyteArray = std::ptr::null_mut(), {
    let args = convert::byte_arrays(env, &args, "command arguments")?;
    if args.is_empty() {
        return Err(Failure::argument("invalid_argument", "a command needs at least its name"));
    }
    let mut out = Vec::new();
    redlock_core::resp::encode_command(args.iter().map(Vec::as_slice), &mut out);
    Ok(env.byte_array_from_slice(&out)?.into_raw())
});

// ---- configuration ------------------------------------------------------------------

export!(Java_io_github_redlockcore_internal_Native_configNew(
    env,
    nodes: jint,
    ttl_ms: jlong,
    drift_factor: jdouble,
    drift_fixed_us: jlong,
    node_timeout_us: jlong,
    min_validity_us: jlong,
    attempts: jint,
    retry_delay_us: jlong,
    retry_jitter_us: jlong,
    key_prefix: JByteArray<'local>,
    token_bytes: jint,
    max_extensions: jlong,
    fencing: jboolean
) -> jlong = 0, {
    let nodes = usize::try_from(nodes)
        .map_err(|_| Failure::argument("no_nodes", "the number of nodes must not be negative"))?;
    let ttl_ms = u64::try_from(ttl_ms)
        .map_err(|_| Failure::argument("ttl_zero", "the TTL must be positive"))?;
    let mut builder = Config::builder(nodes, Duration::from_millis(ttl_ms))
        .drift_factor(drift_factor)
        .drift_fixed(micros(drift_fixed_us, "the fixed drift")?)
        .min_validity(micros(min_validity_us, "the minimum validity")?)
        .attempts(u32::try_from(attempts).map_err(|_| {
            Failure::argument("attempts_zero", "attempts must be positive")
        })?)
        .retry_delay(micros(retry_delay_us, "the retry delay")?)
        .retry_jitter(micros(retry_jitter_us, "the retry jitter")?)
        .token_bytes(usize::try_from(token_bytes).map_err(|_| {
            Failure::argument("token_too_short", "token bytes must not be negative")
        })?);
    if node_timeout_us >= 0 {
        builder = builder.node_timeout(micros(node_timeout_us, "the node timeout")?);
    }
    if !is_null(&key_prefix) {
        builder = builder.key_prefix(env.convert_byte_array(&key_prefix)?);
    }
    if max_extensions >= 0 {
        builder = builder.max_extensions(Some(u32::try_from(max_extensions).unwrap_or(u32::MAX)));
    }
    builder = builder.fencing(fencing != 0);
    let config = builder.build().map_err(config_failure)?;
    Ok(into_handle(config))
});

export!(Java_io_github_redlockcore_internal_Native_configFree(env, config: jlong) -> () = (), {
    let _ = env;
    free::<Config>(config);
    Ok(())
});

export!(Java_io_github_redlockcore_internal_Native_configInfo(env, config: jlong) -> jobject = std::ptr::null_mut(), {
    let config: &mut Config = handle(config, "configuration")?;
    let values = [
        config.nodes() as jlong,
        config.quorum() as jlong,
        config.ttl_ms() as jlong,
        convert::duration_micros(config.drift()),
        convert::duration_micros(config.node_timeout()),
        convert::duration_micros(config.min_validity()),
        jlong::from(config.attempts()),
        convert::duration_micros(config.retry_delay()),
        convert::duration_micros(config.retry_jitter()),
        config.token_bytes() as jlong,
        config.max_extensions().map_or(-1, jlong::from),
        convert::duration_micros(config.drift_fixed()),
        jlong::from(config.fencing()),
    ];
    let array = env.new_long_array(values.len() as i32)?;
    env.set_long_array_region(&array, 0, &values)?;
    Ok(array.into_raw())
});

export!(Java_io_github_redlockcore_internal_Native_configDriftFactor(env, config: jlong) -> jdouble = 0.0, {
    let _ = env;
    let config: &mut Config = handle(config, "configuration")?;
    Ok(config.drift_factor())
});

export!(Java_io_github_redlockcore_internal_Native_configKeyPrefix(env, config: jlong) -> jbyteArray = std::ptr::null_mut(), {
    let config: &mut Config = handle(config, "configuration")?;
    Ok(env.byte_array_from_slice(config.key_prefix())?.into_raw())
});

export!(Java_io_github_redlockcore_internal_Native_configNextExtension(env, config: jlong, lease: jlong, now: jlong) -> jlong = -1, {
    let _ = env;
    let config: &mut Config = handle(config, "configuration")?;
    let lease: &mut Lease = handle(lease, "lease")?;
    let at = config.next_extension(lease, time(now)?);
    Ok(at.map_or(-1, convert::time_to_java))
});

// ---- client -------------------------------------------------------------------------

export!(Java_io_github_redlockcore_internal_Native_clientNew(env, config: jlong, seed: JByteArray<'local>) -> jlong = 0, {
    let config: &mut Config = handle(config, "configuration")?;
    let client = if is_null(&seed) {
        Redlock::new(config.clone())
    } else {
        let bytes = env.convert_byte_array(&seed)?;
        let seed: [u8; 32] = bytes.as_slice().try_into().map_err(|_| {
            Failure::argument("invalid_argument", "a seed must be exactly 32 bytes")
        })?;
        Redlock::with_seed(config.clone(), seed)
    };
    Ok(into_handle(client))
});

export!(Java_io_github_redlockcore_internal_Native_clientFree(env, client: jlong) -> () = (), {
    let _ = env;
    free::<Redlock>(client);
    Ok(())
});

fn operation_handle(operation: Operation) -> jlong {
    into_handle(OperationBox {
        operation,
        command: None,
        outcome: None,
        last_outcome: None,
        pending: std::collections::VecDeque::new(),
    })
}

export!(Java_io_github_redlockcore_internal_Native_clientAcquire(
    env,
    client: jlong,
    resource_list: JObjectArray<'local>,
    ttl_ms: jlong,
    wait_us: jlong,
    random: JByteArray<'local>,
    now: jlong
) -> jlong = 0, {
    let client: &mut Redlock = handle(client, "client")?;
    let names = resources(env, &resource_list)?;
    let now = time(now)?;
    let mut options = redlock_core::AcquireOptions::new();
    if ttl_ms >= 0 {
        options = options.ttl(Duration::from_millis(ttl_ms as u64));
    }
    if wait_us >= 0 {
        options = options.wait(Duration::from_micros(wait_us as u64));
    }
    let operation = if is_null(&random) {
        client.acquire_with(&names, &options, now)
    } else {
        let bytes = env.convert_byte_array(&random)?;
        if ttl_ms < 0 && wait_us < 0 {
            client.acquire_with_random(&names, bytes, now)
        } else {
            client.acquire_with_random_options(&names, &options, bytes, now)
        }
    };
    Ok(operation_handle(operation.map_err(usage_failure)?))
});

export!(Java_io_github_redlockcore_internal_Native_clientExtend(env, client: jlong, lease: jlong, ttl_ms: jlong, now: jlong) -> jlong = 0, {
    let _ = env;
    let client: &mut Redlock = handle(client, "client")?;
    let lease: &mut Lease = handle(lease, "lease")?;
    let now = time(now)?;
    let operation = if ttl_ms >= 0 {
        client.extend_for(lease, Duration::from_millis(ttl_ms as u64), now)
    } else {
        client.extend(lease, now)
    };
    Ok(operation_handle(operation.map_err(usage_failure)?))
});

export!(Java_io_github_redlockcore_internal_Native_clientRelease(env, client: jlong, lease: jlong, now: jlong) -> jlong = 0, {
    let _ = env;
    let client: &mut Redlock = handle(client, "client")?;
    let lease: &mut Lease = handle(lease, "lease")?;
    Ok(operation_handle(client.release(lease, time(now)?)))
});

// Starts an inspection of `resources`: who holds the lock (the core's `inspect`).
export!(Java_io_github_redlockcore_internal_Native_clientInspect(env, client: jlong, resource_list: JObjectArray<'local>, now: jlong) -> jlong = 0, {
    let client: &mut Redlock = handle(client, "client")?;
    let names = resources(env, &resource_list)?;
    let operation = client.inspect(&names, time(now)?);
    Ok(operation_handle(operation.map_err(usage_failure)?))
});

export!(Java_io_github_redlockcore_internal_Native_clientLease(
    env,
    client: jlong,
    resource_list: JObjectArray<'local>,
    token: JString<'local>,
    valid_until: jlong
) -> jlong = 0, {
    let client: &mut Redlock = handle(client, "client")?;
    let names = resources(env, &resource_list)?;
    if is_null(&token) {
        return Err(Failure::argument("invalid_token", "the token must not be null"));
    }
    let token: String = env.get_string(&token)?.into();
    let lease = client
        .lease(&names, &token, time(valid_until)?)
        .map_err(usage_failure)?;
    Ok(into_handle(lease))
});

// ---- operation ----------------------------------------------------------------------

export!(Java_io_github_redlockcore_internal_Native_operationFree(env, operation: jlong) -> () = (), {
    let _ = env;
    free::<OperationBox>(operation);
    Ok(())
});

export!(Java_io_github_redlockcore_internal_Native_operationHandleReply(
    env,
    operation: jlong,
    request: jlong,
    kind: jint,
    integer: jlong,
    data: JByteArray<'local>,
    now: jlong
) -> () = (), {
    let operation: &mut OperationBox = handle(operation, "operation")?;
    let data = if is_null(&data) { Vec::new() } else { env.convert_byte_array(&data)? };
    let reply = reply_from_parts(kind, integer, data)?;
    give_reply(operation, request, reply, now)
});

export!(Java_io_github_redlockcore_internal_Native_operationHandleReplyResp(
    env,
    operation: jlong,
    request: jlong,
    resp: JByteArray<'local>,
    now: jlong
) -> () = (), {
    let operation: &mut OperationBox = handle(operation, "operation")?;
    let reply = convert::one_reply(env, &resp)?;
    give_reply(operation, request, reply, now)
});

export!(Java_io_github_redlockcore_internal_Native_operationHandleReplyHandle(
    env,
    operation: jlong,
    request: jlong,
    reply: jlong,
    now: jlong
) -> () = (), {
    let _ = env;
    let operation: &mut OperationBox = handle(operation, "operation")?;
    let reply: &mut Reply = handle(reply, "reply")?;
    give_reply(operation, request, reply.clone(), now)
});

fn give_reply(
    operation: &mut OperationBox,
    request: jlong,
    reply: Reply,
    now: jlong,
) -> Result<()> {
    let request = u64::try_from(request).map_err(|_| {
        Failure::state(
            "unknown_request",
            "no request with this id was issued by this operation",
        )
    })?;
    operation
        .operation
        .handle_reply(redlock_core::RequestId(request), reply, time(now)?)
        .map_err(usage_failure)
}

export!(Java_io_github_redlockcore_internal_Native_operationHandleTimeout(env, operation: jlong, now: jlong) -> () = (), {
    let _ = env;
    let operation: &mut OperationBox = handle(operation, "operation")?;
    operation.operation.handle_timeout(time(now)?);
    Ok(())
});

/// Polls one output into `out` (at least 5 slots): the code (0 for none, 1 for a command,
/// 2 for a wait, 3 for the outcome) and its numbers (see `operationPoll`).
fn poll_into(env: &mut JNIEnv<'_>, operation: jlong, out: &JLongArray<'_>) -> Result<jint> {
    let operation: &mut OperationBox = handle(operation, "operation")?;
    if is_null(out) || env.get_array_length(out)? < 6 {
        return Err(Failure::argument(
            "invalid_argument",
            "the output array needs 6 slots",
        ));
    }
    let next = match operation.pending.pop_front() {
        Some(output) => Some(output),
        None => operation.operation.poll_output(),
    };
    let (code, values) = match next {
        None => (0, [0; 5]),
        Some(Output::Send(command)) => {
            let values = [
                command.node() as jlong,
                command.request_id().0 as jlong,
                convert::time_to_java(command.deadline()),
                convert::command_kind(command.kind()),
                jlong::from(command.is_eval()),
            ];
            operation.command = Some(command);
            (1, values)
        }
        Some(Output::Wait(until)) => (2, [convert::time_to_java(until), 0, 0, 0, 0]),
        Some(Output::Outcome(outcome)) => {
            operation.outcome = Some(outcome);
            (3, [0; 5])
        }
        Some(_) => {
            return Err(Failure::state(
                "unsupported_output",
                "the core produced an output this binding does not know",
            ))
        }
    };
    env.set_long_array_region(out, 0, &values)?;
    env.set_long_array_region(out, 5, &[jlong::from(code)])?;
    Ok(code)
}

/// Polls one output. Returns 0 for none, 1 for a command (`out` = node, request id,
/// deadline, kind, eval; read it with `operationCommand*`), 2 for a wait (`out[0]` = the
/// instant), 3 for the outcome (read it with `operationOutcome`).
#[no_mangle]
pub extern "system" fn Java_io_github_redlockcore_internal_Native_operationPoll<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    operation: jlong,
    out: JLongArray<'local>,
) -> jint {
    guard(&mut env, -1, |env| poll_into(env, operation, &out))
}

/// Like `operationPoll` (the code goes to `out[5]`), and for a command returns its RESP
/// bytes in the same call (null otherwise): one crossing per command for raw sockets.
#[no_mangle]
pub extern "system" fn Java_io_github_redlockcore_internal_Native_operationPollResp<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    operation: jlong,
    out: JLongArray<'local>,
) -> jbyteArray {
    guard(&mut env, std::ptr::null_mut(), |env| {
        if poll_into(env, operation, &out)? != 1 {
            return Ok(std::ptr::null_mut());
        }
        let command = last_command(operation)?;
        let mut bytes = Vec::with_capacity(128);
        command.encode_resp(&mut bytes);
        Ok(env.byte_array_from_slice(&bytes)?.into_raw())
    })
}

/// Polls until there is no output and returns them all in one crossing:
/// `Object[] { long[] records, byte[][] resp, Object[] outcome }`, six numbers per output
/// (the code, then as `operationPoll` gives them), each command's RESP bytes at its index
/// (when `resp`), and the outcome's parts (see `operationOutcome`) or null.
#[no_mangle]
pub extern "system" fn Java_io_github_redlockcore_internal_Native_operationDrain<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    operation: jlong,
    resp: jboolean,
) -> jobjectArray {
    guard(&mut env, std::ptr::null_mut(), |env| {
        let op: &mut OperationBox = handle(operation, "operation")?;
        let mut records: Vec<jlong> = Vec::with_capacity(48);
        let mut commands: Vec<Option<Vec<u8>>> = Vec::with_capacity(8);
        let mut outcome = None;
        // The core's outputs after one input are finite; the bound only guards a bug.
        for _ in 0..1_000_000 {
            match op.operation.poll_output() {
                None => break,
                Some(Output::Send(command)) => {
                    records.extend_from_slice(&[
                        1,
                        command.node() as jlong,
                        command.request_id().0 as jlong,
                        convert::time_to_java(command.deadline()),
                        convert::command_kind(command.kind()),
                        jlong::from(command.is_eval()),
                    ]);
                    if resp != 0 {
                        let mut bytes = Vec::with_capacity(128);
                        command.encode_resp(&mut bytes);
                        commands.push(Some(bytes));
                    } else {
                        commands.push(None);
                    }
                }
                Some(Output::Wait(until)) => {
                    records.extend_from_slice(&[2, convert::time_to_java(until), 0, 0, 0, 0]);
                    commands.push(None);
                }
                Some(Output::Outcome(o)) => {
                    records.extend_from_slice(&[3, 0, 0, 0, 0, 0]);
                    commands.push(None);
                    op.last_outcome = Some(o.clone());
                    outcome = Some(o);
                }
                Some(_) => {
                    return Err(Failure::state(
                        "unsupported_output",
                        "the core produced an output this binding does not know",
                    ))
                }
            }
        }
        let classes = classes::classes(env)?;
        let record_array = env.new_long_array(records.len() as i32)?;
        env.set_long_array_region(&record_array, 0, &records)?;
        let resp_array = if resp != 0 {
            let array = env.new_object_array(
                commands.len() as i32,
                classes::class(&classes.bytes),
                JObject::null(),
            )?;
            for (i, bytes) in commands.iter().enumerate() {
                if let Some(bytes) = bytes {
                    let bytes = env.byte_array_from_slice(bytes)?;
                    env.set_object_array_element(&array, i as i32, bytes)?;
                }
            }
            JObject::from(array)
        } else {
            JObject::null()
        };
        let outcome_parts = match outcome {
            Some(o) => boundary::local_object(outcome_to_java(env, o)?),
            None => JObject::null(),
        };
        let result = env.new_object_array(3, classes::class(&classes.object), JObject::null())?;
        env.set_object_array_element(&result, 0, record_array)?;
        env.set_object_array_element(&result, 1, resp_array)?;
        env.set_object_array_element(&result, 2, outcome_parts)?;
        Ok(result.into_raw())
    })
}

/// Polls every output and writes as many as fit into the caller's buffers, without
/// creating a Java object: seven numbers per output in `records` (code 1 send, 2 wait,
/// 3 outcome; then node, request id, deadline, kind, eval, RESP length for a send, or the
/// instant for a wait), each command's RESP bytes one after another in `resp`. Returns the
/// number written; outputs that did not fit stay for the next call, and if the first one
/// does not fit, returns minus the `resp` size it needs. An outcome is read with
/// `operationOutcome`.
#[no_mangle]
pub extern "system" fn Java_io_github_redlockcore_internal_Native_operationDrainInto<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    operation: jlong,
    records: JLongArray<'local>,
    resp: JByteArray<'local>,
) -> jint {
    guard(&mut env, 0, |env| {
        let op: &mut OperationBox = handle(operation, "operation")?;
        if is_null(&records) || is_null(&resp) {
            return Err(Failure::argument(
                "invalid_argument",
                "the buffers must not be null",
            ));
        }
        let record_room = (env.get_array_length(&records)? / 7) as usize;
        let resp_room = env.get_array_length(&resp)? as usize;
        while let Some(output) = op.operation.poll_output() {
            op.pending.push_back(output);
        }
        let mut numbers: Vec<jlong> = Vec::with_capacity(record_room.min(16) * 7);
        let mut bytes: Vec<u8> = Vec::with_capacity(resp_room.min(4096));
        let mut written = 0usize;
        while written < record_room {
            let Some(output) = op.pending.front() else {
                break;
            };
            match output {
                Output::Send(command) => {
                    let start = bytes.len();
                    command.encode_resp(&mut bytes);
                    let length = bytes.len() - start;
                    if bytes.len() > resp_room {
                        bytes.truncate(start);
                        if written == 0 {
                            return Ok(-(length.min(i32::MAX as usize) as jint));
                        }
                        break;
                    }
                    numbers.extend_from_slice(&[
                        1,
                        command.node() as jlong,
                        command.request_id().0 as jlong,
                        convert::time_to_java(command.deadline()),
                        convert::command_kind(command.kind()),
                        jlong::from(command.is_eval()),
                        length as jlong,
                    ]);
                }
                Output::Wait(until) => {
                    numbers.extend_from_slice(&[2, convert::time_to_java(*until), 0, 0, 0, 0, 0]);
                }
                Output::Outcome(_) => numbers.extend_from_slice(&[3, 0, 0, 0, 0, 0, 0]),
                _ => {
                    return Err(Failure::state(
                        "unsupported_output",
                        "the core produced an output this binding does not know",
                    ))
                }
            }
            if let Some(Output::Outcome(outcome)) = op.pending.pop_front() {
                op.outcome = Some(outcome);
            }
            written += 1;
        }
        env.set_long_array_region(&records, 0, &numbers)?;
        // u8 -> i8 is a bit-for-bit reinterpretation.
        let signed: Vec<i8> = bytes.iter().map(|&b| b as i8).collect();
        env.set_byte_array_region(&resp, 0, &signed)?;
        Ok(written as jint)
    })
}

fn last_command<'a>(operation: jlong) -> Result<&'a Command> {
    let operation: &mut OperationBox = handle(operation, "operation")?;
    operation
        .command
        .as_ref()
        .ok_or_else(|| Failure::state("no_command", "the last poll produced no command"))
}

export!(Java_io_github_redlockcore_internal_Native_operationCommandResp(env, operation: jlong) -> jbyteArray = std::ptr::null_mut(), {
    let command = last_command(operation)?;
    let mut out = Vec::with_capacity(128);
    command.encode_resp(&mut out);
    Ok(env.byte_array_from_slice(&out)?.into_raw())
});

export!(Java_io_github_redlockcore_internal_Native_operationCommandArgs(env, operation: jlong) -> jobjectArray = std::ptr::null_mut(), {
    let command = last_command(operation)?;
    let bytes = classes::class(&classes::classes(env)?.bytes);
    let array = env.new_object_array(command.arg_count() as i32, bytes, JObject::null())?;
    for (i, arg) in command.args().enumerate() {
        let bytes = env.byte_array_from_slice(arg)?;
        env.set_object_array_element(&array, i as i32, bytes)?;
    }
    Ok(array.into_raw())
});

export!(Java_io_github_redlockcore_internal_Native_operationOutcome(env, operation: jlong) -> jobjectArray = std::ptr::null_mut(), {
    let operation: &mut OperationBox = handle(operation, "operation")?;
    let outcome = operation
        .outcome
        .take()
        .ok_or_else(|| Failure::state("no_outcome", "the operation has not produced its outcome"))?;
    operation.last_outcome = Some(outcome.clone());
    outcome_to_java(env, outcome)
});

// A release notice for the operation's resource from node `node` (waiting acquisitions).
export!(Java_io_github_redlockcore_internal_Native_operationHandleNotice(env, operation: jlong, node: jint, now: jlong) -> () = (), {
    let _ = env;
    let operation: &mut OperationBox = handle(operation, "operation")?;
    let node = usize::try_from(node).unwrap_or(usize::MAX);
    operation
        .operation
        .handle_notice(node, time(now)?)
        .map_err(usage_failure)
});

// Node `node` confirmed the subscription to the operation's notice channel (rule 13 of
// docs/bindings.md): the core decides whether a release may have gone unheard.
export!(Java_io_github_redlockcore_internal_Native_operationHandleSubscribed(env, operation: jlong, node: jint, now: jlong) -> () = (), {
    let _ = env;
    let operation: &mut OperationBox = handle(operation, "operation")?;
    let node = usize::try_from(node).unwrap_or(usize::MAX);
    operation
        .operation
        .handle_subscribed(node, time(now)?)
        .map_err(usage_failure)
});

// The same with the notice's message (the pub/sub payload: the id of the waiter first in
// the node's queue, or empty): the waiter it names tries at once, the others give it time.
export!(Java_io_github_redlockcore_internal_Native_operationHandleNoticeMessage(env, operation: jlong, node: jint, message: JByteArray<'local>, now: jlong) -> () = (), {
    if is_null(&message) {
        return Err(Failure::argument("invalid_argument", "a notice's message is not null"));
    }
    let message = env.convert_byte_array(&message)?;
    let operation: &mut OperationBox = handle(operation, "operation")?;
    let node = usize::try_from(node).unwrap_or(usize::MAX);
    operation
        .operation
        .handle_notice_message(node, &message, time(now)?)
        .map_err(usage_failure)
});

export!(Java_io_github_redlockcore_internal_Native_operationIsFinished(env, operation: jlong) -> jboolean = 0, {
    let _ = env;
    let operation: &mut OperationBox = handle(operation, "operation")?;
    Ok(jboolean::from(operation.operation.is_finished()))
});

export!(Java_io_github_redlockcore_internal_Native_operationListens(env, operation: jlong) -> jboolean = 0, {
    let _ = env;
    let operation: &mut OperationBox = handle(operation, "operation")?;
    Ok(jboolean::from(operation.operation.listens()))
});

export!(Java_io_github_redlockcore_internal_Native_operationNodeCodes(env, operation: jlong) -> jni::sys::jintArray = std::ptr::null_mut(), {
    let operation: &mut OperationBox = handle(operation, "operation")?;
    let codes: Vec<jint> = operation
        .operation
        .node_results()
        .iter()
        .map(convert::node_code)
        .collect();
    let array = env.new_int_array(codes.len() as i32)?;
    env.set_int_array_region(&array, 0, &codes)?;
    Ok(array.into_raw())
});

// ---- lease --------------------------------------------------------------------------

export!(Java_io_github_redlockcore_internal_Native_leaseFree(env, lease: jlong) -> () = (), {
    let _ = env;
    free::<Lease>(lease);
    Ok(())
});

export!(Java_io_github_redlockcore_internal_Native_leaseInfo(env, lease: jlong) -> jobjectArray = std::ptr::null_mut(), {
    let lease: &mut Lease = handle(lease, "lease")?;
    convert::lease_info(env, lease)
});

// ---- RESP decoder and replies -------------------------------------------------------

export!(Java_io_github_redlockcore_internal_Native_decoderNew(env) -> jlong = 0, {
    let _ = env;
    Ok(into_handle(Decoder::new()))
});

export!(Java_io_github_redlockcore_internal_Native_decoderFree(env, decoder: jlong) -> () = (), {
    let _ = env;
    free::<Decoder>(decoder);
    Ok(())
});

export!(Java_io_github_redlockcore_internal_Native_decoderFeed(
    env,
    decoder: jlong,
    bytes: JByteArray<'local>,
    offset: jint,
    length: jint
) -> () = (), {
    let decoder: &mut Decoder = handle(decoder, "decoder")?;
    if is_null(&bytes) {
        return Err(Failure::argument("invalid_argument", "the bytes must not be null"));
    }
    let total = env.get_array_length(&bytes)?;
    if offset < 0 || length < 0 || offset.checked_add(length).is_none_or(|end| end > total) {
        return Err(Failure::argument(
            "invalid_argument",
            format!("offset {offset} and length {length} do not fit an array of {total} bytes"),
        ));
    }
    let mut chunk = vec![0i8; length as usize];
    env.get_byte_array_region(&bytes, offset, &mut chunk)?;
    // i8 -> u8 is a bit-for-bit reinterpretation.
    let chunk: Vec<u8> = chunk.into_iter().map(|b| b as u8).collect();
    decoder.feed(&chunk);
    Ok(())
});

export!(Java_io_github_redlockcore_internal_Native_decoderNext(env, decoder: jlong) -> jlong = 0, {
    let _ = env;
    let decoder: &mut Decoder = handle(decoder, "decoder")?;
    match decoder.next_reply() {
        Ok(Some(reply)) => Ok(into_handle(reply)),
        Ok(None) => Ok(0),
        Err(error) => Err(convert::protocol_failure(error)),
    }
});

export!(Java_io_github_redlockcore_internal_Native_replyFree(env, reply: jlong) -> () = (), {
    let _ = env;
    free::<Reply>(reply);
    Ok(())
});

export!(Java_io_github_redlockcore_internal_Native_replyType(env, reply: jlong) -> jint = -1, {
    let _ = env;
    let reply: &mut Reply = handle(reply, "reply")?;
    Ok(reply_to_type(reply))
});

export!(Java_io_github_redlockcore_internal_Native_replyToJava(env, reply: jlong) -> jobject = std::ptr::null_mut(), {
    let reply: &mut Reply = handle(reply, "reply")?;
    Ok(convert::reply_to_java(env, reply)?.into_raw())
});

// ---- the resource-side fencing check --------------------------------------------------

// A fenced write of `value` to `item` under `token` (the core's `FencedSet`).
export!(Java_io_github_redlockcore_internal_Native_fencedSetNew(env, item: JByteArray<'local>, value: JByteArray<'local>, token: jlong) -> jlong = 0, {
    if is_null(&item) || is_null(&value) {
        return Err(Failure::argument("invalid_argument", "the item and value must not be null"));
    }
    let item = env.convert_byte_array(&item)?;
    let value = env.convert_byte_array(&value)?;
    let token = u64::try_from(token).unwrap_or(0);
    let write = redlock_core::FencedSet::new(&item, &value, token).map_err(usage_failure)?;
    Ok(into_handle(write))
});

export!(Java_io_github_redlockcore_internal_Native_fencedSetFree(env, write: jlong) -> () = (), {
    let _ = env;
    free::<redlock_core::FencedSet>(write);
    Ok(())
});

// The command's argv: `EVALSHA` form, or `EVAL` with `eval`.
export!(Java_io_github_redlockcore_internal_Native_fencedSetArgs(env, write: jlong, eval: jboolean) -> jobjectArray = std::ptr::null_mut(), {
    let write: &mut redlock_core::FencedSet = handle(write, "fenced write")?;
    let args = write.args(eval != 0);
    let bytes = classes::class(&classes::classes(env)?.bytes);
    let array = env.new_object_array(args.len() as i32, bytes, JObject::null())?;
    for (i, arg) in args.iter().enumerate() {
        let bytes = env.byte_array_from_slice(arg)?;
        env.set_object_array_element(&array, i as i32, bytes)?;
    }
    Ok(array.into_raw())
});

// Reads the server's reply (its RESP bytes): 0 accepted, 1 stale (`out[0]` the token the
// item had accepted), 2 retry as `EVAL`, 3 failed (the text is returned).
export!(Java_io_github_redlockcore_internal_Native_fencedSetReply(env, write: jlong, resp: JByteArray<'local>, out: JLongArray<'local>) -> jstring = std::ptr::null_mut(), {
    let write: &mut redlock_core::FencedSet = handle(write, "fenced write")?;
    if is_null(&out) || env.get_array_length(&out)? < 2 {
        return Err(Failure::argument("invalid_argument", "the output array needs 2 slots"));
    }
    let reply = convert::one_reply(env, &resp)?;
    let (code, seen, text) = match write.handle_reply(&reply) {
        redlock_core::FencedWrite::Accepted => (0, 0, None),
        redlock_core::FencedWrite::Stale { seen } => (1, jlong::try_from(seen).unwrap_or(jlong::MAX), None),
        redlock_core::FencedWrite::RetryAsEval => (2, 0, None),
        redlock_core::FencedWrite::Failed(text) => (3, 0, Some(text)),
        _ => (3, 0, Some(String::from("the core gave a result this binding does not know"))),
    };
    env.set_long_array_region(&out, 0, &[code, seen])?;
    match text {
        Some(text) => Ok(env.new_string(text)?.into_raw()),
        None => Ok(std::ptr::null_mut()),
    }
});

// The channels this client's acquisitions of the resources listen on (the core's
// `Redlock::notice_channels`: each key's notice channel, then this client's waiter
// channel of each key), for the subscribers of waiting acquisitions.
export!(Java_io_github_redlockcore_internal_Native_noticeChannels(env, client: jlong, resource_list: JObjectArray<'local>) -> jobjectArray = std::ptr::null_mut(), {
    let client: &mut Redlock = handle(client, "client")?;
    let names = resources(env, &resource_list)?;
    let channels = client.notice_channels(&names).map_err(usage_failure)?;
    let bytes = classes::class(&classes::classes(env)?.bytes);
    let array = env.new_object_array(channels.len() as i32, bytes, JObject::null())?;
    for (i, channel) in channels.iter().enumerate() {
        let channel = env.byte_array_from_slice(channel)?;
        env.set_object_array_element(&array, i as i32, channel)?;
    }
    Ok(array.into_raw())
});
