// Raw-socket transports: the link's RESP bytes are written as they are, and the bytes
// received go back to the link, whose core decoder pairs each reply with its write.
// For runtimes without a Redis client (edge runtimes) and for Node.js sockets.

import { Decoder, encodeCommand } from '../wasm/redlock_wasm.js';
import { wholeNumber } from './args.js';
import { linkCause } from './clients.js';

const lossy = new TextDecoder();

/**
 * Opens byte streams. Called with handlers `{ onData(bytes), onClose(error?), signal }`,
 * it resolves to `{ write(bytes), close() }` once connected (TLS and all), or rejects.
 * `signal` (an AbortSignal) aborts when the attempt is given up (the link's connect
 * timeout, or the Redlock closed): the opener then abandons the connection under way
 * (it may reject; nothing more is reported for it, and a stream it still resolves to is
 * closed at once).
 * @typedef {(handlers: { onData(bytes: Uint8Array): void, onClose(error?: unknown): void, signal: AbortSignal }) => Promise<{ write(bytes: Uint8Array): void, close(): void }>} StreamOpener
 */

/** A node reached over a byte stream: the transport of a link made with `{ resp: true }`. */
export class StreamTransport {
  resp = true;
  /**
   * How long a connection may take to open (the link's connect timeout, and the
   * subscriber connections'): unset, as the opener sets no limit of its own, so the
   * core's default applies. The link gives up an attempt past it with a `close`.
   */
  connectTimeoutMs = undefined;
  #open;
  #stream = null;
  /** The attempt under way, until it opens or fails: aborting it gives the attempt up. */
  #attempt = null;
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
    this.#giveUp();
    const generation = ++this.#generation;
    const current = () => generation === this.#generation;
    const node = this.node;
    const attempt = new AbortController();
    this.#attempt = attempt;
    const settled = () => {
      if (this.#attempt === attempt) this.#attempt = null;
    };
    let opened;
    try {
      opened = this.#open({
        onData: (bytes) => {
          if (current()) node.data(bytes);
        },
        onClose: (error) => {
          if (!current()) return;
          settled();
          this.#stream = null;
          this.#generation += 1;
          node.closed(error ? linkCause(error) : 'closed', error ? String(error.message ?? error) : 'closed by the node');
        },
        signal: attempt.signal,
      });
    } catch (error) {
      opened = Promise.reject(error);
    }
    Promise.resolve(opened).then(
      (stream) => {
        settled();
        if (!current()) {
          stream.close();
          return;
        }
        this.#stream = stream;
        node.connected();
      },
      (error) => {
        settled();
        if (!current()) return;
        this.#generation += 1;
        node.closed(linkCause(error), String(error?.message ?? error) || 'connection failed');
      },
    );
  }

  /** Aborts the attempt under way, if any (its events are already ignored). */
  #giveUp() {
    const attempt = this.#attempt;
    this.#attempt = null;
    attempt?.abort();
  }

  write(id, bytes) {
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
   * The node's subscriber connection for release notices: a socket of its own, opened,
   * subscribed and closed as the core's Subscriptions say (see notices.js), reporting
   * to `events`.
   */
  subscriber(events) {
    return new StreamSubscriber(this.#open, events);
  }

  /**
   * The link's `close`: closes the connection, or gives up the attempt to open one (the
   * link's connect timeout passed); nothing more is reported for either.
   */
  close() {
    this.#generation += 1;
    this.#giveUp();
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
 * RESP encoder, pushed messages, confirmations and refusals through its decoder. It
 * opens, subscribes and closes only when told (the core's Subscriptions decide when) and
 * reports what happens to the current connection: `opened()`, `lost()` (it could not be
 * opened, it dropped, or it sent something that is not RESP), `refused()` (an error
 * reply: a SUBSCRIBE the node refused), `confirmed(channel)`, `message(channel, bytes)`.
 * Nothing is reported for a connection it was told to close.
 */
class StreamSubscriber {
  #open;
  #events;
  #stream = null;
  /** The opening under way, until it opens or fails: aborting it gives it up. */
  #attempt = null;
  /** Counts connections: events of an older one are ignored. */
  #generation = 0;

  constructor(open, events) {
    this.#open = open;
    this.#events = events;
  }

  open() {
    this.#drop();
    const generation = this.#generation;
    const current = () => generation === this.#generation;
    const lost = () => {
      if (!current()) return;
      this.#drop();
      this.#events.lost();
    };
    const decoder = new Decoder();
    const onData = (bytes) => {
      if (!current()) return;
      decoder.feed(bytes);
      while (current()) {
        let reply;
        try {
          reply = decoder.nextReply();
        } catch {
          lost(); // not RESP: this connection cannot be trusted
          return;
        }
        if (reply === undefined) return;
        this.#reply(reply);
      }
    };
    const attempt = new AbortController();
    this.#attempt = attempt;
    const settled = () => {
      if (this.#attempt === attempt) this.#attempt = null;
    };
    let opened;
    try {
      opened = this.#open({ onData, onClose: lost, signal: attempt.signal });
    } catch (error) {
      opened = Promise.reject(error);
    }
    Promise.resolve(opened).then(
      (stream) => {
        settled();
        if (!current()) {
          stream.close();
          return;
        }
        this.#stream = stream;
        this.#events.opened();
      },
      () => {
        settled();
        lost();
      },
    );
  }

  subscribe(channel) {
    this.#write(['SUBSCRIBE', channel]);
  }

  unsubscribe(channel) {
    this.#write(['UNSUBSCRIBE', channel]);
  }

  close() {
    this.#drop();
  }

  #write(args) {
    const stream = this.#stream;
    if (stream === null) return; // not open: the core counts it as lost already
    const generation = this.#generation;
    try {
      stream.write(encodeCommand(args));
    } catch {
      queueMicrotask(() => {
        if (generation !== this.#generation) return;
        this.#drop();
        this.#events.lost();
      });
    }
  }

  /**
   * Forgets the current connection (its events are ignored from now on) and closes it,
   * or gives up the opening under way (the core's Subscriptions close a connection that
   * did not open within the connect timeout).
   */
  #drop() {
    this.#generation += 1;
    const attempt = this.#attempt;
    this.#attempt = null;
    attempt?.abort();
    const stream = this.#stream;
    this.#stream = null;
    try {
      stream?.close();
    } catch {
      // Already closed.
    }
  }

  /**
   * `message <channel> <payload>` or `subscribe <channel> <count>` (RESP2: this
   * connection never asks for RESP3, whose pushes the decoder skips), or an error reply
   * (a refused SUBSCRIBE); anything else (`unsubscribe`) changes nothing.
   */
  #reply(reply) {
    if (reply.type === 'error') {
      this.#events.refused();
      return;
    }
    if (reply.type !== 'array' || reply.value.length !== 3) return;
    const [kind, channel, message] = reply.value;
    if (kind.type !== 'bulk' || channel.type !== 'bulk') return;
    const name = lossy.decode(kind.value);
    if (name === 'message') {
      this.#events.message(channel.value, message.type === 'bulk' ? message.value : new Uint8Array());
    } else if (name === 'subscribe') {
      this.#events.confirmed(channel.value);
    }
  }
}

/**
 * A StreamOpener over a `connect({ hostname, port })` that returns a socket with web
 * streams (`readable`, `writable`, `opened`, `close()`), as Cloudflare's
 * `cloudflare:sockets` does. An attempt given up (`signal`) closes the socket.
 */
export function socketStreams(connect, address, credentials) {
  const where = `${address.hostname}:${address.port}`;
  return async ({ onData, onClose, signal }) => {
    if (signal?.aborted) throw new Error(`${where}: connection attempt given up`);
    const socket = connect(address);
    const writer = socket.writable.getWriter();
    const reader = socket.readable.getReader();
    let abandon;
    const givenUp = new Promise((_, reject) => {
      abandon = () => {
        socket.close().catch(() => {});
        reject(new Error(`${where}: connection attempt given up`));
      };
      signal?.addEventListener('abort', abandon, { once: true });
    });
    givenUp.catch(() => {}); // raced below, or never looked at once the socket is open
    try {
      if (socket.opened) await Promise.race([socket.opened, givenUp]);
      if (needsLogin(credentials)) {
        const decoder = new Decoder();
        // One command at a time, each reply read whole before the next is written.
        const send = async (args) => {
          await writer.write(encodeCommand(args));
          for (;;) {
            const reply = decoder.nextReply();
            if (reply !== undefined) return reply;
            const { value, done } = await reader.read();
            if (done) throw new Error(`${where}: connection closed while logging in`);
            decoder.feed(value);
          }
        };
        try {
          await Promise.race([login(send, credentials, where), givenUp]);
        } catch (error) {
          socket.close().catch(() => {});
          throw error;
        } finally {
          decoder.free();
        }
      }
    } finally {
      signal?.removeEventListener('abort', abandon);
    }
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
   * @param {{ label: string, address?: string, connectTimeoutMs?: number }} options
   * `connectTimeoutMs`: its transports' (unset: the core's default).
   */
  constructor(open, { label, address = label, connectTimeoutMs = undefined }) {
    this.#open = open;
    this.label = label;
    this.address = address;
    this.connectTimeoutMs = connectTimeoutMs;
  }

  /** A new transport (one connection at a time) to this node. */
  createTransport() {
    const transport = new StreamTransport(this.#open, { label: this.label, address: this.address });
    transport.connectTimeoutMs = this.connectTimeoutMs;
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

/**
 * A raw-socket node over web-stream sockets (workerd's `connect`). With `password`
 * (and `username` for an ACL user) every connection sends `AUTH`, and with `db` other
 * than 0 `SELECT`, before the link counts it open (`login`).
 */
export function rawSocket(connect, { hostname, port, username, password, db } = {}) {
  const credentials = checkLogin({ username, password, db }, `${hostname}:${port}`);
  return new SocketNode(socketStreams(connect, { hostname, port }, credentials), { label: `${hostname}:${port}` });
}

/**
 * Checks the `username`, `password` and `db` of a raw-socket node (or a Sentinel's
 * master) named `what`; returns `target`.
 */
export function checkLogin(target, what) {
  const { username, password, db } = target;
  if (username !== undefined && (typeof username !== 'string' || username === '')) {
    throw new TypeError(`${what}: username must be a non-empty string`);
  }
  if (password !== undefined && typeof password !== 'string') {
    throw new TypeError(`${what}: password must be a string`);
  }
  if (username !== undefined && password === undefined) {
    throw new TypeError(`${what}: a username needs its password`);
  }
  if (db !== undefined) wholeNumber(`${what}: db (the database)`, db, 0, Number.MAX_SAFE_INTEGER);
  return target;
}

/** An Error with `code` (the link's cause is read from it: see linkCause). */
export function failure(message, code) {
  const error = new Error(message);
  if (code !== undefined) error.code = code;
  return error;
}

/**
 * Logs a new raw connection in as `credentials` say, before the link counts it open:
 * `AUTH [username] password`, then `SELECT db` (other than 0). `send(args)` writes one
 * command and resolves to its reply (each transport's own). A refused `AUTH` is the
 * cause `auth`; the error names the server's answer.
 */
export async function login(send, { username, password, db }, where) {
  if (password !== undefined) {
    const reply = await send(username === undefined ? ['AUTH', password] : ['AUTH', username, password]);
    if (reply.type === 'error') throw failure(`${where}: AUTH refused: ${reply.value}`, 'AUTH_REFUSED');
  }
  if (db !== undefined && db !== 0) {
    const reply = await send(['SELECT', String(db)]);
    if (reply.type === 'error') throw failure(`${where}: SELECT ${db} refused: ${reply.value}`);
  }
}

/** Whether `credentials` ask for any command before the connection counts open. */
function needsLogin({ password, db } = {}) {
  return password !== undefined || (db !== undefined && db !== 0);
}
