//! The timeline of a run, as text. Built only when asked for: every line comes from
//! the run's own state, so the same seed gives the same bytes.

use std::fmt::Write as _;

use crate::node::{script_name_for_sha, script_name_for_text};

/// A growing timeline, or nothing when tracing is off.
#[derive(Default)]
pub struct Trace {
    text: Option<String>,
}

impl Trace {
    /// A trace that records if `on`.
    pub fn new(on: bool) -> Trace {
        Trace {
            text: on.then(String::new),
        }
    }

    /// True when recording.
    pub fn is_on(&self) -> bool {
        self.text.is_some()
    }

    /// Records `line` from `who` at global time `now`; `line` is only built if recording.
    pub fn line(&mut self, now: u64, who: &str, line: impl FnOnce() -> String) {
        if let Some(text) = self.text.as_mut() {
            // Writing to a String cannot fail.
            let _ = writeln!(text, "{:>12}  {:<5} {}", stamp(now), who, line());
        }
    }

    /// Records a line without a time stamp.
    pub fn plain(&mut self, line: impl FnOnce() -> String) {
        if let Some(text) = self.text.as_mut() {
            text.push_str(&line());
            text.push('\n');
        }
    }

    /// The recorded text, if any.
    pub fn into_text(self) -> Option<String> {
        self.text
    }
}

/// Global time as `seconds.micros s`.
pub fn stamp(micros: u64) -> String {
    format!("{}.{:06}s", micros / 1_000_000, micros % 1_000_000)
}

/// A value for a trace: tokens cut to 8 characters, scripts named.
pub fn short(bytes: &[u8]) -> String {
    if let Some(name) = script_name_for_text(bytes) {
        return format!("<{name} script>");
    }
    let text = String::from_utf8_lossy(bytes);
    if text.len() > 16 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        format!("{}..", &text[..8])
    } else {
        text.into_owned()
    }
}

/// A command for a trace.
pub fn command(args: &[Vec<u8>]) -> String {
    let mut parts = Vec::with_capacity(args.len());
    for (index, arg) in args.iter().enumerate() {
        if index == 1 && args[0].eq_ignore_ascii_case(b"EVALSHA") {
            if let Some(name) = script_name_for_sha(arg) {
                parts.push(format!("<{name} sha1>"));
                continue;
            }
        }
        parts.push(short(arg));
    }
    parts.join(" ")
}
