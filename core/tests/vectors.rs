//! Replays every conformance vector in `tests/vectors/` against the core.
//! The format is documented in `tests/vectors/README.md`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use redlock_core::resp::Decoder;
use redlock_core::{
    AcquireOptions, Config, KeepAlive, KeepAliveAction, Lease, NodeResult, Operation, Outcome,
    Output, Redlock, Reply, RequestId, Time, ACQUIRE_SCRIPT, EXTEND_SCRIPT, RELEASE_SCRIPT,
};
use serde_json::{json, Value};

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors")
}

fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    files
}

fn config_from(value: &Value) -> Result<Config, String> {
    let int = |name: &str| {
        value.get(name).map(|v| {
            v.as_u64()
                .unwrap_or_else(|| panic!("{name} not an integer"))
        })
    };
    let nodes = int("nodes").expect("config.nodes") as usize;
    let ttl = Duration::from_millis(int("ttl_ms").expect("config.ttl_ms"));
    let mut builder = Config::builder(nodes, ttl);
    if let Some(f) = value.get("drift_factor") {
        builder = builder.drift_factor(f.as_f64().expect("drift_factor"));
    }
    if let Some(us) = int("drift_fixed_us") {
        builder = builder.drift_fixed(Duration::from_micros(us));
    }
    if let Some(us) = int("node_timeout_us") {
        builder = builder.node_timeout(Duration::from_micros(us));
    }
    if let Some(us) = int("min_validity_us") {
        builder = builder.min_validity(Duration::from_micros(us));
    }
    if let Some(n) = int("attempts") {
        builder = builder.attempts(n as u32);
    }
    if let Some(us) = int("retry_delay_us") {
        builder = builder.retry_delay(Duration::from_micros(us));
    }
    if let Some(us) = int("retry_jitter_us") {
        builder = builder.retry_jitter(Duration::from_micros(us));
    }
    if let Some(prefix) = value.get("key_prefix") {
        builder = builder.key_prefix(prefix.as_str().expect("key_prefix").as_bytes());
    }
    if let Some(on) = value.get("fencing").and_then(Value::as_bool) {
        builder = builder.fencing(on);
    }
    if let Some(n) = int("token_bytes") {
        builder = builder.token_bytes(n as usize);
    }
    builder.build().map_err(|e| e.code().to_string())
}

fn reply_from(value: &Value) -> Reply {
    let text = || {
        value["value"]
            .as_str()
            .expect("reply value text")
            .to_string()
    };
    match value["type"].as_str().expect("reply type") {
        "ok" => Reply::Ok,
        "status" => Reply::Status(text()),
        "nil" => Reply::Nil,
        "integer" => Reply::Integer(value["value"].as_i64().expect("integer reply")),
        "bulk" => Reply::Bulk(text().into_bytes()),
        "array" => Reply::Array(
            value["value"]
                .as_array()
                .expect("array")
                .iter()
                .map(reply_from)
                .collect(),
        ),
        "error" => Reply::Error(text()),
        "timeout" => Reply::Timeout,
        "connection_failed" => Reply::ConnectionFailed(text()),
        other => panic!("unknown reply type {other}"),
    }
}

fn reply_to_json(reply: &Reply) -> Value {
    match reply {
        Reply::Ok => json!({"type": "ok"}),
        Reply::Status(s) => json!({"type": "status", "value": s}),
        Reply::Nil => json!({"type": "nil"}),
        Reply::Integer(n) => json!({"type": "integer", "value": n}),
        Reply::Bulk(b) => json!({"type": "bulk", "value": String::from_utf8_lossy(b)}),
        Reply::Array(items) => {
            json!({"type": "array", "value": items.iter().map(reply_to_json).collect::<Vec<_>>()})
        }
        Reply::Error(s) => json!({"type": "error", "value": s}),
        Reply::Timeout => json!({"type": "timeout"}),
        Reply::ConnectionFailed(s) => json!({"type": "connection_failed", "value": s}),
        other => panic!("unexpected reply variant {other:?}"),
    }
}

fn nodes_to_json(nodes: &[NodeResult]) -> Value {
    nodes
        .iter()
        .map(|n| match n {
            NodeResult::Error(text) => json!({"error": text}),
            other => json!(other.code()),
        })
        .collect()
}

fn outcome_to_json(outcome: &Outcome) -> Value {
    match outcome {
        Outcome::Acquired(a) => {
            let mut value = json!({
                "kind": "acquired",
                "token": a.lease.token().as_str(),
                "valid_until": a.lease.valid_until().as_micros(),
                "validity": a.validity.as_micros() as u64,
                "attempts": a.attempts,
                "nodes": nodes_to_json(&a.nodes),
            });
            if let Some(fence) = a.lease.fencing_token() {
                value["fencing_token"] = json!(fence);
            }
            value
        }
        Outcome::NotAcquired(n) => json!({
            "kind": "not_acquired",
            "reason": n.reason.code(),
            "attempts": n.attempts,
            "token": n.token.as_str(),
            "nodes": nodes_to_json(&n.nodes),
        }),
        Outcome::Extended(e) => json!({
            "kind": "extended",
            "token": e.lease.token().as_str(),
            "valid_until": e.lease.valid_until().as_micros(),
            "validity": e.validity.as_micros() as u64,
            "extensions": e.lease.extensions(),
            "nodes": nodes_to_json(&e.nodes),
        }),
        Outcome::NotExtended(n) => json!({
            "kind": "not_extended",
            "reason": n.reason.code(),
            "valid_until": n.lease.valid_until().as_micros(),
            "validity": n.validity.as_micros() as u64,
            "retry_at": n.retry_at.map(Time::as_micros),
            "nodes": nodes_to_json(&n.nodes),
        }),
        Outcome::Released(r) => json!({
            "kind": "released",
            "released": r.released,
            "nodes": nodes_to_json(&r.nodes),
        }),
        Outcome::NotReleased(r) => json!({
            "kind": "not_released",
            "released": r.released,
            "nodes": nodes_to_json(&r.nodes),
        }),
        Outcome::Inspected(i) => json!({
            "kind": "inspected",
            "holder": i.holder.as_ref().map(|h| String::from_utf8_lossy(h).into_owned()),
            "nodes": nodes_to_json(&i.nodes),
        }),
        Outcome::NotInspected(i) => json!({
            "kind": "not_inspected",
            "nodes": nodes_to_json(&i.nodes),
        }),
        other => panic!("unexpected outcome variant {other:?}"),
    }
}

fn expand_placeholders(value: &Value) -> Value {
    match value {
        Value::String(s) => Value::String(match s.as_str() {
            "{{ACQUIRE_SCRIPT}}" => ACQUIRE_SCRIPT.to_string(),
            "{{FENCED_ACQUIRE_SCRIPT}}" => redlock_core::FENCED_ACQUIRE_SCRIPT.to_string(),
            "{{WRITE_BACK_SCRIPT}}" => redlock_core::WRITE_BACK_SCRIPT.to_string(),
            "{{RELEASE_SCRIPT}}" => RELEASE_SCRIPT.to_string(),
            "{{EXTEND_SCRIPT}}" => EXTEND_SCRIPT.to_string(),
            _ => s.clone(),
        }),
        Value::Array(items) => Value::Array(items.iter().map(expand_placeholders).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), expand_placeholders(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

struct Replay {
    client: Redlock,
    ops: HashMap<String, Operation>,
    leases: HashMap<String, Lease>,
    /// The last outcome each operation handed out (for `keepalive_outcome`).
    outcomes: HashMap<String, Outcome>,
    keepalives: HashMap<String, KeepAlive>,
    last: Option<String>,
}

fn keepalive_action_to_json(action: KeepAliveAction) -> Value {
    match action {
        KeepAliveAction::Extend => json!({"extend": {}}),
        KeepAliveAction::WaitUntil(t) => json!({"wait": t.as_micros()}),
        KeepAliveAction::Lost(reason) => json!({"lost": reason.code()}),
        KeepAliveAction::Stopped => json!({"stopped": {}}),
        other => panic!("unexpected keep-alive action {other:?}"),
    }
}

impl Replay {
    fn drain(&mut self, name: &str) -> Vec<Value> {
        let mut outputs = Vec::new();
        let op = self.ops.get_mut(name).expect("operation exists");
        let mut outcome = None;
        while let Some(output) = op.poll_output() {
            outputs.push(match output {
                Output::Send(cmd) => json!({"send": {
                    "node": cmd.node(),
                    "request": cmd.request_id().0,
                    "deadline": cmd.deadline().as_micros(),
                    "argv": cmd.args().map(|a| String::from_utf8_lossy(a).into_owned()).collect::<Vec<_>>(),
                }}),
                Output::Wait(t) => json!({"wait": t.as_micros()}),
                Output::Outcome(o) => {
                    let value = json!({"outcome": outcome_to_json(&o)});
                    outcome = Some(o);
                    value
                }
                other => panic!("unexpected output {other:?}"),
            });
            assert!(outputs.len() < 10_000, "outputs never end");
        }
        if let Some(lease) = outcome.as_ref().and_then(Outcome::lease) {
            self.leases.insert(name.to_string(), lease.clone());
        }
        if let Some(outcome) = outcome {
            self.outcomes.insert(name.to_string(), outcome);
        }
        outputs
    }

    /// A keep-alive step (`keepalive`, `keepalive_outcome`, `keepalive_failure`,
    /// `keepalive_stop`, `keepalive_poll`): its input, then one poll at `now`. The
    /// keep-alive's lease afterwards is kept under its name, for extensions of it.
    fn keepalive_step(&mut self, step: &Value, now: Time) -> Result<Option<StepResult>, String> {
        let Some(name) = step.get("name").and_then(Value::as_str) else {
            return Ok(None);
        };
        if let Some(args) = step.get("keepalive") {
            let lease_name = args["lease"].as_str().ok_or("keepalive needs lease")?;
            let lease = self
                .leases
                .get(lease_name)
                .ok_or_else(|| format!("no lease named {lease_name}"))?;
            let keep = KeepAlive::new(self.client.config(), lease.clone());
            self.keepalives.insert(name.to_string(), keep);
        } else if let Some(args) = step.get("keepalive_outcome") {
            let op = args["op"].as_str().ok_or("keepalive_outcome needs op")?;
            let outcome = self
                .outcomes
                .get(op)
                .ok_or_else(|| format!("no outcome of {op}"))?;
            let keep = self.keepalives.get_mut(name).ok_or("no such keep-alive")?;
            keep.handle_outcome(outcome, now);
        } else if step.get("keepalive_failure").is_some() {
            let keep = self.keepalives.get_mut(name).ok_or("no such keep-alive")?;
            keep.handle_failure(now);
        } else if step.get("keepalive_stop").is_some() {
            let keep = self.keepalives.get_mut(name).ok_or("no such keep-alive")?;
            keep.stop();
        } else if step.get("keepalive_poll").is_none() {
            return Ok(None);
        }
        let keep = self.keepalives.get_mut(name).ok_or("no such keep-alive")?;
        let action = keep.poll(now);
        let lease = keep.lease().clone();
        let mut outputs = vec![keepalive_action_to_json(action)];
        outputs.push(json!({"valid_until": lease.valid_until().as_micros()}));
        self.leases.insert(name.to_string(), lease);
        Ok(Some((None, outputs, None)))
    }

    /// Runs one step; returns the outputs and the usage error, if any.
    /// Runs one step: its error, its outputs, and whether the operation it acted on
    /// listens afterwards (`None` for a lease step).
    fn step(&mut self, step: &Value) -> Result<StepResult, String> {
        let now = Time::from_micros(step.get("now").and_then(Value::as_u64).unwrap_or(0));
        let op_name = step.get("op").and_then(Value::as_str).map(str::to_string);
        let strings = |v: &Value| -> Vec<String> {
            v.as_array()
                .expect("resources")
                .iter()
                .map(|s| s.as_str().expect("resource").to_string())
                .collect()
        };
        if let Some(result) = self.keepalive_step(step, now)? {
            return Ok(result);
        }
        let result: Result<(), String>;
        let target: String;
        if let Some(args) = step.get("acquire") {
            target = op_name.ok_or("acquire needs op")?;
            let random = hex::decode(args["random"].as_str().ok_or("acquire needs random")?);
            let resources = strings(&args["resources"]);
            let started = match args.get("wait_ms").and_then(Value::as_u64) {
                Some(ms) => {
                    let options = AcquireOptions::new().wait(Duration::from_millis(ms));
                    self.client
                        .acquire_with_random_options(&resources, &options, random, now)
                }
                None => self.client.acquire_with_random(&resources, random, now),
            };
            match started {
                Ok(op) => {
                    self.ops.insert(target.clone(), op);
                    self.last = Some(target.clone());
                    result = Ok(());
                }
                Err(e) => return Ok((Some(e.code().to_string()), Vec::new(), None)),
            }
        } else if let Some(args) = step.get("inspect") {
            target = op_name.ok_or("inspect needs op")?;
            let resources = strings(&args["resources"]);
            match self.client.inspect(&resources, now) {
                Ok(op) => {
                    self.ops.insert(target.clone(), op);
                    self.last = Some(target.clone());
                    result = Ok(());
                }
                Err(e) => return Ok((Some(e.code().to_string()), Vec::new(), None)),
            }
        } else if let Some(args) = step.get("extend").or_else(|| step.get("release")) {
            target = op_name.ok_or("extend/release needs op")?;
            let lease_name = args["lease"].as_str().ok_or("needs lease")?;
            let lease = self
                .leases
                .get(lease_name)
                .ok_or_else(|| format!("no lease named {lease_name}"))?;
            let op = if step.get("extend").is_some() {
                let started = match args.get("ttl_ms").and_then(Value::as_u64) {
                    Some(ms) => self
                        .client
                        .extend_for(lease, Duration::from_millis(ms), now),
                    None => self.client.extend(lease, now),
                };
                match started {
                    Ok(op) => op,
                    Err(e) => return Ok((Some(e.code().to_string()), Vec::new(), None)),
                }
            } else {
                self.client.release(lease, now)
            };
            self.ops.insert(target.clone(), op);
            self.last = Some(target.clone());
            result = Ok(());
        } else if let Some(args) = step.get("lease") {
            let name = step["name"].as_str().ok_or("lease needs name")?;
            let resources = strings(&args["resources"]);
            let token = args["token"].as_str().ok_or("lease needs token")?;
            let valid_until = Time::from_micros(args["valid_until"].as_u64().unwrap_or(0));
            return match self.client.lease(&resources, token, valid_until) {
                Ok(lease) => {
                    self.leases.insert(name.to_string(), lease);
                    Ok((None, Vec::new(), None))
                }
                Err(e) => Ok((Some(e.code().to_string()), Vec::new(), None)),
            };
        } else if let Some(args) = step.get("reply") {
            target = op_name
                .or_else(|| self.last.clone())
                .ok_or("reply before any operation")?;
            let op = self
                .ops
                .get_mut(&target)
                .ok_or_else(|| format!("no operation {target}"))?;
            let request = RequestId(args["request"].as_u64().ok_or("reply needs request")?);
            result = op
                .handle_reply(request, reply_from(&args["value"]), now)
                .map_err(|e| e.code().to_string());
        } else if let Some(args) = step.get("notice") {
            target = op_name
                .or_else(|| self.last.clone())
                .ok_or("notice before any operation")?;
            let op = self
                .ops
                .get_mut(&target)
                .ok_or_else(|| format!("no operation {target}"))?;
            let node = args["node"].as_u64().ok_or("notice needs node")?;
            let node = usize::try_from(node).unwrap_or(usize::MAX);
            // `message`: the text the notice carried; without it, the bare notice.
            result = match args.get("message").and_then(Value::as_str) {
                Some(message) => op.handle_notice_message(node, message.as_bytes(), now),
                None => op.handle_notice(node, now),
            }
            .map_err(|e| e.code().to_string());
        } else if let Some(args) = step.get("subscribed") {
            target = op_name
                .or_else(|| self.last.clone())
                .ok_or("subscribed before any operation")?;
            let op = self
                .ops
                .get_mut(&target)
                .ok_or_else(|| format!("no operation {target}"))?;
            let node = args["node"].as_u64().ok_or("subscribed needs node")?;
            let node = usize::try_from(node).unwrap_or(usize::MAX);
            result = op
                .handle_subscribed(node, now)
                .map_err(|e| e.code().to_string());
        } else if step.get("abandon").is_some() {
            target = op_name
                .or_else(|| self.last.clone())
                .ok_or("abandon before any operation")?;
            let op = self
                .ops
                .get_mut(&target)
                .ok_or_else(|| format!("no operation {target}"))?;
            op.abandon(now);
            result = Ok(());
        } else if step.get("timeout").is_some() {
            target = op_name
                .or_else(|| self.last.clone())
                .ok_or("timeout before any operation")?;
            let op = self
                .ops
                .get_mut(&target)
                .ok_or_else(|| format!("no operation {target}"))?;
            op.handle_timeout(now);
            result = Ok(());
        } else {
            return Err(format!("unknown step {step}"));
        }
        let error = result.err();
        let outputs = self.drain(&target);
        let listens = self.ops.get(&target).map(Operation::listens);
        Ok((error, outputs, listens))
    }
}

/// A step's error, outputs, and whether its operation listens afterwards.
type StepResult = (Option<String>, Vec<Value>, Option<bool>);

mod hex {
    pub fn decode(text: &str) -> Vec<u8> {
        assert!(text.len() % 2 == 0, "odd hex length");
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
            .collect()
    }
}

fn run_vector(path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let vector: Value = serde_json::from_str(&text).map_err(|e| format!("invalid JSON: {e}"))?;
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    if vector["name"].as_str() != Some(stem) {
        return Err(format!(
            "name {:?} does not match the file name",
            vector["name"]
        ));
    }
    for field in ["description", "why"] {
        if vector[field].as_str().is_none_or(str::is_empty) {
            return Err(format!("missing {field}"));
        }
    }
    let config = config_from(&vector["config"]);
    if let Some(expected) = vector.get("config_error") {
        let expected = expected.as_str().ok_or("config_error must be a string")?;
        return match config {
            Err(code) if code == expected => Ok(()),
            Err(code) => Err(format!("config error {code}, expected {expected}")),
            Ok(_) => Err(format!("config accepted, expected {expected}")),
        };
    }
    let config = config.map_err(|code| format!("config rejected: {code}"))?;
    let mut replay = Replay {
        client: Redlock::with_seed(config, [0; 32]),
        ops: HashMap::new(),
        leases: HashMap::new(),
        outcomes: HashMap::new(),
        keepalives: HashMap::new(),
        last: None,
    };
    let steps = vector["steps"].as_array().ok_or("missing steps")?;
    for (i, step) in steps.iter().enumerate() {
        let (error, outputs, listens) = replay.step(step).map_err(|e| format!("step {i}: {e}"))?;
        if let Some(expected) = step.get("listens") {
            let expected = expected.as_bool().ok_or("listens must be true or false")?;
            if listens != Some(expected) {
                return Err(format!(
                    "step {i}: listens {listens:?}, expected {expected}"
                ));
            }
        }
        let expected_error = step
            .get("error")
            .and_then(Value::as_str)
            .map(str::to_string);
        if error != expected_error {
            return Err(format!(
                "step {i}: error {error:?}, expected {expected_error:?}"
            ));
        }
        if step.get("lease").is_some() {
            continue;
        }
        let expected = expand_placeholders(
            step.get("expect")
                .ok_or_else(|| format!("step {i}: missing expect"))?,
        );
        let actual = Value::Array(outputs);
        if actual != expected {
            return Err(format!(
                "step {i}: outputs differ\n  expected: {}\n  actual:   {}",
                serde_json::to_string(&expected).unwrap_or_default(),
                serde_json::to_string(&actual).unwrap_or_default()
            ));
        }
    }
    Ok(())
}

fn run_resp_vector(path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let vector: Value = serde_json::from_str(&text).map_err(|e| format!("invalid JSON: {e}"))?;
    let mut decoder = Decoder::new();
    let mut replies = Vec::new();
    let mut error = None;
    'chunks: for chunk in vector["chunks"].as_array().ok_or("missing chunks")? {
        decoder.feed(&hex::decode(chunk.as_str().ok_or("chunk must be hex")?));
        loop {
            match decoder.next_reply() {
                Ok(Some(reply)) => replies.push(reply_to_json(&reply)),
                Ok(None) => break,
                Err(e) => {
                    error = Some(e.code().to_string());
                    break 'chunks;
                }
            }
        }
    }
    let expected_replies = vector["replies"].clone();
    if Value::Array(replies.clone()) != expected_replies {
        return Err(format!(
            "replies {} expected {}",
            Value::Array(replies),
            expected_replies
        ));
    }
    let expected_error = vector["error"].as_str().map(str::to_string);
    if error != expected_error {
        return Err(format!("error {error:?}, expected {expected_error:?}"));
    }
    Ok(())
}

/// Replays every vector in `files`; panics listing each failure, or when fewer than
/// `at_least` files were found (a moved folder must not pass as "nothing failed").
fn replay_all(files: &[PathBuf], what: &str, at_least: usize) {
    let failures: Vec<String> = files
        .iter()
        .filter_map(|path| {
            run_vector(path)
                .err()
                .map(|e| format!("{}: {e}", path.display()))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} {what} failed:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n\n")
    );
    assert!(files.len() >= at_least, "only {} {what}", files.len());
}

#[test]
fn every_conformance_vector() {
    replay_all(&json_files(&vectors_dir()), "vectors", 40);
}

/// Fencing and waiting vectors: replayed by the core here; the other bindings' runners
/// take them up with the bindings' support for fencing and wait limits.
#[test]
fn every_fencing_and_waiting_vector() {
    let mut files = json_files(&vectors_dir().join("fencing"));
    files.extend(json_files(&vectors_dir().join("waiting")));
    files.extend(json_files(&vectors_dir().join("inspect")));
    replay_all(&files, "fencing, waiting and inspection vectors", 7);
}

/// Keep-alive vectors: the keep-alive state machine driven by the outcomes of the
/// operations of the same file.
#[test]
fn every_keepalive_vector() {
    replay_all(
        &json_files(&vectors_dir().join("keepalive")),
        "keep-alive vectors",
        4,
    );
}

#[test]
fn every_resp_vector() {
    let files = json_files(&vectors_dir().join("resp"));
    let failures: Vec<String> = files
        .iter()
        .filter_map(|path| {
            run_resp_vector(path)
                .err()
                .map(|e| format!("{}: {e}", path.display()))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} RESP vectors failed:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n\n")
    );
    assert!(files.len() >= 10, "only {} RESP vectors", files.len());
}

#[test]
fn script_sha1s_match_their_texts() {
    for (script, sha) in [
        (ACQUIRE_SCRIPT, redlock_core::ACQUIRE_SHA1),
        (RELEASE_SCRIPT, redlock_core::RELEASE_SHA1),
        (EXTEND_SCRIPT, redlock_core::EXTEND_SHA1),
        (
            redlock_core::FENCED_ACQUIRE_SCRIPT,
            redlock_core::FENCED_ACQUIRE_SHA1,
        ),
        (
            redlock_core::WRITE_BACK_SCRIPT,
            redlock_core::WRITE_BACK_SHA1,
        ),
        (
            redlock_core::FENCED_SET_SCRIPT,
            redlock_core::FENCED_SET_SHA1,
        ),
        (
            redlock_core::QUEUED_ACQUIRE_SCRIPT,
            redlock_core::QUEUED_ACQUIRE_SHA1,
        ),
    ] {
        assert_eq!(sha1_smol::Sha1::from(script).digest().to_string(), sha);
    }
}
