//! The strategies compared: ours (through the real core), the legacy patterns, and the
//! lock recipes of ZooKeeper and etcd.

use std::time::Duration;

use redlock_core::Config;

use crate::coordination::Flavour;
use crate::coordination_model::CoordinationModel;
use crate::model::{CoreModel, Legacy, LegacyModel, LockModel};
use crate::rng::Rng;

/// The lock's TTL in every strategy, milliseconds.
pub const TTL_MS: u64 = 1000;

/// The lock's TTL in microseconds.
pub const TTL: u64 = TTL_MS * 1000;

/// The key every client locks.
pub const KEY: &str = "resource";

/// A way of using Redis as a lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Strategy {
    /// Our Redlock, N = 5 independent nodes.
    Redlock,
    /// Our single-instance mode, N = 1.
    Single,
    /// Our single-instance mode on a master with an asynchronous replica and failover.
    SingleReplica,
    /// `SETNX` then `EXPIRE`, two commands.
    SetnxExpire,
    /// `SETNX` of an expiry timestamp, `GETSET` takeover.
    SetnxGetset,
    /// `SET NX PX`, release by plain `DEL`.
    PlainDel,
    /// `SET NX PX`, release by `GET` then `DEL`.
    GetThenDel,
    /// Our Redlock, N = 5, where a crashed node stays down longer than the TTL.
    RedlockDelayed,
    /// Our Redlock, N = 5, with the core's fencing tokens; every write goes through the
    /// core's resource-side check.
    RedlockFenced,
    /// The same with fencing, and a crashed node stays down longer than the TTL.
    RedlockDelayedFenced,
    /// ZooKeeper's lock recipe (kazoo's `Lock`), session timeout = TTL.
    ZooKeeper,
    /// The same, writes carrying the lock node's `czxid` as a fencing token.
    ZooKeeperFenced,
    /// etcd's lock (clientv3 `concurrency.Mutex`, `etcdctl lock`), lease TTL = TTL.
    Etcd,
    /// The same, writes carrying the lock key's create revision as a fencing token.
    EtcdFenced,
}

impl Strategy {
    /// Every strategy, in table order.
    pub const ALL: [Strategy; 14] = [
        Strategy::Redlock,
        Strategy::RedlockDelayed,
        Strategy::RedlockFenced,
        Strategy::RedlockDelayedFenced,
        Strategy::Single,
        Strategy::SingleReplica,
        Strategy::SetnxExpire,
        Strategy::SetnxGetset,
        Strategy::PlainDel,
        Strategy::GetThenDel,
        Strategy::ZooKeeper,
        Strategy::ZooKeeperFenced,
        Strategy::Etcd,
        Strategy::EtcdFenced,
    ];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Redlock => "redlock",
            Strategy::Single => "single",
            Strategy::SingleReplica => "single-replica",
            Strategy::SetnxExpire => "setnx-expire",
            Strategy::SetnxGetset => "setnx-getset",
            Strategy::PlainDel => "plain-del",
            Strategy::GetThenDel => "get-then-del",
            Strategy::RedlockDelayed => "redlock-delayed",
            Strategy::RedlockFenced => "redlock-fenced",
            Strategy::RedlockDelayedFenced => "redlock-delayed-fenced",
            Strategy::ZooKeeper => "zookeeper",
            Strategy::ZooKeeperFenced => "zookeeper-fenced",
            Strategy::Etcd => "etcd",
            Strategy::EtcdFenced => "etcd-fenced",
        }
    }

    /// The strategy named `name` on the command line.
    pub fn from_name(name: &str) -> Option<Strategy> {
        Strategy::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The column header in the report.
    pub fn title(self) -> &'static str {
        match self {
            Strategy::Redlock => "Redlock N=5",
            Strategy::RedlockDelayed => "Redlock N=5, delayed restart",
            Strategy::RedlockFenced => "Redlock N=5 + fencing",
            Strategy::RedlockDelayedFenced => "Redlock N=5, delayed restart + fencing",
            Strategy::Single => "single N=1",
            Strategy::SingleReplica => "single N=1 + replica",
            Strategy::SetnxExpire => "SETNX then EXPIRE",
            Strategy::SetnxGetset => "SETNX timestamp + GETSET",
            Strategy::PlainDel => "release by plain DEL",
            Strategy::GetThenDel => "release by GET then DEL",
            Strategy::ZooKeeper => "ZooKeeper lock recipe",
            Strategy::ZooKeeperFenced => "ZooKeeper + czxid fencing",
            Strategy::Etcd => "etcd lease lock",
            Strategy::EtcdFenced => "etcd + revision fencing",
        }
    }

    /// Number of nodes the clients lock on.
    pub fn nodes(self) -> usize {
        match self {
            Strategy::Redlock
            | Strategy::RedlockDelayed
            | Strategy::RedlockFenced
            | Strategy::RedlockDelayedFenced => 5,
            _ => 1,
        }
    }

    /// True if the nodes have an asynchronous replica that takes over when they crash.
    pub fn has_replica(self) -> bool {
        self == Strategy::SingleReplica
    }

    /// The consensus service this strategy locks on, if it is not Redis.
    pub fn coordination(self) -> Option<Flavour> {
        match self {
            Strategy::ZooKeeper | Strategy::ZooKeeperFenced => Some(Flavour::ZooKeeper),
            Strategy::Etcd | Strategy::EtcdFenced => Some(Flavour::Etcd),
            _ => None,
        }
    }

    /// True if the strategy's writes carry a fencing token the resource checks.
    pub fn fenced(self) -> bool {
        matches!(
            self,
            Strategy::ZooKeeperFenced
                | Strategy::EtcdFenced
                | Strategy::RedlockFenced
                | Strategy::RedlockDelayedFenced
        )
    }

    /// True for our strategies with fencing: the core issues the tokens and the resource
    /// checks them with the core's own check (`FencedSet`).
    pub fn core_fencing(self) -> bool {
        matches!(
            self,
            Strategy::RedlockFenced | Strategy::RedlockDelayedFenced
        )
    }

    /// True for our strategies, which run the real core.
    pub fn uses_core(self) -> bool {
        matches!(
            self,
            Strategy::Redlock
                | Strategy::RedlockDelayed
                | Strategy::RedlockFenced
                | Strategy::RedlockDelayedFenced
                | Strategy::Single
                | Strategy::SingleReplica
        )
    }

    /// How long a crashed node stays down at least (the operator's restart policy).
    pub fn min_downtime(self) -> u64 {
        match self {
            // Longer than the longest TTL, with room for clock-rate differences.
            Strategy::RedlockDelayed | Strategy::RedlockDelayedFenced => delayed_restart(),
            _ => 0,
        }
    }

    /// A client model of this strategy. `origin` and `wall_offset` describe the
    /// client's clocks (see [`LegacyModel::new`]).
    /// `core_retry` sets the core's retry delay and jitter (microseconds) instead of its
    /// defaults.
    pub fn model(
        self,
        seed: [u8; 32],
        core_retry: Option<(u64, u64)>,
        origin: u64,
        wall_offset: i64,
        rng: Rng,
    ) -> Result<Box<dyn LockModel>, String> {
        if let Some(flavour) = self.coordination() {
            return Ok(Box::new(CoordinationModel::new(
                flavour,
                self.fenced(),
                TTL,
            )));
        }
        let legacy = match self {
            Strategy::SetnxExpire => Legacy::SetnxThenExpire,
            Strategy::SetnxGetset => Legacy::SetnxGetset,
            Strategy::PlainDel => Legacy::PlainDel,
            Strategy::GetThenDel => Legacy::GetThenDel,
            _ => {
                let mut config = Config::builder(self.nodes(), Duration::from_millis(TTL_MS))
                    .fencing(self.core_fencing());
                if let Some((delay, jitter)) = core_retry {
                    config = config
                        .retry_delay(Duration::from_micros(delay))
                        .retry_jitter(Duration::from_micros(jitter));
                }
                let config = config
                    .build()
                    .map_err(|error| format!("configuration rejected: {error:?}"))?;
                let model = CoreModel::new(config, KEY, seed);
                return Ok(Box::new(model));
            }
        };
        Ok(Box::new(LegacyModel::new(
            legacy,
            KEY,
            TTL_MS,
            origin,
            wall_offset,
            rng,
        )))
    }
}

/// The downtime of a delayed restart: the TTL plus a tenth, plus 100 ms.
pub fn delayed_restart() -> u64 {
    TTL + TTL / 10 + 100_000
}
