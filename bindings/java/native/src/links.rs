//! The core's node links ([`redlock_core::Link`]), one per node, behind one handle.
//!
//! The Java loop hands every command an operation emits to its node's link
//! (`operationPump`), every connection event and reply to the link (`links*`), and does
//! what the links output (`linksPoll`). The per-node policy (order, the bound in flight,
//! stalled nodes, owed releases, scripts first, resends, reconnect backoff) is the core's.

use jni::objects::{JByteArray, JClass, JLongArray, JObject, JObjectArray, JString};
use jni::sys::{jboolean, jint, jintArray, jlong, jobject};
use jni::JNIEnv;

use redlock_core::{Delivery, Link, LinkCause, LinkOutput, Output, Reply, WriteId};

use crate::boundary::{guard, handle, into_handle, is_null, Failure, Result};
use crate::convert::{self, reply_from_parts};
use crate::{classes, time, OperationBox};

// Every node's link, and the delivery `linksPoll` announced and `linksDeliver` hands on.
pub(crate) struct Links {
    links: Vec<Link>,
    delivery: Option<Delivery>,
    /// Where the next `linksPoll` starts, so one busy node does not starve the others.
    next: usize,
    buffer: Vec<u8>,
}

fn link(links: &mut Links, node: jint) -> Result<&mut Link> {
    usize::try_from(node)
        .ok()
        .and_then(|node| links.links.get_mut(node))
        .ok_or_else(|| Failure::argument("unknown_node", format!("no node {node}")))
}

export!(Java_io_github_redlockcore_internal_Native_linksNew(env, nodes: jint) -> jlong = 0, {
    let _ = env;
    let nodes = usize::try_from(nodes)
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| Failure::argument("invalid_argument", "at least one node"))?;
    Ok(into_handle(Links {
        links: (0..nodes).map(|_| Link::new()).collect(),
        delivery: None,
        next: 0,
        buffer: Vec::with_capacity(256),
    }))
});

export!(Java_io_github_redlockcore_internal_Native_linksFree(env, links: jlong) -> () = (), {
    let _ = env;
    crate::boundary::free::<Links>(links);
    Ok(())
});

// Polls the operation until it waits or ends, submitting every command it emits to its
// node's link with `tag`. Returns 0 (nothing more: an operation already finished), 2 (a
// wait: `out[0]` is the instant) or 3 (the outcome: read it with `operationOutcome`).
export!(Java_io_github_redlockcore_internal_Native_operationPump(
    env,
    operation: jlong,
    links: jlong,
    tag: jlong,
    now: jlong,
    out: JLongArray<'local>
) -> jint = -1, {
    let op: &mut OperationBox = handle(operation, "operation")?;
    let links: &mut Links = handle(links, "links")?;
    let now = time(now)?;
    if is_null(&out) || env.get_array_length(&out)? < 1 {
        return Err(Failure::argument("invalid_argument", "the output array needs 1 slot"));
    }
    loop {
        match op.operation.poll_output() {
            None => return Ok(0),
            Some(Output::Send(command)) => {
                let node = command.node();
                let link = links.links.get_mut(node).ok_or_else(|| {
                    Failure::argument("unknown_node", "the command's node has no link")
                })?;
                link.submit(tag as u64, command, now);
            }
            Some(Output::Wait(until)) => {
                env.set_long_array_region(&out, 0, &[convert::time_to_java(until)])?;
                return Ok(2);
            }
            Some(Output::Outcome(outcome)) => {
                op.outcome = Some(outcome);
                return Ok(3);
            }
            Some(_) => {
                return Err(Failure::state(
                    "unsupported_output",
                    "the core produced an output this binding does not know",
                ))
            }
        }
    }
});

export!(Java_io_github_redlockcore_internal_Native_operationAbandon(env, operation: jlong, now: jlong) -> () = (), {
    let _ = env;
    let op: &mut OperationBox = handle(operation, "operation")?;
    op.operation.abandon(time(now)?);
    Ok(())
});

// The next output of any link: `out` = code, node, then for a write its id, for a
// delivery its tag and request id. Codes: 0 none, 1 connect, 2 write (returns its RESP
// bytes, or its arguments as `byte[][]` when `args`), 3 close, 4 deliver (the reply waits
// for `linksDeliver` or `linksDropDelivery`).
export!(Java_io_github_redlockcore_internal_Native_linksPoll(
    env,
    links: jlong,
    out: JLongArray<'local>,
    args: jboolean
) -> jobject = std::ptr::null_mut(), {
    let links: &mut Links = handle(links, "links")?;
    if is_null(&out) || env.get_array_length(&out)? < 4 {
        return Err(Failure::argument("invalid_argument", "the output array needs 4 slots"));
    }
    if links.delivery.is_some() {
        return Err(Failure::state(
            "delivery_pending",
            "hand on the last delivery before polling again",
        ));
    }
    let count = links.links.len();
    for step in 0..count {
        let node = (links.next + step) % count;
        let Some(output) = links.links[node].poll_output() else {
            continue;
        };
        links.next = node;
        let node_number = node as jlong;
        return match output {
            LinkOutput::Connect => {
                env.set_long_array_region(&out, 0, &[1, node_number])?;
                Ok(std::ptr::null_mut())
            }
            LinkOutput::Close => {
                env.set_long_array_region(&out, 0, &[3, node_number])?;
                Ok(std::ptr::null_mut())
            }
            LinkOutput::Write(write) => {
                env.set_long_array_region(&out, 0, &[2, node_number, write.id().0 as jlong])?;
                if args != 0 {
                    let bytes = classes::class(&classes::classes(env)?.bytes);
                    let array =
                        env.new_object_array(write.arg_count() as i32, bytes, JObject::null())?;
                    for (i, arg) in write.args().enumerate() {
                        let bytes = env.byte_array_from_slice(arg)?;
                        env.set_object_array_element(&array, i as i32, bytes)?;
                    }
                    Ok(array.into_raw())
                } else {
                    links.buffer.clear();
                    write.encode_resp(&mut links.buffer);
                    Ok(env.byte_array_from_slice(&links.buffer)?.into_raw())
                }
            }
            LinkOutput::Deliver(delivery) => {
                env.set_long_array_region(
                    &out,
                    0,
                    &[4, node_number, delivery.tag as jlong, delivery.request.0 as jlong],
                )?;
                links.delivery = Some(delivery);
                Ok(std::ptr::null_mut())
            }
            _ => Err(Failure::state(
                "unsupported_output",
                "the core's link produced an output this binding does not know",
            )),
        };
    }
    env.set_long_array_region(&out, 0, &[0])?;
    Ok(std::ptr::null_mut())
});

// Hands the delivery `linksPoll` announced to its operation.
export!(Java_io_github_redlockcore_internal_Native_linksDeliver(env, links: jlong, operation: jlong, now: jlong) -> () = (), {
    let _ = env;
    let links: &mut Links = handle(links, "links")?;
    let delivery = links
        .delivery
        .take()
        .ok_or_else(|| Failure::state("no_delivery", "no delivery is pending"))?;
    let op: &mut OperationBox = handle(operation, "operation")?;
    op.operation
        .handle_reply(delivery.request, delivery.reply, time(now)?)
        .map_err(crate::convert::usage_failure)
});

// Drops the pending delivery (its operation already ended: the reply changes nothing).
export!(Java_io_github_redlockcore_internal_Native_linksDropDelivery(env, links: jlong) -> () = (), {
    let _ = env;
    let links: &mut Links = handle(links, "links")?;
    links.delivery = None;
    Ok(())
});

export!(Java_io_github_redlockcore_internal_Native_linksConnected(env, links: jlong, node: jint, now: jlong) -> () = (), {
    let _ = env;
    let links: &mut Links = handle(links, "links")?;
    let now = time(now)?;
    link(links, node)?.handle_connected(now);
    Ok(())
});

// Cause codes as `CloseCause`'s ordinals: refused, auth, tls, timeout, anything else.
fn cause(code: jint) -> LinkCause {
    match code {
        0 => LinkCause::Refused,
        1 => LinkCause::Auth,
        2 => LinkCause::Tls,
        3 => LinkCause::Timeout,
        _ => LinkCause::Closed,
    }
}

export!(Java_io_github_redlockcore_internal_Native_linksClosed(
    env,
    links: jlong,
    node: jint,
    cause_code: jint,
    text: JString<'local>,
    now: jlong
) -> () = (), {
    let text: String = if is_null(&text) { String::new() } else { env.get_string(&text)?.into() };
    let links: &mut Links = handle(links, "links")?;
    let now = time(now)?;
    link(links, node)?.handle_closed(cause(cause_code), &text, now);
    Ok(())
});

fn give(links: jlong, node: jint, write: jlong, reply: Reply, now: jlong) -> Result<()> {
    let links: &mut Links = handle(links, "links")?;
    let now = time(now)?;
    link(links, node)?.handle_reply(WriteId(write as u64), reply, now);
    Ok(())
}

export!(Java_io_github_redlockcore_internal_Native_linksReply(
    env,
    links: jlong,
    node: jint,
    write: jlong,
    kind: jint,
    integer: jlong,
    data: JByteArray<'local>,
    now: jlong
) -> () = (), {
    let data = if is_null(&data) { Vec::new() } else { env.convert_byte_array(&data)? };
    give(links, node, write, reply_from_parts(kind, integer, data)?, now)
});

export!(Java_io_github_redlockcore_internal_Native_linksReplyResp(
    env,
    links: jlong,
    node: jint,
    write: jlong,
    resp: JByteArray<'local>,
    now: jlong
) -> () = (), {
    let reply = convert::one_reply(env, &resp)?;
    give(links, node, write, reply, now)
});

// Hands a decoded reply (a handle from `decoderNext`) to the link (the caller frees the handle).
export!(Java_io_github_redlockcore_internal_Native_linksReplyHandle(
    env,
    links: jlong,
    node: jint,
    write: jlong,
    reply: jlong,
    now: jlong
) -> () = (), {
    let _ = env;
    let value: Reply = handle::<Reply>(reply, "reply")?.clone();
    give(links, node, write, value, now)
});

// Calls `handle_timeout` on every link that is due; returns the next instant any link
// wants (-1 for none).
export!(Java_io_github_redlockcore_internal_Native_linksTimeout(env, links: jlong, now: jlong) -> jlong = -1, {
    let _ = env;
    let links: &mut Links = handle(links, "links")?;
    let now = time(now)?;
    let mut next: Option<redlock_core::Time> = None;
    for link in &mut links.links {
        if link.poll_timeout().is_some_and(|at| at <= now) {
            link.handle_timeout(now);
        }
        if let Some(at) = link.poll_timeout() {
            next = Some(next.map_or(at, |n| n.min(at)));
        }
    }
    Ok(next.map_or(-1, convert::time_to_java))
});

// One node's link: in flight, queued, owed, idle (0/1), stalled at `now` (0/1), open (0/1).
export!(Java_io_github_redlockcore_internal_Native_linksInfo(env, links: jlong, node: jint, now: jlong) -> jni::sys::jlongArray = std::ptr::null_mut(), {
    let links: &mut Links = handle(links, "links")?;
    let now = time(now)?;
    let link = link(links, node)?;
    let values = [
        link.in_flight() as jlong,
        link.queued() as jlong,
        link.owed() as jlong,
        jlong::from(link.is_idle()),
        jlong::from(link.is_stalled(now)),
        jlong::from(link.is_open()),
    ];
    let array = env.new_long_array(values.len() as i32)?;
    env.set_long_array_region(&array, 0, &values)?;
    Ok(array.into_raw())
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

// Hands the outcome an extension operation just produced (before `operationOutcome`
// takes it) to the keep-alive.
export!(Java_io_github_redlockcore_internal_Native_keepAliveHandleOutcome(env, keep_alive: jlong, operation: jlong, now: jlong) -> () = (), {
    let _ = env;
    let keep_alive: &mut redlock_core::KeepAlive = handle(keep_alive, "keep-alive")?;
    let op: &mut OperationBox = handle(operation, "operation")?;
    let outcome = op
        .outcome
        .as_ref()
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

export!(Java_io_github_redlockcore_internal_Native_keepAliveStop(env, keep_alive: jlong) -> () = (), {
    let _ = env;
    let keep_alive: &mut redlock_core::KeepAlive = handle(keep_alive, "keep-alive")?;
    keep_alive.stop();
    Ok(())
});
