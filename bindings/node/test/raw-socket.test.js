// The integration suite over raw TCP sockets: the links' RESP bytes are written as they
// are and the bytes received go to the core's decoder.

import assert from 'node:assert/strict';
import net from 'node:net';
import { test } from 'node:test';

import { NodesFailingError, Redlock, StreamTransport, netSocket } from '../index.js';
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
