// The WASM core inside workerd, the runtime of Cloudflare Workers: a worker acquires,
// extends and releases locks on 5 real local Redis nodes over `cloudflare:sockets`.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';

import { Redis } from 'ioredis';

import { writeConfig } from '../edge/workerd-config.js';
import { RedisNodes, sleep } from './helpers.js';

const workerdBinary = fileURLToPath(new URL('../node_modules/.bin/workerd', import.meta.url));

async function freePort() {
  const server = net.createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('workerd', () => {
  const nodes = new RedisNodes(7260);
  // One node with a password, for the raw sockets' AUTH and SELECT.
  const passwordNode = new RedisNodes(7228, 1, ['--requirepass', 'edge-secret']);
  let workerd;
  let output = '';
  let base;
  let dir;
  let inspectors;

  before(async () => {
    nodes.start();
    passwordNode.start();
    inspectors = nodes.ports.map((port) => new Redis({ host: '127.0.0.1', port }));
    dir = mkdtempSync(join(tmpdir(), 'redlock-workerd-'));
    const port = await freePort();
    writeConfig(join(dir, 'config.capnp'), port);
    workerd = spawn(workerdBinary, ['serve', join(dir, 'config.capnp')], { stdio: ['ignore', 'pipe', 'pipe'] });
    workerd.stdout.on('data', (chunk) => (output += chunk));
    workerd.stderr.on('data', (chunk) => (output += chunk));
    base = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + 20_000;
    for (;;) {
      assert.equal(workerd.exitCode, null, `workerd exited:\n${output}`);
      try {
        await fetch(`${base}/ping`);
        break;
      } catch {
        assert.ok(Date.now() < deadline, `workerd did not start:\n${output}`);
        await sleep(50);
      }
    }
  });

  after(async () => {
    try {
      if (workerd && workerd.exitCode === null) {
        workerd.kill('SIGTERM');
        await new Promise((resolve) => workerd.once('exit', resolve));
      }
      inspectors?.forEach((client) => client.disconnect());
      if (dir) rmSync(dir, { recursive: true, force: true });
    } finally {
      try {
        nodes.stop();
      } finally {
        passwordNode.stop();
      }
    }
  });

  const call = async (path, params) => {
    const query = new URLSearchParams({ ports: nodes.ports.join(','), ...params });
    const response = await fetch(`${base}${path}?${query}`);
    const body = await response.json();
    assert.equal(response.status, 200, `${path}: ${JSON.stringify(body)}\n${output}`);
    assert.equal(body.runtime, 'Cloudflare-Workers', 'served by workerd');
    return body;
  };
  const values = (key) => Promise.all(inspectors.map((client) => client.get(key)));
  // A release decides at a quorum; the worker finishes the other nodes after responding.
  const eventually = async (key, expected) => {
    const deadline = Date.now() + 2000;
    for (;;) {
      const seen = await values(key);
      if (JSON.stringify(seen) === JSON.stringify(expected) || Date.now() > deadline) return seen;
      await sleep(10);
    }
  };

  test('a worker acquires a lock on the nodes and releases it by token', async () => {
    const acquired = await call('/acquire', { resource: 'edge:orders' });
    assert.match(acquired.token, /^[0-9a-f]{40}$/);
    assert.ok(acquired.validityMs > 4000 && acquired.validityMs <= 5000);
    await sleep(20);
    assert.deepEqual(await values('edge:orders'), Array(5).fill(acquired.token));
    const released = await call('/release', { resource: 'edge:orders', token: acquired.token });
    assert.ok(released.released >= 3);
    assert.deepEqual(await eventually('edge:orders', Array(5).fill(null)), Array(5).fill(null));
  });

  test('a worker sees a held lock, extends and releases its own', async () => {
    const cycle = await call('/cycle', { resource: 'edge:cycle' });
    assert.equal(cycle.second, 'LockHeldError: held_elsewhere');
    assert.equal(cycle.extensions, 1);
    assert.ok(cycle.released >= 3);
    assert.deepEqual(await eventually('edge:cycle', Array(5).fill(null)), Array(5).fill(null));
  });

  test('a worker logs in to a node with a password and selects its database', async () => {
    const node = { ports: '7228', password: 'edge-secret', db: '3' };
    const check = new Redis('redis://:edge-secret@127.0.0.1:7228/3');
    try {
      const acquired = await call('/acquire', { ...node, resource: 'edge:login' });
      assert.equal(await check.get('edge:login'), acquired.token);
      const released = await call('/release', { ...node, resource: 'edge:login', token: acquired.token });
      assert.equal(released.released, 1);
      assert.equal(await check.get('edge:login'), null);
    } finally {
      check.disconnect();
    }
    // A wrong password: the node fails with the cause `auth`.
    const query = new URLSearchParams({ ports: '7228', password: 'wrong', resource: 'edge:login' });
    const response = await fetch(`${base}/acquire?${query}`);
    const body = await response.json();
    assert.equal(response.status, 500, JSON.stringify(body));
    assert.match(body.error, /^NodesFailingError: .*\(auth: .*AUTH refused: WRONGPASS/, JSON.stringify(body));
  });

  test('a frozen node does not stall a worker', async () => {
    nodes.pause(0);
    try {
      const acquired = await call('/acquire', { resource: 'edge:frozen' });
      assert.ok(acquired.elapsedMs < 1000, `took ${acquired.elapsedMs} ms`);
      assert.notEqual(acquired.nodes[0].result, 'success');
      const released = await call('/release', { resource: 'edge:frozen', token: acquired.token });
      assert.notEqual(released.nodes[0].result, 'success');
      assert.ok(released.released >= 3);
    } finally {
      nodes.resume(0);
    }
  });
});
