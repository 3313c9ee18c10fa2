//! The scenarios: named, scripted event sequences, and the randomised runs.
//!
//! A scenario lays out a [`Plan`]: the clients (their clocks and what each one wants
//! to do) and [`Rule`]s that inject faults when something happens (a client acquires,
//! a node applies a command, an instant passes). Scripted scenarios fix the faults; the
//! seed varies only what the scenario leaves free (message delays within a small
//! range, clock origins and rates within a small bound, tokens, retry pauses).
//!
//! Node roles for N nodes: quorum `q = N / 2 + 1`; the *minority* is nodes `q..N`;
//! the *pivot* is node `q - 1`, the last node of the first client's quorum. With N = 1
//! the minority is empty and the pivot is the only node.

use crate::clock::Clock;
use crate::network::NetworkSpec;
use crate::rng::{Rng, Stream};
use crate::strategy::{delayed_restart, Strategy, TTL};

/// Milliseconds to microseconds.
const MS: u64 = 1000;

/// A named event sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scenario {
    /// Three clients compete; nothing fails.
    NoFaults,
    /// The first holder crashes as soon as it holds the lock; two others wait.
    ClientCrash,
    /// A node sets the key but its reply to the first client is lost.
    LostReply,
    /// The first client locks a bare quorum; the pivot crashes and restarts at once
    /// without its data; a second client locks the pivot and the minority.
    RestartEmpty,
    /// The same, but the pivot stays down longer than the TTL.
    RestartDelayed,
    /// The first client locks a bare quorum; the pivot's clock jumps past the TTL; a
    /// second client locks the pivot and the minority.
    ClockJump,
    /// The first client pauses right after sending its acquisition, longer than the
    /// TTL; a second client locks meanwhile.
    PauseBeforeReplies,
    /// The first client pauses between acquiring and its first write until a second
    /// client holds the lock; then it writes; a third client waits.
    PauseAfterAcquire,
    /// The first client pauses right after sending its release until a second client
    /// holds the lock; a third client waits.
    PauseInRelease,
    /// Two clients whose wall clocks disagree by half the TTL.
    ClientClockSkew,
    /// The master applies the first client's lock and crashes before replicating it;
    /// the replica is promoted; a second client locks.
    FailoverBeforeReplication,
    /// Random workloads with faults drawn only from the conditions the algorithm
    /// assumes.
    Randomised,
}

impl Scenario {
    /// Every scenario, in table order.
    pub const ALL: [Scenario; 12] = [
        Scenario::NoFaults,
        Scenario::ClientCrash,
        Scenario::LostReply,
        Scenario::RestartEmpty,
        Scenario::RestartDelayed,
        Scenario::ClockJump,
        Scenario::PauseBeforeReplies,
        Scenario::PauseAfterAcquire,
        Scenario::PauseInRelease,
        Scenario::ClientClockSkew,
        Scenario::FailoverBeforeReplication,
        Scenario::Randomised,
    ];

    /// The name used on the command line and in the report.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::NoFaults => "no-faults",
            Scenario::ClientCrash => "client-crash",
            Scenario::LostReply => "lost-reply",
            Scenario::RestartEmpty => "restart-empty",
            Scenario::RestartDelayed => "restart-delayed",
            Scenario::ClockJump => "clock-jump",
            Scenario::PauseBeforeReplies => "pause-before-replies",
            Scenario::PauseAfterAcquire => "pause-after-acquire",
            Scenario::PauseInRelease => "pause-in-release",
            Scenario::ClientClockSkew => "client-clock-skew",
            Scenario::FailoverBeforeReplication => "failover-before-replication",
            Scenario::Randomised => "randomised",
        }
    }

    /// The scenario named `name` on the command line.
    pub fn from_name(name: &str) -> Option<Scenario> {
        Scenario::ALL.into_iter().find(|s| s.name() == name)
    }

    /// False where the scenario has nothing to act on (failover without a replica).
    pub fn applies_to(self, strategy: Strategy) -> bool {
        self != Scenario::FailoverBeforeReplication || strategy.has_replica()
    }

    /// Why the scenario does not apply to `strategy` (empty if it does).
    pub fn why_not(self, strategy: Strategy) -> &'static str {
        if self.applies_to(strategy) {
            ""
        } else if strategy.coordination().is_some() {
            "a write is acknowledged only once a quorum has logged it"
        } else {
            "no replica"
        }
    }

    /// The plan of run `seed` of this scenario under `strategy`.
    pub fn plan(self, strategy: Strategy, seed: u64) -> Plan {
        let mut rng = Rng::new(seed, Stream::Setup);
        let nodes = strategy.nodes();
        if self == Scenario::Randomised {
            return randomised(strategy, nodes, &mut rng);
        }
        let mut plan = Plan::scripted(nodes, &mut rng);
        let quorum = nodes / 2 + 1;
        let minority: Vec<usize> = (quorum..nodes).collect();
        let pivot = quorum - 1;
        let standard = Cycle::standard(3);
        match self {
            Scenario::NoFaults => {
                let two = vec![
                    standard.clone(),
                    Cycle {
                        think: 50 * MS,
                        ..standard.clone()
                    },
                ];
                plan.client(&mut rng, Some(0), two.clone());
                plan.client(&mut rng, Some(100), two);
                plan.client(&mut rng, Some(300 * MS), vec![standard]);
            }
            Scenario::ClientCrash => {
                plan.client(&mut rng, Some(0), vec![standard.clone()]);
                plan.client(&mut rng, Some(10 * MS), vec![standard.clone()]);
                plan.client(&mut rng, Some(20 * MS), vec![standard]);
                plan.on(
                    Trigger::Acquired { client: 0, nth: 1 },
                    0,
                    Fault::CrashClient { client: 0 },
                );
            }
            Scenario::LostReply => {
                plan.client(&mut rng, Some(0), vec![standard.clone()]);
                plan.client(&mut rng, Some(5 * MS), vec![standard]);
                plan.on(
                    Trigger::At(0),
                    0,
                    Fault::DropNextReply { node: 0, client: 0 },
                );
            }
            Scenario::RestartEmpty | Scenario::RestartDelayed | Scenario::ClockJump => {
                plan.client(&mut rng, Some(0), vec![standard.clone()]);
                plan.client(&mut rng, None, vec![standard]);
                let first = Trigger::Acquired { client: 0, nth: 1 };
                plan.on(
                    Trigger::At(0),
                    0,
                    Fault::Cut {
                        client: 0,
                        nodes: minority.clone(),
                    },
                );
                plan.on(
                    first,
                    0,
                    Fault::Heal {
                        client: 0,
                        nodes: minority,
                    },
                );
                let fault = match self {
                    Scenario::ClockJump => Fault::JumpClock {
                        node: pivot,
                        by: TTL + 100 * MS,
                    },
                    Scenario::RestartEmpty => Fault::CrashNode {
                        node: pivot,
                        downtime: MS,
                        keep_data: false,
                    },
                    _ => Fault::CrashNode {
                        node: pivot,
                        downtime: delayed_restart(),
                        keep_data: false,
                    },
                };
                plan.on(first, 10 * MS, fault);
                plan.on(first, 20 * MS, Fault::StartClient { client: 1 });
            }
            Scenario::PauseBeforeReplies => {
                plan.client(&mut rng, Some(0), vec![standard.clone()]);
                plan.client(&mut rng, Some(TTL + 50 * MS), vec![standard]);
                plan.on(
                    Trigger::SentAcquire { client: 0, nth: 1 },
                    0,
                    Fault::Pause {
                        client: 0,
                        max: TTL + 200 * MS,
                    },
                );
            }
            Scenario::PauseAfterAcquire | Scenario::PauseInRelease => {
                plan.client(&mut rng, Some(0), vec![standard.clone()]);
                plan.client(&mut rng, Some(50 * MS), vec![Cycle::standard(5)]);
                plan.client(&mut rng, None, vec![standard]);
                let pause_at = if self == Scenario::PauseAfterAcquire {
                    Trigger::Acquired { client: 0, nth: 1 }
                } else {
                    Trigger::SentRelease { client: 0, nth: 1 }
                };
                plan.on(
                    pause_at,
                    0,
                    Fault::Pause {
                        client: 0,
                        max: 3 * TTL,
                    },
                );
                let second = Trigger::Acquired { client: 1, nth: 1 };
                plan.on(second, 20 * MS, Fault::Resume { client: 0 });
                plan.on(second, 50 * MS, Fault::StartClient { client: 2 });
            }
            Scenario::ClientClockSkew => {
                plan.client(&mut rng, Some(0), vec![Cycle::standard(9)]);
                plan.client(&mut rng, Some(100 * MS), vec![standard]);
                plan.clients[0].wall_offset = 0;
                plan.clients[1].wall_offset = (TTL / 2) as i64;
            }
            Scenario::FailoverBeforeReplication => {
                plan.client(&mut rng, Some(0), vec![Cycle::standard(5)]);
                plan.client(&mut rng, Some(100 * MS), vec![standard]);
                plan.on(
                    Trigger::Applied { node: 0, client: 0 },
                    0,
                    Fault::CrashNode {
                        node: 0,
                        downtime: 50 * MS,
                        keep_data: false,
                    },
                );
            }
            Scenario::Randomised => {}
        }
        plan
    }
}

/// What one client wants to do, once per cycle: wait `think`, acquire (retrying until
/// `give_up` after the start of the cycle), write `writes` times `interval` apart,
/// release.
#[derive(Clone, Debug)]
pub struct Cycle {
    /// Wait before the first attempt (client clock).
    pub think: u64,
    /// Writes to the resource while holding the lock; the first right after acquiring.
    pub writes: u32,
    /// Between writes (client clock).
    pub interval: u64,
    /// Stop trying to acquire this long after the cycle's start (client clock).
    pub give_up: u64,
    /// The application's pause between failed acquisitions, drawn uniformly from this
    /// range (client clock).
    pub retry: (u64, u64),
}

impl Cycle {
    /// Acquire at once, `writes` writes 100 ms apart, retry every 50-150 ms for 5 s.
    pub fn standard(writes: u32) -> Cycle {
        Cycle {
            think: 0,
            writes,
            interval: 100 * MS,
            give_up: 5 * TTL,
            retry: (50 * MS, 150 * MS),
        }
    }
}

/// One client of a plan.
#[derive(Clone, Debug)]
pub struct ClientPlan {
    /// Global start time, or `None` for a client started by a rule.
    pub start: Option<u64>,
    /// Its monotonic clock.
    pub clock: Clock,
    /// Reading of its monotonic clock at global time 0.
    pub origin: u64,
    /// How far its wall clock is ahead of true time (microseconds, may be negative).
    pub wall_offset: i64,
    /// What it does.
    pub cycles: Vec<Cycle>,
    /// Seed of its core client's token stream.
    pub core_seed: [u8; 32],
    /// The core's retry delay and jitter (microseconds) if not its defaults.
    pub core_retry: Option<(u64, u64)>,
}

/// When a rule fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// At this global instant.
    At(u64),
    /// When `client` begins to believe it holds the lock for the `nth` time.
    Acquired {
        /// Which client (index).
        client: usize,
        /// Which acquisition, from 1.
        nth: u32,
    },
    /// Right after `client` sent the commands of its `nth` acquisition.
    SentAcquire {
        /// Which client.
        client: usize,
        /// Which acquisition, from 1.
        nth: u32,
    },
    /// Right after `client` sent the commands of its `nth` release.
    SentRelease {
        /// Which client.
        client: usize,
        /// Which release, from 1.
        nth: u32,
    },
    /// When `client` checked its lease before its `nth` write (counted over the run,
    /// from 1) and is about to write.
    BeforeWrite {
        /// Which client.
        client: usize,
        /// Which write.
        nth: u32,
    },
    /// Right after `node` applied a command of `client` that created a lock key (and
    /// sent the reply).
    Applied {
        /// Which node.
        node: usize,
        /// Whose command.
        client: usize,
    },
}

/// What a rule does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The node crashes; it serves again after `downtime` (at least the strategy's
    /// minimum), with its data if `keep_data`. A node with a replica is replaced by
    /// the promoted replica instead.
    CrashNode {
        /// Which node.
        node: usize,
        /// Time until it serves again.
        downtime: u64,
        /// Whether its keys survive.
        keep_data: bool,
    },
    /// The node's clock jumps forward.
    JumpClock {
        /// Which node.
        node: usize,
        /// By how much (microseconds).
        by: u64,
    },
    /// The client's process stops (a GC pause) until resumed, at most `max`.
    Pause {
        /// Which client.
        client: usize,
        /// Longest pause (global time).
        max: u64,
    },
    /// The client's process continues.
    Resume {
        /// Which client.
        client: usize,
    },
    /// The client's process dies.
    CrashClient {
        /// Which client.
        client: usize,
    },
    /// Messages between the client and these nodes are lost.
    Cut {
        /// Which client.
        client: usize,
        /// Which nodes.
        nodes: Vec<usize>,
    },
    /// The links are restored.
    Heal {
        /// Which client.
        client: usize,
        /// Which nodes.
        nodes: Vec<usize>,
    },
    /// The next reply from the node to the client is lost (after the node acted).
    DropNextReply {
        /// Which node.
        node: usize,
        /// Which client.
        client: usize,
    },
    /// The client starts its work.
    StartClient {
        /// Which client.
        client: usize,
    },
}

/// A fault injected when its trigger fires (once), `delay` later.
#[derive(Clone, Debug)]
pub struct Rule {
    /// When.
    pub trigger: Trigger,
    /// How long after the trigger.
    pub delay: u64,
    /// What.
    pub fault: Fault,
}

/// Everything a run needs besides the strategy.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The clients.
    pub clients: Vec<ClientPlan>,
    /// The faults.
    pub rules: Vec<Rule>,
    /// The network.
    pub network: NetworkSpec,
    /// One clock per node.
    pub node_clocks: Vec<Clock>,
    /// Replication lag range to a replica (microseconds).
    pub replication_lag: (u64, u64),
    /// Bound on client clock-rate drift drawn for new clients (ppm).
    pub client_drift_ppm: i64,
    /// The core's retry delay and jitter for new clients, if not its defaults.
    pub core_retry: Option<(u64, u64)>,
}

impl Plan {
    /// A plan with no clients yet: small message delays, no loss, node and client
    /// clocks drifting by at most 0.1 %.
    fn scripted(nodes: usize, rng: &mut Rng) -> Plan {
        let node_clocks = (0..nodes)
            .map(|_| Clock::new(rng.range(0, 1 << 40), rng.signed(1000)))
            .collect();
        Plan {
            clients: Vec::new(),
            rules: Vec::new(),
            network: NetworkSpec {
                min_delay: 500,
                max_delay: 2 * MS,
                loss_per_million: 0,
            },
            node_clocks,
            replication_lag: (200, MS),
            client_drift_ppm: 1000,
            core_retry: None,
        }
    }

    /// Adds a client; its wall clock is within 2 ms of true time.
    fn client(&mut self, rng: &mut Rng, start: Option<u64>, cycles: Vec<Cycle>) {
        let origin = rng.range(1 << 20, 1 << 40);
        let ppm = rng.signed(self.client_drift_ppm);
        let wall_offset = rng.signed(2 * MS as i64);
        let core_seed = rng.seed32();
        self.clients.push(ClientPlan {
            start,
            clock: Clock::new(origin, ppm),
            origin,
            wall_offset,
            cycles,
            core_seed,
            core_retry: self.core_retry,
        });
    }

    /// Adds a rule.
    fn on(&mut self, trigger: Trigger, delay: u64, fault: Fault) {
        self.rules.push(Rule {
            trigger,
            delay,
            fault,
        });
    }
}

/// The randomised runs: 2-4 clients with 1-3 cycles each, and only the faults the
/// algorithm assumes can happen:
///
/// - clock rates of nodes and clients off by at most 0.4 % each (so any two differ by
///   less than the 1 % drift factor), no clock jumps;
/// - one-way message delays up to at most 20 ms (a round trip within the 50 ms node
///   timeout), random loss up to 2 %, partitions between a client and some nodes;
/// - node crashes, each followed by a delayed restart (down longer than the TTL), with
///   or without its data; a replica is promoted only after the same delay;
/// - client crashes; client pauses (up to twice the TTL) between sending an
///   acquisition and reading its replies, and while holding the lock, anywhere except
///   between the validity check before a write and that write.
///
/// Waiters retry quickly (the application every 1-30 ms, the core every 20 ± 15 ms), so
/// that a lock lost by its holder is taken by another client as soon as the nodes allow.
///
/// Work may last up to twice the TTL: clients of our strategies keep their lock with
/// the core's extensions; the legacy patterns cannot extend, so their clients keep
/// their work under half the TTL.
fn randomised(strategy: Strategy, nodes: usize, rng: &mut Rng) -> Plan {
    let node_clocks = (0..nodes)
        .map(|_| Clock::new(rng.range(0, 1 << 40), rng.signed(4000)))
        .collect();
    let max_delay = rng.range(MS, 20 * MS);
    let mut plan = Plan {
        clients: Vec::new(),
        rules: Vec::new(),
        network: NetworkSpec {
            min_delay: 100,
            max_delay,
            loss_per_million: rng.range(0, 20_000),
        },
        node_clocks,
        replication_lag: (100, 2 * MS),
        client_drift_ppm: 4000,
        core_retry: Some((20 * MS, 15 * MS)),
    };
    let clients = rng.range(2, 4) as usize;
    for client in 0..clients {
        let cycles = (0..rng.range(1, 3))
            .map(|_| {
                let writes = rng.range(1, 5) as u32;
                let mut interval = rng.range(10 * MS, 2 * TTL / 5);
                if !strategy.uses_core() {
                    interval = interval.min(TTL / 2 / u64::from(writes));
                }
                Cycle {
                    think: rng.range(0, 200 * MS),
                    writes,
                    interval,
                    give_up: rng.range(TTL, 4 * TTL),
                    retry: (MS, 30 * MS),
                }
            })
            .collect();
        let start = rng.range(0, 600 * MS);
        plan.client(rng, Some(start), cycles);
        if rng.chance(100_000) {
            let nth = rng.range(1, 2) as u32;
            plan.on(
                Trigger::Acquired { client, nth },
                rng.range(0, 200 * MS),
                Fault::CrashClient { client },
            );
        }
        if rng.chance(200_000) {
            let nth = rng.range(1, 2) as u32;
            let max = rng.range(0, 2 * TTL);
            plan.on(
                Trigger::SentAcquire { client, nth },
                0,
                Fault::Pause { client, max },
            );
        }
        if rng.chance(300_000) {
            let nth = rng.range(1, 2) as u32;
            let after = rng.range(MS, TTL);
            let max = rng.range(0, 2 * TTL);
            plan.on(
                Trigger::Acquired { client, nth },
                after,
                Fault::Pause { client, max },
            );
        }
        for _ in 0..rng.range(0, 2) {
            let count = rng.range(1, nodes as u64) as usize;
            let first = rng.range(0, (nodes - 1) as u64) as usize;
            let cut: Vec<usize> = (0..count).map(|i| (first + i) % nodes).collect();
            let at = rng.range(0, 3 * TTL);
            let length = rng.range(10 * MS, TTL);
            plan.on(
                Trigger::At(at),
                0,
                Fault::Cut {
                    client,
                    nodes: cut.clone(),
                },
            );
            plan.on(
                Trigger::At(at + length),
                0,
                Fault::Heal { client, nodes: cut },
            );
        }
    }
    for _ in 0..rng.range(0, 2) {
        let node = rng.range(0, (nodes - 1) as u64) as usize;
        let at = rng.range(0, 3 * TTL);
        let downtime = delayed_restart() + rng.range(0, 500 * MS);
        let keep_data = rng.chance(500_000);
        plan.on(
            Trigger::At(at),
            0,
            Fault::CrashNode {
                node,
                downtime,
                keep_data,
            },
        );
    }
    plan
}
