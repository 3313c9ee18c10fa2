//! The verdicts the literature predicts, obtained by running the simulation.

use redlock_sim::report::evaluate_many;
use redlock_sim::scenario::{Cycle, Fault, Trigger};
use redlock_sim::trace::Trace;
use redlock_sim::{run_plan, Cell, Scenario, Strategy};

const SCRIPTED_SEEDS: u64 = 50;
const RANDOMISED_SEEDS: u64 = 3000;

fn cell(scenario: Scenario, strategy: Strategy) -> Cell {
    evaluate_many(&[(scenario, strategy)], SCRIPTED_SEEDS, RANDOMISED_SEEDS, 2).remove(0)
}

fn assert_safe(scenario: Scenario, strategy: Strategy) {
    let cell = cell(scenario, strategy);
    assert!(
        cell.is_safe(),
        "{} under {}: {}",
        scenario.name(),
        strategy.name(),
        cell.text()
    );
    assert!(cell.stats.acquisitions > 0, "nobody ever held the lock");
}

/// Violated in every seed (the scripted sequence forces it), with `check` among the
/// failed checks, and never with one of `not`.
fn assert_violated(scenario: Scenario, strategy: Strategy, check: &str, not: &[&str]) {
    let cell = cell(scenario, strategy);
    let label = format!(
        "{} under {}: {}",
        scenario.name(),
        strategy.name(),
        cell.text()
    );
    assert!(cell.errors.is_empty(), "{label}");
    assert_eq!(cell.violations, cell.runs, "{label}");
    let (_, failed) = cell.first.as_ref().expect("a violating seed");
    assert!(failed.contains(&check), "{label}");
    for absent in not {
        assert!(!failed.contains(absent), "{label}");
    }
}

const OURS: [Strategy; 6] = [
    Strategy::Redlock,
    Strategy::RedlockDelayed,
    Strategy::RedlockFenced,
    Strategy::RedlockDelayedFenced,
    Strategy::Single,
    Strategy::SingleReplica,
];

#[test]
fn ours_is_safe_where_the_algorithm_says_it_is() {
    for strategy in OURS {
        for scenario in [
            Scenario::NoFaults,
            Scenario::ClientCrash,
            Scenario::LostReply,
            Scenario::RestartDelayed,
            Scenario::PauseBeforeReplies,
            Scenario::PauseInRelease,
            Scenario::ClientClockSkew,
        ] {
            assert_safe(scenario, strategy);
        }
    }
}

#[test]
fn ours_is_safe_in_every_randomised_run_of_the_assumed_conditions() {
    for strategy in OURS {
        let cell = cell(Scenario::Randomised, strategy);
        assert!(cell.is_safe(), "{}: {}", strategy.name(), cell.text());
        assert_eq!(cell.runs, RANDOMISED_SEEDS);
        // The suite exercises what it claims to.
        let stats = cell.stats;
        for (what, count) in [
            ("acquisitions", stats.acquisitions),
            ("failed acquisitions", stats.not_acquired),
            ("extensions", stats.extended),
            ("failed extensions", stats.not_extended),
            ("leases found expired", stats.expired_before_write),
            ("node crashes", stats.node_crashes),
            ("client crashes", stats.client_crashes),
            ("pauses", stats.pauses),
            ("lost messages", stats.messages_lost),
        ] {
            assert!(
                count > RANDOMISED_SEEDS / 20,
                "{}: only {count} {what}",
                strategy.name()
            );
        }
    }
}

#[test]
fn ours_is_violated_by_clock_jumps_restarts_without_persistence_and_pauses_after_acquiring() {
    for strategy in [Strategy::Redlock, Strategy::Single] {
        assert_violated(Scenario::ClockJump, strategy, "exclusion", &[]);
        assert_violated(Scenario::RestartEmpty, strategy, "exclusion", &[]);
        // The holder's belief ended in time; its write after the pause is stale, which
        // only fencing at the resource catches.
        assert_violated(
            Scenario::PauseAfterAcquire,
            strategy,
            "stale write",
            &["exclusion"],
        );
    }
}

#[test]
fn a_delayed_restart_protects_against_a_restart_without_persistence() {
    assert_safe(Scenario::RestartEmpty, Strategy::RedlockDelayed);
    assert_violated(
        Scenario::ClockJump,
        Strategy::RedlockDelayed,
        "exclusion",
        &[],
    );
}

#[test]
fn a_replica_promoted_before_replicating_breaks_exclusion() {
    assert_violated(
        Scenario::FailoverBeforeReplication,
        Strategy::SingleReplica,
        "exclusion",
        &[],
    );
    // Once the key has reached the replica, failover keeps it.
    assert_safe(Scenario::RestartEmpty, Strategy::SingleReplica);
    let cell = cell(Scenario::FailoverBeforeReplication, Strategy::Redlock);
    assert!(!cell.applies);
}

#[test]
fn setnx_then_expire_leaves_a_key_forever_when_the_second_command_never_comes() {
    assert_violated(
        Scenario::ClientCrash,
        Strategy::SetnxExpire,
        "key left",
        &["exclusion"],
    );
    assert_violated(
        Scenario::LostReply,
        Strategy::SetnxExpire,
        "key left",
        &["exclusion"],
    );
    assert_safe(Scenario::NoFaults, Strategy::SetnxExpire);
}

#[test]
fn release_by_plain_del_deletes_the_next_holders_lock() {
    assert_violated(
        Scenario::PauseAfterAcquire,
        Strategy::PlainDel,
        "exclusion",
        &[],
    );
    assert_safe(Scenario::NoFaults, Strategy::PlainDel);
}

#[test]
fn release_by_get_then_del_deletes_the_next_holders_lock_after_a_pause() {
    assert_violated(
        Scenario::PauseInRelease,
        Strategy::GetThenDel,
        "exclusion",
        &[],
    );
    // The same pause is harmless when the compare-and-delete is one script.
    assert_safe(Scenario::PauseInRelease, Strategy::Redlock);
    assert_safe(Scenario::PauseInRelease, Strategy::PlainDel);
}

#[test]
fn the_timestamp_pattern_needs_agreeing_client_clocks() {
    assert_violated(
        Scenario::ClientClockSkew,
        Strategy::SetnxGetset,
        "exclusion",
        &[],
    );
    assert_safe(Scenario::NoFaults, Strategy::SetnxGetset);
}

#[test]
fn without_a_validity_check_a_late_reply_is_believed() {
    for strategy in [Strategy::PlainDel, Strategy::GetThenDel] {
        assert_violated(Scenario::PauseBeforeReplies, strategy, "exclusion", &[]);
    }
    assert_violated(
        Scenario::PauseBeforeReplies,
        Strategy::SetnxGetset,
        "stale write",
        &[],
    );
}

#[test]
fn the_legacy_patterns_fail_under_the_randomised_conditions() {
    for strategy in [
        Strategy::SetnxExpire,
        Strategy::SetnxGetset,
        Strategy::PlainDel,
        Strategy::GetThenDel,
    ] {
        let cell = cell(Scenario::Randomised, strategy);
        assert!(
            cell.errors.is_empty(),
            "{}: {}",
            strategy.name(),
            cell.text()
        );
        assert!(cell.violations > 0, "{}: {}", strategy.name(), cell.text());
    }
}

const CONSENSUS: [Strategy; 4] = [
    Strategy::ZooKeeper,
    Strategy::ZooKeeperFenced,
    Strategy::Etcd,
    Strategy::EtcdFenced,
];

#[test]
fn zookeeper_and_etcd_survive_what_breaks_redis_nodes() {
    for strategy in CONSENSUS {
        for scenario in [
            Scenario::NoFaults,
            Scenario::ClientCrash,
            Scenario::LostReply,
            Scenario::RestartEmpty,
            Scenario::RestartDelayed,
            Scenario::ClockJump,
            Scenario::PauseBeforeReplies,
            Scenario::PauseInRelease,
            Scenario::ClientClockSkew,
        ] {
            assert_safe(scenario, strategy);
        }
        let cell = cell(Scenario::FailoverBeforeReplication, strategy);
        assert!(!cell.applies);
        assert!(cell.text().contains("quorum"), "{}", cell.text());
    }
}

#[test]
fn without_their_tokens_zookeeper_and_etcd_write_stale_data_after_a_pause() {
    assert_violated(
        Scenario::PauseAfterAcquire,
        Strategy::ZooKeeper,
        "stale write",
        &["exclusion"],
    );
    assert_violated(
        Scenario::PauseAfterAcquire,
        Strategy::Etcd,
        "stale write",
        &[],
    );
}

#[test]
fn their_fencing_tokens_reject_the_stale_write() {
    assert_safe(Scenario::PauseAfterAcquire, Strategy::ZooKeeperFenced);
    // etcd's holder still believes in its lease when the next one gets the lock; the
    // resource rejects its write all the same.
    assert_violated(
        Scenario::PauseAfterAcquire,
        Strategy::EtcdFenced,
        "exclusion",
        &["stale write"],
    );
    let cell = cell(Scenario::Randomised, Strategy::ZooKeeperFenced);
    assert!(cell.errors.is_empty(), "{}", cell.text());
    if let Some((_, failed)) = &cell.first {
        assert!(!failed.contains(&"stale write"), "{}", cell.text());
    }
}

#[test]
fn with_their_tokens_no_stale_write_reaches_the_resource_in_any_randomised_run() {
    for strategy in [Strategy::ZooKeeperFenced, Strategy::EtcdFenced] {
        for seed in 0..RANDOMISED_SEEDS {
            let result = redlock_sim::run(Scenario::Randomised, strategy, seed, false)
                .unwrap_or_else(|e| panic!("{} seed {seed}: {e}", strategy.name()));
            assert_eq!(
                result.verdict.stale_write,
                None,
                "{} seed {seed}",
                strategy.name()
            );
        }
    }
}

#[test]
fn with_the_cores_tokens_a_pause_or_a_clock_jump_no_longer_reaches_the_resource() {
    for strategy in [Strategy::RedlockFenced, Strategy::RedlockDelayedFenced] {
        assert_safe(Scenario::PauseAfterAcquire, strategy);
        // Both still believe they hold the lock; the older token's writes are refused.
        assert_violated(
            Scenario::ClockJump,
            strategy,
            "exclusion",
            &["stale write", "token order"],
        );
    }
}

#[test]
fn a_restart_without_persistence_breaks_the_token_order_unless_the_restart_is_delayed() {
    assert_violated(
        Scenario::RestartEmpty,
        Strategy::RedlockFenced,
        "token order",
        &[],
    );
    assert_violated(
        Scenario::RestartEmpty,
        Strategy::RedlockFenced,
        "exclusion",
        &[],
    );
    assert_safe(Scenario::RestartEmpty, Strategy::RedlockDelayedFenced);
}

/// Restart-empty after the first client has already held the lock once on the same
/// three nodes: their counters are at 1 and its second token is 2. The pivot restarts
/// (with or without its data) and the second client locks the pivot and the minority.
fn restart_after_a_second_lock(keep_data: bool, seed: u64) -> redlock_sim::RunResult {
    restart_after(Strategy::RedlockFenced, keep_data, false, seed)
}

/// The same under `strategy`; with `cut`, the second client never reaches the first
/// two nodes, so the pivot is the only node it can share with the first client, and it
/// starts only once the pivot serves again (a client that tried earlier would have
/// raised the minority's counters with its failed attempts).
fn restart_after(
    strategy: Strategy,
    keep_data: bool,
    cut: bool,
    seed: u64,
) -> redlock_sim::RunResult {
    let mut plan = Scenario::RestartEmpty.plan(strategy, seed);
    plan.clients[0].cycles = vec![Cycle::standard(1), Cycle::standard(3)];
    if cut {
        plan.rules.push(redlock_sim::scenario::Rule {
            trigger: Trigger::At(0),
            delay: 0,
            fault: Fault::Cut {
                client: 1,
                nodes: vec![0, 1],
            },
        });
    }
    for rule in &mut plan.rules {
        if let Trigger::Acquired { client: 0, nth } = &mut rule.trigger {
            *nth = 2;
        }
        if let Fault::CrashNode {
            keep_data: keep, ..
        } = &mut rule.fault
        {
            *keep = keep_data;
        }
        if cut && rule.fault == (Fault::StartClient { client: 1 }) {
            rule.delay = 10_000 + redlock_sim::strategy::delayed_restart() + 100_000;
        }
    }
    run_plan(&plan, strategy, seed, Trace::new(false))
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"))
}

#[test]
fn without_persistence_tokens_go_backwards_and_with_it_they_do_not() {
    for seed in 0..SCRIPTED_SEEDS {
        let lost = restart_after_a_second_lock(false, seed);
        let tokens: Vec<_> = lost.writes.iter().map(|w| (w.0.as_str(), w.2)).collect();
        // C1 writes with 1, then 2; C2 gets 1 from the pivot's forgotten counter and the
        // minority's untouched ones: lower than C1's, and the resource refuses it.
        assert!(tokens.contains(&("C1", Some(2))), "seed {seed}: {tokens:?}");
        assert!(tokens.contains(&("C2", Some(1))), "seed {seed}: {tokens:?}");
        assert!(lost.verdict.token_order.is_some(), "seed {seed}");
        assert!(
            lost.writes.iter().all(|w| w.0 != "C2" || !w.1),
            "seed {seed}: the newer holder is turned away"
        );
        let kept = restart_after_a_second_lock(true, seed);
        assert!(kept.verdict.is_safe(), "seed {seed}: {:?}", kept.verdict);
        let second = kept.writes.iter().find(|w| w.0 == "C2").map(|w| w.2);
        assert!(
            second.flatten().is_some_and(|t| t > 2),
            "seed {seed}: {second:?}"
        );
    }
}

#[test]
fn a_delayed_restart_does_not_bring_the_counter_back() {
    for seed in 0..SCRIPTED_SEEDS {
        // The first client has released long before the pivot serves again: exclusion
        // holds, but the pivot is back without its counter and it is the only node the
        // second client shares with the first one's write-back.
        let result = restart_after(Strategy::RedlockDelayedFenced, false, true, seed);
        assert_eq!(result.verdict.exclusion, None, "seed {seed}");
        assert!(result.verdict.token_order.is_some(), "seed {seed}");
        let second = result.writes.iter().find(|w| w.0 == "C2").map(|w| w.2);
        assert_eq!(second, Some(Some(1)), "seed {seed}");
        // Without the cut it reaches nodes that kept the counter, and gets 3.
        let result = restart_after(Strategy::RedlockDelayedFenced, false, false, seed);
        assert!(
            result.verdict.is_safe(),
            "seed {seed}: {:?}",
            result.verdict
        );
    }
}
