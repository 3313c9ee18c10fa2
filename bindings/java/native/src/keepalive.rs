//! The core's keep-alive, node-address checks and cancellation of a standalone
//! operation. The loop's links live in the `engine` module.

use jni::objects::{JLongArray, JObjectArray, JString};
use jni::sys::{jint, jintArray, jlong};

use crate::boundary::{handle, into_handle, is_null, Failure};
use crate::convert;
use crate::{time, OperationBox};

export!(Java_io_github_redlockcore_internal_Native_operationAbandon(env, operation: jlong, now: jlong) -> () = (), {
    let _ = env;
    let op: &mut OperationBox = handle(operation, "operation")?;
    op.operation.abandon(time(now)?);
    Ok(())
});

// The indexes of the first two addresses naming the same server (host and port), or null.
export!(Java_io_github_redlockcore_internal_Native_duplicateNode(env, addresses: JObjectArray<'local>) -> jintArray = std::ptr::null_mut(), {
    if is_null(&addresses) {
        return Err(Failure::argument("invalid_argument", "the addresses must not be null"));
    }
    let count = env.get_array_length(&addresses)?;
    let mut list = Vec::with_capacity(count as usize);
    for i in 0..count {
        let element = JString::from(env.get_object_array_element(&addresses, i)?);
        if is_null(&element) {
            return Err(Failure::argument("invalid_argument", "an address must not be null"));
        }
        list.push(String::from(env.get_string(&element)?));
    }
    match redlock_core::duplicate_node(&list) {
        None => Ok(std::ptr::null_mut()),
        Some((i, j)) => {
            let array = env.new_int_array(2)?;
            env.set_int_array_region(&array, 0, &[i as jint, j as jint])?;
            Ok(array.into_raw())
        }
    }
});

// ---- keep-alive -------------------------------------------------------------------

export!(Java_io_github_redlockcore_internal_Native_keepAliveNew(env, config: jlong, lease: jlong) -> jlong = 0, {
    let _ = env;
    let config: &mut redlock_core::Config = handle(config, "config")?;
    let lease: &mut redlock_core::Lease = handle(lease, "lease")?;
    Ok(into_handle(redlock_core::KeepAlive::new(config, lease.clone())))
});

export!(Java_io_github_redlockcore_internal_Native_keepAliveFree(env, keep_alive: jlong) -> () = (), {
    let _ = env;
    crate::boundary::free::<redlock_core::KeepAlive>(keep_alive);
    Ok(())
});

// What to do now: 1 extend, 2 wait until `out[0]`, 3 lost (`out[0]`: 0 taken, 1 not held,
// 2 expired, 3 extension limit), 4 stopped.
export!(Java_io_github_redlockcore_internal_Native_keepAlivePoll(env, keep_alive: jlong, now: jlong, out: JLongArray<'local>) -> jint = -1, {
    let keep_alive: &mut redlock_core::KeepAlive = handle(keep_alive, "keep-alive")?;
    if is_null(&out) || env.get_array_length(&out)? < 1 {
        return Err(Failure::argument("invalid_argument", "the output array needs 1 slot"));
    }
    let (code, value) = match keep_alive.poll(time(now)?) {
        redlock_core::KeepAliveAction::Extend => (1, 0),
        redlock_core::KeepAliveAction::WaitUntil(at) => (2, convert::time_to_java(at)),
        redlock_core::KeepAliveAction::Lost(reason) => (
            3,
            match reason {
                redlock_core::LostReason::Taken => 0,
                redlock_core::LostReason::NotHeld => 1,
                redlock_core::LostReason::Expired => 2,
                _ => 3,
            },
        ),
        _ => (4, 0),
    };
    env.set_long_array_region(&out, 0, &[value])?;
    Ok(code)
});

// Hands the outcome an operation handed out last (polled, whether or not
// `operationOutcome` took it since) to the keep-alive.
export!(Java_io_github_redlockcore_internal_Native_keepAliveHandleOutcome(env, keep_alive: jlong, operation: jlong, now: jlong) -> () = (), {
    let _ = env;
    let keep_alive: &mut redlock_core::KeepAlive = handle(keep_alive, "keep-alive")?;
    let op: &mut OperationBox = handle(operation, "operation")?;
    let outcome = op
        .outcome
        .as_ref()
        .or(op.last_outcome.as_ref())
        .ok_or_else(|| Failure::state("no_outcome", "the operation has not produced its outcome"))?;
    keep_alive.handle_outcome(outcome, time(now)?);
    Ok(())
});

export!(Java_io_github_redlockcore_internal_Native_keepAliveHandleFailure(env, keep_alive: jlong, now: jlong) -> () = (), {
    let _ = env;
    let keep_alive: &mut redlock_core::KeepAlive = handle(keep_alive, "keep-alive")?;
    keep_alive.handle_failure(time(now)?);
    Ok(())
});

// A copy of the keep-alive's lease as it stands (a lease handle of its own).
export!(Java_io_github_redlockcore_internal_Native_keepAliveLease(env, keep_alive: jlong) -> jlong = 0, {
    let _ = env;
    let keep_alive: &mut redlock_core::KeepAlive = handle(keep_alive, "keep-alive")?;
    Ok(into_handle(keep_alive.lease().clone()))
});

export!(Java_io_github_redlockcore_internal_Native_keepAliveStop(env, keep_alive: jlong) -> () = (), {
    let _ = env;
    let keep_alive: &mut redlock_core::KeepAlive = handle(keep_alive, "keep-alive")?;
    keep_alive.stop();
    Ok(())
});
