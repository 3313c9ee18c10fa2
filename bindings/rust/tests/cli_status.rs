//! The `redlock` tool's exit statuses (one per kind of failure, as `--help` lists them)
//! and its handling of signals: every signal that would end it reaches the command, the
//! lock is released once the command has exited, and the command never outlives
//! `redlock`. Nodes on base ports 7700 (plain), 7706 (password) and 7710 (TLS); nothing
//! listens on 7715.

mod common;

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::Nodes;

fn redlock() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_redlock"));
    cmd.args(["--node-timeout", "1000"]);
    cmd
}

fn with_nodes(urls: &[String]) -> Command {
    let mut cmd = redlock();
    cmd.env("REDLOCK_NODES", urls.join(","));
    cmd
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).to_string()
}

fn signal(child: &Child, signal: i32) {
    // SAFETY: kill(2) on a child we own.
    assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
}

fn process_alive(pid: i32) -> bool {
    // A zombie still "exists" for kill(0); /proc's state tells it apart.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

#[test]
fn help_lists_every_exit_status() {
    let output = redlock().arg("--help").output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    for line in ["  2    ", "  69   ", "  75   ", "  77   ", "  128+N"] {
        assert!(text.contains(line), "--help lacks {line:?}:\n{text}");
    }
    assert!(
        text.contains("NOAUTH") && text.contains("SIGKILL"),
        "{text}"
    );
}

#[test]
fn each_failure_has_its_own_exit_status() {
    let nodes = Nodes::start_with(7700, &["--nodes", "3"]);
    let secured = Nodes::start_with(7706, &["--nodes", "3", "--requirepass", "s3cret"]);
    let tls = Nodes::start_with(7710, &["--nodes", "3", "--tls"]);

    // Held by someone else: 75.
    let holder = with_nodes(&nodes.urls)
        .args(["acquire", "busy", "--ttl", "20000"])
        .output()
        .unwrap();
    assert!(holder.status.success(), "{}", stderr(&holder));
    let output = with_nodes(&nodes.urls)
        .args(["acquire", "busy", "--retry", "0"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(75), "{}", stderr(&output));
    assert!(stderr(&output).contains("held by someone else"));

    // Nothing listening: 69, the same for exec, status and release.
    let dead = ["redis://127.0.0.1:7715".to_string()];
    for args in [
        &["acquire", "x", "--retry", "0"][..],
        &["exec", "x", "--retry", "0", "--", "true"],
        &["release", "x", "0123456789abcdef0123456789abcdef01234567"],
        &["status", "x"],
    ] {
        let output = with_nodes(&dead).args(args).output().unwrap();
        assert_eq!(
            output.status.code(),
            Some(69),
            "{args:?}: {}",
            stderr(&output)
        );
    }

    // No password, or a wrong one: 77, and the message says why.
    let bare: Vec<String> = secured
        .urls
        .iter()
        .map(|u| u.replace(":s3cret@", ""))
        .collect();
    let wrong: Vec<String> = secured
        .urls
        .iter()
        .map(|u| u.replace(":s3cret@", ":wrong@"))
        .collect();
    for urls in [&bare, &wrong] {
        let output = with_nodes(urls)
            .args(["acquire", "x", "--retry", "0"])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(77), "{}", stderr(&output));
        let text = stderr(&output);
        assert!(
            text.contains("NOAUTH") || text.contains("uthentication"),
            "{text}"
        );
    }
    // The right password works.
    let output = with_nodes(&secured.urls)
        .args(["exec", "x", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));

    // A TLS node whose certificate we do not trust: 77; with its CA: 0.
    let output = with_nodes(&tls.urls)
        .args(["acquire", "x", "--retry", "0"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(77), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("certificate"),
        "{}",
        stderr(&output)
    );
    let ca = tls.run("ca", None);
    let output = with_nodes(&tls.urls)
        .args(["--tls-ca-cert", &ca, "exec", "x", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));

    // Usage: 2 (a bad URL, a bad CA file, a bad TTL, a missing argument).
    for args in [
        &["--nodes", "http://nope", "acquire", "x"][..],
        &["--tls-ca-cert", "/nonexistent.pem", "acquire", "x"],
        &["acquire", "x", "--ttl", "0"],
        &["exec", "x"],
    ] {
        let output = with_nodes(&nodes.urls).args(args).output().unwrap();
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
    }
}

/// Starts `redlock exec RESOURCE -- sh -c SCRIPT` and waits until the lock is on
/// every node and the command has written its pid to `pidfile`.
fn exec_holding(nodes: &Nodes, resource: &str, script: &str, pidfile: &str) -> (Child, i32) {
    let _ = std::fs::remove_file(pidfile);
    let child = with_nodes(&nodes.urls)
        .args(["exec", resource, "--ttl", "20000", "--auto-extend", "--"])
        .args([
            "sh",
            "-c",
            &format!("echo $$ > {pidfile}.tmp; mv {pidfile}.tmp {pidfile}; {script}"),
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(Nodes::eventually(Duration::from_secs(5), || {
        std::path::Path::new(pidfile).exists() && nodes.values(resource).iter().all(Option::is_some)
    }));
    let pid = std::fs::read_to_string(pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    (child, pid)
}

#[test]
fn every_ending_signal_reaches_the_command_and_the_lock_is_released() {
    let nodes = Nodes::start_with(7720, &["--nodes", "3"]);
    let dir = std::env::temp_dir().join(format!("redlock-cli-signals-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pidfile = dir.join("pid").display().to_string();

    // SIGINT, SIGQUIT, SIGUSR1, SIGUSR2 and SIGALRM sent with kill(2) (not from a
    // terminal) are passed on; the command dies of it, redlock reports 128 + N and
    // the key is gone from every node.
    for (name, signo) in [
        ("INT", libc::SIGINT),
        ("QUIT", libc::SIGQUIT),
        ("USR1", libc::SIGUSR1),
        ("USR2", libc::SIGUSR2),
        ("ALRM", libc::SIGALRM),
        ("TERM", libc::SIGTERM),
        ("HUP", libc::SIGHUP),
    ] {
        let resource = format!("signal-{name}");
        // `exec sleep`: the shell is replaced, so the signal reaches sleep itself.
        let (child, pid) = exec_holding(&nodes, &resource, "exec sleep 30", &pidfile);
        signal(&child, signo);
        let output = child.wait_with_output().unwrap();
        assert_eq!(
            output.status.code(),
            Some(128 + signo),
            "{name}: {}",
            stderr(&output)
        );
        assert!(!process_alive(pid), "{name}: the command outlived redlock");
        assert_eq!(
            nodes.values(&resource),
            vec![None; 3],
            "{name}: lock left behind"
        );
    }

    // A command that handles the signal and goes on: redlock goes on too, holding the
    // lock, and releases it when the command ends by itself.
    let (child, _) = exec_holding(
        &nodes,
        "handled",
        "trap 'echo got-usr1 >&2' USR1; sleep 0.6; sleep 0.6; exit 7",
        &pidfile,
    );
    signal(&child, libc::SIGUSR1);
    std::thread::sleep(Duration::from_millis(200));
    // Still held: on a quorum at least (a loaded machine may have left one node's SET
    // past its node timeout).
    assert!(nodes.values("handled").iter().flatten().count() >= 2);
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(7), "{}", stderr(&output));
    assert!(stderr(&output).contains("got-usr1"), "{}", stderr(&output));
    assert_eq!(nodes.values("handled"), vec![None; 3]);

    // SIGKILL cannot be caught: the command is killed with redlock (it holds no lock
    // any more), and the key expires with its TTL.
    let (mut child, pid) = exec_holding(&nodes, "killed", "exec sleep 30", &pidfile);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        Nodes::eventually(Duration::from_secs(2), || !process_alive(pid)),
        "the command outlived redlock"
    );

    // A signal while still waiting for the lock ends the wait with 128 + N, and leaves
    // nothing behind.
    let holder = with_nodes(&nodes.urls)
        .args(["acquire", "waited", "--ttl", "20000"])
        .output()
        .unwrap();
    let token = String::from_utf8_lossy(&holder.stdout).trim().to_string();
    let waiting = with_nodes(&nodes.urls)
        .args(["exec", "waited", "--retry", "1000", "--retry-delay", "50"])
        .args(["--retry-jitter", "10", "--", "true"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    signal(&waiting, libc::SIGINT);
    let output = waiting.wait_with_output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(128 + libc::SIGINT),
        "{}",
        stderr(&output)
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(nodes.values("waited"), vec![Some(token); 3]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Bad input exits with 2 and a message naming the rule and its range, never a panic;
/// a huge resource name is cut short in messages. Nodes on base port 7791 (3).
#[test]
fn bad_input_exits_2_with_the_rule_and_range() {
    let nodes = Nodes::start_with(7791, &["--nodes", "3"]);
    for (args, words) in [
        (
            &["acquire", "x", "--ttl", "0"][..],
            &["--ttl", "from 1 to"][..],
        ),
        (
            &["acquire", "x", "--ttl", "-5"],
            &["--ttl", "from 1 to 1000000000000"],
        ),
        (
            &["acquire", "x", "--ttl", "99999999999999999999999"],
            &["--ttl", "from 1 to"],
        ),
        (
            &["acquire", "x", "--ttl", "1000000000001"],
            &["out of range", "from 1 to"],
        ),
        (
            &[
                "extend",
                "x",
                "0123456789abcdef0123456789abcdef",
                "--ttl",
                "0",
            ],
            &["--ttl", "from 1 to"],
        ),
        (
            &["--node-timeout", "0", "acquire", "x"],
            &["--node-timeout", "from 1 to"],
        ),
        (
            &["--node-timeout", "-1", "acquire", "x"],
            &["--node-timeout", "from 1 to"],
        ),
        (
            &["--node-timeout", "20000", "acquire", "x", "--ttl", "30000"],
            &["a third of the TTL", "10000 ms"],
        ),
        (
            &["acquire", "x", "--retry-delay", "0"],
            &["--retry-delay", "from 1 to"],
        ),
        (
            &["acquire", "x", "--retry-delay", "99999999999999999"],
            &["--retry-delay", "out of range"],
        ),
        (
            &[
                "acquire",
                "x",
                "--retry-jitter",
                "500",
                "--retry-delay",
                "100",
            ],
            &["jitter"],
        ),
        (
            &["acquire", "x", "--retry", "4294967295"],
            &["attempts", "1000000"],
        ),
        (&["acquire", "x", "--wait", "-1"], &["--wait", "from 0 to"]),
        (
            &["acquire", "x", "--wait", "99999999999m"],
            &["--wait", "at most"],
        ),
        (
            &["acquire", "x", "--wait", "1e300"],
            &["--wait", "ms, s or m"],
        ),
        (
            &["exec", "x", "--grace", "-1", "--", "true"],
            &["--grace", "from 0 to"],
        ),
        (
            &["--nodes", "redis://127.0.0.1:0", "acquire", "x"],
            &["port", "1 to 65535"],
        ),
        (
            &["--nodes", "redis://127.0.0.1:99999", "acquire", "x"],
            &["port", "1 to 65535"],
        ),
        (
            &["--nodes", "http://127.0.0.1:6379", "acquire", "x"],
            &["scheme", "redis://"],
        ),
    ] {
        // Without the default --node-timeout of `redlock()`.
        let output = Command::new(env!("CARGO_BIN_EXE_redlock"))
            .env("REDLOCK_NODES", nodes.urls.join(","))
            .args(args)
            .output()
            .unwrap();
        let text = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {text}");
        for word in words {
            assert!(text.contains(word), "{args:?}: {text:?} lacks {word:?}");
        }
        assert!(!text.contains("panicked"), "{args:?}: {text}");
    }

    // A 100 KB resource name (an argument may not exceed 128 KB): a valid key, and every
    // message cuts it to 64 bytes and "…".
    let resource = "r".repeat(100 * 1024);
    let holder = with_nodes(&nodes.urls)
        .args(["acquire", &resource, "--ttl", "20000"])
        .output()
        .unwrap();
    assert!(holder.status.success(), "{}", stderr(&holder));
    assert!(
        stderr(&holder).len() < 300,
        "{} bytes",
        stderr(&holder).len()
    );
    let output = with_nodes(&nodes.urls)
        .args(["acquire", &resource, "--retry", "0"])
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(75),
        "{}",
        &stderr(&output)[..200]
    );
    let text = stderr(&output);
    assert!(text.len() < 2000, "{} bytes", text.len());
    assert!(text.contains(&format!("{}…", "r".repeat(64))), "{text}");
    let token = String::from_utf8_lossy(&holder.stdout).trim().to_string();
    let output = with_nodes(&nodes.urls)
        .args(["release", &resource, &token])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", &stderr(&output));
    assert!(output.stdout.len() < 300, "{} bytes", output.stdout.len());
}
