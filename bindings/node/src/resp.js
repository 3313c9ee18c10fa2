// A connection that speaks RESP over a raw byte stream, through the core's encoder and
// decoder: for runtimes without a Redis client (edge runtimes), and for Node.js sockets.
//
// Commands are pipelined: replies come back in order, so each one goes to the oldest
// command still waiting. A command the driver stopped waiting for keeps its place, so a
// late reply never reaches the wrong command.

import { Decoder, encodeCommand, scripts } from '../wasm/redlock_wasm.js';

/**
 * `SCRIPT LOAD` of the core's three scripts. The core falls back to a script's text on
 * NOSCRIPT only while an operation is undecided, so a node that first meets a script
 * after a release decided at a quorum would keep that key until its TTL; connections
 * therefore load the scripts before their first command, and again after reconnecting.
 */
export function scriptLoads() {
  const { acquire, release, extend } = scripts();
  return [acquire, release, extend].map((script) => ['SCRIPT', 'LOAD', script.text]);
}

/**
 * Opens byte streams. Called with handlers `{ onData(bytes), onClose(error?) }`, it
 * resolves to `{ write(bytes), close() }` once connected.
 * @typedef {(handlers: { onData(bytes: Uint8Array): void, onClose(error?: unknown): void }) => Promise<{ write(bytes: Uint8Array): void, close(): void }>} StreamOpener
 */

const DEFAULT_MAX_PENDING = 1024;

export class RespConnection {
  #open;
  #stream = null;
  #opening = null;
  #decoder = null;
  #pending = [];
  #maxPending;
  #generation = 0;
  #scriptsOnOpen;

  /**
   * @param {StreamOpener} open
   * @param {{ label?: string, maxPending?: number, loadScripts?: boolean }} [options]
   *   maxPending: commands waiting for replies beyond which the node is considered stuck
   *   and the stream is closed (a frozen node otherwise accumulates them forever).
   *   loadScripts (default true): write `scriptLoads()` first on every new stream.
   */
  constructor(open, { label = 'raw socket', maxPending = DEFAULT_MAX_PENDING, loadScripts = true } = {}) {
    this.#open = open;
    this.label = label;
    this.#maxPending = maxPending;
    this.#scriptsOnOpen = loadScripts;
  }

  /** Commands sent and not yet answered. */
  get pending() {
    return this.#pending.length;
  }

  /** Sends one command; resolves to the core's reply (never rejects). */
  send(args) {
    return new Promise((resolve) => {
      let bytes;
      try {
        bytes = encodeCommand(args);
      } catch (error) {
        resolve({ type: 'connection_failed', value: `cannot encode command: ${error.message}` });
        return;
      }
      if (this.#pending.length >= this.#maxPending) {
        this.#fail(new Error(`${this.#pending.length} commands unanswered; closing the connection`));
      }
      const entry = { resolve };
      this.#pending.push(entry);
      this.#connected().then(
        (stream) => {
          if (entry.done) return;
          try {
            stream.write(bytes);
          } catch (error) {
            this.#fail(error);
          }
        },
        (error) => {
          // A stale attempt's failure must not drop a newer connection.
          if (!entry.done) this.#fail(error);
        },
      );
    });
  }

  /** Closes the stream; commands still waiting get a connection failure. */
  close() {
    this.#fail(new Error('connection closed'));
  }

  #connected() {
    if (this.#stream) return Promise.resolve(this.#stream);
    if (this.#opening) return this.#opening;
    const generation = ++this.#generation;
    this.#decoder = new Decoder();
    this.#opening = this.#open({
      onData: (bytes) => {
        if (generation === this.#generation) this.#received(bytes);
      },
      onClose: (error) => {
        if (generation === this.#generation) this.#fail(error ?? new Error('connection closed by the node'));
      },
    }).then(
      (stream) => {
        if (generation !== this.#generation) {
          stream.close();
          throw new Error('connection closed');
        }
        this.#opening = null;
        this.#stream = stream;
        if (this.#scriptsOnOpen) this.#loadScripts(stream);
        return stream;
      },
      (error) => {
        if (generation === this.#generation) this.#opening = null;
        throw error;
      },
    );
    return this.#opening;
  }

  /**
   * Writes the script loads first on a new stream. Every command waiting in `#pending`
   * now was queued while the stream opened and is written after this, so the loads'
   * replies come first and go to the entries put in front of them.
   */
  #loadScripts(stream) {
    const loads = scriptLoads().map((args) => encodeCommand(args));
    this.#pending.unshift(...loads.map(() => ({ resolve: () => {} })));
    try {
      for (const bytes of loads) stream.write(bytes);
    } catch (error) {
      this.#fail(error);
    }
  }

  #received(bytes) {
    this.#decoder.feed(bytes);
    for (;;) {
      let reply;
      try {
        reply = this.#decoder.nextReply();
      } catch (error) {
        this.#fail(new Error(`protocol error: ${error.message}`));
        return;
      }
      if (reply === undefined) return;
      const entry = this.#pending.shift();
      if (entry === undefined) {
        this.#fail(new Error('reply without a command'));
        return;
      }
      entry.done = true;
      entry.resolve(reply);
    }
  }

  /** Drops the stream and answers every waiting command with a connection failure. */
  #fail(error) {
    this.#generation += 1;
    const stream = this.#stream;
    this.#stream = null;
    this.#opening = null;
    if (this.#decoder) {
      this.#decoder.free();
      this.#decoder = null;
    }
    const waiting = this.#pending;
    this.#pending = [];
    if (stream) {
      try {
        stream.close();
      } catch {
        // Already closed.
      }
    }
    const text = error instanceof Error ? error.message : String(error);
    for (const entry of waiting) {
      entry.done = true;
      entry.resolve({ type: 'connection_failed', value: text || 'connection failed' });
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

/** A raw-socket connection over web-stream sockets (workerd's `connect`). */
export function rawSocket(connect, { hostname, port, maxPending } = {}) {
  return new RespConnection(socketStreams(connect, { hostname, port }), {
    label: `${hostname}:${port}`,
    maxPending,
  });
}
