//! Drives the C ABI with arbitrary call sequences: handles created, used in any order
//! (NULL included), fed arbitrary replies, RESP bytes, lengths and codes, and freed.
//! Every call must return a result without panicking (a panic aborts the fuzzer), and
//! the outputs a call reports must be readable as documented.
#![no_main]

use std::ptr;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use redlock::*;

const SLOTS: usize = 4;

#[derive(Arbitrary, Debug)]
enum Call {
    Config {
        nodes: u8,
        ttl_ms: u16,
        setting: u8,
        value: u64,
        prefix: Vec<u8>,
    },
    Client {
        config: u8,
        seeded: bool,
        seed: Vec<u8>,
    },
    Acquire {
        client: u8,
        slot: u8,
        resources: Vec<Vec<u8>>,
        ttl_ms: Option<u16>,
        now: u32,
    },
    AcquireWithRandom {
        client: u8,
        slot: u8,
        resources: Vec<Vec<u8>>,
        random: Vec<u8>,
        now: u32,
    },
    Lease {
        client: u8,
        slot: u8,
        resources: Vec<Vec<u8>>,
        token: Vec<u8>,
        valid_until: u32,
    },
    Extend {
        client: u8,
        lease: u8,
        slot: u8,
        ttl_ms: Option<u16>,
        now: u32,
    },
    Release {
        client: u8,
        lease: u8,
        slot: u8,
        now: u32,
    },
    Poll {
        op: u8,
        limit: u8,
        /// Give each outcome polled back (to the operation in this slot, at this time)
        /// instead of freeing it.
        decline: Option<(u8, u32)>,
    },
    Reply {
        op: u8,
        request: u8,
        kind: u8,
        integer: i64,
        text: Vec<u8>,
        now: u32,
    },
    ReplyValue {
        op: u8,
        request: u8,
        reply: u8,
        now: u32,
    },
    Timeout {
        op: u8,
        now: u32,
    },
    Feed {
        decoder: u8,
        bytes: Vec<u8>,
        tight_limits: bool,
    },
    NextReply {
        decoder: u8,
        slot: u8,
    },
    NewReply {
        slot: u8,
        kind: u8,
        integer: i64,
        text: Vec<u8>,
    },
    Push {
        array: u8,
        item: u8,
    },
    ReadReply {
        reply: u8,
        index: u8,
    },
    Message {
        code: u16,
        capacity: u8,
    },
    Token {
        client: u8,
        bytes: Vec<u8>,
        capacity: u8,
    },
    NextExtension {
        client: u8,
        lease: u8,
        now: u32,
    },
    Abandon {
        op: u8,
        now: u32,
    },
    NewLink {
        slot: u8,
    },
    /// Hands operation `op`'s current send to link `link`, tagged with the op's slot.
    Submit {
        link: u8,
        op: u8,
        now: u32,
    },
    LinkEvent {
        link: u8,
        what: u8,
        cause: u8,
        write_id: u8,
        kind: u8,
        integer: i64,
        text: Vec<u8>,
        reply: u8,
        now: u32,
    },
    LinkPoll {
        link: u8,
        limit: u8,
        now: u32,
    },
    NewKeepAlive {
        client: u8,
        lease: u8,
        slot: u8,
    },
    KeepAlive {
        keepalive: u8,
        what: u8,
        slot: u8,
        now: u32,
    },
    Duplicate {
        addresses: Vec<Vec<u8>>,
    },
    Free {
        what: u8,
        slot: u8,
    },
}

/// Kinds of handle `Call::Free` frees.
const KINDS: u8 = 8;

#[derive(Default)]
struct State {
    configs: [Option<*mut redlock_config>; SLOTS],
    clients: [Option<*mut redlock_client>; SLOTS],
    ops: [Option<*mut redlock_operation>; SLOTS],
    leases: [Option<*mut redlock_lease>; SLOTS],
    replies: [Option<*mut redlock_reply>; SLOTS],
    decoders: [Option<*mut redlock_decoder>; SLOTS],
    links: [Option<*mut redlock_link>; SLOTS],
    keepalives: [Option<*mut redlock_keepalive>; SLOTS],
    /// Pushing an array into itself doubles it: a few pushes per run keep memory small.
    pushes: u32,
}

fn get<T>(slots: &[Option<*mut T>; SLOTS], index: u8) -> *mut T {
    slots[usize::from(index) % SLOTS].unwrap_or(ptr::null_mut())
}

fn no_panic(rc: redlock_result) -> redlock_result {
    assert_ne!(
        rc,
        redlock_result::REDLOCK_PANIC,
        "a panic reached the boundary"
    );
    rc
}

/// Stores a new handle in a slot, freeing the one it replaces.
fn put<T>(
    slots: &mut [Option<*mut T>; SLOTS],
    index: u8,
    value: *mut T,
    free: unsafe extern "C" fn(*mut T),
) {
    let slot = &mut slots[usize::from(index) % SLOTS];
    if let Some(old) = slot.take() {
        // SAFETY: every handle in a slot is live and owned by this state.
        unsafe { free(old) };
    }
    if !value.is_null() {
        *slot = Some(value);
    }
}

fn arrays(resources: &[Vec<u8>]) -> (Vec<*const u8>, Vec<usize>) {
    let resources = &resources[..resources.len().min(80)];
    (
        resources.iter().map(|r| r.as_ptr()).collect(),
        resources.iter().map(Vec::len).collect(),
    )
}

impl State {
    fn call(&mut self, call: Call) {
        // SAFETY: every pointer passed is NULL, a live handle owned by `self`, or a
        // local buffer of the length passed with it.
        unsafe {
            match call {
                Call::Config {
                    nodes,
                    ttl_ms,
                    setting,
                    value,
                    prefix,
                } => {
                    let mut builder = ptr::null_mut();
                    no_panic(redlock_config_builder_new(
                        usize::from(nodes % 8),
                        u64::from(ttl_ms),
                        &mut builder,
                    ));
                    let rc = match setting % 12 {
                        0 => {
                            redlock_config_builder_set_drift_factor(builder, f64::from_bits(value))
                        }
                        1 => redlock_config_builder_set_drift_fixed_us(builder, value),
                        2 => redlock_config_builder_set_node_timeout_us(builder, value),
                        3 => redlock_config_builder_set_min_validity_us(builder, value),
                        4 => redlock_config_builder_set_attempts(builder, (value % 5) as u32),
                        5 => redlock_config_builder_set_retry_delay_us(builder, value),
                        6 => redlock_config_builder_set_retry_jitter_us(builder, value),
                        7 => redlock_config_builder_set_token_bytes(builder, value as usize),
                        8 => redlock_config_builder_set_max_extensions(builder, value as u32),
                        9 => redlock_config_builder_set_unbounded_extensions(builder),
                        10 => redlock_config_builder_set_key_prefix(
                            builder,
                            prefix.as_ptr(),
                            prefix.len(),
                        ),
                        _ => redlock_config_builder_set_ttl_ms(builder, value),
                    };
                    no_panic(rc);
                    let mut config = ptr::null_mut();
                    if no_panic(redlock_config_builder_build(builder, &mut config))
                        == redlock_result::REDLOCK_OK
                    {
                        assert!(!config.is_null());
                        assert!(redlock_config_quorum(config) >= 1);
                        put(&mut self.configs, nodes, config, redlock_config_free);
                    }
                    redlock_config_builder_free(builder);
                }
                Call::Client {
                    config,
                    seeded,
                    seed,
                } => {
                    let mut client = ptr::null_mut();
                    let config_ptr = get(&self.configs, config);
                    let rc = if seeded {
                        redlock_client_new_seeded(
                            config_ptr,
                            seed.as_ptr(),
                            seed.len(),
                            &mut client,
                        )
                    } else {
                        redlock_client_new(config_ptr, &mut client)
                    };
                    if no_panic(rc) == redlock_result::REDLOCK_OK {
                        put(&mut self.clients, config, client, redlock_client_free);
                    }
                }
                Call::Acquire {
                    client,
                    slot,
                    resources,
                    ttl_ms,
                    now,
                } => {
                    let (ptrs, lens) = arrays(&resources);
                    let mut op = ptr::null_mut();
                    let client = get(&self.clients, client);
                    let rc = match ttl_ms {
                        Some(ttl) => redlock_client_acquire_for(
                            client,
                            ptrs.as_ptr(),
                            lens.as_ptr(),
                            ptrs.len(),
                            u64::from(ttl),
                            u64::from(now),
                            &mut op,
                        ),
                        None => redlock_client_acquire(
                            client,
                            ptrs.as_ptr(),
                            lens.as_ptr(),
                            ptrs.len(),
                            u64::from(now),
                            &mut op,
                        ),
                    };
                    if no_panic(rc) == redlock_result::REDLOCK_OK {
                        put(&mut self.ops, slot, op, redlock_operation_free);
                    }
                }
                Call::AcquireWithRandom {
                    client,
                    slot,
                    resources,
                    random,
                    now,
                } => {
                    let (ptrs, lens) = arrays(&resources);
                    let mut op = ptr::null_mut();
                    let rc = redlock_client_acquire_with_random(
                        get(&self.clients, client),
                        ptrs.as_ptr(),
                        lens.as_ptr(),
                        ptrs.len(),
                        random.as_ptr(),
                        random.len(),
                        u64::from(now),
                        &mut op,
                    );
                    if no_panic(rc) == redlock_result::REDLOCK_OK {
                        put(&mut self.ops, slot, op, redlock_operation_free);
                    }
                }
                Call::Lease {
                    client,
                    slot,
                    resources,
                    token,
                    valid_until,
                } => {
                    let (ptrs, lens) = arrays(&resources);
                    let mut lease = ptr::null_mut();
                    let rc = redlock_client_lease(
                        get(&self.clients, client),
                        ptrs.as_ptr(),
                        lens.as_ptr(),
                        ptrs.len(),
                        token.as_ptr(),
                        token.len(),
                        u64::from(valid_until),
                        &mut lease,
                    );
                    if no_panic(rc) == redlock_result::REDLOCK_OK {
                        put(&mut self.leases, slot, lease, redlock_lease_free);
                    }
                }
                Call::Extend {
                    client,
                    lease,
                    slot,
                    ttl_ms,
                    now,
                } => {
                    let mut op = ptr::null_mut();
                    let (client, lease) = (get(&self.clients, client), get(&self.leases, lease));
                    let rc = match ttl_ms {
                        Some(ttl) => redlock_client_extend_for(
                            client,
                            lease,
                            u64::from(ttl),
                            u64::from(now),
                            &mut op,
                        ),
                        None => redlock_client_extend(client, lease, u64::from(now), &mut op),
                    };
                    if no_panic(rc) == redlock_result::REDLOCK_OK {
                        put(&mut self.ops, slot, op, redlock_operation_free);
                    }
                }
                Call::Release {
                    client,
                    lease,
                    slot,
                    now,
                } => {
                    let mut op = ptr::null_mut();
                    let rc = redlock_client_release(
                        get(&self.clients, client),
                        get(&self.leases, lease),
                        u64::from(now),
                        &mut op,
                    );
                    if no_panic(rc) == redlock_result::REDLOCK_OK {
                        put(&mut self.ops, slot, op, redlock_operation_free);
                    }
                }
                Call::Poll { op, limit, decline } => self.poll(op, limit, decline),
                Call::Reply {
                    op,
                    request,
                    kind,
                    integer,
                    text,
                    now,
                } => {
                    no_panic(redlock_operation_handle_reply(
                        get(&self.ops, op),
                        u64::from(request),
                        u32::from(kind % 11),
                        integer,
                        text.as_ptr(),
                        text.len(),
                        u64::from(now),
                    ));
                }
                Call::ReplyValue {
                    op,
                    request,
                    reply,
                    now,
                } => {
                    no_panic(redlock_operation_handle_reply_value(
                        get(&self.ops, op),
                        u64::from(request),
                        get(&self.replies, reply),
                        u64::from(now),
                    ));
                }
                Call::Timeout { op, now } => {
                    no_panic(redlock_operation_handle_timeout(
                        get(&self.ops, op),
                        u64::from(now),
                    ));
                }
                Call::Feed {
                    decoder,
                    bytes,
                    tight_limits,
                } => {
                    if get(&self.decoders, decoder).is_null() {
                        let mut new = ptr::null_mut();
                        let rc = if tight_limits {
                            redlock_decoder_new_with_limits(64, 4, 3, 32, &mut new)
                        } else {
                            redlock_decoder_new(&mut new)
                        };
                        no_panic(rc);
                        put(&mut self.decoders, decoder, new, redlock_decoder_free);
                    }
                    no_panic(redlock_decoder_feed(
                        get(&self.decoders, decoder),
                        bytes.as_ptr(),
                        bytes.len(),
                    ));
                }
                Call::NextReply { decoder, slot } => {
                    let mut reply = ptr::null_mut();
                    if no_panic(redlock_decoder_next_reply(
                        get(&self.decoders, decoder),
                        &mut reply,
                    )) == redlock_result::REDLOCK_OK
                    {
                        put(&mut self.replies, slot, reply, redlock_reply_free);
                    }
                }
                Call::NewReply {
                    slot,
                    kind,
                    integer,
                    text,
                } => {
                    let mut reply = ptr::null_mut();
                    if no_panic(redlock_reply_new(
                        u32::from(kind % 11),
                        integer,
                        text.as_ptr(),
                        text.len(),
                        &mut reply,
                    )) == redlock_result::REDLOCK_OK
                    {
                        put(&mut self.replies, slot, reply, redlock_reply_free);
                    }
                }
                Call::Push { array, item } => {
                    let (array, item) = (get(&self.replies, array), get(&self.replies, item));
                    self.pushes += 1;
                    if self.pushes <= 12 {
                        no_panic(redlock_reply_array_push(array, item));
                    }
                }
                Call::ReadReply { reply, index } => {
                    let reply = get(&self.replies, reply);
                    let (mut bytes, mut len, mut integer) = (ptr::null(), 0usize, 0i64);
                    redlock_reply_kind(reply);
                    if no_panic(redlock_reply_bytes(reply, &mut bytes, &mut len))
                        == redlock_result::REDLOCK_OK
                    {
                        std::hint::black_box(std::slice::from_raw_parts(bytes, len));
                    }
                    no_panic(redlock_reply_integer(reply, &mut integer));
                    let mut item = ptr::null_mut();
                    if no_panic(redlock_reply_array_get(
                        reply,
                        usize::from(index),
                        &mut item,
                    )) == redlock_result::REDLOCK_OK
                    {
                        redlock_reply_free(item);
                    }
                }
                Call::Message { code, capacity } => {
                    let mut buf = vec![0u8; usize::from(capacity)];
                    let mut len = 0;
                    let rc = no_panic(redlock_result_message(
                        9000 + u32::from(code % 400),
                        buf.as_mut_ptr(),
                        buf.len(),
                        &mut len,
                    ));
                    if rc == redlock_result::REDLOCK_OK {
                        assert!(len < buf.len() && buf[len] == 0);
                    }
                    assert!(!redlock_result_name(u32::from(code)).is_null());
                }
                Call::Token {
                    client,
                    bytes,
                    capacity,
                } => {
                    let mut buf = vec![0u8; usize::from(capacity)];
                    let mut len = 0;
                    if no_panic(redlock_token_from_random_bytes(
                        bytes.as_ptr(),
                        bytes.len(),
                        buf.as_mut_ptr(),
                        buf.len(),
                        &mut len,
                    )) == redlock_result::REDLOCK_OK
                    {
                        assert_eq!(len, bytes.len() * 2);
                    }
                    no_panic(redlock_client_generate_token(
                        get(&self.clients, client),
                        buf.as_mut_ptr(),
                        buf.len(),
                        &mut len,
                    ));
                }
                Call::NextExtension { client, lease, now } => {
                    let (mut due, mut at) = (false, 0u64);
                    no_panic(redlock_client_next_extension(
                        get(&self.clients, client),
                        get(&self.leases, lease),
                        u64::from(now),
                        &mut due,
                        &mut at,
                    ));
                }
                Call::Abandon { op, now } => {
                    no_panic(redlock_operation_abandon(get(&self.ops, op), u64::from(now)));
                }
                Call::NewLink { slot } => {
                    let mut link = ptr::null_mut();
                    assert_eq!(redlock_link_new(&mut link), redlock_result::REDLOCK_OK);
                    put(&mut self.links, slot, link, redlock_link_free);
                }
                Call::Submit { link, op, now } => {
                    no_panic(redlock_link_submit_current(
                        get(&self.links, link),
                        u64::from(op) % SLOTS as u64,
                        get(&self.ops, op),
                        u64::from(now),
                    ));
                }
                Call::LinkEvent {
                    link,
                    what,
                    cause,
                    write_id,
                    kind,
                    integer,
                    text,
                    reply,
                    now,
                } => {
                    let link = get(&self.links, link);
                    let now = u64::from(now);
                    let text_len = text.len();
                    match what % 6 {
                        0 => no_panic(redlock_link_handle_connected(link, now)),
                        1 => no_panic(redlock_link_handle_closed(
                            link,
                            u32::from(cause % 7),
                            text.as_ptr(),
                            text_len,
                            now,
                        )),
                        2 => no_panic(redlock_link_handle_reply(
                            link,
                            u64::from(write_id),
                            u32::from(kind % 11),
                            integer,
                            text.as_ptr(),
                            text_len,
                            now,
                        )),
                        3 => no_panic(redlock_link_handle_reply_value(
                            link,
                            u64::from(write_id),
                            get(&self.replies, reply),
                            now,
                        )),
                        4 => no_panic(redlock_link_handle_timeout(link, now)),
                        _ => no_panic(redlock_link_set_connect_timeout(link, integer as u64)),
                    };
                    std::hint::black_box((
                        redlock_link_connect_timeout_ms(link),
                        redlock_link_is_idle(link),
                        redlock_link_is_stalled(link, now),
                        redlock_link_is_open(link),
                        redlock_link_in_flight(link),
                        redlock_link_queued(link),
                        redlock_link_owed(link),
                    ));
                    let (mut due, mut at) = (false, 0u64);
                    no_panic(redlock_link_poll_timeout(link, &mut due, &mut at));
                }
                Call::LinkPoll { link, limit, now } => self.poll_link(link, limit, now),
                Call::NewKeepAlive {
                    client,
                    lease,
                    slot,
                } => {
                    let mut keepalive = ptr::null_mut();
                    let rc = no_panic(redlock_keepalive_new(
                        get(&self.clients, client),
                        get(&self.leases, lease),
                        &mut keepalive,
                    ));
                    if rc == redlock_result::REDLOCK_OK {
                        put(&mut self.keepalives, slot, keepalive, redlock_keepalive_free);
                    }
                }
                Call::KeepAlive {
                    keepalive,
                    what,
                    slot,
                    now,
                } => {
                    let keepalive = get(&self.keepalives, keepalive);
                    let now = u64::from(now);
                    match what % 4 {
                        0 => {
                            let (mut action, mut until, mut reason) = (0u32, 0u64, 0u32);
                            let rc = no_panic(redlock_keepalive_poll(
                                keepalive,
                                now,
                                &mut action,
                                &mut until,
                                &mut reason,
                            ));
                            if rc == redlock_result::REDLOCK_OK {
                                assert!((1..=4).contains(&action));
                                assert_eq!(reason != 0, action == REDLOCK_KEEPALIVE_LOST);
                            }
                        }
                        1 => {
                            no_panic(redlock_keepalive_handle_failure(keepalive, now));
                        }
                        2 => {
                            no_panic(redlock_keepalive_stop(keepalive));
                        }
                        _ => {
                            let mut lease = ptr::null_mut();
                            if no_panic(redlock_keepalive_lease(keepalive, &mut lease))
                                == redlock_result::REDLOCK_OK
                            {
                                put(&mut self.leases, slot, lease, redlock_lease_free);
                            }
                        }
                    }
                    std::hint::black_box((
                        redlock_keepalive_lost_reason(keepalive),
                        redlock_keepalive_is_extending(keepalive),
                    ));
                }
                Call::Duplicate { addresses } => {
                    let (ptrs, lens) = arrays(&addresses);
                    let (mut found, mut first, mut second) = (false, 0usize, 0usize);
                    let rc = no_panic(redlock_duplicate_node(
                        ptrs.as_ptr(),
                        lens.as_ptr(),
                        ptrs.len(),
                        &mut found,
                        &mut first,
                        &mut second,
                    ));
                    if rc == redlock_result::REDLOCK_OK && found {
                        assert!(first < second && second < ptrs.len());
                    }
                }
                Call::Free { what, slot } => match what % KINDS {
                    0 => put(
                        &mut self.configs,
                        slot,
                        ptr::null_mut(),
                        redlock_config_free,
                    ),
                    1 => put(
                        &mut self.clients,
                        slot,
                        ptr::null_mut(),
                        redlock_client_free,
                    ),
                    2 => put(&mut self.ops, slot, ptr::null_mut(), redlock_operation_free),
                    3 => put(&mut self.leases, slot, ptr::null_mut(), redlock_lease_free),
                    4 => put(&mut self.replies, slot, ptr::null_mut(), redlock_reply_free),
                    5 => put(&mut self.links, slot, ptr::null_mut(), redlock_link_free),
                    6 => put(
                        &mut self.keepalives,
                        slot,
                        ptr::null_mut(),
                        redlock_keepalive_free,
                    ),
                    _ => put(
                        &mut self.decoders,
                        slot,
                        ptr::null_mut(),
                        redlock_decoder_free,
                    ),
                },
            }
        }
    }

    /// Polls an operation (at most `limit` outputs), reading each output fully.
    fn poll(&mut self, op_slot: u8, limit: u8, decline: Option<(u8, u32)>) {
        let op = get(&self.ops, op_slot);
        // SAFETY: `op` is NULL or a live handle owned by `self`; outputs are locals.
        unsafe {
            for _ in 0..limit {
                let mut kind = 0u32;
                if no_panic(redlock_operation_poll_output(op, &mut kind))
                    != redlock_result::REDLOCK_OK
                {
                    return;
                }
                match kind {
                    REDLOCK_OUTPUT_SEND => {
                        let (mut node, mut id, mut deadline, mut argc) = (0, 0, 0, 0);
                        assert_eq!(
                            redlock_operation_command(
                                op,
                                &mut node,
                                &mut id,
                                &mut deadline,
                                &mut argc
                            ),
                            redlock_result::REDLOCK_OK
                        );
                        let mut args = vec![ptr::null(); argc];
                        let mut lens = vec![0usize; argc];
                        let mut got = 0;
                        assert_eq!(
                            redlock_operation_command_args(
                                op,
                                args.as_mut_ptr(),
                                lens.as_mut_ptr(),
                                argc,
                                &mut got
                            ),
                            redlock_result::REDLOCK_OK
                        );
                        for (&arg, &len) in args.iter().zip(&lens) {
                            std::hint::black_box(std::slice::from_raw_parts(arg, len));
                        }
                        let (mut resp, mut resp_len) = (ptr::null(), 0);
                        assert_eq!(
                            redlock_operation_command_resp(op, &mut resp, &mut resp_len),
                            redlock_result::REDLOCK_OK
                        );
                        std::hint::black_box(std::slice::from_raw_parts(resp, resp_len));
                    }
                    REDLOCK_OUTPUT_WAIT => {
                        let mut until = 0;
                        assert_eq!(
                            redlock_operation_wait_until(op, &mut until),
                            redlock_result::REDLOCK_OK
                        );
                    }
                    REDLOCK_OUTPUT_OUTCOME => {
                        let mut outcome = ptr::null_mut();
                        assert_eq!(
                            redlock_operation_take_outcome(op, &mut outcome),
                            redlock_result::REDLOCK_OK
                        );
                        self.read_outcome(outcome, op_slot);
                        match decline {
                            // Consumed whatever the answer: never freed here as well.
                            Some((target, now)) => {
                                let target = get(&self.ops, target);
                                let result = redlock_operation_decline(target, outcome, now.into());
                                assert!(
                                    matches!(
                                        result,
                                        redlock_result::REDLOCK_OK
                                            | redlock_result::REDLOCK_FOREIGN_OUTCOME
                                            | redlock_result::REDLOCK_NULL_PARAMETER
                                    ),
                                    "{result:?}"
                                );
                                assert_eq!(
                                    result == redlock_result::REDLOCK_NULL_PARAMETER,
                                    target.is_null()
                                );
                            }
                            None => redlock_outcome_free(outcome),
                        }
                    }
                    _ => return,
                }
            }
        }
    }

    /// Polls a link (at most `limit` outputs), reading each output fully, and hands
    /// each delivery to the operation in the slot its tag names.
    fn poll_link(&mut self, link_slot: u8, limit: u8, now: u32) {
        let link = get(&self.links, link_slot);
        // SAFETY: `link` is NULL or a live handle owned by `self`; outputs are locals.
        unsafe {
            for _ in 0..limit {
                let mut kind = 0u32;
                if no_panic(redlock_link_poll_output(link, &mut kind)) != redlock_result::REDLOCK_OK
                {
                    return;
                }
                match kind {
                    REDLOCK_LINK_OUTPUT_WRITE => {
                        let (mut id, mut argc) = (0u64, 0usize);
                        assert_eq!(
                            redlock_link_write(link, &mut id, &mut argc),
                            redlock_result::REDLOCK_OK
                        );
                        let mut args = vec![ptr::null(); argc];
                        let mut lens = vec![0usize; argc];
                        let mut got = 0;
                        assert_eq!(
                            redlock_link_write_args(
                                link,
                                args.as_mut_ptr(),
                                lens.as_mut_ptr(),
                                argc,
                                &mut got
                            ),
                            redlock_result::REDLOCK_OK
                        );
                        for (&arg, &len) in args.iter().zip(&lens) {
                            std::hint::black_box(std::slice::from_raw_parts(arg, len));
                        }
                        let (mut resp, mut resp_len) = (ptr::null(), 0);
                        assert_eq!(
                            redlock_link_write_resp(link, &mut resp, &mut resp_len),
                            redlock_result::REDLOCK_OK
                        );
                        std::hint::black_box(std::slice::from_raw_parts(resp, resp_len));
                    }
                    REDLOCK_LINK_OUTPUT_DELIVER => {
                        let (mut tag, mut request, mut reply_kind) = (0u64, 0u64, 0u32);
                        let (mut integer, mut text, mut text_len) = (0i64, ptr::null(), 0usize);
                        assert_eq!(
                            redlock_link_delivery(
                                link,
                                &mut tag,
                                &mut request,
                                &mut reply_kind,
                                &mut integer,
                                &mut text,
                                &mut text_len
                            ),
                            redlock_result::REDLOCK_OK
                        );
                        std::hint::black_box(std::slice::from_raw_parts(text, text_len));
                        let mut reply = ptr::null_mut();
                        assert_eq!(
                            redlock_link_delivery_reply(link, &mut reply),
                            redlock_result::REDLOCK_OK
                        );
                        assert_eq!(redlock_reply_kind(reply), reply_kind);
                        redlock_reply_free(reply);
                        let op = get(&self.ops, tag as u8);
                        no_panic(redlock_operation_handle_delivery(op, link, u64::from(now)));
                    }
                    REDLOCK_LINK_OUTPUT_CONNECT | REDLOCK_LINK_OUTPUT_CLOSE => {}
                    _ => return,
                }
            }
        }
    }

    /// Reads every accessor of an outcome and keeps its lease, if any.
    ///
    /// # Safety
    /// `outcome` is a live outcome handle.
    unsafe fn read_outcome(&mut self, outcome: *mut redlock_outcome, slot: u8) {
        // SAFETY: `outcome` is live; every output is a local.
        unsafe {
            let (mut u32v, mut u64v, mut flag, mut size) = (0u32, 0u64, false, 0usize);
            let (mut bytes, mut len) = (ptr::null(), 0usize);
            redlock_outcome_kind(outcome);
            redlock_outcome_is_success(outcome);
            no_panic(redlock_outcome_reason(outcome, &mut u32v));
            if redlock_outcome_token(outcome, &mut bytes, &mut len) == redlock_result::REDLOCK_OK {
                std::hint::black_box(std::slice::from_raw_parts(bytes, len));
            }
            no_panic(redlock_outcome_valid_until(outcome, &mut u64v));
            no_panic(redlock_outcome_validity(outcome, &mut u64v));
            no_panic(redlock_outcome_attempts(outcome, &mut u32v));
            no_panic(redlock_outcome_extensions(outcome, &mut u32v));
            no_panic(redlock_outcome_retry_at(outcome, &mut flag, &mut u64v));
            no_panic(redlock_outcome_is_lost(outcome, &mut flag));
            no_panic(redlock_outcome_released(outcome, &mut size));
            let class = redlock_outcome_error_class(outcome);
            assert_eq!(class == 0, redlock_outcome_is_success(outcome));
            assert!(class == 0 || !redlock_error_class_name(class).is_null());
            for i in 0..=redlock_outcome_node_count(outcome) {
                if redlock_outcome_node_cause(outcome, i, &mut u32v) == redlock_result::REDLOCK_OK
                {
                    assert!(u32v == 0 || !redlock_node_cause_name(u32v).is_null());
                }
                if redlock_outcome_node(outcome, i, &mut u32v, &mut bytes, &mut len)
                    == redlock_result::REDLOCK_OK
                {
                    std::hint::black_box(std::slice::from_raw_parts(bytes, len));
                }
            }
            no_panic(redlock_keepalive_handle_outcome(
                get(&self.keepalives, slot),
                outcome,
                u64::from(u32::MAX),
            ));
            let mut lease = ptr::null_mut();
            if redlock_outcome_lease(outcome, &mut lease) == redlock_result::REDLOCK_OK {
                put(&mut self.leases, slot, lease, redlock_lease_free);
            }
        }
    }
}

impl Drop for State {
    fn drop(&mut self) {
        for slot in 0..SLOTS as u8 {
            for what in 0..KINDS {
                self.call(Call::Free { what, slot });
            }
        }
    }
}

fuzz_target!(|calls: Vec<Call>| {
    let mut state = State::default();
    for call in calls.into_iter().take(256) {
        state.call(call);
    }
});
