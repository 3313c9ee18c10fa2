//! Inspections: who holds a lock, decided at the quorum from what each node holds.

use std::time::Duration;

use redlock_core::{
    CommandKind, Config, NodeResult, Operation, Outcome, Output, Redlock, Reply, Time, UsageError,
};

fn at(us: u64) -> Time {
    Time::from_micros(us)
}

fn client(nodes: usize) -> Redlock {
    let config = Config::builder(nodes, Duration::from_secs(10))
        .build()
        .unwrap();
    Redlock::with_seed(config, [9; 32])
}

/// Starts an inspection; returns it with its commands' request ids, node by node.
fn start(redlock: &Redlock, resources: &[&str]) -> (Operation, Vec<redlock_core::RequestId>) {
    let mut op = redlock.inspect(resources, at(1_000)).unwrap();
    let mut ids = Vec::new();
    while let Some(output) = op.poll_output() {
        if let Output::Send(command) = output {
            assert_eq!(command.kind(), CommandKind::Inspect);
            ids.push(command.request_id());
        }
    }
    (op, ids)
}

fn outcome(op: &mut Operation) -> Option<Outcome> {
    while let Some(output) = op.poll_output() {
        if let Output::Outcome(outcome) = output {
            return Some(outcome);
        }
    }
    None
}

fn bulk(text: &str) -> Reply {
    Reply::Bulk(text.as_bytes().to_vec())
}

#[test]
fn commands_read_every_key_and_write_nothing() {
    let redlock = client(3);
    let mut one = redlock.inspect(&["a"], at(0)).unwrap();
    let Some(Output::Send(get)) = one.poll_output() else {
        panic!()
    };
    assert_eq!(get.args().collect::<Vec<_>>(), vec![&b"GET"[..], b"a"]);
    assert_eq!(get.ttl_ms(), 0);
    assert!(get.token().is_empty());
    let mut two = redlock.inspect(&["a", "b"], at(0)).unwrap();
    let Some(Output::Send(mget)) = two.poll_output() else {
        panic!()
    };
    assert_eq!(
        mget.args().collect::<Vec<_>>(),
        vec![&b"MGET"[..], b"a", b"b"]
    );
    assert_eq!(
        redlock.inspect::<&str>(&[], at(0)).unwrap_err(),
        UsageError::NoResources
    );
    assert_eq!(
        redlock.inspect(&["a", "a"], at(0)).unwrap_err(),
        UsageError::DuplicateResource
    );
}

#[test]
fn a_token_on_a_quorum_is_the_holder_and_decides_early() {
    let mut redlock = client(5);
    let (mut op, ids) = start(&redlock, &["r"]);
    op.handle_reply(ids[0], bulk("tok"), at(1_100)).unwrap();
    op.handle_reply(ids[1], Reply::Nil, at(1_200)).unwrap();
    op.handle_reply(ids[2], bulk("tok"), at(1_300)).unwrap();
    assert!(outcome(&mut op).is_none());
    op.handle_reply(ids[3], bulk("tok"), at(1_400)).unwrap();
    let Some(Outcome::Inspected(inspected)) = outcome(&mut op) else {
        panic!()
    };
    assert!(inspected.is_locked());
    assert_eq!(inspected.holder.as_deref(), Some(&b"tok"[..]));
    assert_eq!(inspected.nodes[4], NodeResult::Pending);
    // Held by a lease with that token while it is valid, not after.
    let lease = redlock.lease(&["r"], "tok", at(5_000_000)).unwrap();
    assert!(inspected.is_held_by(&lease, at(4_000_000)));
    assert!(!inspected.is_held_by(&lease, at(5_000_000)));
    let other = redlock.lease(&["r"], "other", at(5_000_000)).unwrap();
    assert!(!inspected.is_held_by(&other, at(1_500)));
    let _ = redlock.generate_token();
}

#[test]
fn keys_on_fewer_than_a_quorum_are_nobody_s_lock() {
    // A failed attempt's leftovers on two nodes, another token on one, two free.
    let redlock = client(5);
    let (mut op, ids) = start(&redlock, &["r"]);
    op.handle_reply(ids[0], bulk("a"), at(1_100)).unwrap();
    op.handle_reply(ids[1], bulk("a"), at(1_100)).unwrap();
    op.handle_reply(ids[2], bulk("b"), at(1_100)).unwrap();
    assert!(
        outcome(&mut op).is_none(),
        "two pending could still make a quorum of a"
    );
    op.handle_reply(ids[3], Reply::Nil, at(1_200)).unwrap();
    assert!(
        outcome(&mut op).is_none(),
        "the last node could still make it three"
    );
    op.handle_reply(ids[4], Reply::Nil, at(1_300)).unwrap();
    let Some(Outcome::Inspected(inspected)) = outcome(&mut op) else {
        panic!()
    };
    assert!(!inspected.is_locked());
    assert!(inspected.nodes.iter().all(|n| *n == NodeResult::Success));
}

#[test]
fn a_quorum_of_free_nodes_decides_early() {
    let redlock = client(5);
    let (mut op, ids) = start(&redlock, &["r"]);
    for id in &ids[..3] {
        op.handle_reply(*id, Reply::Nil, at(1_100)).unwrap();
    }
    let Some(Outcome::Inspected(inspected)) = outcome(&mut op) else {
        panic!()
    };
    assert!(!inspected.is_locked());
}

#[test]
fn several_keys_count_only_when_one_token_holds_them_all() {
    let redlock = client(3);
    let (mut op, ids) = start(&redlock, &["x", "y"]);
    let both = |a: &str, b: &str| Reply::Array(vec![bulk(a), bulk(b)]);
    op.handle_reply(ids[0], both("t", "t"), at(1_100)).unwrap();
    op.handle_reply(ids[1], both("t", "u"), at(1_100)).unwrap();
    op.handle_reply(ids[2], Reply::Array(vec![bulk("t"), Reply::Nil]), at(1_100))
        .unwrap();
    let Some(Outcome::Inspected(inspected)) = outcome(&mut op) else {
        panic!()
    };
    assert!(!inspected.is_locked());
}

#[test]
fn too_few_answers_say_nothing() {
    let redlock = client(3);
    let (mut op, ids) = start(&redlock, &["r"]);
    op.handle_reply(ids[0], bulk("t"), at(1_100)).unwrap();
    op.handle_reply(ids[1], Reply::Error("ERR wrong".into()), at(1_100))
        .unwrap();
    assert!(outcome(&mut op).is_none());
    // The third never answers: at the deadline, one answer of three is too few.
    op.handle_timeout(at(1_000 + 1_000_000));
    let Some(Outcome::NotInspected(not)) = outcome(&mut op) else {
        panic!()
    };
    assert_eq!(not.nodes[2], NodeResult::Timeout);
    assert_eq!(
        Outcome::NotInspected(not).error_class().map(|c| c.code()),
        Some("nodes_failing")
    );
}

#[test]
fn replies_of_the_wrong_shape_are_node_errors() {
    let redlock = client(3);
    let (mut op, ids) = start(&redlock, &["r"]);
    op.handle_reply(ids[0], Reply::Integer(1), at(1_100))
        .unwrap();
    op.handle_reply(ids[1], Reply::Array(vec![bulk("t")]), at(1_100))
        .unwrap();
    let Some(Outcome::NotInspected(not)) = outcome(&mut op) else {
        panic!()
    };
    assert!(matches!(&not.nodes[0], NodeResult::Error(text) if text.contains("integer")));
    assert!(matches!(&not.nodes[1], NodeResult::Error(_)));
}
