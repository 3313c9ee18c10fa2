// Raw-socket transports on Node.js (node:net, node:tls).

import net from 'node:net';
import tls from 'node:tls';

import { SocketNode } from './resp.js';

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
 * One node over Node.js TCP (or TLS) sockets, speaking RESP through the
 * core's codec. `address` is `redis://host:port`, `rediss://host:port`, `host:port`, or
 * `{ host, port, tls?: tls.ConnectionOptions }`.
 */
export function netSocket(address) {
  const { host, port, tls: tlsOptions } = parseAddress(address);
  const open = ({ onData, onClose }) =>
    new Promise((resolve, reject) => {
      const socket = tlsOptions
        ? tls.connect({ host, port, servername: host, ...tlsOptions })
        : net.connect({ host, port });
      socket.setNoDelay(true);
      let connected = false;
      let failure;
      socket.once(tlsOptions ? 'secureConnect' : 'connect', () => {
        connected = true;
        resolve({
          write: (bytes) => socket.write(bytes),
          close: () => socket.destroy(),
        });
      });
      socket.on('data', onData);
      socket.on('error', (error) => {
        failure = error;
        if (!connected) reject(error);
      });
      socket.on('close', () => {
        if (connected) onClose(failure ?? new Error('connection closed'));
        else reject(failure ?? new Error('connection closed'));
      });
    });
  return new SocketNode(open, { label: `${host}:${port}` });
}
