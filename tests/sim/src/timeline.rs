//! A run's timeline as a picture (SVG): one lane per client, per node and for the
//! resource, on the global clock nobody inside the run can read.
//!
//! - **Client lanes**: the lock as the client believes it (a bar from the moment it
//!   learns it holds the lock to the end of its validity, its release or its crash),
//!   pauses (grey, hatched), crashes (a cross).
//! - **Node lanes**: who holds the lock as the node sees it (the key and its owner until
//!   it is deleted or expires on the node's clock; for ZooKeeper and etcd, the owner of
//!   the first entry in the queue), the node's down time, clock jumps.
//! - **Resource lane**: every write, filled when accepted, crossed out when the
//!   resource rejected its fencing token.
//! - **In red**: the overlap of two beliefs that breaks exclusion, and a stale write.
//!
//! Everything drawn comes from the run's own state, so a seed always gives the same
//! bytes.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::check::{Resource, Session};
use crate::trace::stamp;

/// One lane's bar: `[from, to)` in global time, drawn in `client`'s colour.
#[derive(Clone, Debug)]
struct Span {
    from: u64,
    to: u64,
    client: Option<usize>,
}

/// What a node lane shows right now (the holder's bar is still open).
#[derive(Clone, Debug)]
struct Open {
    client: Option<usize>,
    value: Vec<u8>,
    from: u64,
    /// When the key will expire if nothing touches it (global time).
    until: u64,
}

/// The recorder, filled while the run goes, rendered at its end.
#[derive(Debug, Default)]
pub struct Timeline {
    clients: Vec<String>,
    nodes: Vec<String>,
    pauses: Vec<(usize, u64, Option<u64>)>,
    client_crashes: Vec<(usize, u64)>,
    node_down: Vec<(usize, u64, Option<u64>)>,
    jumps: Vec<(usize, u64, u64)>,
    holds: Vec<(usize, Span)>,
    open: BTreeMap<usize, Open>,
    tokens: BTreeMap<Vec<u8>, usize>,
    notes: Vec<(usize, u64, String)>,
}

const COLOURS: [&str; 4] = ["#1f77b4", "#e6820e", "#2ca02c", "#9467bd"];
const RED: &str = "#d62728";
/// A white outline behind text drawn over bars.
const HALO: &str =
    r##"paint-order="stroke" stroke="white" stroke-width="3" stroke-linejoin="round""##;

/// `t` microseconds as seconds, with as many decimals as it needs (at most two).
fn seconds(t: u64) -> String {
    let text = format!("{:.2}", t as f64 / 1e6);
    let text = text.trim_end_matches('0');
    match text.strip_suffix('.') {
        Some(whole) => format!("{whole}.0"),
        None => text.to_string(),
    }
}

fn colour(client: Option<usize>) -> &'static str {
    client.map_or("#7f7f7f", |c| COLOURS[c % COLOURS.len()])
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

impl Timeline {
    /// A recorder for these clients and nodes (names as in the trace).
    pub fn new(clients: Vec<String>, nodes: Vec<String>) -> Timeline {
        Timeline {
            clients,
            nodes,
            ..Timeline::default()
        }
    }

    /// `client` sent `value` as its lock value (so a node holding it shows its owner).
    pub fn value_sent(&mut self, client: usize, value: &[u8]) {
        self.tokens.entry(value.to_vec()).or_insert(client);
    }

    /// After `node` changed or may have changed: it now holds `value` (owned by
    /// `owner` if known) until `until`, or nothing.
    pub fn node_holds(
        &mut self,
        node: usize,
        now: u64,
        held: Option<(Vec<u8>, u64)>,
        owner: Option<usize>,
    ) {
        let same = match (&self.open.get(&node), &held) {
            (Some(open), Some((value, _))) => open.value == *value && open.until >= now,
            (None, None) => true,
            _ => false,
        };
        if same {
            if let (Some(open), Some((_, until))) = (self.open.get_mut(&node), held) {
                open.until = until;
            }
            return;
        }
        if let Some(open) = self.open.remove(&node) {
            let to = open.until.min(now).max(open.from);
            self.holds.push((
                node,
                Span {
                    from: open.from,
                    to,
                    client: open.client,
                },
            ));
        }
        if let Some((value, until)) = held {
            let client = owner.or_else(|| self.tokens.get(&value).copied());
            self.open.insert(
                node,
                Open {
                    client,
                    value,
                    from: now,
                    until,
                },
            );
        }
    }

    /// `client` pauses at `now`.
    pub fn pause(&mut self, client: usize, now: u64) {
        self.pauses.push((client, now, None));
    }

    /// `client` resumes at `now`.
    pub fn resume(&mut self, client: usize, now: u64) {
        if let Some(pause) = self
            .pauses
            .iter_mut()
            .rev()
            .find(|p| p.0 == client && p.2.is_none())
        {
            pause.2 = Some(now);
        }
    }

    /// `client` crashes at `now`.
    pub fn client_crash(&mut self, client: usize, now: u64) {
        self.client_crashes.push((client, now));
    }

    /// `node` goes down at `now`.
    pub fn node_down(&mut self, node: usize, now: u64) {
        self.node_down.push((node, now, None));
    }

    /// `node` serves again at `now`.
    pub fn node_up(&mut self, node: usize, now: u64) {
        if let Some(down) = self
            .node_down
            .iter_mut()
            .rev()
            .find(|d| d.0 == node && d.2.is_none())
        {
            down.2 = Some(now);
        }
    }

    /// `node`'s clock jumps forward by `by` at `now`.
    pub fn jump(&mut self, node: usize, now: u64, by: u64) {
        self.jumps.push((node, now, by));
    }

    /// A short label on `node`'s lane at `now`.
    pub fn note(&mut self, node: usize, now: u64, text: String) {
        self.notes.push((node, now, text));
    }

    /// The picture, at the end of the run.
    pub fn render(
        mut self,
        title: &str,
        finished: u64,
        sessions: &[Session],
        resource: &Resource,
        verdict: &[String],
    ) -> String {
        let open: Vec<(usize, Open)> = std::mem::take(&mut self.open).into_iter().collect();
        for (node, open) in open {
            let to = open.until.min(finished.max(open.from + 1));
            self.holds.push((
                node,
                Span {
                    from: open.from,
                    to,
                    client: open.client,
                },
            ));
        }
        // The time axis: the whole run, rounded up to a tenth of a second.
        let end = finished.max(1).div_ceil(100_000) * 100_000;
        let left = 170.0;
        let width = 1000.0;
        let plot = width - left - 30.0;
        let x = |t: u64| left + plot * (t.min(end) as f64) / (end as f64);
        let lane = 34.0;
        let top = 58.0;
        let lanes = self.clients.len() + self.nodes.len() + 1;
        let legend_y = top + lane * lanes as f64 + 44.0;
        let height = legend_y + 26.0 + 18.0 * verdict.len() as f64 + 10.0;
        let mut svg = String::new();
        let w = &mut svg;
        // Writing to a String cannot fail.
        let _ = writeln!(
            w,
            r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height:.0}" viewBox="0 0 {width} {height:.0}" font-family="DejaVu Sans, Verdana, sans-serif" font-size="12">"##
        );
        let _ = writeln!(
            w,
            r##"<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#e8e8e8"/><line x1="0" y1="0" x2="0" y2="6" stroke="#9a9a9a" stroke-width="2"/></pattern></defs>"##
        );
        let _ = writeln!(w, r##"<rect width="100%" height="100%" fill="white"/>"##);
        let _ = writeln!(
            w,
            r##"<text x="12" y="22" font-size="15" font-weight="bold">{}</text>"##,
            escape(title)
        );
        // Grid and axis.
        let step = match end {
            0..=1_000_000 => 100_000,
            1_000_001..=2_500_000 => 250_000,
            2_500_001..=5_000_000 => 500_000,
            _ => 1_000_000,
        };
        let mut t = 0;
        while t <= end {
            let _ = writeln!(
                w,
                r##"<line x1="{0:.1}" y1="{1:.1}" x2="{0:.1}" y2="{2:.1}" stroke="#dddddd"/><text x="{0:.1}" y="{3:.1}" text-anchor="middle" fill="#555">{4} s</text>"##,
                x(t),
                top - 6.0,
                top + lane * lanes as f64,
                top - 10.0,
                seconds(t)
            );
            t += step;
        }
        let lane_y = |index: usize| top + lane * index as f64;
        let label = |w: &mut String, index: usize, text: &str, shade: bool| {
            let y = lane_y(index);
            if shade {
                let _ = writeln!(
                    w,
                    r##"<rect x="0" y="{y:.1}" width="{width}" height="{lane}" fill="#f7f7f7"/>"##
                );
            }
            let _ = writeln!(
                w,
                r##"<text x="12" y="{:.1}" font-weight="bold">{}</text>"##,
                y + lane / 2.0 + 4.0,
                escape(text)
            );
        };
        // Lane backgrounds and labels.
        for (index, name) in self.clients.iter().enumerate() {
            label(w, index, &format!("client {name}"), index % 2 == 0);
        }
        let node_base = self.clients.len();
        for (index, name) in self.nodes.iter().enumerate() {
            label(w, node_base + index, name, (node_base + index) % 2 == 0);
        }
        let resource_lane = node_base + self.nodes.len();
        label(w, resource_lane, "resource", resource_lane % 2 == 0);
        // The exclusion overlap, behind the bars.
        if let Some((a, b, from, to)) = overlap(sessions) {
            let (first, second) = (a.min(b), a.max(b));
            let y = lane_y(first) + 2.0;
            let h = lane_y(second) + lane - 2.0 - y;
            let _ = writeln!(
                w,
                r##"<rect x="{:.1}" y="{y:.1}" width="{:.1}" height="{h:.1}" fill="{RED}" fill-opacity="0.25" stroke="{RED}" stroke-width="1.5"/>"##,
                x(from),
                (x(to) - x(from)).max(3.0)
            );
            let _ = writeln!(
                w,
                r##"<text x="{:.1}" y="{:.1}" fill="{RED}" font-weight="bold" {HALO}>both believe they hold the lock</text>"##,
                x(to) + 6.0,
                lane_y(first) + lane + 4.0
            );
        }
        // Client beliefs.
        for session in sessions {
            for &(from, to) in &session.intervals {
                let to = if to == u64::MAX { finished } else { to };
                if to <= from {
                    continue;
                }
                let y = lane_y(session.client) + 9.0;
                let _ = writeln!(
                    w,
                    r##"<rect x="{:.1}" y="{y:.1}" width="{:.1}" height="16" rx="3" fill="{}" fill-opacity="0.85"><title>{} believes it holds the lock {}..{}</title></rect>"##,
                    x(from),
                    (x(to) - x(from)).max(2.0),
                    colour(Some(session.client)),
                    escape(&self.clients[session.client]),
                    stamp(from),
                    stamp(to)
                );
                if x(to) - x(from) > 70.0 {
                    let token = match session.fencing_token {
                        Some(token) => format!("holds (token {token})"),
                        None => "holds".into(),
                    };
                    let _ = writeln!(
                        w,
                        r##"<text x="{:.1}" y="{:.1}" fill="white" font-size="11">{token}</text>"##,
                        x(from) + 5.0,
                        y + 12.0
                    );
                }
            }
        }
        // Pauses and crashes.
        for &(client, from, to) in &self.pauses {
            let to = to.unwrap_or(finished);
            let y = lane_y(client) + 4.0;
            let _ = writeln!(
                w,
                r##"<rect x="{:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="url(#hatch)" fill-opacity="0.8" stroke="#666"/><text x="{:.1}" y="{:.1}" fill="#333" font-size="11">paused</text>"##,
                x(from),
                (x(to) - x(from)).max(2.0),
                lane - 8.0,
                x(from) + 4.0,
                y + lane / 2.0
            );
        }
        for &(client, at) in &self.client_crashes {
            cross(w, x(at), lane_y(client) + lane / 2.0, "#000");
            let _ = writeln!(
                w,
                r##"<text x="{:.1}" y="{:.1}" font-size="11">crash</text>"##,
                x(at) + 8.0,
                lane_y(client) + lane / 2.0 + 4.0
            );
        }
        // Node lanes.
        for (node, span) in &self.holds {
            if span.to <= span.from {
                continue;
            }
            let y = lane_y(node_base + node) + 9.0;
            let who = span
                .client
                .map_or("?".to_string(), |c| self.clients[c].clone());
            let _ = writeln!(
                w,
                r##"<rect x="{:.1}" y="{y:.1}" width="{:.1}" height="16" fill="{}" fill-opacity="0.45" stroke="{}"><title>{} holds the lock for {who} {}..{}</title></rect>"##,
                x(span.from),
                (x(span.to) - x(span.from)).max(2.0),
                colour(span.client),
                colour(span.client),
                escape(&self.nodes[*node]),
                stamp(span.from),
                stamp(span.to)
            );
            if x(span.to) - x(span.from) > 24.0 {
                let _ = writeln!(
                    w,
                    r##"<text x="{:.1}" y="{:.1}" font-size="11">{who}</text>"##,
                    x(span.from) + 4.0,
                    y + 12.0
                );
            }
        }
        for &(node, from, to) in &self.node_down {
            let to = to.unwrap_or(finished);
            let y = lane_y(node_base + node) + 4.0;
            let _ = writeln!(
                w,
                r##"<rect x="{:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="#444" fill-opacity="0.75"/>"##,
                x(from),
                (x(to) - x(from)).max(3.0),
                lane - 8.0,
            );
            let _ = writeln!(
                w,
                r##"<text x="{:.1}" y="{:.1}" font-size="11" fill="#000">crash</text>"##,
                x(from) + 6.0,
                y - 1.0
            );
        }
        for &(node, at, by) in &self.jumps {
            let y = lane_y(node_base + node);
            let _ = writeln!(
                w,
                r##"<path d="M{0:.1},{1:.1} l6,10 l-4,0 l4,10 l-10,-13 l4,0 z" fill="{RED}"/><text x="{2:.1}" y="{3:.1}" fill="{RED}" font-size="11" {HALO}>clock jumps +{4:.1} s</text>"##,
                x(at) - 3.0,
                y + 6.0,
                x(at) + 8.0,
                y + 14.0,
                by as f64 / 1e6
            );
        }
        for (node, at, text) in &self.notes {
            let _ = writeln!(
                w,
                r##"<text x="{:.1}" y="{:.1}" font-size="10" fill="#555">{}</text>"##,
                x(*at) + 3.0,
                lane_y(node_base + node) + lane - 2.0,
                escape(text)
            );
        }
        // Writes: a tick on the writer's lane and a mark on the resource lane.
        let stale = stale_index(resource, sessions);
        let ry = lane_y(resource_lane) + lane / 2.0;
        // A rejected write is labelled once per holding, on the first of two rows with
        // room for it (a holder whose check refuses its repeated token has many).
        let mut labelled = Vec::new();
        let mut free_from = [f64::MIN; 2];
        for (index, write) in resource.log.iter().enumerate() {
            let client = sessions[write.session].client;
            let cx = x(write.at);
            let _ = writeln!(
                w,
                r##"<line x1="{cx:.1}" y1="{:.1}" x2="{cx:.1}" y2="{:.1}" stroke="{}" stroke-width="2"/>"##,
                lane_y(client) + 26.0,
                lane_y(client) + 32.0,
                colour(Some(client))
            );
            let tip = format!(
                "{} writes at {}{}{}",
                self.clients[client],
                stamp(write.at),
                write
                    .fencing_token
                    .map_or(String::new(), |t| format!(" with token {t}")),
                if write.accepted {
                    ""
                } else {
                    ": rejected (the resource had accepted this token or a greater one)"
                }
            );
            if write.accepted {
                let _ = writeln!(
                    w,
                    r##"<circle cx="{cx:.1}" cy="{ry:.1}" r="6" fill="{}"><title>{}</title></circle>"##,
                    colour(Some(client)),
                    escape(&tip)
                );
            } else {
                let _ = writeln!(
                    w,
                    r##"<circle cx="{cx:.1}" cy="{ry:.1}" r="6" fill="white" stroke="{}" stroke-width="2"><title>{}</title></circle>"##,
                    colour(Some(client)),
                    escape(&tip)
                );
                cross(w, cx, ry, colour(Some(client)));
                let text = format!(
                    "{} rejected (token {})",
                    self.clients[client],
                    write.fencing_token.unwrap_or(0)
                );
                // About 6 px per character at this size.
                let width = 6.0 * text.len() as f64;
                let row = free_from.iter().position(|&free| cx - 20.0 >= free);
                if let (false, Some(row)) = (labelled.contains(&write.session), row) {
                    labelled.push(write.session);
                    free_from[row] = cx - 20.0 + width + 6.0;
                    let _ = writeln!(
                        w,
                        r##"<text x="{:.1}" y="{:.1}" font-size="11" {HALO}>{}</text>"##,
                        cx - 20.0,
                        ry + 22.0 + 12.0 * row as f64,
                        escape(&text)
                    );
                }
            }
            if stale == Some(index) {
                let _ = writeln!(
                    w,
                    r##"<circle cx="{cx:.1}" cy="{ry:.1}" r="10" fill="none" stroke="{RED}" stroke-width="3"/><text x="{:.1}" y="{:.1}" fill="{RED}" font-weight="bold" {HALO}>stale write by {}</text>"##,
                    cx - 20.0,
                    ry + 24.0,
                    escape(&self.clients[client])
                );
            }
        }
        // Legend and verdict.
        let y = legend_y;
        let _ = writeln!(
            w,
            r##"<rect x="12" y="{:.1}" width="26" height="12" rx="3" fill="{}"/><text x="44" y="{:.1}">client believes it holds the lock</text><rect x="270" y="{:.1}" width="26" height="12" fill="{}" fill-opacity="0.45" stroke="{}"/><text x="302" y="{:.1}">node holds it for that client</text><rect x="500" y="{:.1}" width="26" height="12" fill="url(#hatch)" stroke="#666"/><text x="532" y="{:.1}">paused</text><rect x="600" y="{:.1}" width="26" height="12" fill="#444" fill-opacity="0.75"/><text x="632" y="{:.1}">node down</text><circle cx="730" cy="{:.1}" r="6" fill="#555"/><text x="742" y="{:.1}">write accepted</text><circle cx="860" cy="{:.1}" r="6" fill="white" stroke="#555" stroke-width="2"/><text x="872" y="{:.1}">rejected</text>"##,
            y - 10.0,
            COLOURS[0],
            y,
            y - 10.0,
            COLOURS[0],
            COLOURS[0],
            y,
            y - 10.0,
            y,
            y - 10.0,
            y,
            y - 4.0,
            y,
            y - 4.0,
            y
        );
        for (index, line) in verdict.iter().enumerate() {
            let fill = if line.contains("VIOLATED") {
                RED
            } else {
                "#222"
            };
            let _ = writeln!(
                w,
                r##"<text x="12" y="{:.1}" fill="{fill}">{}</text>"##,
                y + 24.0 + 18.0 * index as f64,
                escape(line)
            );
        }
        svg.push_str("</svg>\n");
        svg
    }
}

fn cross(w: &mut String, cx: f64, cy: f64, stroke: &str) {
    let _ = writeln!(
        w,
        r##"<path d="M{:.1},{:.1} l10,10 m0,-10 l-10,10" stroke="{stroke}" stroke-width="2.5"/>"##,
        cx - 5.0,
        cy - 5.0
    );
}

/// The first overlap of two different clients' beliefs: (client, client, from, to).
fn overlap(sessions: &[Session]) -> Option<(usize, usize, u64, u64)> {
    let mut best: Option<(usize, usize, u64, u64)> = None;
    for (i, a) in sessions.iter().enumerate() {
        for b in &sessions[i + 1..] {
            if a.client == b.client {
                continue;
            }
            for &(af, at) in &a.intervals {
                for &(bf, bt) in &b.intervals {
                    let (from, to) = (af.max(bf), at.min(bt));
                    if from < to && best.is_none_or(|(_, _, f, _)| from < f) {
                        best = Some((a.client, b.client, from, to));
                    }
                }
            }
        }
    }
    best
}

/// The index in the resource's log of the first stale write (see [`crate::check`]).
fn stale_index(resource: &Resource, sessions: &[Session]) -> Option<usize> {
    let mut latest: Option<usize> = None;
    for (index, write) in resource.log.iter().enumerate() {
        if !write.accepted {
            continue;
        }
        if let Some(newest) = latest {
            if sessions[write.session].granted < sessions[newest].granted {
                return Some(index);
            }
        }
        if latest.is_none_or(|n| sessions[write.session].granted > sessions[n].granted) {
            latest = Some(write.session);
        }
    }
    None
}
