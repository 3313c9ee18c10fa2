//! The per-call overhead of the C ABI: one N = 5 acquire + release cycle, every node
//! answering OK, driven (a) through the exported C functions, called from Rust with
//! every NULL check, copy, handle allocation and result code a C caller pays, and
//! (b) on the core directly, doing the same work (reading every command's node, id,
//! deadline and arguments). The target is (a) under 1.5 times (b).
//!
//! The second group does the same cycle the way a driver does it, through one node link
//! per node: every command submitted to its link, written as RESP, answered at the link
//! and delivered back to the operation.
//!
//! Run with `cargo bench -p redlock-ffi --bench ffi_cycle`.

use std::hint::black_box;
use std::ptr;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use redlock::*;
use redlock_core::{
    Config, Link, LinkOutput, Operation, Outcome, Output, Redlock, Reply, RequestId, Time,
};

const RESOURCE: &[u8] = b"orders:42";

/// Reads a command as a driver does before sending it.
fn read_command(command: &redlock_core::Command) -> (usize, u64, u64, usize) {
    let bytes: usize = command.args().map(<[u8]>::len).sum();
    (
        command.node(),
        command.request_id().0,
        command.deadline().as_micros(),
        bytes,
    )
}

fn core_poll(op: &mut Operation, ids: &mut Vec<u64>) -> Option<Outcome> {
    let mut outcome = None;
    while let Some(output) = op.poll_output() {
        match output {
            Output::Send(command) => {
                let (_, id, _, bytes) = black_box(read_command(&command));
                black_box(bytes);
                ids.push(id);
            }
            Output::Wait(until) => {
                black_box(until);
            }
            Output::Outcome(o) => outcome = Some(o),
            _ => {}
        }
    }
    outcome
}

fn core_cycle(client: &mut Redlock, ids: &mut Vec<u64>) -> usize {
    ids.clear();
    let mut op = client
        .acquire(&[RESOURCE], Time::from_micros(1_000))
        .expect("valid resource");
    core_poll(&mut op, ids);
    let mut lease = None;
    for id in std::mem::take(ids) {
        op.handle_reply(RequestId(id), Reply::Ok, Time::from_micros(1_200))
            .expect("issued request");
        if let Some(Outcome::Acquired(a)) = core_poll(&mut op, &mut Vec::new()) {
            lease = Some(a.lease);
        }
    }
    let lease = lease.expect("acquired");
    let mut op = client.release(&lease, Time::from_micros(2_000));
    core_poll(&mut op, ids);
    let mut released = 0;
    for id in std::mem::take(ids) {
        op.handle_reply(RequestId(id), Reply::Integer(1), Time::from_micros(2_200))
            .expect("issued request");
        if let Some(Outcome::Released(r)) = core_poll(&mut op, &mut Vec::new()) {
            released = r.released;
        }
    }
    released
}

fn ok(rc: redlock_result) {
    assert_eq!(rc, redlock_result::REDLOCK_OK);
}

/// Polls through the C ABI until empty, reading each command as a C driver does;
/// returns the outcome handle if one came.
///
/// # Safety
/// `op` is a live operation handle.
unsafe fn ffi_poll(op: *mut redlock_operation, ids: &mut Vec<u64>) -> *mut redlock_outcome {
    let mut outcome = ptr::null_mut();
    let mut args = [ptr::null::<u8>(); 16];
    let mut lens = [0usize; 16];
    loop {
        let mut kind = 0u32;
        // SAFETY: `op` is live; every output pointer is a local.
        unsafe {
            ok(redlock_operation_poll_output(op, &mut kind));
            match kind {
                REDLOCK_OUTPUT_SEND => {
                    let (mut node, mut id, mut deadline, mut argc) = (0usize, 0u64, 0u64, 0usize);
                    ok(redlock_operation_command(
                        op,
                        &mut node,
                        &mut id,
                        &mut deadline,
                        &mut argc,
                    ));
                    ok(redlock_operation_command_args(
                        op,
                        args.as_mut_ptr(),
                        lens.as_mut_ptr(),
                        args.len(),
                        &mut argc,
                    ));
                    black_box((node, deadline, lens[..argc].iter().sum::<usize>()));
                    ids.push(id);
                }
                REDLOCK_OUTPUT_WAIT => {
                    let mut until = 0u64;
                    ok(redlock_operation_wait_until(op, &mut until));
                    black_box(until);
                }
                REDLOCK_OUTPUT_OUTCOME => {
                    ok(redlock_operation_take_outcome(op, &mut outcome));
                }
                _ => return outcome,
            }
        }
    }
}

/// # Safety
/// `client` is a live client handle.
unsafe fn ffi_cycle(client: *mut redlock_client, ids: &mut Vec<u64>) -> usize {
    let resources = [RESOURCE.as_ptr()];
    let lens = [RESOURCE.len()];
    ids.clear();
    // SAFETY: every handle below is created here, used while live, and freed once.
    unsafe {
        let mut op = ptr::null_mut();
        ok(redlock_client_acquire(
            client,
            resources.as_ptr(),
            lens.as_ptr(),
            1,
            1_000,
            &mut op,
        ));
        ffi_poll(op, ids);
        let mut lease = ptr::null_mut();
        for id in std::mem::take(ids) {
            ok(redlock_operation_handle_reply(
                op,
                id,
                REDLOCK_REPLY_OK,
                0,
                ptr::null(),
                0,
                1_200,
            ));
            let outcome = ffi_poll(op, &mut Vec::new());
            if !outcome.is_null() {
                assert_eq!(redlock_outcome_kind(outcome), REDLOCK_OUTCOME_ACQUIRED);
                ok(redlock_outcome_lease(outcome, &mut lease));
                redlock_outcome_free(outcome);
            }
        }
        redlock_operation_free(op);
        assert!(!lease.is_null(), "acquired");
        ok(redlock_client_release(client, lease, 2_000, &mut op));
        ffi_poll(op, ids);
        let mut released = 0;
        for id in std::mem::take(ids) {
            ok(redlock_operation_handle_reply(
                op,
                id,
                REDLOCK_REPLY_INTEGER,
                1,
                ptr::null(),
                0,
                2_200,
            ));
            let outcome = ffi_poll(op, &mut Vec::new());
            if !outcome.is_null() {
                ok(redlock_outcome_released(outcome, &mut released));
                redlock_outcome_free(outcome);
            }
        }
        redlock_operation_free(op);
        redlock_lease_free(lease);
        released
    }
}

/// Connected links whose script loads are answered: ready for commands.
fn core_links() -> Vec<Link> {
    (0..5)
        .map(|_| {
            let mut link = Link::new();
            link.handle_connected(Time::from_micros(1));
            while let Some(output) = link.poll_output() {
                if let LinkOutput::Write(write) = output {
                    link.handle_reply(
                        write.id(),
                        Reply::Bulk(b"sha".to_vec()),
                        Time::from_micros(1),
                    );
                }
            }
            link
        })
        .collect()
}

/// Runs one operation through the links until it decides, every write answered with
/// `reply`.
fn core_run(op: &mut Operation, links: &mut [Link], reply: &Reply, now: Time) -> Option<Outcome> {
    let mut resp = Vec::with_capacity(256);
    let mut outcome = None;
    let mut pending = true;
    while pending {
        pending = false;
        while let Some(output) = op.poll_output() {
            match output {
                Output::Send(command) => {
                    let node = command.node();
                    links[node].submit(0, command, now);
                }
                Output::Outcome(o) => outcome = Some(o),
                _ => {}
            }
        }
        for link in links.iter_mut() {
            while let Some(output) = link.poll_output() {
                match output {
                    LinkOutput::Write(write) => {
                        resp.clear();
                        write.encode_resp(&mut resp);
                        black_box(&resp);
                        link.handle_reply(write.id(), reply.clone(), now);
                    }
                    LinkOutput::Deliver(delivery) => {
                        // Late replies after the outcome are accepted and change nothing.
                        let _ = op.handle_reply(delivery.request, delivery.reply, now);
                        pending = true;
                    }
                    _ => {}
                }
            }
        }
    }
    outcome
}

fn core_link_cycle(client: &mut Redlock, links: &mut [Link]) -> usize {
    let mut op = client
        .acquire(&[RESOURCE], Time::from_micros(1_000))
        .expect("valid resource");
    let Some(Outcome::Acquired(acquired)) =
        core_run(&mut op, links, &Reply::Ok, Time::from_micros(1_200))
    else {
        panic!("not acquired");
    };
    let mut op = client.release(&acquired.lease, Time::from_micros(2_000));
    match core_run(&mut op, links, &Reply::Integer(1), Time::from_micros(2_200)) {
        Some(Outcome::Released(r)) => r.released,
        other => panic!("not released: {other:?}"),
    }
}

/// Connected links whose script loads are answered, through the C ABI.
///
/// # Safety
/// None beyond the crate's contract: the handles are made here.
unsafe fn ffi_links() -> Vec<*mut redlock_link> {
    (0..5)
        .map(|_| {
            let mut link = ptr::null_mut();
            // SAFETY: the link is created here and every output is a local.
            unsafe {
                ok(redlock_link_new(&mut link));
                ok(redlock_link_handle_connected(link, 1));
                loop {
                    let mut kind = 0u32;
                    ok(redlock_link_poll_output(link, &mut kind));
                    if kind == REDLOCK_LINK_OUTPUT_NONE {
                        break;
                    }
                    let (mut id, mut argc) = (0u64, 0usize);
                    ok(redlock_link_write(link, &mut id, &mut argc));
                    ok(redlock_link_handle_reply(
                        link,
                        id,
                        REDLOCK_REPLY_BULK,
                        0,
                        b"sha".as_ptr(),
                        3,
                        1,
                    ));
                }
            }
            link
        })
        .collect()
}

/// Runs one operation through the links until it decides, as a C driver does; returns
/// the outcome handle.
///
/// # Safety
/// `op` and `links` are live handles.
unsafe fn ffi_run(
    op: *mut redlock_operation,
    links: &[*mut redlock_link],
    reply_kind: u32,
    integer: i64,
    now: u64,
) -> *mut redlock_outcome {
    let mut outcome = ptr::null_mut();
    let mut pending = true;
    // SAFETY: every handle is live; every output pointer is a local.
    unsafe {
        while pending {
            pending = false;
            loop {
                let mut kind = 0u32;
                ok(redlock_operation_poll_output(op, &mut kind));
                match kind {
                    REDLOCK_OUTPUT_SEND => {
                        let (mut node, mut id, mut deadline, mut argc) = (0, 0, 0, 0);
                        ok(redlock_operation_command(
                            op,
                            &mut node,
                            &mut id,
                            &mut deadline,
                            &mut argc,
                        ));
                        ok(redlock_link_submit_current(links[node], 0, op, now));
                    }
                    REDLOCK_OUTPUT_OUTCOME => ok(redlock_operation_take_outcome(op, &mut outcome)),
                    _ => break,
                }
            }
            for &link in links {
                loop {
                    let mut kind = 0u32;
                    ok(redlock_link_poll_output(link, &mut kind));
                    match kind {
                        REDLOCK_LINK_OUTPUT_WRITE => {
                            let (mut id, mut argc) = (0u64, 0usize);
                            let (mut bytes, mut len) = (ptr::null(), 0usize);
                            ok(redlock_link_write(link, &mut id, &mut argc));
                            ok(redlock_link_write_resp(link, &mut bytes, &mut len));
                            black_box((bytes, len));
                            ok(redlock_link_handle_reply(
                                link,
                                id,
                                reply_kind,
                                integer,
                                ptr::null(),
                                0,
                                now,
                            ));
                        }
                        REDLOCK_LINK_OUTPUT_DELIVER => {
                            let _ = redlock_operation_handle_delivery(op, link, now);
                            pending = true;
                        }
                        REDLOCK_LINK_OUTPUT_NONE => break,
                        _ => {}
                    }
                }
            }
        }
    }
    outcome
}

/// # Safety
/// `client` and `links` are live handles.
unsafe fn ffi_link_cycle(client: *mut redlock_client, links: &[*mut redlock_link]) -> usize {
    let resources = [RESOURCE.as_ptr()];
    let lens = [RESOURCE.len()];
    // SAFETY: every handle below is created here, used while live, and freed once.
    unsafe {
        let mut op = ptr::null_mut();
        ok(redlock_client_acquire(
            client,
            resources.as_ptr(),
            lens.as_ptr(),
            1,
            1_000,
            &mut op,
        ));
        let outcome = ffi_run(op, links, REDLOCK_REPLY_OK, 0, 1_200);
        assert_eq!(redlock_outcome_kind(outcome), REDLOCK_OUTCOME_ACQUIRED);
        let mut lease = ptr::null_mut();
        ok(redlock_outcome_lease(outcome, &mut lease));
        redlock_outcome_free(outcome);
        redlock_operation_free(op);
        ok(redlock_client_release(client, lease, 2_000, &mut op));
        let outcome = ffi_run(op, links, REDLOCK_REPLY_INTEGER, 1, 2_200);
        let mut released = 0;
        ok(redlock_outcome_released(outcome, &mut released));
        redlock_outcome_free(outcome);
        redlock_operation_free(op);
        redlock_lease_free(lease);
        released
    }
}

fn bench_links(c: &mut Criterion) {
    let mut group = c.benchmark_group("n5_acquire_release_links");
    let config = Config::builder(5, Duration::from_millis(10_000))
        .build()
        .expect("valid config");
    let mut core_client = Redlock::with_seed(config, [42; 32]);
    let mut links = core_links();
    assert_eq!(core_link_cycle(&mut core_client, &mut links), 3);
    group.bench_function("core", |b| {
        b.iter(|| black_box(core_link_cycle(&mut core_client, &mut links)))
    });
    // SAFETY: the handles are created, used and freed here, on one thread.
    unsafe {
        let (mut builder, mut config, mut client) =
            (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
        ok(redlock_config_builder_new(5, 10_000, &mut builder));
        ok(redlock_config_builder_build(builder, &mut config));
        let seed = [42u8; 32];
        ok(redlock_client_new_seeded(
            config,
            seed.as_ptr(),
            seed.len(),
            &mut client,
        ));
        let links = ffi_links();
        assert_eq!(ffi_link_cycle(client, &links), 3);
        group.bench_function("c_abi", |b| {
            b.iter(|| black_box(ffi_link_cycle(client, &links)))
        });
        for link in links {
            redlock_link_free(link);
        }
        redlock_client_free(client);
        redlock_config_free(config);
        redlock_config_builder_free(builder);
    }
    group.finish();
}

fn bench_overhead(c: &mut Criterion) {
    let mut group = c.benchmark_group("n5_acquire_release");
    let config = Config::builder(5, Duration::from_millis(10_000))
        .build()
        .expect("valid config");
    let mut core_client = Redlock::with_seed(config, [42; 32]);
    let mut ids = Vec::with_capacity(8);
    // The release decides at the quorum (3 of 5); the other replies arrive late.
    assert_eq!(core_cycle(&mut core_client, &mut ids), 3);
    group.bench_function("core", |b| {
        b.iter(|| black_box(core_cycle(&mut core_client, &mut ids)))
    });

    // SAFETY: the handles are created, used and freed here, on one thread.
    unsafe {
        let (mut builder, mut config, mut client) =
            (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
        ok(redlock_config_builder_new(5, 10_000, &mut builder));
        ok(redlock_config_builder_build(builder, &mut config));
        let seed = [42u8; 32];
        ok(redlock_client_new_seeded(
            config,
            seed.as_ptr(),
            seed.len(),
            &mut client,
        ));
        assert_eq!(ffi_cycle(client, &mut ids), 3);
        group.bench_function("c_abi", |b| {
            b.iter(|| black_box(ffi_cycle(client, &mut ids)))
        });
        redlock_client_free(client);
        redlock_config_free(config);
        redlock_config_builder_free(builder);
    }
    group.finish();
}

criterion_group!(benches, bench_overhead, bench_links);
criterion_main!(benches);
