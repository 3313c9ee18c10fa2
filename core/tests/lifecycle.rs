//! The lock's lifecycle outside one operation: node links and keep-alive, as scenarios
//! on a virtual clock. Each test names the event sequence it checks.

use std::time::Duration;

use redlock_core::{
    Command, CommandKind, Config, Delivery, KeepAlive, KeepAliveAction, Lease, Link, LinkCause,
    LinkOutput, LostReason, Operation, Outcome, Output, Redlock, Reply, Time, UsageError, Write,
    WriteId, CONNECT_TIMEOUT_DEFAULT_MS, MAX_IN_FLIGHT, RECONNECT_MIN, STALL_CLOSE,
};

fn at(us: u64) -> Time {
    Time::from_micros(us)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn client(nodes: usize) -> Redlock {
    let config = Config::builder(nodes, ms(10_000)).build().unwrap();
    Redlock::with_seed(config, [3; 32])
}

/// Every command an operation outputs until its wait or outcome.
fn sends(op: &mut Operation) -> Vec<Command> {
    let mut out = Vec::new();
    while let Some(output) = op.poll_output() {
        match output {
            Output::Send(command) => out.push(command),
            Output::Wait(_) | Output::Outcome(_) => {}
            other => panic!("unknown output {other:?}"),
        }
    }
    out
}

#[derive(Debug, Default)]
struct Drained {
    connects: usize,
    closes: usize,
    writes: Vec<Write>,
    deliveries: Vec<Delivery>,
}

fn drain(link: &mut Link) -> Drained {
    let mut d = Drained::default();
    while let Some(output) = link.poll_output() {
        match output {
            LinkOutput::Connect => d.connects += 1,
            LinkOutput::Close => d.closes += 1,
            LinkOutput::Write(w) => d.writes.push(w),
            LinkOutput::Deliver(x) => d.deliveries.push(x),
            other => panic!("unknown output {other:?}"),
        }
    }
    d
}

fn name(write: &Write) -> String {
    let parts: Vec<String> = write
        .args()
        .take(2)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    parts.join(" ")
}

/// A link with an open connection whose script loads were answered.
fn open_link(now: u64) -> Link {
    let mut link = Link::new();
    link.handle_connected(at(now));
    let d = drain(&mut link);
    assert_eq!(d.writes.len(), 3);
    for w in d.writes {
        link.handle_reply(w.id(), Reply::Bulk(b"sha".to_vec()), at(now));
    }
    assert!(drain(&mut link).writes.is_empty());
    link
}

#[test]
fn scripts_are_loaded_first_on_every_connection() {
    let mut redlock = client(1);
    let mut op = redlock.acquire(&["r"], at(0)).unwrap();
    let set = sends(&mut op).remove(0);
    let mut link = Link::new();
    link.submit(1, set, at(0));
    let d = drain(&mut link);
    assert_eq!(d.connects, 1, "something to write opens a connection");
    assert!(
        d.writes.is_empty(),
        "nothing is written before the connection is ready"
    );
    link.handle_connected(at(100));
    let names: Vec<String> = drain(&mut link).writes.iter().map(name).collect();
    assert_eq!(
        names,
        ["SCRIPT LOAD", "SCRIPT LOAD", "SCRIPT LOAD", "SET r"],
        "the three scripts go before any command"
    );
    // The connection drops; the next connection loads the scripts again first.
    link.handle_closed(LinkCause::Closed, "reset by peer", at(200));
    let d = drain(&mut link);
    assert_eq!(
        d.deliveries.len(),
        1,
        "the SET in flight fails with the cause"
    );
    assert_eq!(
        d.deliveries[0].reply,
        Reply::ConnectionFailed("closed: reset by peer".into())
    );
    let lease = client(1).lease(&["r"], "tok", Time::ZERO).unwrap();
    let mut release = client(1).release(&lease, at(300));
    link.submit(2, sends(&mut release).remove(0), at(300));
    assert_eq!(
        drain(&mut link).connects,
        1,
        "re-opened at once: it was open before"
    );
    link.handle_connected(at(400));
    let names: Vec<String> = drain(&mut link).writes.iter().map(name).collect();
    assert_eq!(names[..3], ["SCRIPT LOAD", "SCRIPT LOAD", "SCRIPT LOAD"]);
    assert!(names[3].starts_with("EVALSHA"));
}

#[test]
fn the_writes_of_one_round_share_their_arguments() {
    let mut redlock = client(3);
    let mut links: Vec<Link> = (0..3).map(|_| open_link(0)).collect();
    let mut first = redlock.acquire(&["r"], at(10)).unwrap();
    for command in sends(&mut first) {
        let node = command.node();
        links[node].submit(1, command, at(10));
    }
    let writes: Vec<Write> = links
        .iter_mut()
        .map(|link| drain(link).writes.remove(0))
        .collect();
    assert!(writes[0].shares_args_with(&writes[1]));
    assert!(writes[1].shares_args_with(&writes[2]));
    // Another acquisition of the same resource: other arguments (its token).
    let mut second = redlock.acquire(&["r"], at(20)).unwrap();
    let command = sends(&mut second).remove(0);
    let node = command.node();
    links[node].submit(2, command, at(20));
    let other = drain(&mut links[node]).writes.remove(0);
    assert!(!other.shares_args_with(&writes[node]));
    assert!(other.args().ne(writes[node].args()));
}

#[test]
fn pending_outputs_counts_what_poll_output_gives() {
    let mut link = Link::new();
    assert_eq!(link.pending_outputs(), 0);
    link.handle_connected(at(0));
    assert_eq!(link.pending_outputs(), 3, "the three script loads");
    let mut polled = 0;
    while link.poll_output().is_some() {
        polled += 1;
        assert_eq!(link.pending_outputs(), 3 - polled);
    }
    assert_eq!(polled, 3);
}

#[test]
fn commands_keep_their_order_and_the_in_flight_bound() {
    let mut link = open_link(0);
    let mut redlock = client(1);
    for tag in 0..(MAX_IN_FLIGHT as u64 + 10) {
        let mut op = redlock.acquire(&[format!("r{tag}")], at(10)).unwrap();
        link.submit(tag, sends(&mut op).remove(0), at(10));
    }
    let d = drain(&mut link);
    assert_eq!(d.writes.len(), MAX_IN_FLIGHT, "the rest wait in the queue");
    assert_eq!(link.queued(), 10);
    // Answering the first frees a place for the next, in order.
    link.handle_reply(d.writes[0].id(), Reply::Ok, at(20));
    let next = drain(&mut link);
    assert_eq!(next.deliveries.len(), 1);
    assert_eq!(next.deliveries[0].tag, 0);
    assert_eq!(next.writes.len(), 1);
    assert_eq!(
        next.writes[0].arg(1),
        Some(format!("r{}", MAX_IN_FLIGHT).as_bytes())
    );
}

#[test]
fn a_stalled_node_gets_nothing_new_but_the_releases_it_owes() {
    // One node frozen: the SET of an acquisition is written and never answered.
    let mut link = open_link(0);
    let mut redlock = client(1);
    let mut op = redlock.acquire(&["owed"], at(1_000)).unwrap();
    let set = sends(&mut op).remove(0);
    let deadline = set.deadline();
    link.submit(7, set, at(1_000));
    let set_write = drain(&mut link).writes.remove(0);
    assert!(!link.is_stalled(at(1_000)));
    assert_eq!(
        link.poll_timeout(),
        Some(deadline),
        "the link watches the deadline"
    );
    link.handle_timeout(deadline);
    assert!(link.is_stalled(deadline));

    // A new acquisition for the stalled node fails at once, unwritten.
    let mut other = redlock.acquire(&["new"], deadline).unwrap();
    link.submit(8, sends(&mut other).remove(0), deadline);
    let d = drain(&mut link);
    assert!(d.writes.is_empty());
    assert_eq!(d.deliveries.len(), 1);
    let Reply::ConnectionFailed(text) = &d.deliveries[0].reply else {
        panic!("{:?}", d.deliveries[0].reply)
    };
    assert!(text.starts_with("stalled:"), "{text}");

    // The failed acquisition's release is owed (its SET is out): it is written at once,
    // behind the SET on the same connection, so that the node runs it right after the
    // SET when it thaws, whether or not the driver runs then.
    op.handle_timeout(deadline);
    let release = sends(&mut op).remove(0);
    assert_eq!(release.kind(), CommandKind::Release);
    link.submit(7, release, deadline);
    let d = drain(&mut link);
    assert!(d.deliveries.is_empty());
    assert_eq!(d.writes.len(), 1);
    assert!(name(&d.writes[0]).starts_with("EVALSHA"));
    let release_write = d.writes[0].clone();
    assert_eq!(link.queued(), 0);
    assert_eq!(link.in_flight(), 2);

    // Many more cycles while frozen add nothing: the link stays bounded.
    for i in 0..500u64 {
        let now = deadline.as_micros() + 1 + i;
        let mut op = redlock.acquire(&[format!("x{i}")], at(now)).unwrap();
        link.submit(100 + i, sends(&mut op).remove(0), at(now));
        assert_eq!(drain(&mut link).deliveries.len(), 1);
    }
    assert_eq!(link.queued(), 0);
    assert_eq!(link.in_flight(), 2);

    // The node thaws: the late SET reply comes, then the release's, both delivered.
    let thaw = at(deadline.as_micros() + 10_000);
    link.handle_reply(set_write.id(), Reply::Ok, thaw);
    let d = drain(&mut link);
    assert_eq!(
        d.deliveries.len(),
        1,
        "the late reply still goes to its operation"
    );
    assert!(d.writes.is_empty());
    link.handle_reply(release_write.id(), Reply::Integer(1), thaw);
    assert_eq!(drain(&mut link).deliveries.len(), 1);
    assert!(!link.is_stalled(thaw), "every write is answered");
}

#[test]
fn a_release_queued_behind_its_own_set_is_owed() {
    // A node slow to answer fills the bound in flight; an acquisition's SET waits in the
    // queue, and its failed attempt's release queues behind it. The SET goes out when a
    // place frees; the release must then never be dropped at its deadline, or the key
    // stays its whole TTL on a node that answered (seen with Jedis under load).
    let mut link = open_link(0);
    let mut redlock = client(1);
    for tag in 0..MAX_IN_FLIGHT as u64 {
        let mut op = redlock.acquire(&[format!("busy{tag}")], at(10)).unwrap();
        link.submit(tag, sends(&mut op).remove(0), at(10));
    }
    let busy = drain(&mut link).writes;
    assert_eq!(busy.len(), MAX_IN_FLIGHT);
    let mut op = redlock.acquire(&["queued"], at(20)).unwrap();
    let set = sends(&mut op).remove(0);
    let token = String::from_utf8(set.token().to_vec()).unwrap();
    link.submit(1_000, set, at(20));
    // The acquisition failed on the other nodes meanwhile: its release comes at once.
    let lease = redlock.lease(&["queued"], &token, Time::ZERO).unwrap();
    let mut release_op = redlock.release(&lease, at(25));
    let release = sends(&mut release_op).remove(0);
    assert_eq!(release.kind(), CommandKind::Release);
    let release_deadline = release.deadline();
    link.submit(1_001, release, at(25));
    assert!(drain(&mut link).writes.is_empty());
    assert_eq!(link.queued(), 2);
    // One place frees before the SET's deadline: the SET is written, the release waits.
    link.handle_reply(busy[0].id(), Reply::Ok, at(30));
    let d = drain(&mut link);
    assert_eq!(d.writes.len(), 1);
    assert_eq!(d.writes[0].arg(1), Some(&b"queued"[..]));
    // Past the release's deadline, the node still slow: the release is kept.
    link.handle_timeout(release_deadline);
    let _ = drain(&mut link);
    assert_eq!(link.queued(), 1, "the owed release is not dropped");
    // The node answers: the release is written.
    let thaw = at(release_deadline.as_micros() + 1_000);
    for write in &busy[1..] {
        link.handle_reply(write.id(), Reply::Ok, thaw);
    }
    let d = drain(&mut link);
    assert!(
        d.writes
            .iter()
            .any(|w| name(w).starts_with("EVALSHA") && w.arg(3) == Some(&b"queued"[..])),
        "the release of the SET written late goes out"
    );
}

#[test]
fn a_release_whose_queued_set_is_dropped_unwritten_is_owed_nothing() {
    // The same queue, but no place frees before the SET's deadline: the SET is dropped
    // unwritten, so its key cannot be set, and the release behind it goes too at its
    // deadline. Nothing piles up for a node that stays frozen.
    let mut link = open_link(0);
    let mut redlock = client(1);
    for tag in 0..MAX_IN_FLIGHT as u64 {
        let mut op = redlock.acquire(&[format!("busy{tag}")], at(10)).unwrap();
        link.submit(tag, sends(&mut op).remove(0), at(10));
    }
    let busy = drain(&mut link).writes;
    let mut op = redlock.acquire(&["never"], at(20)).unwrap();
    let set = sends(&mut op).remove(0);
    let token = String::from_utf8(set.token().to_vec()).unwrap();
    link.submit(1_000, set, at(20));
    let lease = redlock.lease(&["never"], &token, Time::ZERO).unwrap();
    let mut release_op = redlock.release(&lease, at(25));
    let release = sends(&mut release_op).remove(0);
    let release_deadline = release.deadline();
    link.submit(1_001, release, at(25));
    assert_eq!(link.queued(), 2);
    link.handle_timeout(release_deadline);
    let _ = drain(&mut link);
    assert_eq!(link.queued(), 0, "neither the SET nor its release is kept");
    assert_eq!(
        link.owed(),
        MAX_IN_FLIGHT,
        "only the SETs written are owed their releases"
    );
    let thaw = at(release_deadline.as_micros() + 1_000);
    for write in &busy {
        link.handle_reply(write.id(), Reply::Ok, thaw);
    }
    assert!(
        drain(&mut link).writes.is_empty(),
        "nothing is written late"
    );
}

#[test]
fn a_release_answered_noscript_is_written_again_as_eval() {
    // A node restarted empty behind a client library that replayed our command before
    // the scripts were loaded: the release must still delete the key.
    let mut link = open_link(0);
    let lease = client(1).lease(&["r"], "tok", Time::ZERO).unwrap();
    let mut release = client(1).release(&lease, at(10));
    link.submit(3, sends(&mut release).remove(0), at(10));
    let first = drain(&mut link).writes.remove(0);
    link.handle_reply(
        first.id(),
        Reply::Error("NOSCRIPT No matching script. Please use EVAL.".into()),
        at(20),
    );
    let d = drain(&mut link);
    assert!(
        d.deliveries.is_empty(),
        "the NOSCRIPT is the link's own business"
    );
    assert_eq!(d.writes.len(), 1);
    assert_eq!(d.writes[0].arg(0), Some(&b"EVAL"[..]));
    link.handle_reply(d.writes[0].id(), Reply::Integer(1), at(30));
    let d = drain(&mut link);
    assert_eq!(d.deliveries.len(), 1);
    assert_eq!(d.deliveries[0].reply, Reply::Integer(1));
}

#[test]
fn an_acquisition_answered_noscript_goes_to_its_operation() {
    let mut link = open_link(0);
    let mut redlock = client(1);
    let mut op = redlock.acquire(&["a", "b"], at(10)).unwrap();
    link.submit(1, sends(&mut op).remove(0), at(10));
    let write = drain(&mut link).writes.remove(0);
    link.handle_reply(write.id(), Reply::Error("NOSCRIPT x".into()), at(20));
    let d = drain(&mut link);
    assert!(
        d.writes.is_empty(),
        "an acquisition is never written twice by the link"
    );
    assert_eq!(d.deliveries.len(), 1);
}

#[test]
fn releases_survive_a_closed_connection_other_commands_fail() {
    let mut link = open_link(0);
    let mut redlock = client(1);
    let mut op = redlock.acquire(&["r"], at(10)).unwrap();
    link.submit(1, sends(&mut op).remove(0), at(10));
    let lease = redlock.lease(&["z"], "tok", Time::ZERO).unwrap();
    let mut release = redlock.release(&lease, at(10));
    link.submit(2, sends(&mut release).remove(0), at(10));
    assert_eq!(drain(&mut link).writes.len(), 2);
    link.handle_closed(LinkCause::Closed, "EOF", at(20));
    let d = drain(&mut link);
    assert_eq!(d.deliveries.len(), 1, "the SET fails; it is never resent");
    assert_eq!(d.deliveries[0].tag, 1);
    assert_eq!(
        d.connects, 1,
        "the release is queued for the next connection"
    );
    link.handle_connected(at(30));
    let names: Vec<String> = drain(&mut link).writes.iter().map(name).collect();
    assert_eq!(names.len(), 4);
    assert!(names[3].starts_with("EVALSHA"));
}

#[test]
fn a_refused_node_fails_fast_and_reconnects_with_backoff() {
    let mut link = Link::new();
    let mut redlock = client(1);
    let mut op = redlock.acquire(&["r"], at(0)).unwrap();
    link.submit(1, sends(&mut op).remove(0), at(0));
    assert_eq!(drain(&mut link).connects, 1);
    link.handle_closed(LinkCause::Refused, "ECONNREFUSED 127.0.0.1:1", at(100));
    let d = drain(&mut link);
    assert_eq!(
        d.deliveries.len(),
        1,
        "queued commands fail with the cause at once"
    );
    assert_eq!(
        d.deliveries[0].reply,
        Reply::ConnectionFailed("refused: ECONNREFUSED 127.0.0.1:1".into())
    );
    // During the backoff a new command fails at once, without a connection attempt.
    let mut op2 = redlock.acquire(&["s"], at(200)).unwrap();
    link.submit(2, sends(&mut op2).remove(0), at(200));
    let d = drain(&mut link);
    assert_eq!(d.connects, 0);
    assert_eq!(d.deliveries.len(), 1);
    // After it, a command opens a connection again.
    let later = 100 + RECONNECT_MIN.as_micros() as u64;
    let mut op3 = redlock.acquire(&["t"], at(later)).unwrap();
    link.submit(3, sends(&mut op3).remove(0), at(later));
    assert_eq!(drain(&mut link).connects, 1);
}

#[test]
fn a_connection_that_never_opens_is_given_up_after_the_connect_timeout() {
    // A node whose address never answers (black-holed): the attempt is the link's to give
    // up, so no driver needs a timer of its own.
    let mut link = Link::new();
    let timeout = CONNECT_TIMEOUT_DEFAULT_MS * 1000;
    assert_eq!(link.connect_timeout(), ms(CONNECT_TIMEOUT_DEFAULT_MS));
    let mut redlock = client(1);
    let mut op = redlock.acquire(&["r"], at(0)).unwrap();
    link.submit(1, sends(&mut op).remove(0), at(0));
    assert_eq!(drain(&mut link).connects, 1);
    // Due at the timeout at the latest (earlier: the SET's own deadline).
    assert!(link.poll_timeout().is_some_and(|t| t <= at(timeout)));
    link.handle_timeout(at(timeout - 1));
    let d = drain(&mut link);
    assert_eq!(
        (d.connects, d.closes),
        (0, 0),
        "one microsecond early: still trying"
    );
    assert_eq!(link.poll_timeout(), Some(at(timeout)));
    link.handle_timeout(at(timeout));
    let d = drain(&mut link);
    assert_eq!(d.closes, 1, "the attempt is given up");
    assert!(
        d.deliveries.is_empty(),
        "the SET was dropped at its own deadline"
    );
    // It counts as a failed attempt with `timeout`: during the backoff a command fails
    // at once with that cause, without a new attempt.
    let mut op2 = redlock.acquire(&["s"], at(timeout + 10)).unwrap();
    link.submit(2, sends(&mut op2).remove(0), at(timeout + 10));
    let d = drain(&mut link);
    assert_eq!(d.connects, 0);
    assert_eq!(
        d.deliveries[0].reply,
        Reply::ConnectionFailed("timeout: no connection within 2000 ms; given up".into())
    );
    // A report of the abandoned attempt's failure changes nothing.
    link.handle_closed(LinkCause::Refused, "late", at(timeout + 20));
    assert!(drain(&mut link).deliveries.is_empty());
    // After the backoff the next command opens a connection, with a fresh limit.
    let later = timeout + RECONNECT_MIN.as_micros() as u64;
    let mut op3 = redlock.acquire(&["t"], at(later)).unwrap();
    link.submit(3, sends(&mut op3).remove(0), at(later));
    assert_eq!(drain(&mut link).connects, 1);
    link.handle_timeout(at(later + timeout - 1));
    assert_eq!(drain(&mut link).closes, 0);
    link.handle_connected(at(later + timeout - 1));
    assert!(link.is_open());
    link.handle_timeout(at(later + 2 * timeout));
    assert_eq!(
        drain(&mut link).closes,
        0,
        "an open connection has no connect limit"
    );
}

#[test]
fn an_owed_release_outlives_connection_attempts_that_time_out() {
    // The user's client's own connect timeout replaces the core's.
    let mut link = Link::with_connect_timeout(ms(500));
    assert_eq!(link.connect_timeout(), ms(500));
    link.handle_connected(at(0));
    let _ = drain(&mut link);
    let mut redlock = client(1);
    let mut op = redlock.acquire(&["r"], at(0)).unwrap();
    link.submit(1, sends(&mut op).remove(0), at(0));
    let _ = drain(&mut link);
    link.handle_closed(LinkCause::Closed, "reset", at(10));
    let _ = drain(&mut link);
    // The SET was written, so its release is owed: it waits through failed attempts.
    let lease = redlock.lease(&["r"], op.token().as_str(), at(0)).unwrap();
    let mut release = redlock.release(&lease, at(20));
    link.submit(2, sends(&mut release).remove(0), at(20));
    assert_eq!(drain(&mut link).connects, 1);
    link.handle_timeout(at(20 + 500_000));
    let d = drain(&mut link);
    assert_eq!(d.closes, 1);
    assert!(d.deliveries.is_empty(), "the owed release waits");
    assert_eq!(link.queued(), 1);
    let retry = 20 + 500_000 + RECONNECT_MIN.as_micros() as u64;
    assert_eq!(link.poll_timeout(), Some(at(retry)));
    link.handle_timeout(at(retry));
    assert_eq!(
        drain(&mut link).connects,
        1,
        "tried again after the backoff"
    );
    link.handle_connected(at(retry + 1000));
    let names: Vec<String> = drain(&mut link).writes.iter().map(name).collect();
    assert!(names[3].starts_with("EVALSHA"), "{names:?}");
    // Less than a millisecond counts as one.
    link.set_connect_timeout(Duration::ZERO);
    assert_eq!(link.connect_timeout(), ms(1));
}

#[test]
fn commands_past_their_deadline_are_not_written() {
    let mut link = Link::new();
    let mut redlock = client(1);
    let mut op = redlock.acquire(&["r"], at(0)).unwrap();
    let set = sends(&mut op).remove(0);
    let deadline = set.deadline();
    link.submit(1, set, at(0));
    let _ = drain(&mut link);
    // The connection is ready only after the SET's deadline: it is dropped unwritten.
    link.handle_connected(deadline);
    let names: Vec<String> = drain(&mut link).writes.iter().map(name).collect();
    assert_eq!(names, ["SCRIPT LOAD", "SCRIPT LOAD", "SCRIPT LOAD"]);
    assert_eq!(link.queued(), 0);
    assert_eq!(link.in_flight(), 3, "only the script loads are out");
}

#[test]
fn a_node_stalled_too_long_has_its_connection_closed() {
    let mut link = open_link(0);
    let mut redlock = client(1);
    let mut op = redlock.acquire(&["r"], at(0)).unwrap();
    let set = sends(&mut op).remove(0);
    let deadline = set.deadline();
    link.submit(1, set, at(0));
    let _ = drain(&mut link);
    link.handle_timeout(deadline);
    assert_eq!(
        link.poll_timeout(),
        Some(deadline.saturating_add(STALL_CLOSE))
    );
    link.handle_timeout(deadline.saturating_add(STALL_CLOSE));
    let d = drain(&mut link);
    assert_eq!(d.closes, 1);
    assert_eq!(d.deliveries.len(), 1, "the SET fails with the close");
    assert!(!link.is_open());
    // A reply on the old connection is ignored.
    link.handle_reply(WriteId(4), Reply::Ok, deadline.saturating_add(STALL_CLOSE));
    assert!(drain(&mut link).deliveries.is_empty());
}

// ---- keep-alive -----------------------------------------------------------------------

fn acquired(redlock: &mut Redlock, now: u64) -> (Lease, Outcome) {
    let mut op = redlock.acquire(&["k"], at(now)).unwrap();
    let commands = sends(&mut op);
    let mut outcome = None;
    for c in &commands {
        op.handle_reply(c.request_id(), Reply::Ok, at(now + 100))
            .unwrap();
        while let Some(output) = op.poll_output() {
            if let Output::Outcome(o) = output {
                outcome = Some(o);
            }
        }
    }
    let outcome = outcome.unwrap();
    (outcome.lease().unwrap().clone(), outcome)
}

/// Runs an extension of `lease` at `now`, every node answering `reply`.
fn extension(redlock: &Redlock, lease: &Lease, now: u64, reply: Reply) -> Outcome {
    let mut op = redlock.extend(lease, at(now)).unwrap();
    let commands = sends(&mut op);
    for c in &commands {
        op.handle_reply(c.request_id(), reply.clone(), at(now + 100))
            .unwrap();
        while let Some(output) = op.poll_output() {
            if let Output::Outcome(o) = output {
                return o;
            }
        }
    }
    op.handle_timeout(at(now + 1_000_000));
    loop {
        match op.poll_output() {
            Some(Output::Outcome(o)) => return o,
            Some(_) => {}
            None => panic!("no outcome"),
        }
    }
}

#[test]
fn keep_alive_extends_on_schedule_and_keeps_the_lock() {
    let mut redlock = client(3);
    let (lease, _) = acquired(&mut redlock, 0);
    let mut keep = KeepAlive::new(redlock.config(), lease.clone());
    let due = redlock.config().next_extension(&lease, at(200)).unwrap();
    assert_eq!(keep.poll(at(200)), KeepAliveAction::WaitUntil(due));
    assert_eq!(keep.poll(due), KeepAliveAction::Extend);
    assert!(keep.is_extending());
    let outcome = extension(&redlock, keep.lease(), due.as_micros(), Reply::Integer(1));
    keep.handle_outcome(&outcome, at(due.as_micros() + 100));
    assert!(keep.lease().valid_until() > lease.valid_until());
    assert_eq!(keep.lease().extensions(), 1);
    assert!(matches!(
        keep.poll(at(due.as_micros() + 100)),
        KeepAliveAction::WaitUntil(_)
    ));
}

#[test]
fn keep_alive_retries_failing_nodes_until_the_lease_ends() {
    let mut redlock = client(3);
    let (lease, _) = acquired(&mut redlock, 0);
    let mut keep = KeepAlive::new(redlock.config(), lease.clone());
    let mut now = redlock.config().next_extension(&lease, at(0)).unwrap();
    let mut attempts = 0;
    loop {
        match keep.poll(now) {
            KeepAliveAction::Extend => {
                attempts += 1;
                // Every node times out: nodes failed, the lock still holds.
                let outcome = extension(&redlock, keep.lease(), now.as_micros(), Reply::Timeout);
                assert!(!outcome.is_success());
                keep.handle_outcome(&outcome, now);
            }
            KeepAliveAction::WaitUntil(t) => {
                assert!(t > now || t == keep.lease().valid_until());
                now = t.max(now);
                if now >= keep.lease().valid_until() {
                    assert_eq!(keep.poll(now), KeepAliveAction::Lost(LostReason::Expired));
                    break;
                }
            }
            other => panic!("{other:?} before the lease ended"),
        }
        assert!(attempts < 100, "retries are bounded by the lease");
    }
    assert!(
        attempts > 1,
        "a failed extension is retried while a round fits"
    );
    assert!(
        now >= lease.valid_until(),
        "never lost before its validity ran out"
    );
}

#[test]
fn a_driver_failure_is_the_same_policy_as_failing_nodes() {
    let mut redlock = client(3);
    let (lease, _) = acquired(&mut redlock, 0);
    let mut keep = KeepAlive::new(redlock.config(), lease.clone());
    let due = redlock.config().next_extension(&lease, at(0)).unwrap();
    assert_eq!(keep.poll(due), KeepAliveAction::Extend);
    keep.handle_failure(due);
    assert!(
        keep.lost().is_none(),
        "a driver error does not lose a valid lock"
    );
    let KeepAliveAction::WaitUntil(retry) = keep.poll(due) else {
        panic!("expected a retry")
    };
    assert!(retry > due && retry < lease.valid_until());
    assert_eq!(keep.poll(retry), KeepAliveAction::Extend);
}

#[test]
fn keep_alive_knows_taken_from_gone() {
    for (reply, reason) in [
        (Reply::Integer(-1), LostReason::Taken),
        (Reply::Integer(0), LostReason::NotHeld),
    ] {
        let mut redlock = client(3);
        let (lease, _) = acquired(&mut redlock, 0);
        let mut keep = KeepAlive::new(redlock.config(), lease.clone());
        let due = redlock.config().next_extension(&lease, at(0)).unwrap();
        assert_eq!(keep.poll(due), KeepAliveAction::Extend);
        let outcome = extension(&redlock, keep.lease(), due.as_micros(), reply);
        keep.handle_outcome(&outcome, due);
        assert_eq!(keep.poll(due), KeepAliveAction::Lost(reason));
        // Lost is final, whatever comes after.
        let later = extension(&redlock, &lease, due.as_micros(), Reply::Integer(1));
        keep.handle_outcome(&later, due);
        assert_eq!(keep.lost(), Some(reason));
    }
}

#[test]
fn keep_alive_honours_the_extension_bound() {
    let config = Config::builder(1, ms(1000))
        .max_extensions(Some(1))
        .build()
        .unwrap();
    let mut redlock = Redlock::with_seed(config, [5; 32]);
    let (lease, _) = acquired(&mut redlock, 0);
    let mut keep = KeepAlive::new(redlock.config(), lease.clone());
    let due = redlock.config().next_extension(&lease, at(0)).unwrap();
    assert_eq!(keep.poll(due), KeepAliveAction::Extend);
    let outcome = extension(&redlock, keep.lease(), due.as_micros(), Reply::Integer(1));
    keep.handle_outcome(&outcome, due);
    let end = keep.lease().valid_until();
    assert_eq!(keep.poll(due), KeepAliveAction::WaitUntil(end));
    assert_eq!(
        keep.poll(end),
        KeepAliveAction::Lost(LostReason::ExtensionLimit)
    );
}

#[test]
fn an_extension_that_outlives_the_lease_does_not_revive_it() {
    let mut redlock = client(3);
    let (lease, _) = acquired(&mut redlock, 0);
    let mut keep = KeepAlive::new(redlock.config(), lease.clone());
    let due = redlock.config().next_extension(&lease, at(0)).unwrap();
    assert_eq!(keep.poll(due), KeepAliveAction::Extend);
    let end = lease.valid_until();
    assert_eq!(keep.poll(end), KeepAliveAction::Lost(LostReason::Expired));
    let outcome = extension(&redlock, &lease, due.as_micros(), Reply::Integer(1));
    keep.handle_outcome(&outcome, end);
    assert_eq!(keep.lost(), Some(LostReason::Expired));
    keep.stop();
    assert_eq!(keep.poll(end), KeepAliveAction::Lost(LostReason::Expired));
}

#[test]
fn stop_is_final() {
    let mut redlock = client(1);
    let (lease, _) = acquired(&mut redlock, 0);
    let mut keep = KeepAlive::new(redlock.config(), lease);
    keep.stop();
    assert_eq!(keep.poll(at(1)), KeepAliveAction::Stopped);
}

#[test]
fn an_acquisition_names_its_notice_channels_while_it_runs() {
    let config = Config::builder(3, Duration::from_secs(10))
        .key_prefix(b"app:".to_vec())
        .build()
        .unwrap();
    let mut redlock = Redlock::with_seed(config, [3; 32]);
    let mut op = redlock
        .acquire(&["a", "b"], Time::from_micros(1_000))
        .unwrap();
    assert_eq!(
        op.notice_channels(),
        vec![
            b"redlock:released:app:a".to_vec(),
            b"redlock:released:app:b".to_vec()
        ]
    );
    op.abandon(Time::from_micros(2_000));
    assert!(op.notice_channels().is_empty());
}

#[test]
fn a_fenced_acquisition_on_a_stalled_node_is_owed_its_release_too() {
    // The fenced acquisition script sets the lock key just as SET does: when its node
    // stalls, the release of that attempt must still go out once the node thaws.
    let mut link = open_link(0);
    let config = Config::builder(1, ms(10_000))
        .fencing(true)
        .build()
        .unwrap();
    let mut redlock = Redlock::with_seed(config, [5; 32]);
    let mut op = redlock.acquire(&["fenced"], at(1_000)).unwrap();
    let script = sends(&mut op).remove(0);
    assert_eq!(script.kind(), CommandKind::FencedAcquire);
    let deadline = script.deadline();
    link.submit(1, script, at(1_000));
    // The fencing scripts are loaded first, then the command.
    let mut writes = drain(&mut link).writes;
    assert_eq!(writes.len(), 3);
    let script_write = writes.remove(2);
    let loads = writes;
    link.handle_timeout(deadline);
    assert!(link.is_stalled(deadline));

    op.handle_timeout(deadline);
    let release = sends(&mut op).remove(0);
    assert_eq!(release.kind(), CommandKind::Release);
    link.submit(1, release, deadline);
    let d = drain(&mut link);
    assert!(
        d.deliveries.is_empty(),
        "an owed release is not failed as stalled"
    );
    // Written at once, behind the fenced acquisition on the same connection.
    assert_eq!(d.writes.len(), 1);
    assert!(name(&d.writes[0]).starts_with("EVALSHA"));
    assert_eq!(link.queued(), 0);
    let thaw = at(deadline.as_micros() + 5_000);
    for load in &loads {
        link.handle_reply(load.id(), Reply::Bulk(b"sha".to_vec()), thaw);
    }
    link.handle_reply(script_write.id(), Reply::Integer(1), thaw);
    let d = drain(&mut link);
    assert!(d.writes.is_empty());
}

#[test]
fn a_connection_loads_the_fencing_scripts_before_its_first_fenced_command() {
    let mut link = open_link(0);
    let config = Config::builder(1, ms(10_000))
        .fencing(true)
        .build()
        .unwrap();
    let mut redlock = Redlock::with_seed(config, [6; 32]);
    let mut first = redlock.acquire(&["f1"], at(1_000)).unwrap();
    link.submit(1, sends(&mut first).remove(0), at(1_000));
    let names: Vec<String> = drain(&mut link).writes.iter().map(name).collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert_eq!(names[..2], ["SCRIPT LOAD", "SCRIPT LOAD"]);
    assert!(names[2].starts_with("EVALSHA"));
    // Not again on the same connection; again on the next one.
    let mut second = redlock.acquire(&["f2"], at(2_000)).unwrap();
    link.submit(2, sends(&mut second).remove(0), at(2_000));
    assert_eq!(drain(&mut link).writes.len(), 1);
    link.handle_closed(LinkCause::Closed, "reset", at(3_000));
    let _ = drain(&mut link);
    link.handle_connected(at(4_000));
    let mut third = redlock.acquire(&["f3"], at(4_000)).unwrap();
    link.submit(3, sends(&mut third).remove(0), at(4_000));
    let names: Vec<String> = drain(&mut link).writes.iter().map(name).collect();
    assert_eq!(
        names.iter().filter(|n| n.as_str() == "SCRIPT LOAD").count(),
        5,
        "{names:?}"
    );
}

/// What `op` outputs after an abandon or a decline: only the release of `token` on the
/// key of `orders`, one per node of `nodes`, in node order.
fn releases_to_every_node(op: &mut Operation, token: &[u8], nodes: usize) -> Vec<Command> {
    let releases: Vec<Command> = std::iter::from_fn(|| match op.poll_output() {
        Some(Output::Send(command)) => Some(command),
        Some(other) => panic!("only the releases follow, got {other:?}"),
        None => None,
    })
    .collect();
    assert_eq!(releases.len(), nodes);
    for (node, release) in releases.iter().enumerate() {
        assert_eq!(release.node(), node);
        assert_eq!(release.kind(), CommandKind::Release);
        assert_eq!(release.token(), token);
        // EVALSHA <sha> 1 orders <token>: the key the lease had taken.
        assert_eq!(release.arg(3), Some(&b"orders"[..]));
    }
    releases
}

#[test]
fn an_acquisition_abandoned_before_its_outcome_was_polled_releases_its_keys() {
    // A driver that hands replies in and is cancelled before it polls the outcome (its
    // caller never got the lock): the keys must not stay until their TTL.
    let mut redlock = client(3);
    let mut op = redlock.acquire(&["orders"], at(1_000)).unwrap();
    let sets = sends(&mut op);
    let token = sets[0].token().to_vec();
    for set in &sets {
        op.handle_reply(set.request_id(), Reply::Ok, at(1_100))
            .unwrap();
    }
    op.abandon(at(1_200));
    releases_to_every_node(&mut op, &token, 3);
    assert!(op.is_finished());

    // Once the outcome was polled, the lock is its holder's: abandoning changes nothing.
    let (mut op, _) = polled_acquisition(&mut redlock, "orders", 2_000);
    op.abandon(at(2_200));
    assert!(op.poll_output().is_none());
}

/// An acquisition that reached "acquired" on every node, polled to its outcome.
fn polled_acquisition(redlock: &mut Redlock, resource: &str, now: u64) -> (Operation, Outcome) {
    let mut op = redlock.acquire(&[resource], at(now)).unwrap();
    for set in sends(&mut op) {
        op.handle_reply(set.request_id(), Reply::Ok, at(now + 100))
            .unwrap();
    }
    match op.poll_output() {
        Some(Output::Outcome(outcome @ Outcome::Acquired(_))) => (op, outcome),
        other => panic!("expected the lock, got {other:?}"),
    }
}

#[test]
fn an_acquired_outcome_that_reached_no_caller_is_given_back_and_released() {
    // A driver polls outcomes on its own thread; the caller was interrupted as the lock
    // was decided, so the outcome it polled reaches nobody. Given back, the core releases
    // the lock on every node, as for an outcome never polled.
    let mut redlock = client(3);
    let (mut op, outcome) = polled_acquisition(&mut redlock, "orders", 1_000);
    let token = outcome.lease().unwrap().token().as_bytes().to_vec();
    op.decline(outcome, at(1_300)).unwrap();
    let releases = releases_to_every_node(&mut op, &token, 3);
    // Their replies are taken and change nothing; no outcome follows.
    for release in &releases {
        op.handle_reply(release.request_id(), Reply::Integer(1), at(1_400))
            .unwrap();
    }
    assert!(op.poll_output().is_none());
    assert!(op.is_finished());
}

#[test]
fn an_outcome_is_given_back_only_to_the_operation_that_handed_it_out() {
    let mut redlock = client(3);
    let (mut first, first_outcome) = polled_acquisition(&mut redlock, "orders", 1_000);
    let (mut second, second_outcome) = polled_acquisition(&mut redlock, "orders", 5_000);

    // Another acquisition's lock: refused, nothing sent, the operation unchanged.
    assert_eq!(
        first.decline(second_outcome.clone(), at(6_000)),
        Err(UsageError::ForeignOutcome)
    );
    assert!(first.poll_output().is_none());

    // Another kind of operation's outcome.
    let lease = first_outcome.lease().unwrap().clone();
    let mut release = redlock.release(&lease, at(6_100));
    for command in sends(&mut release) {
        release
            .handle_reply(command.request_id(), Reply::Integer(1), at(6_200))
            .unwrap();
    }
    let Some(Output::Outcome(released)) = release.poll_output() else {
        panic!("the release decides once every node confirmed");
    };
    assert_eq!(
        first.decline(released.clone(), at(6_300)),
        Err(UsageError::ForeignOutcome)
    );
    // The release's own outcome: nothing to undo, nothing sent.
    release.decline(released.clone(), at(6_300)).unwrap();
    assert!(release.poll_output().is_none());
    // Given back once only.
    assert_eq!(
        release.decline(released, at(6_400)),
        Err(UsageError::ForeignOutcome)
    );

    // Before its outcome was polled, there is nothing handed out to give back.
    let mut third = redlock.acquire(&["orders"], at(7_000)).unwrap();
    let sets = sends(&mut third);
    assert_eq!(
        third.decline(first_outcome.clone(), at(7_100)),
        Err(UsageError::ForeignOutcome)
    );
    assert_eq!(sends(&mut third).len(), 0, "nothing more to send: {sets:?}");

    // The first acquisition's own outcome is taken back once.
    first.decline(first_outcome.clone(), at(8_000)).unwrap();
    assert_eq!(sends(&mut first).len(), 3);
    assert_eq!(
        first.decline(first_outcome, at(8_100)),
        Err(UsageError::ForeignOutcome)
    );
    second.decline(second_outcome, at(8_200)).unwrap();
    assert_eq!(sends(&mut second).len(), 3);
}

#[test]
fn a_failed_acquisition_given_back_cannot_stand_for_a_lock_handed_out() {
    // A driver that mixes outcomes up must not clear the lock an acquisition handed out:
    // its own outcome is still taken back (and released) afterwards.
    let config = Config::builder(3, ms(10_000)).attempts(1).build().unwrap();
    let mut once = Redlock::with_seed(config, [5; 32]);
    let mut failing = once.acquire(&["orders"], at(500)).unwrap();
    // The attempt, refused everywhere, then its cleanup (nothing to delete).
    for (reply, now) in [(Reply::Nil, 600), (Reply::Integer(0), 700)] {
        for command in sends(&mut failing) {
            failing
                .handle_reply(command.request_id(), reply.clone(), at(now))
                .unwrap();
        }
    }
    let Some(Output::Outcome(failed @ Outcome::NotAcquired(_))) = failing.poll_output() else {
        panic!("one attempt, refused everywhere, then its cleanup");
    };

    let mut redlock = client(3);
    let (mut op, outcome) = polled_acquisition(&mut redlock, "orders", 1_000);
    assert_eq!(
        op.decline(failed.clone(), at(1_200)),
        Err(UsageError::ForeignOutcome)
    );
    assert!(op.poll_output().is_none());
    let token = outcome.lease().unwrap().token().as_bytes().to_vec();
    op.decline(outcome, at(1_300)).unwrap();
    releases_to_every_node(&mut op, &token, 3);

    // The failed acquisition's own outcome goes back to it, and emits nothing.
    failing.decline(failed, at(1_400)).unwrap();
    assert!(failing.poll_output().is_none());
}
