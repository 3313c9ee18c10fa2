// Raw-socket transports: the link's RESP bytes are written as they are, and the bytes
// received go back to the link, whose core decoder pairs each reply with its write.
// For runtimes without a Redis client (edge runtimes) and for Node.js sockets.

import { Decoder, defaults, encodeCommand } from '../wasm/redlock_wasm.js';
import { channelId } from './channels.js';
import { linkCause } from './clients.js';

// Reconnecting a subscriber connection: the core's pauses (SUBSCRIBER_REOPEN_FIRST_MS,
// doubling up to _MAX_MS), read once the module is loaded.
let reopenFirstMs;
let reopenMaxMs;
const lossy = new TextDecoder();

/**
 * Opens byte streams. Called with handlers `{ onData(bytes), onClose(error?) }`, it
 * resolves to `{ write(bytes), close() }` once connected (TLS and all), or rejects.
 * @typedef {(handlers: { onData(bytes: Uint8Array): void, onClose(error?: unknown): void }) => Promise<{ write(bytes: Uint8Array): void, close(): void }>} StreamOpener
 */

/** A node reached over a byte stream: the transport of a link made with `{ resp: true }`. */
export class StreamTransport {
  resp = true;
  #open;
  #stream = null;
  /** Counts connections: events of an older one are ignored. */
  #generation = 0;

  /**
   * @param {StreamOpener} open
   * @param {{ label?: string, address?: string }} [options]
   */
  constructor(open, { label = 'raw socket', address = label } = {}) {
    this.#open = open;
    this.label = label;
    this.address = address;
  }

  attach(node) {
    this.node = node;
  }

  connect() {
    const generation = ++this.#generation;
    const current = () => generation === this.#generation;
    const node = this.node;
    let opened;
    try {
      opened = this.#open({
        onData: (bytes) => {
          if (current()) node.data(bytes);
        },
        onClose: (error) => {
          if (!current()) return;
          this.#stream = null;
          this.#generation += 1;
          node.closed(error ? linkCause(error) : 'closed', error ? String(error.message ?? error) : 'closed by the node');
        },
      });
    } catch (error) {
      opened = Promise.reject(error);
    }
    Promise.resolve(opened).then(
      (stream) => {
        if (!current()) {
          stream.close();
          return;
        }
        this.#stream = stream;
        node.connected();
      },
      (error) => {
        if (!current()) return;
        this.#generation += 1;
        node.closed(linkCause(error), String(error?.message ?? error) || 'connection failed');
      },
    );
  }

  write({ bytes }) {
    try {
      this.#stream.write(bytes);
    } catch (error) {
      const stream = this.#stream;
      this.#stream = null;
      this.#generation += 1;
      try {
        stream?.close();
      } catch {
        // Already closed.
      }
      queueMicrotask(() => this.node.closed('closed', String(error?.message ?? error)));
    }
  }

  /**
   * A subscriber connection for release notices: a socket of its own to the node.
   * `onMessage(channel, message)` for each message, `onSubscribed(channel)` for each
   * subscription the node confirms.
   */
  subscriber(onMessage, onSubscribed) {
    return new StreamSubscriber(this.#open, onMessage, onSubscribed);
  }

  close() {
    this.#generation += 1;
    const stream = this.#stream;
    this.#stream = null;
    try {
      stream?.close();
    } catch {
      // Already closed.
    }
  }

  detach() {
    this.close();
  }
}

/**
 * A subscriber connection over a byte stream: SUBSCRIBE / UNSUBSCRIBE through the core's
 * RESP encoder, pushed messages and confirmations through its decoder. Reconnects (and
 * subscribes again) after the connection drops; messages in between are lost, which the
 * confirmations of the new subscriptions make up for.
 */
class StreamSubscriber {
  #open;
  #onMessage;
  #onSubscribed;
  /** Channels subscribed, by channelId. */
  #channels = new Map();
  #stream = null;
  #generation = 0;
  #retryMs;
  #timer = undefined;
  #closed = false;

  constructor(open, onMessage, onSubscribed) {
    if (reopenFirstMs === undefined) {
      const core = defaults();
      reopenFirstMs = core.subscriberReopenFirstMs;
      reopenMaxMs = core.subscriberReopenMaxMs;
    }
    this.#retryMs = reopenFirstMs;
    this.#open = open;
    this.#onMessage = onMessage;
    this.#onSubscribed = onSubscribed;
    this.#connect();
  }

  subscribe(channel) {
    this.#channels.set(channelId(channel), channel);
    this.#write(['SUBSCRIBE', channel]);
  }

  unsubscribe(channel) {
    this.#channels.delete(channelId(channel));
    this.#write(['UNSUBSCRIBE', channel]);
  }

  close() {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#drop(this.#generation);
  }

  #write(args) {
    if (this.#stream === null) return; // sent on (re)connecting
    try {
      this.#stream.write(encodeCommand(args));
    } catch {
      this.#drop(this.#generation);
    }
  }

  #connect() {
    const generation = ++this.#generation;
    const decoder = new Decoder();
    const onData = (bytes) => {
      if (generation !== this.#generation) return;
      decoder.feed(bytes);
      for (;;) {
        let reply;
        try {
          reply = decoder.nextReply();
        } catch {
          this.#drop(generation); // not RESP: start over
          return;
        }
        if (reply === undefined) return;
        this.#reply(reply);
      }
    };
    let opened;
    try {
      opened = this.#open({ onData, onClose: () => this.#drop(generation) });
    } catch (error) {
      opened = Promise.reject(error);
    }
    Promise.resolve(opened).then(
      (stream) => {
        if (generation !== this.#generation || this.#closed) {
          stream.close();
          return;
        }
        this.#stream = stream;
        this.#retryMs = reopenFirstMs;
        for (const channel of this.#channels.values()) this.#write(['SUBSCRIBE', channel]);
      },
      () => this.#drop(generation),
    );
  }

  /** Forgets connection `generation` (if still current) and schedules the next. */
  #drop(generation) {
    if (generation !== this.#generation) return;
    this.#generation += 1;
    const stream = this.#stream;
    this.#stream = null;
    try {
      stream?.close();
    } catch {
      // Already closed.
    }
    if (this.#closed) return;
    this.#timer = setTimeout(() => this.#connect(), this.#retryMs);
    this.#retryMs = Math.min(this.#retryMs * 2, reopenMaxMs);
  }

  /**
   * `message <channel> <payload>` or `subscribe <channel> <count>` (RESP2: this
   * connection never asks for RESP3, whose pushes the decoder skips); anything else
   * (`unsubscribe`, a refused SUBSCRIBE) changes nothing.
   */
  #reply(reply) {
    if (reply.type !== 'array' || reply.value.length !== 3) return;
    const [kind, channel, message] = reply.value;
    if (kind.type !== 'bulk' || channel.type !== 'bulk') return;
    const name = lossy.decode(kind.value);
    if (name === 'message') {
      this.#onMessage(channel.value, message.type === 'bulk' ? message.value : new Uint8Array());
    } else if (name === 'subscribe') {
      this.#onSubscribed?.(channel.value);
    }
  }
}

/**
 * A StreamOpener over a `connect({ hostname, port })` that returns a socket with web
 * streams (`readable`, `writable`, `opened`, `close()`), as Cloudflare's
 * `cloudflare:sockets` does.
 */
export function socketStreams(connect, address) {
  return async ({ onData, onClose }) => {
    const socket = connect(address);
    const writer = socket.writable.getWriter();
    const reader = socket.readable.getReader();
    if (socket.opened) await socket.opened;
    (async () => {
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          onData(value);
        }
        onClose();
      } catch (error) {
        onClose(error);
      }
    })();
    return {
      write(bytes) {
        writer.write(bytes).catch((error) => onClose(error));
      },
      close() {
        socket.close().catch(() => {});
      },
    };
  };
}

/**
 * A node reached over raw sockets: each Redlock given it opens its own connection
 * (`createTransport()`); `close()` closes every one of them.
 */
export class SocketNode {
  #open;
  #transports = new Set();

  /**
   * @param {StreamOpener} open
   * @param {{ label: string, address?: string }} options
   */
  constructor(open, { label, address = label }) {
    this.#open = open;
    this.label = label;
    this.address = address;
  }

  /** A new transport (one connection at a time) to this node. */
  createTransport() {
    const transport = new StreamTransport(this.#open, { label: this.label, address: this.address });
    const detach = transport.detach.bind(transport);
    transport.detach = () => {
      this.#transports.delete(transport);
      detach();
    };
    this.#transports.add(transport);
    return transport;
  }

  /** Closes every connection opened through this node. */
  close() {
    for (const transport of [...this.#transports]) transport.detach();
  }
}

/** A raw-socket node over web-stream sockets (workerd's `connect`). */
export function rawSocket(connect, { hostname, port } = {}) {
  return new SocketNode(socketStreams(connect, { hostname, port }), { label: `${hostname}:${port}` });
}
