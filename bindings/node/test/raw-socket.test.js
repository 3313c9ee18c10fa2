// The integration suite over raw TCP sockets: the links' RESP bytes are written as they
// are and the bytes received go to the core's decoder.

import assert from 'node:assert/strict';
import net from 'node:net';
import { test } from 'node:test';

import { NodesFailingError, Redlock, StreamTransport, netSocket } from '../index.js';
import { silentServer } from './helpers.js';
import { integrationSuite } from './suite.js';

integrationSuite('raw sockets', 7240, async (urls) => {
  const clients = urls.map((url) => netSocket(url));
  return { clients, close: () => clients.forEach((client) => client.close()) };
});

async function closedPort() {
  const server = net.createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

test('a refused port is named refused, and costs nothing while it stays down', async () => {
  const port = await closedPort();
  const redlock = new Redlock([netSocket(`127.0.0.1:${port}`)], { ttlMs: 1000, attempts: 1 });
  try {
    const error = await redlock.acquire('r').then(
      () => assert.fail('locked on a refused port'),
      (e) => e,
    );
    assert.ok(error instanceof NodesFailingError, String(error));
    assert.equal(error.nodes[0].cause, 'refused', JSON.stringify(error.nodes));
  } finally {
    redlock.close();
  }
});

test('a new stream starts with the scripts; replies split across packets reach their writes', async () => {
  // A fake node: answers SCRIPT LOAD with a SHA and SET with OK, split in odd places.
  let written = '';
  let push;
  const transport = () =>
    new StreamTransport(
      async ({ onData }) => {
        push = onData;
        return {
          write: (bytes) => {
            written += Buffer.from(bytes).toString('latin1');
          },
          close() {},
        };
      },
      { label: 'fake', address: 'fake.invalid:1' },
    );
  const redlock = new Redlock([{ createTransport: transport }], { ttlMs: 1000, attempts: 1 });
  try {
    const pending = redlock.acquire('split');
    for (let i = 0; i < 50 && !written.includes('SET'); i++) await new Promise((resolve) => setImmediate(resolve));
    const loads = written.split('*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n');
    assert.equal(loads.length, 4, 'three SCRIPT LOADs first');
    assert.match(loads[3], /\r\nSET\r\n/, 'then the command');
    const reply = '$40\r\n' + 'a'.repeat(40) + '\r\n';
    const bytes = Buffer.from(reply.repeat(3) + '+OK\r\n');
    for (let at = 0; at < bytes.length; at += 7) push(bytes.subarray(at, at + 7));
    const lock = await pending;
    assert.equal(lock.nodes[0].result, 'success');
  } finally {
    redlock.close();
  }
});

test("a node that never finishes its handshake is given up after the core's connect timeout", async () => {
  // A server that accepts TCP connections and never answers: a TLS client's handshake
  // waits forever, as for an address that drops every packet. The core's default bounds
  // it (2 s); the next acquisition opens a new connection.
  const { port, connections, close: closeServer } = await silentServer();
  const node = netSocket({ host: '127.0.0.1', port, tls: { rejectUnauthorized: false } });
  // A node timeout past the connect timeout: the first acquisition waits for the link.
  const redlock = new Redlock([node], { ttlMs: 10_000, nodeTimeoutMs: 2500, attempts: 1 });
  const fails = async () => {
    const error = await redlock.acquire('silent').then(
      () => assert.fail('locked on a node that never answers'),
      (e) => e,
    );
    assert.ok(error instanceof NodesFailingError, String(error));
    return error;
  };
  const until = async (condition) => {
    const deadline = performance.now() + 6000;
    while (!condition() && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    assert.ok(condition(), `connections: ${JSON.stringify(connections)}`);
  };
  try {
    const first = await fails();
    // Given up by the link at the core's deadline (netSocket has no timer of its own).
    assert.equal(first.nodes[0].cause, 'timeout', JSON.stringify(first.nodes));
    assert.match(first.nodes[0].error, /no connection within 2000 ms; given up/);
    await until(() => connections[0]?.closed !== undefined);
    const held = connections[0].closed - connections[0].opened;
    assert.ok(held >= 1900 && held < 3500, `the first connection was given up after ${held} ms`);
    // Acquisitions during the link's pause after the failure fail at once; the first
    // one after it opens a new connection.
    const deadline = performance.now() + 3000;
    while (connections.length < 2 && performance.now() < deadline) {
      await fails();
      await new Promise((r) => setTimeout(r, 100));
    }
    await until(() => connections.length >= 2);
  } finally {
    redlock.close();
    node.close();
    await closeServer();
  }
});
