// Fencing against real Redis: fenced locks on 5 local nodes hand out strictly increasing
// tokens; fencedSet (the resource-side check) accepts, refuses stale and equal tokens,
// survives SCRIPT FLUSH, and refuses bad tokens, through ioredis and node-redis; and a
// holder stopped past its lease (SIGSTOP of its process) has its late write refused
// after a second holder wrote.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { after, before, describe, test } from 'node:test';

import { Redis } from 'ioredis';
import { createClient } from 'redis';

import { InvalidArgumentError, NodesFailingError, Redlock, core, fencedSet } from '../index.js';
import { RedisNodes, noscriptCount, sleep } from './helpers.js';

const lockNodes = new RedisNodes(7200);
// The protected resource lives on a Redis server of its own, not one of the lock's nodes.
const storeNode = new RedisNodes(7205, 1);
let clients;
let store;
let storeNodeRedis;

const connect = (port) => {
  const client = new Redis({ host: '127.0.0.1', port });
  client.on('error', () => {});
  return client;
};

before(async () => {
  lockNodes.start();
  storeNode.start();
  clients = lockNodes.ports.map(connect);
  store = connect(storeNode.basePort);
  storeNodeRedis = await createClient({ url: `redis://127.0.0.1:${storeNode.basePort}` }).connect();
});

after(async () => {
  try {
    clients?.forEach((client) => client.disconnect());
    store?.disconnect();
    await storeNodeRedis?.quit();
  } finally {
    lockNodes.stop();
    storeNode.stop();
  }
});

describe('fenced locks on 5 nodes', () => {
  test('tokens strictly increase from one lock of a resource to the next', async () => {
    const redlock = new Redlock(clients, { ttlMs: 5000, fencing: true });
    try {
      let previous = 0;
      for (let i = 0; i < 5; i++) {
        const lock = await redlock.acquire('fenced:order');
        assert.equal(typeof lock.fencingToken, 'number');
        assert.ok(Number.isSafeInteger(lock.fencingToken));
        assert.ok(lock.fencingToken > previous, `token ${lock.fencingToken} after ${previous}`);
        previous = lock.fencingToken;
        await lock.extend();
        assert.equal(lock.fencingToken, previous, 'an extension keeps the token');
        await lock.release();
      }
      await redlock.idle();
      // The counter lives next to the key, with no TTL, on at least a quorum of nodes
      // (the write-back decides at a quorum; a node whose fenced script came too late
      // may have missed every round).
      const fenceKey = core.fenceKey('fenced:order');
      const counters = await Promise.all(clients.map((client) => client.get(fenceKey)));
      assert.ok(counters.filter((value) => Number(value) === previous).length >= 3, `counters ${counters}`);
      assert.equal(await clients[counters.findIndex((value) => Number(value) === previous)].pttl(fenceKey), -1);
    } finally {
      redlock.close();
    }
  });

  test('fencing per acquisition, and none without it', async () => {
    const redlock = new Redlock(clients, { ttlMs: 5000 });
    try {
      const plain = await redlock.acquire('fenced:mixed');
      assert.equal(plain.fencingToken, undefined);
      await plain.release();
      const fenced = await redlock.acquire('fenced:mixed', { fencing: true });
      assert.ok(fenced.fencingToken >= 1);
      await fenced.release();
      await assert.rejects(redlock.acquire('fenced:mixed', { fencing: 'yes' }), InvalidArgumentError);
    } finally {
      redlock.close();
    }
  });
});

for (const [name, client] of [
  ['ioredis', () => store],
  ['node-redis', () => storeNodeRedis],
]) {
  describe(`fencedSet through ${name}`, () => {
    const item = `fenced:item:${name}`;

    test('accepts a higher token, refuses a lower or an equal one, naming what it saw', async () => {
      assert.deepEqual(await fencedSet(client(), item, 'v5', 5), { accepted: true, token: 5 });
      assert.equal(await store.get(item), 'v5');
      assert.equal(await store.get(core.fenceGuardKey(item)), '5');
      assert.deepEqual(await fencedSet(client(), item, 'v3', 3), { accepted: false, token: 3, seen: 5 });
      assert.deepEqual(await fencedSet(client(), item, 'v5 again', 5), { accepted: false, token: 5, seen: 5 });
      assert.equal(await store.get(item), 'v5', 'refused writes change nothing');
      assert.deepEqual(await fencedSet(client(), item, Buffer.from([0xff, 0x00]), 9), { accepted: true, token: 9 });
      assert.deepEqual(await store.getBuffer(item), Buffer.from([0xff, 0x00]));
    });

    test('after SCRIPT FLUSH the write goes again as EVAL', async () => {
      await store.script('FLUSH');
      const before = noscriptCount(storeNode.basePort);
      assert.deepEqual(await fencedSet(client(), `${item}:flushed`, 'v', 2), { accepted: true, token: 2 });
      assert.equal(noscriptCount(storeNode.basePort), before + 1, 'EVALSHA answered NOSCRIPT once');
      assert.equal(await store.get(`${item}:flushed`), 'v');
    });

    test('a bad token is an InvalidArgumentError; a server error is NodesFailingError', async () => {
      for (const token of [0, -1, 1.5, 2 ** 53, Number.NaN]) {
        await assert.rejects(
          fencedSet(client(), item, 'v', token),
          (e) => e instanceof InvalidArgumentError && e.reason === 'invalid_fencing_token',
          String(token),
        );
      }
      for (const token of ['7', 7n, undefined]) {
        await assert.rejects(fencedSet(client(), item, 'v', token), InvalidArgumentError, String(token));
      }
      await assert.rejects(fencedSet(client(), '', 'v', 1), (e) => e.reason === 'empty_resource');
      await assert.rejects(fencedSet(client(), item, 42, 1), InvalidArgumentError);
      await assert.rejects(fencedSet({}, item, 'v', 1), InvalidArgumentError);
      // A guard key of the wrong type makes the script fail on the server.
      const broken = `${item}:broken`;
      await store.rpush(core.fenceGuardKey(broken), 'x');
      await assert.rejects(
        fencedSet(client(), broken, 'v', 1),
        (e) => e instanceof NodesFailingError && e.reason === 'fenced_write_failed' && /WRONGTYPE/.test(e.message),
      );
    });
  });
}

test('a holder stopped past its lease has its late write refused', async () => {
  const resource = 'fenced:paused';
  const item = 'fenced:paused:item';
  const child = spawn(
    process.execPath,
    [new URL('fixtures/fenced-holder.js', import.meta.url).pathname, lockNodes.ports.join(','), resource, item, String(storeNode.basePort)],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const exited = new Promise((resolve) => child.once('exit', resolve));
  try {
    const first = JSON.parse((await lines.next()).value);
    assert.ok(first.token >= 1, JSON.stringify(first));
    // Stopped between its check and its write, for longer than its 1 s lease.
    child.kill('SIGSTOP');
    const stoppedAt = performance.now();
    const redlock = new Redlock(clients, { ttlMs: 5000, fencing: true, retryDelayMs: 100, retryJitterMs: 50 });
    try {
      await sleep(1100);
      const second = await redlock.acquire(resource, { waitMs: 2000 });
      assert.ok(performance.now() - stoppedAt >= 1000);
      assert.ok(second.fencingToken > first.token, `${second.fencingToken} after ${first.token}`);
      assert.deepEqual(await fencedSet(store, item, 'written by the second holder', second.fencingToken), {
        accepted: true,
        token: second.fencingToken,
      });
      child.kill('SIGCONT');
      const late = JSON.parse((await lines.next()).value);
      assert.equal(late.validAfterPause, false, 'the first holder knows its lease is over only by the clock');
      assert.deepEqual(late.result, { accepted: false, token: first.token, seen: second.fencingToken });
      assert.equal(await store.get(item), 'written by the second holder');
      await second.release();
    } finally {
      redlock.close();
    }
    assert.equal(await exited, 0);
  } finally {
    child.kill('SIGCONT');
    child.kill();
  }
});
