//! The core's notice subscriptions (`redlock_core::Subscriptions`): one per client,
//! deciding when each node's subscriber connection opens, which channels it subscribes,
//! when it unsubscribes and closes, and how long a failed one stays closed. The Java loop
//! only does what it outputs and reports what happened to each connection.
//!
//! Output kinds (`subscriptionsPollOutput`, mirrored in `Subscriptions.java`):
//! 0 none, 1 open, 2 subscribe, 3 unsubscribe, 4 close; `out[0]` the kind, `out[1]` the
//! node, and the channel returned for subscribe and unsubscribe (null otherwise).

use std::time::Duration;

use jni::objects::{JByteArray, JLongArray};
use jni::sys::{jboolean, jbyteArray, jint, jlong};
use jni::JNIEnv;

use redlock_core::{SubscriberOutput, Subscriptions};

use crate::boundary::{free, handle, into_handle, is_null, Failure, Result};
use crate::convert::{config_failure, time_to_java, usage_failure};
use crate::time;

const OUTPUT_NONE: jlong = 0;
const OUTPUT_OPEN: jlong = 1;
const OUTPUT_SUBSCRIBE: jlong = 2;
const OUTPUT_UNSUBSCRIBE: jlong = 3;
const OUTPUT_CLOSE: jlong = 4;

fn subscriptions<'a>(subscriptions: jlong) -> Result<&'a mut Subscriptions> {
    handle(subscriptions, "subscriptions")
}

/// A channel's bytes; null is refused.
fn channel(env: &mut JNIEnv<'_>, channel: &JByteArray<'_>) -> Result<Vec<u8>> {
    if is_null(channel) {
        return Err(Failure::argument(
            "invalid_argument",
            "a notice channel must not be null",
        ));
    }
    Ok(env.convert_byte_array(channel)?)
}

/// A node index; a negative one is no node (`unknown_node`, as the core says for one
/// past the count).
fn node(node: jint) -> Result<usize> {
    usize::try_from(node).map_err(|_| usage_failure(redlock_core::UsageError::UnknownNode))
}

// Subscriptions over `nodes` nodes; a connection that neither opens nor confirms a
// subscription within `timeoutMs` counts as lost. `no_nodes` / `too_many_nodes` for a
// bad node count (as the configuration says).
export!(Java_io_github_redlockcore_internal_Native_subscriptionsNew(env, nodes: jint, timeout_ms: jlong) -> jlong = 0, {
    let _ = env;
    let nodes = usize::try_from(nodes)
        .map_err(|_| config_failure(redlock_core::ConfigError::NoNodes))?;
    let timeout_ms = u64::try_from(timeout_ms).map_err(|_| {
        Failure::argument("invalid_argument", "the subscriber timeout must not be negative")
    })?;
    let inner = Subscriptions::new(nodes, Duration::from_millis(timeout_ms))
        .map_err(config_failure)?;
    Ok(into_handle(inner))
});

export!(Java_io_github_redlockcore_internal_Native_subscriptionsFree(env, subscriptions: jlong) -> () = (), {
    let _ = env;
    free::<Subscriptions>(subscriptions);
    Ok(())
});

export!(Java_io_github_redlockcore_internal_Native_subscriptionsWant(env, handle: jlong, name: JByteArray<'local>, now: jlong) -> () = (), {
    let name = channel(env, &name)?;
    let now = time(now)?;
    subscriptions(handle)?.want(&name, now);
    Ok(())
});

// False (nothing changes) for a channel nobody listens on.
export!(Java_io_github_redlockcore_internal_Native_subscriptionsUnwant(env, handle: jlong, name: JByteArray<'local>, now: jlong) -> jboolean = 0, {
    let name = channel(env, &name)?;
    let now = time(now)?;
    Ok(jboolean::from(subscriptions(handle)?.unwant(&name, now)))
});

export!(Java_io_github_redlockcore_internal_Native_subscriptionsHandleOpened(env, handle: jlong, index: jint, now: jlong) -> () = (), {
    let _ = env;
    let now = time(now)?;
    subscriptions(handle)?
        .handle_opened(node(index)?, now)
        .map_err(usage_failure)
});

export!(Java_io_github_redlockcore_internal_Native_subscriptionsHandleLost(env, handle: jlong, index: jint, now: jlong) -> () = (), {
    let _ = env;
    let now = time(now)?;
    subscriptions(handle)?
        .handle_lost(node(index)?, now)
        .map_err(usage_failure)
});

export!(Java_io_github_redlockcore_internal_Native_subscriptionsHandleRefused(env, handle: jlong, index: jint, now: jlong) -> () = (), {
    let _ = env;
    let now = time(now)?;
    subscriptions(handle)?
        .handle_refused(node(index)?, now)
        .map_err(usage_failure)
});

// True when the confirmation counts: hand it to the channel's waiting operations then.
export!(Java_io_github_redlockcore_internal_Native_subscriptionsHandleConfirmed(env, handle: jlong, index: jint, name: JByteArray<'local>, now: jlong) -> jboolean = 0, {
    let name = channel(env, &name)?;
    let now = time(now)?;
    let counts = subscriptions(handle)?
        .handle_confirmed(node(index)?, &name, now)
        .map_err(usage_failure)?;
    Ok(jboolean::from(counts))
});

export!(Java_io_github_redlockcore_internal_Native_subscriptionsHandleTimeout(env, handle: jlong, now: jlong) -> () = (), {
    let _ = env;
    let now = time(now)?;
    subscriptions(handle)?.handle_timeout(now);
    Ok(())
});

// The next output: its kind in `out[0]` and its node in `out[1]`; the channel is returned
// for a subscribe or an unsubscribe, null otherwise.
export!(Java_io_github_redlockcore_internal_Native_subscriptionsPollOutput(env, handle: jlong, out: JLongArray<'local>) -> jbyteArray = std::ptr::null_mut(), {
    if is_null(&out) || env.get_array_length(&out)? < 2 {
        return Err(Failure::argument("invalid_argument", "the output array needs 2 slots"));
    }
    let (kind, node, channel) = match subscriptions(handle)?.poll_output() {
        None => (OUTPUT_NONE, 0, None),
        Some(SubscriberOutput::Open { node }) => (OUTPUT_OPEN, node, None),
        Some(SubscriberOutput::Subscribe { node, channel }) => {
            (OUTPUT_SUBSCRIBE, node, Some(channel))
        }
        Some(SubscriberOutput::Unsubscribe { node, channel }) => {
            (OUTPUT_UNSUBSCRIBE, node, Some(channel))
        }
        Some(SubscriberOutput::Close { node }) => (OUTPUT_CLOSE, node, None),
    };
    env.set_long_array_region(&out, 0, &[kind, node as jlong])?;
    match channel {
        Some(channel) => Ok(env.byte_array_from_slice(&channel)?.into_raw()),
        None => Ok(std::ptr::null_mut()),
    }
});

// When `subscriptionsHandleTimeout` is next due, or -1.
export!(Java_io_github_redlockcore_internal_Native_subscriptionsPollTimeout(env, handle: jlong) -> jlong = -1, {
    let _ = env;
    Ok(subscriptions(handle)?.poll_timeout().map_or(-1, time_to_java))
});

// Whether node `index`'s subscriber connection is open (false for an unknown node).
export!(Java_io_github_redlockcore_internal_Native_subscriptionsIsOpen(env, handle: jlong, index: jint) -> jboolean = 0, {
    let _ = env;
    let s = subscriptions(handle)?;
    Ok(jboolean::from(usize::try_from(index).is_ok_and(|n| s.is_open(n))))
});

// Whether `name` is confirmed on node `index`'s current connection.
export!(Java_io_github_redlockcore_internal_Native_subscriptionsIsSubscribed(env, handle: jlong, index: jint, name: JByteArray<'local>) -> jboolean = 0, {
    let name = channel(env, &name)?;
    let s = subscriptions(handle)?;
    Ok(jboolean::from(usize::try_from(index).is_ok_and(|n| s.is_subscribed(n, &name))))
});

// The number of channels wanted or lingering.
export!(Java_io_github_redlockcore_internal_Native_subscriptionsChannelCount(env, handle: jlong) -> jint = -1, {
    let _ = env;
    Ok(jint::try_from(subscriptions(handle)?.channels()).unwrap_or(jint::MAX))
});
