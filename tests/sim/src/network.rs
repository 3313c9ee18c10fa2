//! The network between clients and nodes: per-message delay, loss, partitions, and
//! order kept per connection (a Redis connection is one TCP stream).

use std::collections::BTreeSet;

use crate::rng::Rng;

/// How messages travel in one run.
#[derive(Clone, Debug)]
pub struct NetworkSpec {
    /// Smallest one-way delay, microseconds.
    pub min_delay: u64,
    /// Largest one-way delay, microseconds.
    pub max_delay: u64,
    /// Probability that a message is lost, in millionths.
    pub loss_per_million: u64,
}

/// Which way a message goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Client to node.
    ToNode,
    /// Node to client.
    ToClient,
}

/// Why a message did not arrive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dropped {
    /// The link is cut.
    Partition,
    /// Random loss.
    Lost,
    /// A scenario asked for this reply to be lost.
    Scripted,
}

/// The network's state during a run.
pub struct Network {
    spec: NetworkSpec,
    nodes: usize,
    /// Cut (client, node) links.
    cut: BTreeSet<(usize, usize)>,
    /// (node, client) pairs whose next reply is lost.
    drop_next_reply: BTreeSet<(usize, usize)>,
    /// Latest arrival per (client, node, direction), to keep each connection in order.
    last_arrival: Vec<u64>,
}

impl Network {
    /// A network for `clients` x `nodes` links.
    pub fn new(spec: NetworkSpec, clients: usize, nodes: usize) -> Network {
        Network {
            spec,
            nodes,
            cut: BTreeSet::new(),
            drop_next_reply: BTreeSet::new(),
            last_arrival: vec![0; clients * nodes * 2],
        }
    }

    /// Cuts or heals the link between `client` and `node`.
    pub fn set_cut(&mut self, client: usize, node: usize, cut: bool) {
        if cut {
            self.cut.insert((client, node));
        } else {
            self.cut.remove(&(client, node));
        }
    }

    /// The next reply from `node` to `client` will be lost.
    pub fn drop_next_reply(&mut self, node: usize, client: usize) {
        self.drop_next_reply.insert((node, client));
    }

    /// When a message sent at `now` arrives, or why it does not.
    pub fn route(
        &mut self,
        now: u64,
        client: usize,
        node: usize,
        direction: Direction,
        rng: &mut Rng,
    ) -> Result<u64, Dropped> {
        // Draw first, so that what happens to one message never shifts the next one's draws.
        let delay = rng.range(self.spec.min_delay, self.spec.max_delay);
        let lost = self.spec.loss_per_million > 0 && rng.chance(self.spec.loss_per_million);
        if self.cut.contains(&(client, node)) {
            return Err(Dropped::Partition);
        }
        if direction == Direction::ToClient && self.drop_next_reply.remove(&(node, client)) {
            return Err(Dropped::Scripted);
        }
        if lost {
            return Err(Dropped::Lost);
        }
        let slot = (client * self.nodes + node) * 2 + usize::from(direction == Direction::ToClient);
        let arrival = (now + delay).max(self.last_arrival[slot]);
        self.last_arrival[slot] = arrival;
        Ok(arrival)
    }
}
