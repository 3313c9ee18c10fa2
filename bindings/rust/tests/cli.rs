//! The `redlock` command-line tool against real nodes: exit codes, the child's
//! environment, stopping the child when the lock is lost. The tests share one node set
//! (base port 7145); nothing listens on 7150.

mod common;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::Nodes;

fn redlock(nodes: &Nodes) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_redlock"));
    cmd.env("REDLOCK_NODES", nodes.urls.join(","));
    // Generous for a loaded machine; these tests check behaviour, not timeouts.
    cmd.args(["--node-timeout", "100"]);
    cmd
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("run redlock")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).to_string()
}

#[test]
fn help_documents_every_command() {
    let output = run(Command::new(env!("CARGO_BIN_EXE_redlock")).arg("--help"));
    assert!(output.status.success());
    let text = stdout(&output);
    for word in [
        "exec",
        "acquire",
        "extend",
        "release",
        "status",
        "REDLOCK_NODES",
        "--json",
        "75",
    ] {
        assert!(text.contains(word), "--help lacks {word}:\n{text}");
    }
    let output = run(Command::new(env!("CARGO_BIN_EXE_redlock")).args(["exec", "--help"]));
    let text = stdout(&output);
    for word in [
        "REDLOCK_TOKEN",
        "REDLOCK_VALID_UNTIL_MS",
        "--auto-extend",
        "SIGTERM",
        "--ttl",
        "--retry",
        "--wait",
        "--fencing",
        "REDLOCK_FENCING_TOKEN",
    ] {
        assert!(text.contains(word), "exec --help lacks {word}:\n{text}");
    }
    // Usage errors exit with 2.
    let output = run(Command::new(env!("CARGO_BIN_EXE_redlock")).args(["exec", "r"]));
    assert_eq!(output.status.code(), Some(2));
    for bad in [
        &["acquire", "r", "--wait", "soon"][..],
        &["acquire", "r", "--wait", "-1"],
        &["acquire", "r", "--wait", "3h"],
        &["acquire", "r", "--wait", "1", "--retry", "3"],
    ] {
        let output = run(Command::new(env!("CARGO_BIN_EXE_redlock")).args(bad));
        assert_eq!(
            output.status.code(),
            Some(2),
            "{bad:?}: {}",
            stderr(&output)
        );
    }
}

#[test]
fn fencing_tokens_reach_the_command_and_the_json() {
    let nodes = common::shared(7145);
    let print_token = "echo \"${REDLOCK_FENCING_TOKEN-none}\"";
    let fenced = |nodes: &Nodes| -> u64 {
        let output = run(redlock(nodes).args([
            "exec",
            "cli:fenced",
            "--fencing",
            "--",
            "sh",
            "-c",
            print_token,
        ]));
        assert!(output.status.success(), "{}", stderr(&output));
        stdout(&output).parse().expect("a number")
    };
    let first = fenced(&nodes);
    let second = fenced(&nodes);
    assert!(first >= 1 && second > first, "{first} then {second}");
    // Without --fencing the variable is not set.
    let output = run(redlock(&nodes).args(["exec", "cli:fenced", "--", "sh", "-c", print_token]));
    assert_eq!(stdout(&output), "none");

    // acquire --json: the token as a number, or null without fencing.
    let output = run(redlock(&nodes).args(["--json", "acquire", "cli:fenced", "--fencing"]));
    assert!(output.status.success(), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    let third = json["fencing_token"].as_u64().expect("fencing_token");
    assert!(third > second);
    let token = json["token"].as_str().unwrap().to_string();
    let output = run(redlock(&nodes).args(["release", "cli:fenced", &token]));
    assert!(output.status.success());
    let output = run(redlock(&nodes).args(["--json", "acquire", "cli:fenced"]));
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert!(json["fencing_token"].is_null(), "{json}");
    let token = json["token"].as_str().unwrap().to_string();
    run(redlock(&nodes).args(["release", "cli:fenced", &token]));
    // exec --json's acquired event carries it too.
    let output =
        run(redlock(&nodes).args(["--json", "exec", "cli:fenced", "--fencing", "--", "true"]));
    let event = stderr(&output)
        .lines()
        .find(|line| line.contains("\"acquired\""))
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .expect("an acquired event");
    assert!(event["fencing_token"].as_u64().unwrap() > third);
}

#[test]
fn wait_gives_up_at_its_limit_or_wakes_at_the_release() {
    let nodes = common::shared(7145);
    let output = run(redlock(&nodes).args(["acquire", "cli:wait", "--ttl", "20000"]));
    assert!(output.status.success(), "{}", stderr(&output));
    let token = stdout(&output);

    // Held for longer than the wait: 75 at the limit. The last attempt starts no later
    // than one node timeout (100 ms here) before the limit, so that it ends by then.
    let started = Instant::now();
    let output = run(redlock(&nodes).args(["exec", "cli:wait", "--wait", "0.4", "--", "true"]));
    let waited = started.elapsed();
    assert_eq!(output.status.code(), Some(75), "{}", stderr(&output));
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_millis(1400),
        "{waited:?}"
    );
    assert!(stderr(&output).contains("held by someone else"));

    // Released while a long wait runs: the waiter runs its command soon after, not at
    // its next retry (the retry delay is 5 s here).
    let releaser = {
        let urls = nodes.urls.join(",");
        let token = token.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(500));
            let released = Instant::now();
            let output = Command::new(env!("CARGO_BIN_EXE_redlock"))
                .env("REDLOCK_NODES", urls)
                .args(["release", "cli:wait", &token])
                .output()
                .unwrap();
            assert!(output.status.success());
            released
        })
    };
    let output = run(redlock(&nodes).args([
        "exec",
        "cli:wait",
        "--wait",
        "30s",
        "--retry-delay",
        "5000",
        "--retry-jitter",
        "0",
        "--",
        "sh",
        "-c",
        "date +%s%N",
    ]));
    let ran_at = Instant::now();
    assert!(output.status.success(), "{}", stderr(&output));
    let released = releaser.join().unwrap();
    let after = ran_at.duration_since(released);
    assert!(
        after < Duration::from_secs(2),
        "ran {after:?} after the release"
    );
}

#[test]
fn exec_runs_the_command_with_the_lock_and_its_status() {
    let nodes = common::shared(7145);
    let ports: Vec<String> = (0..5).map(|i| nodes.port(i).to_string()).collect();
    let output = run(redlock(&nodes)
        .args([
            "exec",
            "job",
            "--ttl",
            "5000",
            "--",
            "sh",
            "-c",
            "echo \"$REDLOCK_RESOURCE $REDLOCK_TOKEN $REDLOCK_VALID_UNTIL_MS\"; \
             for port in $PORTS; do redis-cli -p \"$port\" get job; done; exit 3",
        ])
        .env("PORTS", ports.join(" ")));
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let text = stdout(&output);
    let lines: Vec<&str> = text.lines().collect();
    let fields: Vec<&str> = lines[0].split(' ').collect();
    assert_eq!(fields[0], "job");
    assert_eq!(fields[1].len(), 40);
    // The child saw the token stored on (at least) a quorum of the nodes; the others
    // may still be on their way when the command starts.
    let holding = lines[1..].iter().filter(|l| **l == fields[1]).count();
    assert!(holding >= 3, "{text}");
    let until: u128 = fields[2].parse().expect("a number");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    assert!(until > now && until <= now + 5000, "{until} vs {now}");
    // Released after the command.
    assert_eq!(nodes.values("job"), vec![None; 5]);

    // A missing command: 127, and nothing left behind.
    let output = run(redlock(&nodes).args(["exec", "job", "--", "/nonexistent/command"]));
    assert_eq!(output.status.code(), Some(127), "{}", stderr(&output));
    assert_eq!(nodes.values("job"), vec![None; 5]);

    // Killed by a signal: 128 + N, like a shell.
    let output = run(redlock(&nodes).args(["exec", "job", "--", "sh", "-c", "kill -9 $$"]));
    assert_eq!(output.status.code(), Some(137), "{}", stderr(&output));
}

#[test]
fn acquire_extend_release_and_status_for_scripts() {
    let nodes = common::shared(7145);
    let output = run(redlock(&nodes).args(["acquire", "deploy", "--ttl", "10000"]));
    assert!(output.status.success(), "{}", stderr(&output));
    let token = stdout(&output);
    assert_eq!(token.len(), 40);
    assert!(nodes
        .values("deploy")
        .iter()
        .all(|v| v.as_deref() == Some(token.as_str())));

    // Held: exec and acquire give up with 75 after their retries, saying why.
    let started = Instant::now();
    let output = run(redlock(&nodes).args([
        "exec",
        "deploy",
        "--retry",
        "2",
        "--retry-delay",
        "20",
        "--retry-jitter",
        "10",
        "--",
        "true",
    ]));
    assert_eq!(output.status.code(), Some(75));
    assert!(
        stderr(&output).contains("held by someone else"),
        "{}",
        stderr(&output)
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    let output = run(redlock(&nodes).args(["--json", "acquire", "deploy", "--retry", "0"]));
    assert_eq!(output.status.code(), Some(75));
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    assert_eq!(json["reason"], "conflict");
    assert_eq!(json["nodes"].as_array().unwrap().len(), 5);

    // Status shows the holder on every node.
    let output = run(redlock(&nodes).args(["--json", "status", "deploy"]));
    assert!(output.status.success());
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    for node in json["nodes"].as_array().unwrap() {
        assert_eq!(node["value"], token.as_str());
        let ttl = node["ttl_ms"].as_i64().unwrap();
        assert!(ttl > 0 && ttl <= 10_000);
    }
    let output = run(redlock(&nodes).args(["status", "deploy"]));
    assert!(stdout(&output).contains(&format!("{token} is on 5 of 5 nodes")));

    // Extend: with the token, yes; with another, no (exit 1).
    let output = run(redlock(&nodes).args(["extend", "deploy", &token, "--ttl", "60000"]));
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(Nodes::eventually(Duration::from_secs(1), || nodes
        .pttl(0, "deploy")
        > 50_000));
    let output = run(redlock(&nodes).args(["extend", "deploy", "someone-elses", "--ttl", "60000"]));
    assert_eq!(output.status.code(), Some(1));

    // Release: another token deletes nothing (exit 1); the right one deletes all.
    let output = run(redlock(&nodes).args(["release", "deploy", "someone-elses"]));
    assert_eq!(output.status.code(), Some(1));
    assert!(nodes
        .values("deploy")
        .iter()
        .all(|v| v.as_deref() == Some(token.as_str())));
    let output = run(redlock(&nodes).args(["--json", "release", "deploy", &token]));
    assert!(output.status.success());
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    // The release decides at a quorum; the CLI still waits for the rest before exiting.
    assert!(json["released"].as_u64().unwrap() >= 3, "{json}");
    assert_eq!(nodes.values("deploy"), vec![None; 5]);

    // Extending the released lock: "not held", never "held by someone else".
    let output = run(redlock(&nodes).args(["extend", "deploy", &token, "--ttl", "60000"]));
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("not held"), "{}", stderr(&output));
    assert!(
        !stderr(&output).contains("someone else"),
        "{}",
        stderr(&output)
    );
    let output = run(redlock(&nodes).args(["--json", "extend", "deploy", &token]));
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(json["reason"], "not_held", "{json}");

    // Unreachable nodes: 69 (not 75: nothing says the lock is held), and the message
    // says so.
    let output = run(Command::new(env!("CARGO_BIN_EXE_redlock")).args([
        "--nodes",
        "redis://127.0.0.1:7150",
        "acquire",
        "x",
        "--retry",
        "0",
    ]));
    assert_eq!(output.status.code(), Some(69));
    assert!(
        stderr(&output).contains("unreachable"),
        "{}",
        stderr(&output)
    );
    // A bad URL or configuration: 2.
    let output = run(Command::new(env!("CARGO_BIN_EXE_redlock")).args([
        "--nodes",
        "http://nope",
        "acquire",
        "x",
    ]));
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let output = run(redlock(&nodes).args(["acquire", "x", "--ttl", "0"]));
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
}

#[test]
fn exec_extends_while_the_command_runs_and_stops_it_when_lost() {
    let nodes = common::shared(7145);
    // A command longer than the TTL completes under automatic extension.
    let output = run(redlock(&nodes).args([
        "--json",
        "exec",
        "long",
        "--ttl",
        "400",
        "--auto-extend",
        "--",
        "sleep",
        "1.2",
    ]));
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events: Vec<serde_json::Value> = stderr(&output)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert_eq!(events[0]["event"], "acquired");
    let last = events.last().unwrap();
    assert_eq!(last["event"], "released");
    assert!(last["extensions"].as_u64().unwrap() >= 3, "{last}");
    assert_eq!(nodes.values("long"), vec![None; 5]);

    // Without --auto-extend the command may only run for the lock's validity.
    let started = Instant::now();
    let output = run(redlock(&nodes).args(["exec", "short", "--ttl", "400", "--", "sleep", "10"]));
    assert_eq!(output.status.code(), Some(75), "{}", stderr(&output));
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(stderr(&output).contains("lock lost"), "{}", stderr(&output));

    // Keys deleted behind its back: SIGTERM at once, exit 75.
    let child = redlock(&nodes)
        .args([
            "--json",
            "exec",
            "taken",
            "--ttl",
            "600",
            "--auto-extend",
            "--",
            "sleep",
            "30",
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    assert!(Nodes::eventually(Duration::from_secs(2), || nodes
        .values("taken")
        .iter()
        .all(Option::is_some)));
    let deleted = Instant::now();
    for i in 0..5 {
        nodes.del(i, "taken");
    }
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(75), "{}", stderr(&output));
    assert!(
        deleted.elapsed() < Duration::from_secs(2),
        "{:?}",
        deleted.elapsed()
    );
    assert!(
        stderr(&output).contains("\"reason\":\"not_held\""),
        "{}",
        stderr(&output)
    );

    // A command that ignores SIGTERM gets SIGKILL after the grace period.
    let child = redlock(&nodes)
        .args([
            "exec",
            "stubborn",
            "--ttl",
            "600",
            "--auto-extend",
            "--grace",
            "300",
            "--",
            "sh",
            "-c",
            "trap '' TERM; exec sleep 30",
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    assert!(Nodes::eventually(Duration::from_secs(2), || nodes
        .values("stubborn")
        .iter()
        .all(Option::is_some)));
    let deleted = Instant::now();
    for i in 0..5 {
        nodes.del(i, "stubborn");
    }
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(75), "{}", stderr(&output));
    let took = deleted.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(3),
        "{took:?}"
    );

    // SIGTERM to redlock reaches the command; the lock is released after it exits.
    let child = redlock(&nodes)
        .args(["exec", "forwarded", "--ttl", "5000", "--", "sleep", "30"])
        .spawn()
        .unwrap();
    assert!(Nodes::eventually(Duration::from_secs(2), || nodes
        .values("forwarded")
        .iter()
        .all(Option::is_some)));
    // SAFETY: kill(2) on a child we own.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(128 + 15));
    assert_eq!(nodes.values("forwarded"), vec![None; 5]);
}
