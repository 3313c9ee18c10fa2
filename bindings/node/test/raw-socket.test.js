// The integration suite over raw TCP sockets speaking RESP through the core's codec.

import assert from 'node:assert/strict';
import net from 'node:net';
import { test } from 'node:test';

import { netSocket, RespConnection } from '../index.js';
import { integrationSuite } from './suite.js';

integrationSuite('raw sockets', 7240, async (urls) => {
  const clients = urls.map((url) => netSocket(url));
  return { clients, close: () => clients.forEach((client) => client.close()) };
});

test('a refused connection is a connection failure, and the next command reconnects', async () => {
  const server = net.createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  const connection = netSocket(`127.0.0.1:${port}`);
  const reply = await connection.send(['PING']);
  assert.equal(reply.type, 'connection_failed');
  assert.equal(connection.pending, 0);
  connection.close();
});

test('replies split across packets and pipelined commands reach the right command', async () => {
  // A fake node that answers two commands with one reply split in odd places.
  let written = '';
  let push;
  const connection = new RespConnection(
    async ({ onData }) => {
      push = onData;
      return { write: (bytes) => (written += Buffer.from(bytes).toString()), close() {} };
    },
    { loadScripts: false },
  );
  const first = connection.send(['GET', 'a']);
  const second = connection.send(['SET', 'b', 'v']);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(written, '*2\r\n$3\r\nGET\r\n$1\r\na\r\n*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$1\r\nv\r\n');
  push(Buffer.from('$3\r\nx'));
  push(Buffer.from('yz\r\n+O'));
  push(Buffer.from('K\r\n'));
  assert.deepEqual(await first, { type: 'bulk', value: new Uint8Array(Buffer.from('xyz')) });
  assert.deepEqual(await second, { type: 'ok' });
});

test('a protocol error fails every waiting command and closes the stream', async () => {
  let push;
  let closed = 0;
  const connection = new RespConnection(async ({ onData }) => {
    push = onData;
    return { write() {}, close: () => (closed += 1) };
  });
  const pending = [connection.send(['PING']), connection.send(['PING'])];
  await new Promise((resolve) => setImmediate(resolve));
  push(Buffer.from('?bad\r\n'));
  for (const reply of await Promise.all(pending)) {
    assert.equal(reply.type, 'connection_failed');
    assert.match(reply.value, /protocol error/);
  }
  assert.equal(closed, 1);
});

test('a node that never answers is dropped after maxPending commands', async () => {
  let opened = 0;
  const connection = new RespConnection(
    async () => {
      opened += 1;
      return { write() {}, close() {} };
    },
    { maxPending: 3, loadScripts: false },
  );
  const stuck = [1, 2, 3].map(() => connection.send(['PING']));
  const fourth = connection.send(['PING']);
  for (const reply of await Promise.all(stuck)) assert.equal(reply.type, 'connection_failed');
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(connection.pending, 1);
  assert.equal(opened, 2);
  connection.close();
  assert.equal((await fourth).type, 'connection_failed');
});

test('a new stream starts with the scripts, whose replies never reach a command', async () => {
  let written = '';
  let push;
  const connection = new RespConnection(async ({ onData }) => {
    push = onData;
    return { write: (bytes) => (written += Buffer.from(bytes).toString()), close() {} };
  });
  const get = connection.send(['GET', 'a']);
  await new Promise((resolve) => setImmediate(resolve));
  const loads = written.split('*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n');
  assert.equal(loads.length, 4, 'three SCRIPT LOADs first');
  assert.ok(written.endsWith('*2\r\n$3\r\nGET\r\n$1\r\na\r\n'), 'then the command');
  for (const sha of ['4df62321cd567593267878acb4c28e1f7a3cc4af', '77ca464c5e5c04fb844d50b9a72b30052642d9cd', '6aec6dabb71e80f87fc28910be87b135f17d85ab']) {
    push(Buffer.from(`$40\r\n${sha}\r\n`));
  }
  push(Buffer.from('$1\r\nv\r\n'));
  assert.deepEqual(await get, { type: 'bulk', value: new Uint8Array(Buffer.from('v')) });
  assert.equal(connection.pending, 0);
});
