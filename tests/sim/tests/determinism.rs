//! One seed, one run: traces are identical byte for byte, and the report does not depend
//! on how many threads ran it.

use redlock_sim::report::evaluate_many;
use redlock_sim::scenario::{Fault, Trigger};
use redlock_sim::trace::Trace;
use redlock_sim::{run, run_plan, Scenario, Strategy};

fn trace(scenario: Scenario, strategy: Strategy, seed: u64) -> String {
    run(scenario, strategy, seed, true)
        .expect("run completes")
        .trace
        .expect("trace recorded")
}

#[test]
fn the_same_seed_gives_the_same_trace() {
    for strategy in Strategy::ALL {
        for scenario in Scenario::ALL {
            if !scenario.applies_to(strategy) {
                continue;
            }
            for seed in [0, 7, 123_456_789] {
                let first = trace(scenario, strategy, seed);
                let second = trace(scenario, strategy, seed);
                assert_eq!(
                    first,
                    second,
                    "{} {} {seed}",
                    scenario.name(),
                    strategy.name()
                );
            }
        }
    }
}

#[test]
fn different_seeds_give_different_runs() {
    let a = trace(Scenario::Randomised, Strategy::Redlock, 1);
    let b = trace(Scenario::Randomised, Strategy::Redlock, 2);
    assert_ne!(a, b);
}

#[test]
fn tracing_does_not_change_the_run() {
    for seed in 0..200 {
        let quiet = run(Scenario::Randomised, Strategy::Redlock, seed, false).expect("run");
        let traced = run(Scenario::Randomised, Strategy::Redlock, seed, true).expect("run");
        assert_eq!(quiet.verdict, traced.verdict);
        assert_eq!(quiet.stats, traced.stats);
        assert_eq!(quiet.events, traced.events);
    }
}

#[test]
fn the_report_does_not_depend_on_the_thread_count() {
    let pairs = [
        (Scenario::Randomised, Strategy::PlainDel),
        (Scenario::Randomised, Strategy::Redlock),
        (Scenario::ClientClockSkew, Strategy::SetnxGetset),
    ];
    let one = evaluate_many(&pairs, 20, 300, 1);
    let three = evaluate_many(&pairs, 20, 300, 3);
    for (a, b) in one.iter().zip(&three) {
        assert_eq!(a.text(), b.text());
        assert_eq!(a.stats, b.stats);
    }
}

#[test]
fn the_trace_shows_the_script_cache_fallback() {
    let text = trace(Scenario::NoFaults, Strategy::Redlock, 0);
    assert!(text.contains("EVALSHA <release sha1> 1 resource"), "{text}");
    assert!(text.contains("NOSCRIPT"), "{text}");
    assert!(text.contains("EVAL <release script> 1 resource"), "{text}");
}

#[test]
fn a_pause_between_the_check_and_the_write_makes_the_write_stale() {
    // The pause-after-acquire sequence, with the pause moved to just before the second
    // write (after its validity check).
    let mut plan = Scenario::PauseAfterAcquire.plan(Strategy::Redlock, 3);
    let pause = plan
        .rules
        .iter_mut()
        .find(|rule| matches!(rule.fault, Fault::Pause { .. }))
        .expect("the scenario pauses its first client");
    pause.trigger = Trigger::BeforeWrite { client: 0, nth: 2 };
    let result = run_plan(&plan, Strategy::Redlock, 3, Trace::new(true)).expect("run");
    let text = result.trace.unwrap_or_default();
    assert!(result.verdict.stale_write.is_some(), "{text}");
    assert!(result.verdict.exclusion.is_none(), "{text}");
}

#[test]
fn a_plan_naming_a_missing_client_or_node_is_an_error() {
    let mut plan = Scenario::NoFaults.plan(Strategy::Single, 0);
    plan.rules.push(redlock_sim::scenario::Rule {
        trigger: Trigger::At(0),
        delay: 0,
        fault: Fault::JumpClock { node: 3, by: 1 },
    });
    assert!(run_plan(&plan, Strategy::Single, 0, Trace::new(false)).is_err());
    let mut plan = Scenario::NoFaults.plan(Strategy::Single, 0);
    plan.rules.push(redlock_sim::scenario::Rule {
        trigger: Trigger::Acquired { client: 9, nth: 1 },
        delay: 0,
        fault: Fault::CrashClient { client: 0 },
    });
    assert!(run_plan(&plan, Strategy::Single, 0, Trace::new(false)).is_err());
    // A plan for five nodes does not run on one.
    let plan = Scenario::NoFaults.plan(Strategy::Redlock, 0);
    assert!(run_plan(&plan, Strategy::Single, 0, Trace::new(false)).is_err());
}
