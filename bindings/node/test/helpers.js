// Real local Redis nodes for the integration tests, started and stopped by the
// project's script (scripts/redis-nodes.sh), and small helpers around them.

import { execFileSync } from 'node:child_process';
import net from 'node:net';
import { fileURLToPath } from 'node:url';

import Redis from 'ioredis';
import { createClient } from 'redis';

import { netSocket } from '../index.js';

const script = fileURLToPath(new URL('../../../scripts/redis-nodes.sh', import.meta.url));

function run(...args) {
  return execFileSync(script, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
}

/** A set of N nodes on ports basePort.. ; stop() is idempotent. */
export class RedisNodes {
  /** @param {string[]} options more options of `start` (`--tls`, `--requirepass P`) */
  constructor(basePort, count = 5, options = []) {
    this.basePort = basePort;
    this.count = count;
    this.options = options;
    this.ports = Array.from({ length: count }, (_, i) => basePort + i);
    this.running = false;
  }

  start() {
    const urls = run('start', '--nodes', String(this.count), '--base-port', String(this.basePort), ...this.options)
      .trim()
      .split('\n');
    this.running = true;
    // Whatever happens to the test process, do not leave nodes behind.
    this.onExit = () => this.stop();
    process.once('exit', this.onExit);
    return urls;
  }

  stop() {
    if (!this.running) return;
    this.running = false;
    process.removeListener('exit', this.onExit);
    run('stop', '--base-port', String(this.basePort));
  }

  pause(index) {
    run('pause', String(index), '--base-port', String(this.basePort));
  }

  resume(index) {
    run('resume', String(index), '--base-port', String(this.basePort));
  }

  kill(index) {
    run('kill', String(index), '--base-port', String(this.basePort));
  }

  restart(index) {
    run('restart', String(index), '--base-port', String(this.basePort));
  }
}

/** `redis-cli -p port args...` on loopback (no TLS, no password). */
export function redisCli(port, ...args) {
  return execFileSync('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/** How many NOSCRIPT errors node `port` answered since it started (INFO errorstats). */
export function noscriptCount(port) {
  const match = /errorstat_NOSCRIPT:count=(\d+)/.exec(redisCli(port, 'INFO', 'errorstats'));
  return match ? Number(match[1]) : 0;
}

/** Calls per command on node `port` since it started (INFO commandstats): `{ set: 3, 'script|load': 3 }`. */
export function commandStats(port) {
  const calls = {};
  for (const match of redisCli(port, 'INFO', 'commandstats').matchAll(/^cmdstat_(\S+?):calls=(\d+)/gm)) {
    calls[match[1]] = Number(match[2]);
  }
  return calls;
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A server on a free loopback port that accepts TCP connections and never answers (a
 * TLS client's handshake then waits forever, as for an address that drops every packet).
 * `connections` records when each opened and when the client closed it; `close()` stops
 * the server and drops what it still holds.
 */
export async function silentServer() {
  const connections = [];
  const sockets = [];
  const server = net.createServer((socket) => {
    const entry = { opened: performance.now(), closed: undefined };
    connections.push(entry);
    sockets.push(socket);
    socket.on('error', () => {});
    socket.on('close', () => (entry.closed = performance.now()));
    socket.resume(); // reads, so the client's close is seen
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: server.address().port,
    connections,
    close: async () => {
      const closed = new Promise((resolve) => server.close(resolve));
      sockets.forEach((socket) => socket.destroy());
      await closed;
    },
  };
}

/**
 * Each driver's clients of `urls`, connected: `{ clients, close }`, for tests that run
 * the same scenario over ioredis, node-redis and raw sockets.
 */
export const transports = {
  ioredis: async (urls) => {
    const clients = urls.map((url) => {
      const client = new Redis(url);
      client.on('error', () => {});
      return client;
    });
    await Promise.all(clients.map((client) => new Promise((resolve) => client.once('ready', resolve))));
    return { clients, close: () => clients.forEach((client) => client.disconnect()) };
  },
  'node-redis': async (urls) => {
    const clients = await Promise.all(
      urls.map((url) => {
        const client = createClient({ url });
        client.on('error', () => {});
        return client.connect();
      }),
    );
    return { clients, close: () => Promise.all(clients.map((client) => client.destroy?.() ?? client.disconnect())) };
  },
  'raw sockets': async (urls) => {
    const clients = urls.map((url) => netSocket(url));
    return { clients, close: () => clients.forEach((client) => client.close()) };
  },
};
