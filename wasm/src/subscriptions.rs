//! `Subscriptions`: the policy of a client's release-notice subscriber connections
//! (which channels each node's connection subscribes, when it opens, closes and opens
//! again after a failure), decided by the core; the driver only does the I/O it outputs
//! and hands notices and confirmations to its waiting operations.

use core::time::Duration;

use redlock_core::{SubscriberOutput, Subscriptions as CoreSubscriptions, Time, UsageError};
use wasm_bindgen::prelude::*;

use crate::convert::{bytes_from_js, node_index, time, time_to_js, to_js, whole, BytesRef};
use crate::error::{self, invalid_argument};
use crate::types::BytesJs;

/// What the output `Subscriptions.pollOutput()` returned asks for, on node
/// `outputNode` (and channel `outputChannel` for `Subscribe` and `Unsubscribe`).
#[wasm_bindgen]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubscriberOutputKind {
    /// Open the node's subscriber connection, then call `handleOpened`, or `handleLost`
    /// if it fails.
    Open = 1,
    /// Subscribe `outputChannel` on the node's subscriber connection; hand its
    /// confirmation to `handleConfirmed`, a refusal to `handleRefused`.
    Subscribe = 2,
    /// Unsubscribe `outputChannel` there; its confirmation needs no input.
    Unsubscribe = 3,
    /// Close the node's subscriber connection; report nothing more for it.
    Close = 4,
}

/// A client's notice subscriptions, one subscriber connection per node. Keep one per
/// client for as long as it lives.
///
/// Tell it when an acquisition starts and stops listening on a channel (`want`,
/// `unwant`) and what happens to each node's subscriber connection (`handleOpened`,
/// `handleLost`, `handleRefused`, `handleConfirmed`, `handleTimeout`). After every
/// input, call `pollOutput()` until `undefined` and do what it says on node
/// `outputNode` (see `SubscriberOutputKind`); call `handleTimeout` at `pollTimeout()`.
/// Hand a confirmation to the channel's waiting operations (`handleSubscribed`) only
/// when `handleConfirmed` returns true, and every message to them
/// (`handleNoticeMessage`): that dispatch is the driver's.
///
/// A client library that reconnects by itself reports its "disconnected" event as
/// `handleLost` and subscribes nothing on its new connection until `Open` says so (or
/// its reconnection is switched off for this connection).
#[wasm_bindgen]
pub struct Subscriptions {
    inner: redlock_core::Subscriptions,
    /// The node of the output last polled.
    node: usize,
    /// The channel of the output last polled (`Subscribe`, `Unsubscribe`).
    channel: Option<Vec<u8>>,
}

#[wasm_bindgen]
impl Subscriptions {
    /// Subscriptions over `nodes` nodes. A subscriber connection that neither opens nor
    /// confirms a subscription within `timeoutMs` (the driver's connect timeout; below
    /// 1 ms counts as 1 ms) counts as lost. Throws `no_nodes` / `too_many_nodes` for a
    /// bad node count.
    #[wasm_bindgen(constructor)]
    pub fn new(
        nodes: f64,
        #[wasm_bindgen(js_name = timeoutMs)] timeout_ms: f64,
    ) -> Result<Subscriptions, JsValue> {
        let nodes = usize::try_from(whole(nodes, "nodes")?).unwrap_or(usize::MAX);
        if !(timeout_ms.is_finite() && timeout_ms >= 0.0) {
            return Err(invalid_argument(&format!(
                "timeoutMs must be a non-negative number of milliseconds, got {timeout_ms}"
            )));
        }
        // `as` truncates toward zero and saturates.
        let timeout = Duration::from_micros((timeout_ms * 1000.0) as u64);
        let inner = redlock_core::Subscriptions::new(nodes, timeout).map_err(error::config)?;
        Ok(Subscriptions {
            inner,
            node: 0,
            channel: None,
        })
    }

    /// One more listener on `channel` (an acquisition started listening), at `nowUs`.
    pub fn want(
        &mut self,
        channel: BytesJs,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<(), JsValue> {
        let now = time(now_us, "nowUs")?;
        let channel = bytes_from_js(&channel, "a channel")?;
        self.inner.want(&channel, now);
        Ok(())
    }

    /// One listener fewer on `channel`: once none is left it lingers, then is
    /// unsubscribed. False (and nothing changes) for a channel nobody listens on.
    pub fn unwant(
        &mut self,
        channel: BytesJs,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<bool, JsValue> {
        let now = time(now_us, "nowUs")?;
        let channel = bytes_from_js(&channel, "a channel")?;
        Ok(self.inner.unwant(&channel, now))
    }

    /// Node `node`'s subscriber connection opened (after `Open`). Throws `unknown_node`
    /// for a node outside `0..nodes`.
    #[wasm_bindgen(js_name = handleOpened)]
    pub fn handle_opened(
        &mut self,
        node: f64,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<(), JsValue> {
        self.node_input(node, now_us, CoreSubscriptions::handle_opened)
    }

    /// Node `node`'s subscriber connection could not be opened, or dropped. Throws
    /// `unknown_node` for a node outside `0..nodes`.
    #[wasm_bindgen(js_name = handleLost)]
    pub fn handle_lost(
        &mut self,
        node: f64,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<(), JsValue> {
        self.node_input(node, now_us, CoreSubscriptions::handle_lost)
    }

    /// Node `node` refused a `SUBSCRIBE` (an ACL without pub/sub): the connection is to
    /// be closed (a `Close` output follows) and counts as lost. Throws `unknown_node`
    /// for a node outside `0..nodes`.
    #[wasm_bindgen(js_name = handleRefused)]
    pub fn handle_refused(
        &mut self,
        node: f64,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<(), JsValue> {
        self.node_input(node, now_us, CoreSubscriptions::handle_refused)
    }

    /// Node `node` confirmed the subscription to `channel`. True when it confirms one
    /// asked for on the current connection: hand it to the channel's waiting operations
    /// then (`Operation.handleSubscribed`); false for a stale or unknown one. Throws
    /// `unknown_node` for a node outside `0..nodes`.
    #[wasm_bindgen(js_name = handleConfirmed)]
    pub fn handle_confirmed(
        &mut self,
        node: f64,
        channel: BytesJs,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<bool, JsValue> {
        let now = time(now_us, "nowUs")?;
        let node = node_index(node)?;
        let channel = bytes_from_js(&channel, "a channel")?;
        self.inner
            .handle_confirmed(node, &channel, now)
            .map_err(error::usage)
    }

    /// Time has reached `nowUs`: lingering channels come due, connections that did not
    /// open or confirm in time count as lost, paused ones open again. Calling it early
    /// is harmless.
    #[wasm_bindgen(js_name = handleTimeout)]
    pub fn handle_timeout(
        &mut self,
        #[wasm_bindgen(js_name = nowUs)] now_us: f64,
    ) -> Result<(), JsValue> {
        let now = time(now_us, "nowUs")?;
        self.inner.handle_timeout(now);
        Ok(())
    }

    /// The next output's kind, or `undefined` when there is nothing to do until the
    /// next input; its node is `outputNode`, its channel `outputChannel`. Each poll
    /// replaces the previous output.
    #[wasm_bindgen(js_name = pollOutput)]
    pub fn poll_output(&mut self) -> Option<SubscriberOutputKind> {
        let (kind, node, channel) = match self.inner.poll_output()? {
            SubscriberOutput::Open { node } => (SubscriberOutputKind::Open, node, None),
            SubscriberOutput::Subscribe { node, channel } => {
                (SubscriberOutputKind::Subscribe, node, Some(channel))
            }
            SubscriberOutput::Unsubscribe { node, channel } => {
                (SubscriberOutputKind::Unsubscribe, node, Some(channel))
            }
            SubscriberOutput::Close { node } => (SubscriberOutputKind::Close, node, None),
        };
        self.node = node;
        self.channel = channel;
        Some(kind)
    }

    /// The node of the output last polled.
    #[wasm_bindgen(getter, js_name = outputNode)]
    pub fn output_node(&self) -> usize {
        self.node
    }

    /// The channel of the output last polled (`Subscribe`, `Unsubscribe`): text where
    /// valid UTF-8, bytes otherwise; `undefined` for the other outputs.
    #[wasm_bindgen(getter, js_name = outputChannel)]
    pub fn output_channel(&self) -> Result<Option<BytesJs>, JsValue> {
        self.channel
            .as_deref()
            .map(|channel| to_js(&BytesRef(channel)).map(JsValue::unchecked_into))
            .transpose()
    }

    /// When `handleTimeout` is next due (us), or `undefined` if nothing waits on time.
    #[wasm_bindgen(js_name = pollTimeout)]
    pub fn poll_timeout(&self) -> Option<f64> {
        self.inner.poll_timeout().map(time_to_js)
    }

    /// Whether node `node`'s subscriber connection is open (false for an unknown node).
    #[wasm_bindgen(js_name = isOpen)]
    pub fn is_open(&self, node: f64) -> Result<bool, JsValue> {
        Ok(self.inner.is_open(node_index(node)?))
    }

    /// Whether `channel` is confirmed on node `node`'s current connection.
    #[wasm_bindgen(js_name = isSubscribed)]
    pub fn is_subscribed(&self, node: f64, channel: BytesJs) -> Result<bool, JsValue> {
        let node = node_index(node)?;
        let channel = bytes_from_js(&channel, "a channel")?;
        Ok(self.inner.is_subscribed(node, &channel))
    }

    /// The number of channels wanted or lingering.
    #[wasm_bindgen(getter, js_name = channelCount)]
    pub fn channel_count(&self) -> usize {
        self.inner.channels()
    }

    /// The number of nodes.
    #[wasm_bindgen(getter)]
    pub fn nodes(&self) -> usize {
        self.inner.nodes()
    }
}

impl Subscriptions {
    /// A node's connection event: the time and node checked, then handed to `input`.
    fn node_input(
        &mut self,
        node: f64,
        now_us: f64,
        input: fn(&mut CoreSubscriptions, usize, Time) -> Result<(), UsageError>,
    ) -> Result<(), JsValue> {
        let now = time(now_us, "nowUs")?;
        let node = node_index(node)?;
        input(&mut self.inner, node, now).map_err(error::usage)
    }
}
