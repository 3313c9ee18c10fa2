// Release notices: one core Subscriptions per Redlock decides the subscriber connections
// (one per node, made from the node's transport: a duplicate of the user's client, or a
// socket of its own): which channels each subscribes, when it opens, closes, and how
// long a failed one stays closed. This file does what it outputs through each node's
// subscriber (the transport's `subscriber(events)`), reports what happens to them, and
// arms one timer at its pollTimeout.
//
// Dispatch stays here: each message is handed to the operations listening on its
// channel (through the driver, `engine.notice(tag, node, message, now)`), its bytes as
// received (the waiter first in the resource's queue, or empty); a confirmed
// subscription, when the core says it counts, as `engine.subscribed(tag, node, now)`: a
// release the node published before the subscription took effect reached nobody, and
// the core decides whether one may have gone unheard (docs/bindings.md, rule 13). Notices never decide anything: a lost one
// costs at most a retry delay (or the time to subscribe again), a forged one at most an
// attempt.

import { SubscriberOutputKind, Subscriptions, defaults } from '../wasm/redlock_wasm.js';
import { channelId } from './channels.js';
import { nowUs } from './clock.js';

const { Open, Subscribe, Unsubscribe, Close } = SubscriberOutputKind;

/**
 * The subscriber of a node whose transport cannot subscribe (a `send(args)` connection,
 * or one whose `subscriber()` threw): every opening fails, so the core keeps it closed
 * and only tries again after its pauses, at no cost but a timer.
 */
class NoSubscriber {
  #events;

  constructor(events) {
    this.#events = events;
  }

  open() {
    queueMicrotask(() => this.#events.lost());
  }

  subscribe() {}

  unsubscribe() {}

  close() {}
}

/** Whether `transport` can make subscriber connections. */
export function canSubscribe(transport) {
  return typeof transport?.subscriber === 'function';
}

export class Notices {
  /** The core's Subscriptions: every decision about the subscriber connections. */
  #core;
  /** One per node: `{ open(), subscribe(channel), unsubscribe(channel), close() }`. */
  #subscribers;
  /** channelId -> { channel, waiters: Set of tags }, while anyone listens. */
  #channels = new Map();
  #deliver;
  #timer = undefined;
  #timerAt = Infinity;
  #pumping = false;
  #closed = false;

  /**
   * @param transports one per node
   * @param deliver `(tag, node, message)`: a notice for the operation tagged `tag` from
   *   `node`, with the message's bytes, or undefined for a confirmed subscription
   */
  constructor(transports, deliver) {
    this.#deliver = deliver;
    // How long a subscriber connection may take to open, or to confirm a subscription,
    // before the core counts it as lost: the transport's connect timeout, or for one
    // that names none (`connectTimeoutMs`) the core's default, as in every binding.
    const fallbackMs = defaults().connectTimeoutDefaultMs;
    const timeoutMs = Math.max(...transports.map((t) => t.connectTimeoutMs ?? fallbackMs));
    this.#core = new Subscriptions(transports.length, timeoutMs);
    this.#subscribers = transports.map((transport, node) => {
      const events = {
        opened: () => this.#input(node, OPENED),
        lost: () => this.#input(node, LOST),
        refused: () => this.#input(node, REFUSED),
        confirmed: (channel) => this.#confirmed(node, channel),
        message: (channel, message) => this.#message(node, channel, message),
      };
      if (!canSubscribe(transport)) return new NoSubscriber(events);
      try {
        return transport.subscriber(events);
      } catch {
        return new NoSubscriber(events); // this client cannot subscribe: no notices from it
      }
    });
  }

  /** Starts listening for `channels` on behalf of the operation tagged `tag`. */
  watch(tag, channels) {
    const ids = [];
    if (this.#closed) return ids;
    const now = nowUs();
    for (const channel of channels) {
      const id = channelId(channel);
      let entry = this.#channels.get(id);
      if (entry === undefined) {
        entry = { channel, waiters: new Set() };
        this.#channels.set(id, entry);
      }
      if (entry.waiters.has(tag)) continue;
      entry.waiters.add(tag);
      ids.push(id);
      this.#core.want(channel, now);
    }
    this.#pump();
    return ids;
  }

  /** Stops listening on behalf of `tag` (`ids` from watch); the core decides the rest. */
  unwatch(tag, ids) {
    if (this.#closed) return;
    const now = nowUs();
    for (const id of ids) {
      const entry = this.#channels.get(id);
      if (entry === undefined || !entry.waiters.delete(tag)) continue;
      this.#core.unwant(entry.channel, now);
      if (entry.waiters.size === 0) this.#channels.delete(id);
    }
    this.#pump();
  }

  /** Closes every subscriber connection. */
  close() {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#channels.clear();
    for (const subscriber of this.#subscribers) {
      try {
        subscriber.close();
      } catch {
        // Already closed.
      }
    }
    this.#core.free();
  }

  /** One event of node `node`'s subscriber connection: `call(core, node, now)`. */
  #input(node, call) {
    if (this.#closed) return;
    call(this.#core, node, nowUs());
    this.#pump();
  }

  /** Does what the core outputs, then arms the timer for its next wake-up. */
  #pump() {
    // An event reported while outputs are carried out: the loop below polls its
    // outputs too.
    if (this.#pumping || this.#closed) return;
    this.#pumping = true;
    const core = this.#core;
    try {
      while (!this.#closed) {
        const kind = core.pollOutput();
        if (kind === undefined) break;
        const node = core.outputNode;
        const subscriber = this.#subscribers[node];
        try {
          if (kind === Open) subscriber.open();
          else if (kind === Subscribe) subscriber.subscribe(core.outputChannel);
          else if (kind === Unsubscribe) subscriber.unsubscribe(core.outputChannel);
          else if (kind === Close) subscriber.close();
        } catch {
          // A subscriber that cannot do it: its connection is dropped and counts as lost
          // (a close needs nothing more).
          if (kind !== Close) {
            try {
              subscriber.close();
            } catch {
              // Already closed.
            }
            queueMicrotask(() => this.#input(node, LOST));
          }
        }
      }
    } finally {
      this.#pumping = false;
    }
    if (!this.#closed) this.#arm();
  }

  /**
   * Arms the one timer for the core's next wake-up. Unref'd: an idle Redlock (a channel
   * lingering, a paused reopening) never keeps the process alive; while a connection is
   * open its socket does, and while an acquisition waits its own timer does.
   */
  #arm() {
    const at = this.#core.pollTimeout();
    // One already armed sooner stays (waking early is harmless: the core re-arms).
    if (at === undefined || at >= this.#timerAt) return;
    clearTimeout(this.#timer);
    this.#timerAt = at;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#timerAt = Infinity;
      this.#input(0, TIMEOUT);
    }, Math.max(0, Math.ceil((at - nowUs()) / 1000)));
    this.#timer?.unref?.();
  }

  #message(node, channel, message) {
    if (this.#closed) return;
    const entry = this.#channels.get(channelId(channel));
    if (entry === undefined) return; // nobody listens (a lingering channel)
    const bytes = message instanceof Uint8Array ? message : new TextEncoder().encode(String(message ?? ''));
    for (const tag of [...entry.waiters]) this.#deliver(tag, node, bytes);
  }

  /**
   * `node` confirmed the subscription to `channel`: its waiters are told, when the core
   * says the confirmation counts.
   */
  #confirmed(node, channel) {
    if (this.#closed) return;
    const counts = this.#core.handleConfirmed(node, channel, nowUs());
    if (counts) {
      const entry = this.#channels.get(channelId(channel));
      if (entry !== undefined) for (const tag of [...entry.waiters]) this.#deliver(tag, node, undefined);
    }
    this.#pump();
  }
}

// The core's inputs for a subscriber connection's events, as #input calls them.
const OPENED = (core, node, now) => core.handleOpened(node, now);
const LOST = (core, node, now) => core.handleLost(node, now);
const REFUSED = (core, node, now) => core.handleRefused(node, now);
const TIMEOUT = (core, node, now) => core.handleTimeout(now);
