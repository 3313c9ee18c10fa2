// Raw-socket connections on Node.js (node:net, node:tls).

import net from 'node:net';
import tls from 'node:tls';

import { RespConnection } from './resp.js';

function parseAddress(address) {
  if (typeof address !== 'string') return address;
  const url = new URL(address.includes('://') ? address : `redis://${address}`);
  if (url.username || url.password) {
    throw new TypeError('raw sockets do not authenticate yet: use a node without a password');
  }
  return {
    host: url.hostname || '127.0.0.1',
    port: Number(url.port || 6379),
    tls: url.protocol === 'rediss:' ? {} : undefined,
  };
}

/**
 * A connection to one node over a Node.js TCP (or TLS) socket, speaking RESP through the
 * core's codec. `address` is `redis://host:port`, `host:port`, or
 * `{ host, port, tls?: tls.ConnectionOptions }`.
 */
export function netSocket(address, { maxPending } = {}) {
  const { host, port, tls: tlsOptions } = parseAddress(address);
  const open = ({ onData, onClose }) =>
    new Promise((resolve, reject) => {
      const socket = tlsOptions
        ? tls.connect({ host, port, servername: host, ...tlsOptions })
        : net.connect({ host, port });
      socket.setNoDelay(true);
      let connected = false;
      socket.once(tlsOptions ? 'secureConnect' : 'connect', () => {
        connected = true;
        resolve({
          write: (bytes) => socket.write(bytes),
          close: () => socket.destroy(),
        });
      });
      socket.on('data', onData);
      socket.on('error', (error) => {
        if (!connected) reject(error);
      });
      socket.on('close', () => {
        if (connected) onClose(new Error('connection closed'));
        else reject(new Error('connection closed'));
      });
    });
  return new RespConnection(open, { label: `${host}:${port}`, maxPending });
}
