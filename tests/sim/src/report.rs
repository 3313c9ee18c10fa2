//! The scenario x strategy table: every cell is the result of running the simulation
//! over a range of seeds.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::scenario::Scenario;
use crate::sim::{run, RunResult, SimError, Stats};
use crate::strategy::Strategy;

/// How many seeds the report runs.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    /// Seeds per scripted scenario (seeds `0..scripted`).
    pub scripted: u64,
    /// Seeds of the randomised scenario (seeds `0..randomised`).
    pub randomised: u64,
    /// Worker threads.
    pub threads: usize,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            scripted: 100,
            randomised: 10_000,
            threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
        }
    }
}

/// The result of one scenario under one strategy over its seeds.
#[derive(Clone, Debug, Default)]
pub struct Cell {
    /// Seeds run.
    pub runs: u64,
    /// Seeds where some check failed.
    pub violations: u64,
    /// The lowest violating seed and the checks it failed.
    pub first: Option<(u64, Vec<&'static str>)>,
    /// Seeds whose run could not complete.
    pub errors: Vec<(u64, SimError)>,
    /// False if the scenario does not apply to the strategy.
    pub applies: bool,
    /// Why not, when it does not.
    pub not_applicable: &'static str,
    /// What the runs exercised, summed.
    pub stats: Stats,
}

impl Cell {
    /// True if every seed ran and passed every check.
    pub fn is_safe(&self) -> bool {
        self.applies && self.violations == 0 && self.errors.is_empty() && self.runs > 0
    }

    /// The cell's text in the table.
    pub fn text(&self) -> String {
        if !self.applies {
            return format!("n/a ({})", self.not_applicable);
        }
        if let Some((seed, error)) = self.errors.first() {
            return format!("ERROR (seed {seed}: {error})");
        }
        match &self.first {
            None => format!("safe in {}/{} seeds", self.runs, self.runs),
            Some((seed, checks)) => format!(
                "violated in {}/{} seeds (seed {seed}: {})",
                self.violations,
                self.runs,
                checks.join(", ")
            ),
        }
    }
}

/// Runs seeds `0..seeds` of `scenario` under `strategy`.
pub fn evaluate(scenario: Scenario, strategy: Strategy, seeds: u64, threads: usize) -> Cell {
    evaluate_many(&[(scenario, strategy)], seeds, seeds, threads).remove(0)
}

/// Runs every pair, scripted scenarios over `scripted` seeds and the randomised one over
/// `randomised` seeds, spread over `threads` threads. The result does not depend on the
/// number of threads.
pub fn evaluate_many(
    pairs: &[(Scenario, Strategy)],
    scripted: u64,
    randomised: u64,
    threads: usize,
) -> Vec<Cell> {
    let mut jobs = Vec::new();
    for (index, &(scenario, strategy)) in pairs.iter().enumerate() {
        if !scenario.applies_to(strategy) {
            continue;
        }
        let seeds = if scenario == Scenario::Randomised {
            randomised
        } else {
            scripted
        };
        jobs.extend((0..seeds).map(|seed| (index, scenario, strategy, seed)));
    }
    let next = AtomicUsize::new(0);
    let results = Mutex::new(Vec::with_capacity(jobs.len()));
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                let mut mine = Vec::new();
                loop {
                    let job = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(index, scenario, strategy, seed)) = jobs.get(job) else {
                        break;
                    };
                    let outcome =
                        run(scenario, strategy, seed, false).map(|r| (r.verdict.failed(), r.stats));
                    mine.push((index, seed, outcome));
                }
                // A poisoned lock means another worker panicked; its results are still valid.
                results
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend(mine);
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by_key(|&(index, seed, _)| (index, seed));
    let mut cells: Vec<Cell> = pairs
        .iter()
        .map(|&(scenario, strategy)| Cell {
            applies: scenario.applies_to(strategy),
            not_applicable: scenario.why_not(strategy),
            ..Cell::default()
        })
        .collect();
    for (index, seed, outcome) in results {
        let cell = &mut cells[index];
        cell.runs += 1;
        match outcome {
            Err(error) => cell.errors.push((seed, error)),
            Ok((failed, stats)) => {
                cell.stats += stats;
                if !failed.is_empty() {
                    cell.violations += 1;
                    if cell.first.is_none() {
                        cell.first = Some((seed, failed));
                    }
                }
            }
        }
    }
    cells
}

/// The full table, in Markdown.
pub fn table(settings: Settings) -> String {
    let pairs: Vec<(Scenario, Strategy)> = Scenario::ALL
        .iter()
        .flat_map(|&scenario| {
            Strategy::ALL
                .iter()
                .map(move |&strategy| (scenario, strategy))
        })
        .collect();
    let cells = evaluate_many(
        &pairs,
        settings.scripted,
        settings.randomised,
        settings.threads,
    );
    let mut out = String::new();
    out.push_str("| scenario |");
    for strategy in Strategy::ALL {
        out.push_str(&format!(" {} |", strategy.title()));
    }
    out.push_str("\n|---|");
    for _ in Strategy::ALL {
        out.push_str("---|");
    }
    out.push('\n');
    for (row, scenario) in Scenario::ALL.iter().enumerate() {
        out.push_str(&format!("| {} |", scenario.name()));
        for column in 0..Strategy::ALL.len() {
            out.push_str(&format!(
                " {} |",
                cells[row * Strategy::ALL.len() + column].text()
            ));
        }
        out.push('\n');
    }
    out
}

/// Marks the generated table inside `docs/safety.md`.
pub const BEGIN_MARKER: &str =
    "<!-- table generated by `cargo run -p redlock-sim --release -- report`: do not edit -->";
/// Ends the generated table.
pub const END_MARKER: &str = "<!-- end of generated table -->";

/// The generated part of a document, between the markers.
pub fn generated_part(document: &str) -> Option<&str> {
    let start = document.find(BEGIN_MARKER)? + BEGIN_MARKER.len();
    let end = start + document[start..].find(END_MARKER)?;
    Some(document[start..end].trim_matches('\n'))
}

/// `document` with its generated part replaced by `table`.
pub fn with_table(document: &str, table: &str) -> Option<String> {
    let start = document.find(BEGIN_MARKER)? + BEGIN_MARKER.len();
    let end = start + document[start..].find(END_MARKER)?;
    Some(format!(
        "{}\n{}\n{}",
        &document[..start],
        table.trim_matches('\n'),
        &document[end..]
    ))
}

/// What the resource saw in a run: one line per acquisition (`granted C1 8064`, global
/// microseconds), one per write (`write C2 accepted token 7`), then the four checks (`check stale-write ok`): what the real-system checks compare
/// with what they observe.
pub fn resource_summary(result: &RunResult) -> String {
    let mut out = String::new();
    for (client, at) in &result.grants {
        out.push_str(&format!("granted {client} {at}\n"));
    }
    for (client, accepted, token) in &result.writes {
        out.push_str(&format!(
            "write {client} {}{}\n",
            if *accepted { "accepted" } else { "rejected" },
            token.map_or(String::new(), |t| format!(" token {t}"))
        ));
    }
    for (check, result) in result.verdict.checks() {
        out.push_str(&format!(
            "check {} {}\n",
            check.replace(' ', "-"),
            if result.is_some() { "violated" } else { "ok" }
        ));
    }
    out
}

/// One picture in `docs/safety.md`.
#[derive(Clone, Copy, Debug)]
pub struct Picture {
    /// The scenario.
    pub scenario: Scenario,
    /// The strategy.
    pub strategy: Strategy,
    /// The seed.
    pub seed: u64,
}

impl Picture {
    /// Its file name under `docs/pictures/`.
    pub fn file(&self) -> String {
        format!("{}--{}.svg", self.scenario.name(), self.strategy.name())
    }

    /// The SVG.
    pub fn render(&self) -> Result<String, SimError> {
        let result = run(self.scenario, self.strategy, self.seed, true)?;
        result
            .picture
            .ok_or_else(|| SimError("the run drew no picture".into()))
    }
}

const fn picture(scenario: Scenario, strategy: Strategy) -> Picture {
    Picture {
        scenario,
        strategy,
        seed: 0,
    }
}

/// The pictures `docs/safety.md` shows: one per kind of violated cell, and each row's
/// most instructive safe case.
pub const PICTURES: [Picture; 19] = [
    picture(Scenario::NoFaults, Strategy::Redlock),
    picture(Scenario::ClientCrash, Strategy::SetnxExpire),
    picture(Scenario::ClientCrash, Strategy::ZooKeeper),
    picture(Scenario::LostReply, Strategy::Redlock),
    picture(Scenario::RestartEmpty, Strategy::Redlock),
    picture(Scenario::RestartEmpty, Strategy::RedlockFenced),
    picture(Scenario::RestartDelayed, Strategy::RedlockDelayed),
    picture(Scenario::ClockJump, Strategy::Redlock),
    picture(Scenario::ClockJump, Strategy::RedlockFenced),
    picture(Scenario::ClockJump, Strategy::ZooKeeper),
    picture(Scenario::PauseBeforeReplies, Strategy::Redlock),
    picture(Scenario::PauseAfterAcquire, Strategy::Redlock),
    picture(Scenario::PauseAfterAcquire, Strategy::RedlockFenced),
    picture(Scenario::PauseAfterAcquire, Strategy::ZooKeeperFenced),
    picture(Scenario::PauseAfterAcquire, Strategy::Etcd),
    picture(Scenario::PauseInRelease, Strategy::GetThenDel),
    picture(Scenario::ClientClockSkew, Strategy::SetnxGetset),
    picture(Scenario::FailoverBeforeReplication, Strategy::SingleReplica),
    picture(Scenario::Randomised, Strategy::Redlock),
];
