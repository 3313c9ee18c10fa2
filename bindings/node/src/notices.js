// Release notices: per node, one subscriber connection made from the node's transport
// (a duplicate of the user's client, or a socket of its own), opened when an
// acquisition first waits and subscribed to the core's notice channels of the resources
// someone is waiting for. Each message is handed to the waiting operations as
// `handleNoticeMessage(node, message, now)`, its bytes as received (the waiter first in
// the resource's queue, or empty); the core decides what it changes. A confirmed
// subscription is handed to them as `handleSubscribed(node, now)`: a release the node
// published before the subscription took effect reached nobody, and the core decides
// whether one may have gone unheard (docs/bindings.md, rule 13).
// Notices never decide anything: a lost one costs at most a retry delay (or the time to
// subscribe again), a forged one at most an attempt.

import { defaults } from '../wasm/redlock_wasm.js';
import { channelId } from './channels.js';

// A subscriber connection nobody has used for this long is closed (so that a program
// which no longer waits can exit); the next wait opens it again.
const SUBSCRIBER_LINGER_MS = 1000;

// A channel stays subscribed for this long after the last acquisition listening on it
// ended (the core's NOTICE_CHANNEL_LINGER_MS): a program that waits for the same
// resource again and again (release, then acquire at once) would otherwise subscribe
// anew each time, and its next attempt, refused and queued, could be named by a release
// before its SUBSCRIBE landed. Read when the first Notices is made (the module is
// initialised by then).
let channelLingerMs;

/** One node's subscriber connection, opened on first use. */
class NodeSubscriber {
  #transport;
  #onMessage;
  #onSubscribed;
  #connection = undefined;
  #timer = undefined;
  #channels = 0;

  constructor(transport, onMessage, onSubscribed) {
    this.#transport = transport;
    this.#onMessage = onMessage;
    this.#onSubscribed = onSubscribed;
  }

  subscribe(channel) {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#connection === undefined) {
      try {
        // Transports without `subscriber` (a `send(args)` connection) get no notices.
        this.#connection = this.#transport.subscriber?.(this.#onMessage, this.#onSubscribed) ?? null;
      } catch {
        this.#connection = null; // this client cannot subscribe: no notices from it
      }
    }
    this.#channels += 1;
    this.#connection?.subscribe(channel);
  }

  unsubscribe(channel) {
    this.#channels -= 1;
    this.#connection?.unsubscribe(channel);
    if (this.#channels === 0 && this.#connection) {
      clearTimeout(this.#timer);
      this.#timer = setTimeout(() => this.close(), SUBSCRIBER_LINGER_MS);
    }
  }

  close() {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const connection = this.#connection;
    this.#connection = undefined;
    try {
      connection?.close();
    } catch {
      // Already closed.
    }
  }
}

export class Notices {
  #subscribers;
  /** channelId -> { channel, waiters: Set of tags } */
  #channels = new Map();
  #deliver;

  /**
   * @param transports one per node
   * @param deliver `(tag, node, message)`: a notice for the operation tagged `tag` from
   *   `node`, with the message's bytes, or undefined for a confirmed subscription
   */
  constructor(transports, deliver) {
    channelLingerMs ??= defaults().noticeChannelLingerMs;
    this.#deliver = deliver;
    this.#subscribers = transports.map(
      (transport, node) =>
        new NodeSubscriber(
          transport,
          (channel, message) => this.#message(node, channel, message),
          (channel) => this.#subscribed(node, channel),
        ),
    );
  }

  /** Starts listening for `channels` on behalf of the operation tagged `tag`. */
  watch(tag, channels) {
    const ids = [];
    for (const channel of channels) {
      const id = channelId(channel);
      ids.push(id);
      let entry = this.#channels.get(id);
      if (entry !== undefined && entry.linger !== undefined) {
        clearTimeout(entry.linger);
        entry.linger = undefined;
      }
      if (entry === undefined) {
        entry = { channel, waiters: new Set(), linger: undefined };
        this.#channels.set(id, entry);
        for (const subscriber of this.#subscribers) subscriber.subscribe(channel);
      }
      entry.waiters.add(tag);
    }
    return ids;
  }

  /**
   * Stops listening on behalf of `tag` (`ids` from watch); unsubscribes what nobody
   * waits for once CHANNEL_LINGER_MS passed without a new waiter.
   */
  unwatch(tag, ids) {
    for (const id of ids) {
      const entry = this.#channels.get(id);
      if (entry === undefined || !entry.waiters.delete(tag)) continue;
      if (entry.waiters.size === 0 && entry.linger === undefined) {
        entry.linger = setTimeout(() => {
          entry.linger = undefined;
          if (entry.waiters.size > 0 || this.#channels.get(id) !== entry) return;
          this.#channels.delete(id);
          for (const subscriber of this.#subscribers) subscriber.unsubscribe(entry.channel);
        }, channelLingerMs);
      }
    }
  }

  /** Closes every subscriber connection. */
  close() {
    for (const entry of this.#channels.values()) clearTimeout(entry.linger);
    this.#channels.clear();
    for (const subscriber of this.#subscribers) subscriber.close();
  }

  #message(node, channel, message) {
    const entry = this.#channels.get(channelId(channel));
    if (entry === undefined) return;
    const bytes = message instanceof Uint8Array ? message : new TextEncoder().encode(String(message ?? ''));
    for (const tag of [...entry.waiters]) this.#deliver(tag, node, bytes);
  }

  /** `node` confirmed the subscription to `channel`: its waiters are told. */
  #subscribed(node, channel) {
    const entry = this.#channels.get(channelId(channel));
    if (entry === undefined) return; // nobody listens any more
    for (const tag of [...entry.waiters]) this.#deliver(tag, node, undefined);
  }
}
