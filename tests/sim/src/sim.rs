//! The event loop: global virtual time, a queue of events ordered by (time, sequence),
//! nodes, network, clients and the resource, and the checks at the end.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::rc::Rc;

use redlock_core::{Reply, Time};

use crate::check::{self, Resource, Session, Verdict};
use crate::clock::Clock;
use crate::coordination::{Delivery, Service};
use crate::model::millis;
use crate::model::{describe_reply, Action, LockModel, Tag};
use crate::network::{Direction, Network};
use crate::node::{Effects, Mutation, Node};
use crate::rng::{Rng, Stream};
use crate::scenario::{ClientPlan, Cycle, Fault, Plan, Rule, Scenario, Trigger};
use crate::strategy::{Strategy, KEY, TTL};
use crate::timeline::Timeline;
use crate::trace::{self, stamp, Trace};

/// A run that could not be completed: a bug in the simulation or a driver error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimError(pub String);

impl std::fmt::Display for SimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a run produced.
#[derive(Debug)]
pub struct RunResult {
    /// The checks.
    pub verdict: Verdict,
    /// The timeline, if asked for.
    pub trace: Option<String>,
    /// The timeline as a picture (SVG), when the trace was asked for.
    pub picture: Option<String>,
    /// What the resource saw: per write, the writer's name, whether it was accepted,
    /// and the fencing token it carried.
    pub writes: Vec<(String, bool, Option<u64>)>,
    /// Every acquisition: who, and when (global time) it learned it holds the lock.
    pub grants: Vec<(String, u64)>,
    /// Events processed.
    pub events: u64,
    /// What happened, counted.
    pub stats: Stats,
}

/// Counts of what happened in a run, to see what a suite exercises.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Acquisitions that succeeded.
    pub acquisitions: u64,
    /// Acquisitions that failed (each after all of the core's attempts).
    pub not_acquired: u64,
    /// Extensions that succeeded.
    pub extended: u64,
    /// Extensions that failed.
    pub not_extended: u64,
    /// Times a holder found its lease expired before a write and stopped.
    pub expired_before_write: u64,
    /// Node crashes.
    pub node_crashes: u64,
    /// Client crashes.
    pub client_crashes: u64,
    /// Client pauses.
    pub pauses: u64,
    /// Messages lost (partition, loss or script).
    pub messages_lost: u64,
    /// Writes to the resource.
    pub writes: u64,
}

impl std::ops::AddAssign for Stats {
    fn add_assign(&mut self, other: Stats) {
        self.acquisitions += other.acquisitions;
        self.not_acquired += other.not_acquired;
        self.extended += other.extended;
        self.not_extended += other.not_extended;
        self.expired_before_write += other.expired_before_write;
        self.node_crashes += other.node_crashes;
        self.client_crashes += other.client_crashes;
        self.pauses += other.pauses;
        self.messages_lost += other.messages_lost;
        self.writes += other.writes;
    }
}

/// Runs `scenario` under `strategy` with `seed`.
pub fn run(
    scenario: Scenario,
    strategy: Strategy,
    seed: u64,
    trace: bool,
) -> Result<RunResult, SimError> {
    let plan = scenario.plan(strategy, seed);
    let title = format!("{} / {} / seed {seed}", scenario.name(), strategy.title());
    let mut trace = Trace::new(trace);
    trace.plain(|| {
        format!(
            "scenario {} / strategy {} / seed {seed}",
            scenario.name(),
            strategy.name()
        )
    });
    let mut world = World::new(&plan, strategy, seed, trace)?;
    world.title = title;
    world.run()?;
    Ok(world.finish())
}

/// Runs a plan (built by a scenario or by hand) under `strategy`.
pub fn run_plan(
    plan: &Plan,
    strategy: Strategy,
    seed: u64,
    trace: Trace,
) -> Result<RunResult, SimError> {
    let mut world = World::new(plan, strategy, seed, trace)?;
    world.run()?;
    Ok(world.finish())
}

/// Checks that every index a plan's rules use names a client or node of the run.
fn validate(plan: &Plan, nodes: usize) -> Result<(), SimError> {
    let clients = plan.clients.len();
    let bad = |what: &str, index: usize| {
        Err(SimError(format!(
            "a rule names {what} {index}, which does not exist"
        )))
    };
    for rule in &plan.rules {
        let (client, node) = match rule.trigger {
            Trigger::At(_) => (None, None),
            Trigger::Acquired { client, .. }
            | Trigger::SentAcquire { client, .. }
            | Trigger::SentRelease { client, .. }
            | Trigger::BeforeWrite { client, .. } => (Some(client), None),
            Trigger::Applied { node, client } => (Some(client), Some(node)),
        };
        let (fault_client, fault_nodes): (Option<usize>, &[usize]) = match &rule.fault {
            Fault::CrashNode { node, .. } | Fault::JumpClock { node, .. } => {
                (None, std::slice::from_ref(node))
            }
            Fault::Pause { client, .. }
            | Fault::Resume { client }
            | Fault::CrashClient { client }
            | Fault::StartClient { client } => (Some(*client), &[]),
            Fault::Cut { client, nodes } | Fault::Heal { client, nodes } => {
                (Some(*client), nodes.as_slice())
            }
            Fault::DropNextReply { node, client } => (Some(*client), std::slice::from_ref(node)),
        };
        for index in client.into_iter().chain(fault_client) {
            if index >= clients {
                return bad("client", index);
            }
        }
        for &index in node.iter().chain(fault_nodes) {
            if index >= nodes {
                return bad("node", index);
            }
        }
    }
    Ok(())
}

/// Upper bounds that turn a runaway run into an error rather than a hang.
const MAX_EVENTS: u64 = 2_000_000;
const MAX_TIME: u64 = 600_000_000;

#[derive(Debug)]
enum Event {
    ToNode {
        client: usize,
        node: usize,
        tag: Tag,
        args: Vec<Vec<u8>>,
    },
    ToClient {
        client: usize,
        node: usize,
        tag: Tag,
        reply: Reply,
    },
    Timer {
        client: usize,
        timer: Timer,
        generation: u64,
    },
    Continue {
        client: usize,
        actions: Vec<Action>,
    },
    Restart {
        node: usize,
        generation: u64,
    },
    Replicate {
        node: usize,
        generation: u64,
        mutation: Mutation,
    },
    Fault {
        rule: usize,
    },
    ResumeAfter {
        client: usize,
        pause: u64,
    },
    ServiceCheck,
}

impl Event {
    /// The client whose process handles this event (and which a pause holds back).
    fn client(&self) -> Option<usize> {
        match self {
            Event::ToClient { client, .. }
            | Event::Timer { client, .. }
            | Event::Continue { client, .. } => Some(*client),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Timer {
    Model(usize),
    Start,
    Work,
    Write,
    Extend,
}

impl Timer {
    fn index(self) -> usize {
        match self {
            Timer::Model(slot) => slot.min(1),
            Timer::Start => 2,
            Timer::Work => 3,
            Timer::Write => 4,
            Timer::Extend => 5,
        }
    }
}

/// The queue orders `(time, sequence, slot)` keys; events stay in a slab, so the
/// heap moves small keys rather than whole events.
#[derive(Default)]
struct Queue {
    heap: BinaryHeap<Reverse<(u64, u64, usize)>>,
    slab: Vec<Option<Event>>,
    free: Vec<usize>,
    seq: u64,
}

impl Queue {
    fn push(&mut self, at: u64, event: Event) {
        self.seq += 1;
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slab[slot] = Some(event);
                slot
            }
            None => {
                self.slab.push(Some(event));
                self.slab.len() - 1
            }
        };
        self.heap.push(Reverse((at, self.seq, slot)));
    }

    fn pop(&mut self) -> Option<(u64, Event)> {
        loop {
            let Reverse((at, _, slot)) = self.heap.pop()?;
            self.free.push(slot);
            // Every slot in the heap holds an event; a miss would be skipped, not fatal.
            if let Some(event) = self.slab.get_mut(slot).and_then(Option::take) {
                return Some((at, event));
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    NotStarted,
    Waiting,
    Acquiring,
    Holding,
    Releasing,
    Done,
    Crashed,
}

struct Client {
    name: String,
    clock: Clock,
    model: Box<dyn LockModel>,
    cycles: Vec<Cycle>,
    cycle: usize,
    give_up_at: u64,
    phase: Phase,
    /// Per timer: the generation of its live event, and when that event is due.
    timers: [u64; 6],
    timer_due: [Option<u64>; 6],
    paused: Option<u64>,
    pauses: u64,
    deferred: Vec<Event>,
    session: Option<usize>,
    writes_done: u32,
    acquisitions: u32,
    acquire_calls: u32,
    release_calls: u32,
    writes_total: u32,
    /// When the client last started an acquisition (global time).
    asked: u64,
}

struct World {
    now: u64,
    queue: Queue,
    events: u64,
    strategy: Strategy,
    nodes: Vec<Node>,
    node_names: Vec<Rc<str>>,
    network: Network,
    network_rng: Rng,
    client_rng: Rng,
    clients: Vec<Client>,
    client_names: Vec<Rc<str>>,
    rules: Vec<(Rule, bool)>,
    resource: Resource,
    sessions: Vec<Session>,
    replication_lag: (u64, u64),
    trace: Trace,
    error: Option<SimError>,
    stats: Stats,
    /// The consensus service, for the ZooKeeper and etcd strategies (node 0 is then
    /// the service, not a Redis node).
    service: Option<Service>,
    /// When the service's next expiry check is scheduled.
    service_check: Option<u64>,
    timeline: Option<Timeline>,
    title: String,
}

impl World {
    fn new(
        plan: &Plan,
        strategy: Strategy,
        seed: u64,
        mut trace: Trace,
    ) -> Result<World, SimError> {
        let node_count = strategy.nodes();
        if plan.node_clocks.len() != node_count {
            return Err(SimError(
                "the plan's node count differs from the strategy's".into(),
            ));
        }
        validate(plan, node_count)?;
        let node_names: Vec<Rc<str>> = match strategy.coordination() {
            Some(flavour) => vec![Rc::from(flavour.name())],
            None => (0..node_count)
                .map(|i| Rc::from(char::from(b'A' + (i % 26) as u8).to_string()))
                .collect(),
        };
        let nodes = plan
            .node_clocks
            .iter()
            .map(|clock| Node::new(clock.clone(), strategy.has_replica()))
            .collect();
        let mut clients = Vec::with_capacity(plan.clients.len());
        for (index, spec) in plan.clients.iter().enumerate() {
            clients.push(World::client(index, spec, strategy, seed)?);
        }
        let client_names: Vec<Rc<str>> =
            clients.iter().map(|c| Rc::from(c.name.as_str())).collect();
        for (index, clock) in plan.node_clocks.iter().enumerate() {
            trace.plain(|| {
                format!(
                    "node {}: clock drift {} ppm",
                    node_names[index],
                    clock.ppm()
                )
            });
        }
        for (index, spec) in plan.clients.iter().enumerate() {
            trace.plain(|| {
                format!(
                    "client C{}: clock drift {} ppm, wall clock off by {}, {}",
                    index + 1,
                    spec.clock.ppm(),
                    crate::model::millis(u128::from(spec.wall_offset.unsigned_abs())),
                    match spec.start {
                        Some(at) => format!("starts at {}", stamp(at)),
                        None => "started by a rule".into(),
                    }
                )
            });
        }
        trace.plain(|| {
            format!(
                "network: one-way delay {}..{} us, loss {} per million",
                plan.network.min_delay, plan.network.max_delay, plan.network.loss_per_million
            )
        });
        for rule in &plan.rules {
            trace.plain(|| {
                format!(
                    "rule: on {:?} + {} us: {:?}",
                    rule.trigger, rule.delay, rule.fault
                )
            });
        }
        trace.plain(String::new);
        let timeline = trace.is_on().then(|| {
            Timeline::new(
                client_names
                    .iter()
                    .map(|n: &Rc<str>| n.to_string())
                    .collect(),
                node_names
                    .iter()
                    .map(|n| match strategy.coordination() {
                        Some(_) => format!("{n} (service)"),
                        None => format!("node {n}"),
                    })
                    .collect(),
            )
        });
        let service = strategy
            .coordination()
            .map(|flavour| Service::new(flavour, plan.node_clocks[0].clone()));
        let mut world = World {
            now: 0,
            queue: Queue::default(),
            events: 0,
            strategy,
            network: Network::new(plan.network.clone(), plan.clients.len(), node_count),
            nodes,
            node_names,
            network_rng: Rng::new(seed, Stream::Network),
            client_rng: Rng::new(seed, Stream::Clients),
            clients,
            client_names,
            rules: plan.rules.iter().cloned().map(|r| (r, false)).collect(),
            // The resource checks every token it is given: our fenced strategies through
            // the core's own check, the others by rejecting a lower token.
            resource: if strategy.core_fencing() {
                Resource::with_core_check()
            } else {
                Resource::with_fencing()
            },
            sessions: Vec::new(),
            replication_lag: plan.replication_lag,
            trace,
            error: None,
            stats: Stats::default(),
            service,
            service_check: None,
            timeline,
            title: String::new(),
        };
        for index in 0..world.rules.len() {
            if let Trigger::At(at) = world.rules[index].0.trigger {
                world.rules[index].1 = true;
                let at = at + world.rules[index].0.delay;
                world.schedule(at, Event::Fault { rule: index });
            }
        }
        for (index, spec) in plan.clients.iter().enumerate() {
            if let Some(at) = spec.start {
                world.schedule(
                    at,
                    Event::Timer {
                        client: index,
                        timer: Timer::Start,
                        generation: 0,
                    },
                );
            }
        }
        Ok(world)
    }

    fn client(
        index: usize,
        spec: &ClientPlan,
        strategy: Strategy,
        seed: u64,
    ) -> Result<Client, SimError> {
        let rng = Rng::new(seed ^ ((index as u64 + 1) << 48), Stream::Clients);
        let model = strategy
            .model(
                spec.core_seed,
                spec.core_retry,
                spec.origin,
                spec.wall_offset,
                rng,
            )
            .map_err(SimError)?;
        let give_up_at = spec.cycles.first().map_or(0, |c| c.give_up);
        Ok(Client {
            name: format!("C{}", index + 1),
            clock: spec.clock.clone(),
            model,
            cycles: spec.cycles.clone(),
            cycle: 0,
            give_up_at,
            phase: Phase::NotStarted,
            timers: [0; 6],
            timer_due: [None; 6],
            paused: None,
            pauses: 0,
            deferred: Vec::new(),
            session: None,
            writes_done: 0,
            acquisitions: 0,
            acquire_calls: 0,
            release_calls: 0,
            writes_total: 0,
            asked: 0,
        })
    }

    // ---- the loop -----------------------------------------------------------------

    fn schedule(&mut self, at: u64, event: Event) {
        self.queue.push(at.max(self.now), event);
    }

    fn run(&mut self) -> Result<(), SimError> {
        while let Some((at, event)) = self.queue.pop() {
            self.now = at;
            self.events += 1;
            if self.events > MAX_EVENTS || self.now > MAX_TIME {
                return Err(SimError(format!(
                    "run did not settle by event {} at {}",
                    self.events,
                    stamp(self.now)
                )));
            }
            if let Some(client) = event.client() {
                match self.clients[client].phase {
                    Phase::Crashed => continue,
                    _ if self.clients[client].paused.is_some() => {
                        self.clients[client].deferred.push(event);
                        continue;
                    }
                    _ => {}
                }
            }
            self.handle(event);
            if let Some(error) = self.error.take() {
                return Err(error);
            }
        }
        for client in &self.clients {
            if !matches!(
                client.phase,
                Phase::Done | Phase::Crashed | Phase::NotStarted
            ) {
                return Err(SimError(format!(
                    "{} stuck in {:?} with nothing left to happen",
                    client.name, client.phase
                )));
            }
        }
        Ok(())
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::ToNode {
                client,
                node,
                tag,
                args,
            } => self.node_receives(client, node, tag, args),
            Event::ToClient {
                client,
                node,
                tag,
                reply,
            } => {
                if matches!(self.clients[client].phase, Phase::Done) {
                    return;
                }
                let who = self.client_names[client].clone();
                let from = self.node_names[node].clone();
                self.trace.line(self.now, &who, || {
                    format!("<- {from}: {}", describe_reply(&reply))
                });
                let now = self.local(client);
                let mut out = Vec::new();
                let result = self.clients[client]
                    .model
                    .on_reply(tag, reply, now, &mut out);
                self.model_result(client, result, out);
            }
            Event::Timer {
                client,
                timer,
                generation,
            } => self.timer(client, timer, generation),
            Event::Continue { client, actions } => self.apply(client, actions),
            Event::Restart { node, generation } => {
                if let Some(service) = self.service.as_mut() {
                    if !service.is_up() && self.nodes[node].generation == generation {
                        service.restart(self.now);
                        if let Some(timeline) = self.timeline.as_mut() {
                            timeline.node_up(node, self.now);
                        }
                        let who = self.node_names[node].clone();
                        self.trace.line(self.now, &who, || {
                            "serves again; every session gets a fresh timeout".into()
                        });
                        self.schedule_service_check();
                    }
                    return;
                }
                if self.nodes[node].generation == generation && !self.nodes[node].is_up() {
                    if self.nodes[node].has_replica() {
                        self.nodes[node].promote_replica();
                        let who = self.node_names[node].clone();
                        self.trace
                            .line(self.now, &who, || "replica promoted to master".into());
                    } else {
                        self.nodes[node].restart();
                        let who = self.node_names[node].clone();
                        let keys = self.nodes[node].live_keys(self.now).len();
                        self.trace
                            .line(self.now, &who, || format!("restarted with {keys} key(s)"));
                    }
                    if let Some(timeline) = self.timeline.as_mut() {
                        timeline.node_up(node, self.now);
                    }
                    self.sample_node(node, None);
                }
            }
            Event::Replicate {
                node,
                generation,
                mutation,
            } => {
                if self.nodes[node].generation == generation {
                    self.nodes[node].replicate(mutation);
                }
            }
            Event::Fault { rule } => {
                let fault = self.rules[rule].0.fault.clone();
                self.inject(fault);
            }
            Event::ResumeAfter { client, pause } => {
                if self.clients[client].paused == Some(pause) {
                    self.resume(client);
                }
            }
            Event::ServiceCheck => {
                if self.service_check != Some(self.now) {
                    return;
                }
                self.service_check = None;
                let mut out = Vec::new();
                let ended = match self.service.as_mut() {
                    Some(service) => service.expire(self.now, &mut out),
                    None => return,
                };
                for client in ended {
                    let who = self.node_names[0].clone();
                    let whose = self.client_names[client].clone();
                    self.trace.line(self.now, &who, || {
                        format!(
                            "SESSION of {whose} EXPIRED on the service; its lock entry is deleted"
                        )
                    });
                }
                self.deliver(out);
                self.sample_service();
                self.schedule_service_check();
            }
        }
    }

    // ---- the consensus service (ZooKeeper, etcd) ------------------------------------

    fn service_receives(&mut self, client: usize, tag: Tag, args: Vec<Vec<u8>>) {
        let mut out = Vec::new();
        if let Some(service) = self.service.as_mut() {
            service.execute(self.now, client, tag, &args, &mut out);
        }
        let who = self.node_names[0].clone();
        let from = self.client_names[client].clone();
        let answer = out
            .iter()
            .find(|d| d.client == client && d.tag == tag)
            .map_or("(answers later)".to_string(), |d| describe_reply(&d.reply));
        self.trace.line(self.now, &who, || {
            format!("{} from {from} -> {answer}", trace::command(&args))
        });
        self.deliver(out);
        self.sample_service();
        self.schedule_service_check();
    }

    fn deliver(&mut self, out: Vec<Delivery>) {
        for Delivery { client, tag, reply } in out {
            let route = self.network.route(
                self.now,
                client,
                0,
                Direction::ToClient,
                &mut self.network_rng,
            );
            match route {
                Ok(at) => self.schedule(
                    at,
                    Event::ToClient {
                        client,
                        node: 0,
                        tag,
                        reply,
                    },
                ),
                Err(why) => {
                    self.stats.messages_lost += 1;
                    let who = self.node_names[0].clone();
                    let to = self.client_names[client].clone();
                    self.trace
                        .line(self.now, &who, || format!("reply to {to} lost: {why:?}"));
                }
            }
        }
    }

    fn schedule_service_check(&mut self) {
        // A service that is down checks nothing; its restart schedules the next check.
        let Some(next) = self
            .service
            .as_ref()
            .filter(|s| s.is_up())
            .and_then(|s| s.next_check(self.now))
        else {
            return;
        };
        if self
            .service_check
            .is_none_or(|at| next < at || at < self.now)
        {
            self.service_check = Some(next);
            self.schedule(next, Event::ServiceCheck);
        }
    }

    fn sample_service(&mut self) {
        let (Some(timeline), Some(service)) = (self.timeline.as_mut(), self.service.as_ref())
        else {
            return;
        };
        let holder = service.holder();
        let held = holder.map(|c| (c.to_string().into_bytes(), u64::MAX));
        timeline.node_holds(0, self.now, held, holder);
    }

    /// Records what node `node` holds for the lock key now (for the picture).
    fn sample_node(&mut self, node: usize, owner: Option<usize>) {
        let Some(timeline) = self.timeline.as_mut() else {
            return;
        };
        let state = &self.nodes[node];
        let held = if state.is_up() {
            state
                .live_keys(self.now)
                .into_iter()
                .find(|(key, _, _)| key.as_slice() == KEY.as_bytes())
                .map(|(_, value, left)| {
                    let until = left.map_or(u64::MAX, |left| {
                        let ms = state.clock.local(self.now) / 1000;
                        state.clock.global_at((ms + left) * 1000)
                    });
                    (value, until)
                })
        } else {
            None
        };
        timeline.node_holds(node, self.now, held, owner);
    }

    fn local(&self, client: usize) -> Time {
        Time::from_micros(self.clients[client].clock.local(self.now))
    }

    fn model_result(&mut self, client: usize, result: Result<(), String>, out: Vec<Action>) {
        match result {
            Ok(()) => self.apply(client, out),
            Err(error) => {
                self.error = Some(SimError(format!("{}: {error}", self.client_names[client])))
            }
        }
    }

    // ---- nodes and network ----------------------------------------------------------

    fn send(&mut self, client: usize, node: usize, tag: Tag, args: Vec<Vec<u8>>) {
        if let (Some(timeline), [name, _, value, ..]) = (self.timeline.as_mut(), args.as_slice()) {
            if [&b"SET"[..], b"SETNX", b"GETSET"]
                .iter()
                .any(|c| name.eq_ignore_ascii_case(c))
            {
                timeline.value_sent(client, value);
            }
        }
        let who = self.client_names[client].clone();
        let to = self.node_names[node].clone();
        let route = self.network.route(
            self.now,
            client,
            node,
            Direction::ToNode,
            &mut self.network_rng,
        );
        self.trace.line(self.now, &who, || {
            let lost = match route {
                Ok(_) => String::new(),
                Err(why) => format!("  [lost: {why:?}]"),
            };
            format!("-> {to}: {}{lost}", trace::command(&args))
        });
        match route {
            Ok(at) => self.schedule(
                at,
                Event::ToNode {
                    client,
                    node,
                    tag,
                    args,
                },
            ),
            Err(_) => self.stats.messages_lost += 1,
        }
    }

    fn node_receives(&mut self, client: usize, node: usize, tag: Tag, args: Vec<Vec<u8>>) {
        if self.service.is_some() {
            self.service_receives(client, tag, args);
            return;
        }
        let who = self.node_names[node].clone();
        let mut effects = Effects::default();
        let reply = if self.nodes[node].is_up() {
            let mut log = Vec::new();
            let reply = self.nodes[node].execute(self.now, &args, &mut log, &mut effects);
            if self.nodes[node].has_replica() {
                let generation = self.nodes[node].generation;
                for mutation in log {
                    let lag = self
                        .network_rng
                        .range(self.replication_lag.0, self.replication_lag.1);
                    self.schedule(
                        self.now + lag,
                        Event::Replicate {
                            node,
                            generation,
                            mutation,
                        },
                    );
                }
            }
            reply
        } else {
            Reply::ConnectionFailed("connection refused".into())
        };
        let from = self.client_names[client].clone();
        let node_clock = self.nodes[node].clock.local(self.now);
        self.trace.line(self.now, &who, || {
            format!(
                "{} from {from} -> {}  [node clock {}]",
                trace::command(&args),
                describe_reply(&reply),
                stamp(node_clock)
            )
        });
        let route = self.network.route(
            self.now,
            client,
            node,
            Direction::ToClient,
            &mut self.network_rng,
        );
        match route {
            Ok(at) => self.schedule(
                at,
                Event::ToClient {
                    client,
                    node,
                    tag,
                    reply,
                },
            ),
            Err(why) => {
                self.stats.messages_lost += 1;
                self.trace
                    .line(self.now, &who, || format!("reply to {from} lost: {why:?}"));
            }
        }
        self.sample_node(node, effects.created.then_some(client));
        if effects.created {
            self.fire(Trigger::Applied { node, client });
        }
    }

    // ---- faults -----------------------------------------------------------------------

    fn fire(&mut self, trigger: Trigger) {
        for index in 0..self.rules.len() {
            let (rule, fired) = &mut self.rules[index];
            if *fired || rule.trigger != trigger {
                continue;
            }
            *fired = true;
            if rule.delay == 0 {
                let fault = rule.fault.clone();
                self.inject(fault);
            } else {
                let at = self.now + rule.delay;
                self.schedule(at, Event::Fault { rule: index });
            }
        }
    }

    fn inject(&mut self, fault: Fault) {
        match fault {
            Fault::CrashNode {
                node,
                downtime,
                keep_data,
            } => {
                if let Some(service) = self.service.as_mut() {
                    if !service.is_up() {
                        return;
                    }
                    service.crash();
                    self.nodes[node].generation += 1;
                    let generation = self.nodes[node].generation;
                    self.stats.node_crashes += 1;
                    if let Some(timeline) = self.timeline.as_mut() {
                        timeline.node_down(node, self.now);
                    }
                    let who = self.node_names[node].clone();
                    self.trace.line(self.now, &who, || {
                        format!(
                            "CRASH of the ensemble's leader: unavailable for {} (the log keeps every acknowledged write)",
                            stamp(downtime)
                        )
                    });
                    self.schedule(self.now + downtime, Event::Restart { node, generation });
                    return;
                }
                if !self.nodes[node].is_up() {
                    return;
                }
                let downtime = downtime.max(self.strategy.min_downtime());
                self.stats.node_crashes += 1;
                self.nodes[node].crash(keep_data);
                let generation = self.nodes[node].generation;
                let who = self.node_names[node].clone();
                let replica = self.nodes[node].has_replica();
                self.trace.line(self.now, &who, || {
                    format!(
                        "CRASH ({}), {} in {}",
                        if keep_data {
                            "data persisted"
                        } else {
                            "data lost"
                        },
                        if replica {
                            "replica promoted"
                        } else {
                            "restarts"
                        },
                        stamp(downtime)
                    )
                });
                if let Some(timeline) = self.timeline.as_mut() {
                    timeline.node_down(node, self.now);
                }
                self.sample_node(node, None);
                self.schedule(self.now + downtime, Event::Restart { node, generation });
            }
            Fault::JumpClock { node, by } => {
                self.nodes[node].clock.jump(self.now, by);
                let who = self.node_names[node].clone();
                let service = self.service.is_some();
                self.trace.line(self.now, &who, || {
                    format!(
                        "CLOCK JUMPS forward by {}{}",
                        stamp(by),
                        if service {
                            " (the wall clock: session timers run on a monotonic clock)"
                        } else {
                            ""
                        }
                    )
                });
                if let Some(timeline) = self.timeline.as_mut() {
                    timeline.jump(node, self.now, by);
                    if service {
                        timeline.note(node, self.now, "session timers unaffected".into());
                    }
                }
                if !service {
                    self.sample_node(node, None);
                }
            }
            Fault::Pause { client, max } => {
                let state = &mut self.clients[client];
                if state.paused.is_some() || matches!(state.phase, Phase::Done | Phase::Crashed) {
                    return;
                }
                state.pauses += 1;
                self.stats.pauses += 1;
                if let Some(timeline) = self.timeline.as_mut() {
                    timeline.pause(client, self.now);
                }
                let pause = state.pauses;
                state.paused = Some(pause);
                let who = self.client_names[client].clone();
                self.trace.line(self.now, &who, || {
                    format!("PAUSES (at most {})", stamp(max))
                });
                self.schedule(self.now + max, Event::ResumeAfter { client, pause });
            }
            Fault::Resume { client } => {
                if self.clients[client].paused.is_some() {
                    self.resume(client);
                }
            }
            Fault::CrashClient { client } => {
                if matches!(self.clients[client].phase, Phase::Done | Phase::Crashed) {
                    return;
                }
                self.close_session(client);
                self.stats.client_crashes += 1;
                if let Some(timeline) = self.timeline.as_mut() {
                    timeline.client_crash(client, self.now);
                }
                let state = &mut self.clients[client];
                state.phase = Phase::Crashed;
                state.paused = None;
                state.deferred.clear();
                let who = self.client_names[client].clone();
                self.trace.line(self.now, &who, || "CRASHES".into());
            }
            Fault::Cut { client, nodes } if !nodes.is_empty() => {
                for &node in &nodes {
                    self.network.set_cut(client, node, true);
                }
                let who = self.client_names[client].clone();
                let names = self.names_of(&nodes);
                self.trace
                    .line(self.now, &who, || format!("PARTITIONED from {names}"));
            }
            Fault::Heal { client, nodes } if !nodes.is_empty() => {
                for &node in &nodes {
                    self.network.set_cut(client, node, false);
                }
                let who = self.client_names[client].clone();
                let names = self.names_of(&nodes);
                self.trace
                    .line(self.now, &who, || format!("reconnected to {names}"));
            }
            Fault::Cut { .. } | Fault::Heal { .. } => {}
            Fault::DropNextReply { node, client } => self.network.drop_next_reply(node, client),
            Fault::StartClient { client } => {
                if self.clients[client].phase == Phase::NotStarted {
                    self.begin(client);
                }
            }
        }
    }

    fn names_of(&self, nodes: &[usize]) -> String {
        nodes
            .iter()
            .map(|&n| &*self.node_names[n])
            .collect::<Vec<_>>()
            .join(",")
    }

    fn resume(&mut self, client: usize) {
        if let Some(timeline) = self.timeline.as_mut() {
            timeline.resume(client, self.now);
        }
        let state = &mut self.clients[client];
        state.paused = None;
        let deferred = std::mem::take(&mut state.deferred);
        let who = self.client_names[client].clone();
        let count = deferred.len();
        self.trace.line(self.now, &who, || {
            format!("RESUMES ({count} event(s) waiting)")
        });
        for event in deferred {
            self.schedule(self.now, event);
        }
    }

    // ---- clients ----------------------------------------------------------------------

    fn arm(&mut self, client: usize, timer: Timer, at_local: Time) {
        let state = &mut self.clients[client];
        let at = state.clock.global_at(at_local.as_micros()).max(self.now);
        if state.timer_due[timer.index()] == Some(at) {
            // Already armed for that instant (the core repeats its Wait every input).
            return;
        }
        state.timers[timer.index()] += 1;
        state.timer_due[timer.index()] = Some(at);
        let generation = state.timers[timer.index()];
        self.schedule(
            at,
            Event::Timer {
                client,
                timer,
                generation,
            },
        );
    }

    fn arm_after(&mut self, client: usize, timer: Timer, after: u64) {
        let at = Time::from_micros(self.local(client).as_micros() + after);
        self.arm(client, timer, at);
    }

    fn timer(&mut self, client: usize, timer: Timer, generation: u64) {
        // Start events of planned clients carry generation 0 and are always current.
        if generation != 0 {
            if self.clients[client].timers[timer.index()] != generation {
                return;
            }
            self.clients[client].timer_due[timer.index()] = None;
        }
        let state = &self.clients[client];
        let now = self.local(client);
        match timer {
            Timer::Model(slot) => {
                let mut out = Vec::new();
                let result = self.clients[client].model.on_timer(slot, now, &mut out);
                self.model_result(client, result, out);
            }
            Timer::Start => match state.phase {
                Phase::NotStarted => self.begin(client),
                Phase::Waiting => self.acquire(client),
                _ => {}
            },
            Timer::Work => {
                if state.phase != Phase::Holding {
                    return;
                }
                let expired = state
                    .session
                    .and_then(|s| self.session_valid_until(s))
                    .is_some_and(|until| now.as_micros() >= until);
                if expired {
                    self.stats.expired_before_write += 1;
                    let who = self.client_names[client].clone();
                    self.trace.line(self.now, &who, || {
                        "lease expired before the next write: stops".into()
                    });
                    self.release(client);
                    return;
                }
                let nth = state.writes_total + 1;
                self.fire(Trigger::BeforeWrite { client, nth });
                self.write_unless_stopped(client);
            }
            Timer::Write => {
                if state.phase != Phase::Holding {
                    return;
                }
                self.write(client);
            }
            Timer::Extend => {
                if state.phase != Phase::Holding {
                    return;
                }
                let mut out = Vec::new();
                if self.clients[client].model.extend(now, &mut out) {
                    let who = self.client_names[client].clone();
                    self.trace.line(self.now, &who, || "extends".into());
                    self.apply(client, out);
                }
            }
        }
    }

    /// The session's `valid_until`, on its holder's clock.
    fn session_valid_until(&self, session: usize) -> Option<u64> {
        self.sessions.get(session).and_then(|s| s.valid_until)
    }

    /// Starts the client's current cycle, or finishes it if none is left.
    fn begin(&mut self, client: usize) {
        let state = &mut self.clients[client];
        let Some(cycle) = state.cycles.get(state.cycle).cloned() else {
            state.phase = Phase::Done;
            let who = self.client_names[client].clone();
            self.trace.line(self.now, &who, || "done".into());
            return;
        };
        state.phase = Phase::Waiting;
        state.give_up_at = state.clock.local(self.now) + cycle.think + cycle.give_up;
        self.arm_after(client, Timer::Start, cycle.think);
    }

    fn acquire(&mut self, client: usize) {
        let now = self.local(client);
        let state = &mut self.clients[client];
        state.phase = Phase::Acquiring;
        state.asked = self.now;
        state.acquire_calls += 1;
        let nth = state.acquire_calls;
        let mut out = Vec::new();
        state.model.acquire(now, &mut out);
        let who = self.client_names[client].clone();
        self.trace.line(self.now, &who, || {
            format!("acquire #{nth} (client clock {})", stamp(now.as_micros()))
        });
        self.apply(client, out);
        self.fire(Trigger::SentAcquire { client, nth });
    }

    fn release(&mut self, client: usize) {
        self.close_session(client);
        let now = self.local(client);
        let state = &mut self.clients[client];
        state.phase = Phase::Releasing;
        state.release_calls += 1;
        let nth = state.release_calls;
        let mut out = Vec::new();
        state.model.release(now, &mut out);
        let who = self.client_names[client].clone();
        self.trace
            .line(self.now, &who, || format!("release #{nth}"));
        self.apply(client, out);
        self.fire(Trigger::SentRelease { client, nth });
    }

    fn write(&mut self, client: usize) {
        let Some(session) = self.clients[client].session else {
            return;
        };
        let fencing_token = self.sessions[session].fencing_token;
        let accepted = match self.resource.write(self.now, session, fencing_token) {
            Ok(accepted) => accepted,
            Err(error) => {
                self.error = Some(SimError(format!("{}: {error}", self.client_names[client])));
                return;
            }
        };
        self.stats.writes += 1;
        let state = &mut self.clients[client];
        state.writes_done += 1;
        state.writes_total += 1;
        let (done, writes) = (state.writes_done, state.cycles[state.cycle].writes);
        let interval = state.cycles[state.cycle].interval;
        let who = self.client_names[client].clone();
        self.trace.line(self.now, &who, || {
            format!(
                "WRITES to the resource ({done}/{writes}){}{}",
                fencing_token.map_or(String::new(), |t| format!(" with token {t}")),
                if accepted { "" } else { " - rejected" }
            )
        });
        if done >= writes {
            self.release(client);
        } else {
            self.arm_after(client, Timer::Work, interval);
        }
    }

    /// Writes now, right after the check that precedes it, unless a rule fired by that
    /// check paused the client (the write then happens when it resumes) or crashed it.
    /// Writing in the same step keeps pauses injected elsewhere from ever falling
    /// between a check and its write.
    fn write_unless_stopped(&mut self, client: usize) {
        match self.clients[client].phase {
            Phase::Crashed => {}
            _ if self.clients[client].paused.is_some() => self.arm_after(client, Timer::Write, 0),
            _ => self.write(client),
        }
    }

    /// Ends the current belief at the present instant (release, crash).
    fn close_session(&mut self, client: usize) {
        if let Some(session) = self.clients[client].session {
            if let Some(last) = self.sessions[session].intervals.last_mut() {
                last.1 = last.1.min(self.now);
            }
        }
    }

    /// The global instant at which the client's clock reaches `valid_until`.
    fn belief_end(&self, client: usize, valid_until: Option<Time>) -> u64 {
        valid_until.map_or(u64::MAX, |until| {
            self.clients[client].clock.global_at(until.as_micros())
        })
    }

    /// Acts on a model's actions in order. A crash stops the rest; a pause holds the
    /// rest back until the client resumes.
    fn apply(&mut self, client: usize, actions: Vec<Action>) {
        let mut actions = actions.into_iter();
        while let Some(action) = actions.next() {
            match self.clients[client].phase {
                Phase::Crashed => return,
                _ if self.clients[client].paused.is_some() => {
                    let mut rest = vec![action];
                    rest.extend(actions);
                    self.clients[client].deferred.push(Event::Continue {
                        client,
                        actions: rest,
                    });
                    return;
                }
                _ => {}
            }
            let who = self.client_names[client].clone();
            match action {
                Action::Send { node, tag, args } => self.send(client, node, tag, args),
                Action::Arm { slot, at } => self.arm(client, Timer::Model(slot), at),
                Action::Acquired {
                    token,
                    valid_until,
                    fencing_token,
                    note,
                } => {
                    let end = self.belief_end(client, valid_until);
                    self.trace.line(self.now, &who, || {
                        let until = if end == u64::MAX {
                            "until it releases".to_string()
                        } else {
                            format!("until {}", stamp(end))
                        };
                        format!("ACQUIRED {} {until} {note}", trace::short(token.as_bytes()))
                    });
                    self.stats.acquisitions += 1;
                    let state = &mut self.clients[client];
                    state.acquisitions += 1;
                    let nth = state.acquisitions;
                    state.phase = Phase::Holding;
                    state.writes_done = 0;
                    state.session = Some(self.sessions.len());
                    self.sessions.push(Session {
                        client,
                        token,
                        granted: self.now,
                        asked: self.clients[client].asked,
                        intervals: vec![(self.now, end)],
                        valid_until: valid_until.map(Time::as_micros),
                        fencing_token,
                    });
                    self.fire(Trigger::Acquired { client, nth });
                    if self.clients[client].phase == Phase::Crashed {
                        return;
                    }
                    // The first write follows the acquisition with no other check: a
                    // pause right here is the critique's pause after acquiring.
                    self.write_unless_stopped(client);
                    let now = self.local(client);
                    if let Some(at) = self.clients[client].model.next_extension(now) {
                        self.arm(client, Timer::Extend, at);
                    }
                }
                Action::NotAcquired { note } => {
                    self.trace
                        .line(self.now, &who, || format!("not acquired: {note}"));
                    self.stats.not_acquired += 1;
                    let now = self.local(client).as_micros();
                    let state = &mut self.clients[client];
                    if now < state.give_up_at {
                        state.phase = Phase::Waiting;
                        let (low, high) = state.cycles[state.cycle].retry;
                        let pause = self.client_rng.range(low, high);
                        self.arm_after(client, Timer::Start, pause);
                    } else {
                        state.cycle += 1;
                        self.trace.line(self.now, &who, || "gives up".into());
                        self.begin(client);
                    }
                }
                Action::Extended { valid_until } => {
                    let end = self.belief_end(client, Some(valid_until));
                    self.trace
                        .line(self.now, &who, || format!("EXTENDED until {}", stamp(end)));
                    self.stats.extended += 1;
                    if let Some(session) = self.clients[client].session {
                        if self.clients[client].phase == Phase::Holding {
                            let record = &mut self.sessions[session];
                            record.valid_until = Some(valid_until.as_micros());
                            match record.intervals.last_mut() {
                                Some(last) if self.now < last.1 => last.1 = end,
                                _ => record.intervals.push((self.now, end)),
                            }
                        }
                    }
                    let now = self.local(client);
                    if let Some(at) = self.clients[client].model.next_extension(now) {
                        self.arm(client, Timer::Extend, at);
                    }
                }
                Action::NotExtended { valid_until, note } => {
                    let end = self.belief_end(client, Some(valid_until));
                    self.trace.line(self.now, &who, || {
                        format!("not extended ({note}): valid until {}", stamp(end))
                    });
                    self.stats.not_extended += 1;
                    if let Some(session) = self.clients[client].session {
                        let record = &mut self.sessions[session];
                        record.valid_until =
                            Some(record.valid_until.map_or(valid_until.as_micros(), |v| {
                                v.min(valid_until.as_micros())
                            }));
                        if let Some(last) = record.intervals.last_mut() {
                            last.1 = last.1.min(end);
                        }
                    }
                    let now = self.local(client);
                    if let Some(at) = self.clients[client].model.next_extension(now) {
                        self.arm(client, Timer::Extend, at);
                    }
                }
                Action::Released { note } => {
                    self.trace
                        .line(self.now, &who, || format!("released: {note}"));
                    let state = &mut self.clients[client];
                    if state.phase == Phase::Releasing {
                        state.session = None;
                        state.cycle += 1;
                        self.begin(client);
                    }
                }
            }
        }
    }

    // ---- the end ----------------------------------------------------------------------

    fn finish(mut self) -> RunResult {
        let names: Vec<String> = self.client_names.iter().map(|n| n.to_string()).collect();
        let exclusion = check::exclusion(&self.sessions, &names);
        let stale_write = check::stale_write(&self.resource, &self.sessions, &names);
        let token_order = check::token_order(&self.sessions, &names);
        let finished = self.now;
        let mut lingering = Vec::new();
        for (index, node) in self.nodes.iter().enumerate() {
            if node.is_up() {
                for (key, value, left) in node.live_keys(finished) {
                    lingering.push(format!(
                        "{}: {} = {} ({})",
                        self.node_names[index],
                        String::from_utf8_lossy(&key),
                        trace::short(&value),
                        left.map_or("no expiry".into(), |ms| format!("{ms} ms left"))
                    ));
                }
            }
        }
        let horizon = finished + 2 * TTL + 1_000_000;
        let mut left_behind = Vec::new();
        for (index, node) in self.nodes.iter().enumerate() {
            if node.is_up() {
                // Only the lock key: a fence key has no TTL by design (docs/fencing.md).
                let keys = node.live_keys(horizon).into_iter();
                for (key, value, _) in keys.filter(|(key, _, _)| key == KEY.as_bytes()) {
                    left_behind.push(format!(
                        "{}: {} = {}",
                        self.node_names[index],
                        String::from_utf8_lossy(&key),
                        trace::short(&value)
                    ));
                }
            }
        }
        let key_left = (!left_behind.is_empty()).then(|| {
            format!(
                "still present {} after the last client finished: {}",
                millis(u128::from(horizon - finished)),
                left_behind.join("; ")
            )
        });
        let verdict = Verdict {
            exclusion,
            stale_write,
            token_order,
            key_left,
        };
        let stats = self.stats;
        let picture = self.timeline.take().map(|timeline| {
            let mut lines = Vec::new();
            for (check, result) in verdict.checks() {
                lines.push(match result {
                    None => format!("{check}: ok"),
                    Some(text) => format!("{check}: VIOLATED: {text}"),
                });
            }
            timeline.render(
                &self.title,
                finished,
                &self.sessions,
                &self.resource,
                &lines,
            )
        });
        let mut trace = std::mem::take(&mut self.trace);
        if trace.is_on() {
            trace.plain(String::new);
            trace.plain(|| {
                format!(
                    "finished at {} after {} events",
                    stamp(finished),
                    self.events
                )
            });
            trace.plain(|| {
                format!(
                    "keys then (a key with time left expires on its own): {}",
                    if lingering.is_empty() {
                        "none".into()
                    } else {
                        lingering.join("; ")
                    }
                )
            });
            trace.plain(|| format!("{stats:?}"));
            for (check, result) in verdict.checks() {
                trace.plain(|| match result {
                    None => format!("check {check}: ok"),
                    Some(text) => format!("check {check}: VIOLATED: {text}"),
                });
            }
        }
        RunResult {
            verdict,
            trace: trace.into_text(),
            picture,
            grants: self
                .sessions
                .iter()
                .map(|s| (names[s.client].clone(), s.granted))
                .collect(),
            writes: self
                .resource
                .log
                .iter()
                .map(|w| {
                    let client = self.sessions[w.session].client;
                    (names[client].clone(), w.accepted, w.fencing_token)
                })
                .collect(),
            events: self.events,
            stats,
        }
    }
}
