// Raw-socket transports: the link's RESP bytes are written as they are, and the bytes
// received go back to the link, whose core decoder pairs each reply with its write.
// For runtimes without a Redis client (edge runtimes) and for Node.js sockets.

import { linkCause } from './clients.js';

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
