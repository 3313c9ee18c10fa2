//! `redlock-sim`: the safety report, traces, and a benchmark of the randomised suite.

use std::process::ExitCode;
use std::time::Instant;

use redlock_sim::report::{self, Settings};
use redlock_sim::{run, Scenario, Strategy};

const USAGE: &str = "usage:
  redlock-sim report [--seeds N] [--random-seeds N] [--threads N] [--update FILE]
      print the scenario x strategy table (or rewrite the table inside FILE)
  redlock-sim --trace SCENARIO STRATEGY SEED
      print the timeline of one run
  redlock-sim --svg SCENARIO STRATEGY SEED
      print the timeline of one run as a picture (SVG)
  redlock-sim --resource SCENARIO STRATEGY SEED
      print what the resource saw in one run: one line per write, then the checks
  redlock-sim --pictures DIRECTORY
      write the pictures docs/safety.md shows into DIRECTORY
  redlock-sim --bench-runs N [--strategy STRATEGY] [--threads N]
      time N seeds of the randomised scenario per strategy (all strategies by default)
  redlock-sim --list
      list scenario and strategy names";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match dispatch(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("{message}");
            ExitCode::FAILURE
        }
    }
}

fn number(value: Option<&String>, flag: &str) -> Result<u64, String> {
    value
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("{flag} needs a number\n{USAGE}"))
}

fn dispatch(args: &[String]) -> Result<(), String> {
    match args.first().map(String::as_str) {
        Some("report") => report_command(&args[1..]),
        Some(mode @ ("--trace" | "--svg" | "--resource")) => {
            let [_, scenario, strategy, seed] = args else {
                return Err(USAGE.into());
            };
            let scenario = Scenario::from_name(scenario)
                .ok_or_else(|| format!("unknown scenario {scenario}\n{USAGE}"))?;
            let strategy = Strategy::from_name(strategy)
                .ok_or_else(|| format!("unknown strategy {strategy}\n{USAGE}"))?;
            let seed = number(Some(seed), "SEED")?;
            if !scenario.applies_to(strategy) {
                return Err(format!(
                    "{} does not apply to {}",
                    scenario.name(),
                    strategy.name()
                ));
            }
            let result =
                run(scenario, strategy, seed, true).map_err(|e| format!("run failed: {e}"))?;
            match mode {
                "--svg" => print!("{}", result.picture.unwrap_or_default()),
                "--resource" => print!("{}", report::resource_summary(&result)),
                _ => print!("{}", result.trace.unwrap_or_default()),
            }
            Ok(())
        }
        Some("--pictures") => {
            let [_, directory] = args else {
                return Err(USAGE.into());
            };
            for picture in report::PICTURES {
                let path = format!("{directory}/{}", picture.file());
                let svg = picture.render().map_err(|e| format!("{path}: {e}"))?;
                std::fs::write(&path, svg).map_err(|e| format!("{path}: {e}"))?;
                eprintln!("wrote {path}");
            }
            Ok(())
        }
        Some("--bench-runs") => bench(args),
        Some("--list") => {
            println!("scenarios: {}", Scenario::ALL.map(Scenario::name).join(" "));
            println!(
                "strategies: {}",
                Strategy::ALL.map(Strategy::name).join(" ")
            );
            Ok(())
        }
        _ => Err(USAGE.into()),
    }
}

fn report_command(args: &[String]) -> Result<(), String> {
    let mut settings = Settings::default();
    let mut update = None;
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        match flag.as_str() {
            "--seeds" => settings.scripted = number(rest.next(), flag)?,
            "--random-seeds" => settings.randomised = number(rest.next(), flag)?,
            "--threads" => settings.threads = number(rest.next(), flag)? as usize,
            "--update" => update = Some(rest.next().ok_or(USAGE)?.clone()),
            _ => return Err(USAGE.into()),
        }
    }
    let table = report::table(settings);
    match update {
        None => print!("{table}"),
        Some(path) => {
            let document = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
            let updated = report::with_table(&document, &table)
                .ok_or_else(|| format!("{path}: table markers not found"))?;
            std::fs::write(&path, updated).map_err(|e| format!("{path}: {e}"))?;
            eprintln!("updated {path}");
        }
    }
    Ok(())
}

fn bench(args: &[String]) -> Result<(), String> {
    let runs = number(args.get(1), "--bench-runs")?;
    let mut strategies = Strategy::ALL.to_vec();
    let mut threads = Settings::default().threads;
    let mut rest = args[2..].iter();
    while let Some(flag) = rest.next() {
        match flag.as_str() {
            "--strategy" => {
                let name = rest.next().ok_or(USAGE)?;
                strategies =
                    vec![Strategy::from_name(name)
                        .ok_or_else(|| format!("unknown strategy {name}"))?];
            }
            "--threads" => threads = number(rest.next(), flag)? as usize,
            _ => return Err(USAGE.into()),
        }
    }
    let mut total = 0.0;
    for strategy in strategies {
        let started = Instant::now();
        let cell = report::evaluate(Scenario::Randomised, strategy, runs, threads);
        let seconds = started.elapsed().as_secs_f64();
        total += seconds;
        println!(
            "{:<16} {} randomised runs in {:.2} s ({:.0} runs/s, {} thread(s)): {}",
            strategy.name(),
            runs,
            seconds,
            runs as f64 / seconds,
            threads,
            cell.text()
        );
        println!("  {:?}", cell.stats);
    }
    println!("total {total:.2} s");
    Ok(())
}
