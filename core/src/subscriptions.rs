//! Notice subscriptions: which release-notice channels a client subscribes to on each
//! node, and when its subscriber connections open, close and open again, decided once
//! for every driver.
//!
//! A driver keeps one [`Subscriptions`] for as long as its client lives. It tells it when
//! an acquisition starts and stops listening on its channels ([`Subscriptions::want`],
//! [`Subscriptions::unwant`]) and what happens to each node's subscriber connection
//! (opened, lost, a subscription confirmed or refused, time passing), and does what it
//! outputs: open a node's subscriber connection, subscribe or unsubscribe a channel on
//! it, or close it. Handing notices and confirmations to the waiting operations
//! ([`crate::Operation::handle_notice_message`], [`crate::Operation::handle_subscribed`])
//! stays with the driver, which knows its waiters; this only decides the connections.
//!
//! # The policy
//!
//! - **One subscriber connection per node**, apart from the node's command connection
//!   (`SUBSCRIBE` takes a connection over). It is opened when a channel is first wanted
//!   and closed once no channel is wanted or lingering.
//! - **Channels linger.** A channel the last listener left stays subscribed for
//!   [`NOTICE_CHANNEL_LINGER_MS`]: a client that waits for the same resource again at
//!   once is still listening when a release names it.
//! - **A failed connection opens again, paced.** A connection that dropped, could not be
//!   opened, was refused `SUBSCRIBE`, or did not confirm a subscription (or open) within
//!   the timeout given to [`Subscriptions::new`] counts as lost. While some channel is
//!   wanted it is opened again after a pause: [`SUBSCRIBER_REOPEN_FIRST_MS`] at first,
//!   doubling up to [`SUBSCRIBER_REOPEN_MAX_MS`] while it keeps failing, back to the first
//!   once a subscription is confirmed. A waiter that arrives during the pause does not cut
//!   it short: a node that refuses notices costs a connection attempt now and then, never
//!   a stream of them, and a notice lost meanwhile costs at most the core's retry
//!   schedule (a confirmation on the new connection can stand for it, rule 13 of
//!   `docs/bindings.md`).
//! - **Subscribed again on every new connection**: every channel still wanted. Lingering
//!   channels are dropped with the connection they were subscribed on.
//!
//! # Driving it
//!
//! After every input, poll [`Subscriptions::poll_output`] until `None`:
//!
//! - [`SubscriberOutput::Open`]: open the node's subscriber connection, then call
//!   [`Subscriptions::handle_opened`], or [`Subscriptions::handle_lost`] if it fails.
//! - [`SubscriberOutput::Subscribe`]: subscribe the channel on that connection. Hand the
//!   confirmation to [`Subscriptions::handle_confirmed`] (and, when it returns true, to the
//!   channel's waiting operations), a refusal to [`Subscriptions::handle_refused`].
//! - [`SubscriberOutput::Unsubscribe`]: unsubscribe it; its confirmation needs no input.
//! - [`SubscriberOutput::Close`]: close the node's subscriber connection; report nothing
//!   more for it (it already counts as closed).
//!
//! Call [`Subscriptions::handle_timeout`] at [`Subscriptions::poll_timeout`]. Drivers over
//! a client library that reconnects on its own report its "disconnected" event as
//! `handle_lost` and treat its reconnection as one it was asked for only once `Open` says
//! so (or switch the library's resubscription off).

use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;
use core::time::Duration;

use crate::command::{
    NOTICE_CHANNEL_LINGER_MS, SUBSCRIBER_REOPEN_FIRST_MS, SUBSCRIBER_REOPEN_MAX_MS,
};
use crate::config::ConfigError;
use crate::error::UsageError;
use crate::time::{micros_floor, Time};

/// What a driver must do for the subscriber connections ([`Subscriptions::poll_output`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SubscriberOutput {
    /// Open a node's subscriber connection.
    Open {
        /// The node's index.
        node: usize,
    },
    /// Subscribe a channel on a node's subscriber connection.
    Subscribe {
        /// The node's index.
        node: usize,
        /// The channel's name.
        channel: Vec<u8>,
    },
    /// Unsubscribe a channel there.
    Unsubscribe {
        /// The node's index.
        node: usize,
        /// The channel's name.
        channel: Vec<u8>,
    },
    /// Close a node's subscriber connection.
    Close {
        /// The node's index.
        node: usize,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Connection {
    /// Closed; opened again at the instant, if any, while a channel is wanted.
    Closed {
        reopen_at: Option<Time>,
    },
    /// Asked to open at the instant.
    Opening {
        since: Time,
    },
    Open,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OnNode {
    /// Not subscribed on the node's current connection.
    No,
    /// `SUBSCRIBE` asked for at the instant, not confirmed yet.
    Asked {
        at: Time,
    },
    Confirmed,
}

#[derive(Debug)]
struct Channel {
    listeners: u32,
    /// When the last listener left (the channel lingers from then).
    idle_since: Option<Time>,
    on_node: Vec<OnNode>,
}

#[derive(Debug)]
struct NodeState {
    connection: Connection,
    /// The pause before the next reopening after a loss (us).
    pause_us: u64,
}

/// The subscriber connections of one client, one per node: see the module docs.
#[derive(Debug)]
pub struct Subscriptions {
    nodes: Vec<NodeState>,
    channels: BTreeMap<Vec<u8>, Channel>,
    timeout_us: u64,
    outputs: VecDeque<SubscriberOutput>,
}

fn linger_us() -> u64 {
    NOTICE_CHANNEL_LINGER_MS.saturating_mul(1000)
}

fn reopen_first_us() -> u64 {
    SUBSCRIBER_REOPEN_FIRST_MS.saturating_mul(1000)
}

fn reopen_max_us() -> u64 {
    SUBSCRIBER_REOPEN_MAX_MS.saturating_mul(1000)
}

impl Subscriptions {
    /// Subscriptions over `nodes` nodes. A connection that neither opens nor confirms a
    /// subscription within `timeout` (the driver's connect timeout, at least 1 ms) counts
    /// as lost. Fails when `nodes` is 0 or above [`crate::MAX_NODES`].
    pub fn new(nodes: usize, timeout: Duration) -> Result<Subscriptions, ConfigError> {
        if nodes == 0 {
            return Err(ConfigError::NoNodes);
        }
        if nodes > crate::MAX_NODES {
            return Err(ConfigError::TooManyNodes);
        }
        Ok(Subscriptions {
            nodes: (0..nodes)
                .map(|_| NodeState {
                    connection: Connection::Closed { reopen_at: None },
                    pause_us: reopen_first_us(),
                })
                .collect(),
            channels: BTreeMap::new(),
            timeout_us: micros_floor(timeout).max(1000),
            outputs: VecDeque::new(),
        })
    }

    /// The number of nodes.
    pub fn nodes(&self) -> usize {
        self.nodes.len()
    }

    /// One more listener on `channel` (an acquisition started listening): the channel
    /// is subscribed on every node (opening connections as their pauses allow).
    pub fn want(&mut self, channel: &[u8], now: Time) {
        let nodes = self.nodes.len();
        let entry = self
            .channels
            .entry(channel.to_vec())
            .or_insert_with(|| Channel {
                listeners: 0,
                idle_since: None,
                on_node: alloc::vec![OnNode::No; nodes],
            });
        entry.listeners = entry.listeners.saturating_add(1);
        entry.idle_since = None;
        for node in 0..nodes {
            self.reconcile(node, now);
        }
    }

    /// One listener fewer on `channel`: once none is left it lingers, then is
    /// unsubscribed. False (and nothing changes) for a channel nobody listens on.
    pub fn unwant(&mut self, channel: &[u8], now: Time) -> bool {
        let Some(entry) = self.channels.get_mut(channel) else {
            return false;
        };
        if entry.listeners == 0 {
            return false;
        }
        entry.listeners -= 1;
        if entry.listeners == 0 {
            entry.idle_since = Some(now);
        }
        true
    }

    /// Node `node`'s subscriber connection opened (after [`SubscriberOutput::Open`]).
    /// A connection nobody asked for (the node's opening was given up meanwhile) is
    /// closed at once.
    pub fn handle_opened(&mut self, node: usize, now: Time) -> Result<(), UsageError> {
        let state = self.node_mut(node)?;
        if !matches!(state.connection, Connection::Opening { .. }) {
            if !matches!(state.connection, Connection::Open) {
                self.outputs.push_back(SubscriberOutput::Close { node });
            }
            return Ok(());
        }
        state.connection = Connection::Open;
        self.reconcile(node, now);
        Ok(())
    }

    /// Node `node`'s subscriber connection failed: it could not be opened, or it
    /// dropped. Ignored while it counts as closed already.
    pub fn handle_lost(&mut self, node: usize, now: Time) -> Result<(), UsageError> {
        self.node_mut(node)?;
        self.lose(node, now);
        Ok(())
    }

    /// The node refused a `SUBSCRIBE` (an ACL without pub/sub, for example): the
    /// connection is closed and counts as lost.
    pub fn handle_refused(&mut self, node: usize, now: Time) -> Result<(), UsageError> {
        let state = self.node_mut(node)?;
        if matches!(state.connection, Connection::Closed { .. }) {
            return Ok(());
        }
        self.outputs.push_back(SubscriberOutput::Close { node });
        self.lose(node, now);
        Ok(())
    }

    /// Node `node` confirmed the subscription to `channel`. True when it confirms one
    /// this asked for on the current connection: hand it to the channel's waiting
    /// operations then ([`crate::Operation::handle_subscribed`]); false for a stale or
    /// unknown one, which changes nothing.
    pub fn handle_confirmed(
        &mut self,
        node: usize,
        channel: &[u8],
        _now: Time,
    ) -> Result<bool, UsageError> {
        let state = self.node_mut(node)?;
        if state.connection != Connection::Open {
            return Ok(false);
        }
        let Some(entry) = self.channels.get_mut(channel) else {
            return Ok(false);
        };
        // `node` was checked against the node count above; every channel has one state
        // per node.
        let Some(on_node) = entry.on_node.get_mut(node) else {
            return Ok(false);
        };
        if !matches!(on_node, OnNode::Asked { .. }) {
            return Ok(false);
        }
        *on_node = OnNode::Confirmed;
        self.nodes[node].pause_us = reopen_first_us();
        Ok(true)
    }

    /// Time passed: lingering channels come due, connections that did not open or
    /// confirm in time count as lost, paused connections open again. Calling it early
    /// is harmless.
    pub fn handle_timeout(&mut self, now: Time) {
        let due: Vec<Vec<u8>> = self
            .channels
            .iter()
            .filter(|(_, c)| {
                c.listeners == 0
                    && c.idle_since
                        .is_some_and(|since| since.plus_micros(linger_us()) <= now)
            })
            .map(|(name, _)| name.clone())
            .collect();
        for name in due {
            if let Some(entry) = self.channels.remove(&name) {
                for (node, on_node) in entry.on_node.iter().enumerate() {
                    if *on_node != OnNode::No && self.nodes[node].connection == Connection::Open {
                        self.outputs.push_back(SubscriberOutput::Unsubscribe {
                            node,
                            channel: name.clone(),
                        });
                    }
                }
            }
        }
        for node in 0..self.nodes.len() {
            let overdue = match self.nodes[node].connection {
                Connection::Opening { since } => since.plus_micros(self.timeout_us) <= now,
                Connection::Open => self.channels.values().any(|c| {
                    matches!(c.on_node[node], OnNode::Asked { at }
                        if at.plus_micros(self.timeout_us) <= now)
                }),
                Connection::Closed { .. } => false,
            };
            if overdue {
                self.outputs.push_back(SubscriberOutput::Close { node });
                self.lose(node, now);
            }
            self.reconcile(node, now);
        }
    }

    /// The next output to carry out, if any.
    pub fn poll_output(&mut self) -> Option<SubscriberOutput> {
        self.outputs.pop_front()
    }

    /// When [`Subscriptions::handle_timeout`] must next be called, if ever.
    pub fn poll_timeout(&self) -> Option<Time> {
        let mut earliest: Option<Time> = None;
        let mut consider = |at: Time| {
            earliest = Some(earliest.map_or(at, |e: Time| e.min(at)));
        };
        let wanted = self.channels.values().any(|c| c.listeners > 0);
        for channel in self.channels.values() {
            if let Some(since) = channel.idle_since {
                consider(since.plus_micros(linger_us()));
            }
        }
        for (node, state) in self.nodes.iter().enumerate() {
            match state.connection {
                Connection::Closed { reopen_at } => {
                    if let (Some(at), true) = (reopen_at, wanted) {
                        consider(at);
                    }
                }
                Connection::Opening { since } => consider(since.plus_micros(self.timeout_us)),
                Connection::Open => {
                    for channel in self.channels.values() {
                        if let OnNode::Asked { at } = channel.on_node[node] {
                            consider(at.plus_micros(self.timeout_us));
                        }
                    }
                }
            }
        }
        earliest
    }

    /// Whether node `node`'s subscriber connection is open.
    pub fn is_open(&self, node: usize) -> bool {
        self.nodes
            .get(node)
            .is_some_and(|s| s.connection == Connection::Open)
    }

    /// Whether `channel` is confirmed on node `node`'s current connection.
    pub fn is_subscribed(&self, node: usize, channel: &[u8]) -> bool {
        self.is_open(node)
            && self
                .channels
                .get(channel)
                .and_then(|c| c.on_node.get(node))
                .is_some_and(|s| *s == OnNode::Confirmed)
    }

    /// The number of channels wanted or lingering.
    pub fn channels(&self) -> usize {
        self.channels.len()
    }

    fn node_mut(&mut self, node: usize) -> Result<&mut NodeState, UsageError> {
        self.nodes.get_mut(node).ok_or(UsageError::UnknownNode)
    }

    /// The connection is gone: every subscription on it with it, lingering channels
    /// dropped, and the reopening paced.
    fn lose(&mut self, node: usize, now: Time) {
        let state = &mut self.nodes[node];
        if matches!(state.connection, Connection::Closed { .. }) {
            return;
        }
        let pause = state.pause_us;
        state.pause_us = pause.saturating_mul(2).min(reopen_max_us());
        state.connection = Connection::Closed {
            reopen_at: Some(now.plus_micros(pause)),
        };
        for channel in self.channels.values_mut() {
            channel.on_node[node] = OnNode::No;
        }
        self.drop_unsubscribed_lingering();
        self.reconcile(node, now);
    }

    /// Lingering channels subscribed on no node any more need no unsubscribing.
    fn drop_unsubscribed_lingering(&mut self) {
        self.channels
            .retain(|_, c| c.listeners > 0 || c.on_node.iter().any(|s| *s != OnNode::No));
    }

    /// Brings node `node` towards what is wanted: open it (when no pause holds it
    /// closed), subscribe what is wanted and not asked for yet, close it once nothing
    /// is wanted or lingering.
    fn reconcile(&mut self, node: usize, now: Time) {
        let wanted = self.channels.values().any(|c| c.listeners > 0);
        match self.nodes[node].connection {
            Connection::Closed { reopen_at } => {
                if wanted && reopen_at.is_none_or(|at| at <= now) {
                    self.nodes[node].connection = Connection::Opening { since: now };
                    self.outputs.push_back(SubscriberOutput::Open { node });
                }
            }
            Connection::Opening { .. } => {}
            Connection::Open => {
                if self.channels.is_empty() {
                    self.nodes[node].connection = Connection::Closed { reopen_at: None };
                    self.outputs.push_back(SubscriberOutput::Close { node });
                    return;
                }
                for (name, channel) in self.channels.iter_mut() {
                    if channel.listeners > 0 && channel.on_node[node] == OnNode::No {
                        channel.on_node[node] = OnNode::Asked { at: now };
                        self.outputs.push_back(SubscriberOutput::Subscribe {
                            node,
                            channel: name.clone(),
                        });
                    }
                }
            }
        }
    }
}
