// Inspections against real Redis (docs/inspection.md): redlock.isLocked and
// lock.isOwned on 5 local nodes, through ioredis (string replies) and raw sockets (RESP
// bulk strings): held by us, by another, free, leftovers on fewer than a quorum written
// by hand, one node down still decides, too many down rejects with NodesFailingError.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { Redis } from 'ioredis';

import { NodesFailingError, Redlock, netSocket } from '../index.js';
import { RedisNodes, redisCli } from './helpers.js';

const nodes = new RedisNodes(7265);
let ioredis;
let raw;

before(() => {
  nodes.start();
  ioredis = nodes.ports.map((port) => {
    const client = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 0, enableOfflineQueue: false });
    client.on('error', () => {});
    return client;
  });
  raw = nodes.ports.map((port) => netSocket(`redis://127.0.0.1:${port}`));
});

after(() => {
  try {
    ioredis?.forEach((client) => client.disconnect());
    raw?.forEach((client) => client.close());
  } finally {
    nodes.stop();
  }
});

for (const [name, clients] of [
  ['ioredis', () => ioredis],
  ['raw sockets', () => raw],
]) {
  describe(`inspections through ${name}`, () => {
    test('held by us, by another, then free', async () => {
      const ours = new Redlock(clients(), { ttlMs: 5000, nodeTimeoutMs: 200 });
      const theirs = new Redlock(clients(), { ttlMs: 5000, nodeTimeoutMs: 200 });
      const resource = `inspect:${name}:one`;
      try {
        assert.equal(await ours.isLocked(resource), false, 'free before anyone locks');
        const lock = await ours.acquire(resource);
        assert.equal(await ours.isLocked(resource), true);
        assert.equal(await lock.isOwned(), true, 'we hold it');
        // Another process's view of our lock: locked, and a lock rebuilt with another
        // token is not the holder.
        assert.equal(await theirs.isLocked(resource), true);
        assert.equal(await theirs.lock(resource, 'not-our-token').isOwned(), false);
        // Rebuilt with our token but no known validity: the core says not owned.
        assert.equal(await theirs.lock(resource, lock.token).isOwned(), false);
        await lock.release();
        assert.equal(await lock.isOwned(), false, 'released');
        assert.equal(await ours.isLocked(resource), false, 'free after the release');
        // Someone else's lock: locked, not ours.
        const other = await theirs.acquire(resource);
        assert.equal(await ours.isLocked(resource), true);
        assert.equal(await other.isOwned(), true);
        await other.release();
      } finally {
        await ours.idle();
        await theirs.idle();
        ours.close();
        theirs.close();
      }
    });

    test('several resources: locked only when one token holds every key on a quorum', async () => {
      const redlock = new Redlock(clients(), { ttlMs: 5000, nodeTimeoutMs: 200 });
      const [a, b] = [`inspect:${name}:a`, `inspect:${name}:b`];
      try {
        const lock = await redlock.acquire([a, b]);
        assert.equal(await redlock.isLocked([a, b]), true);
        assert.equal(await lock.isOwned(), true);
        await lock.release();
        assert.equal(await redlock.isLocked([a, b]), false);
        // One key held on every node, the other nowhere: not locked as a whole.
        for (const port of nodes.ports) redisCli(port, 'SET', a, 'tok', 'PX', '5000');
        assert.equal(await redlock.isLocked([a, b]), false);
        assert.equal(await redlock.isLocked(a), true);
        for (const port of nodes.ports) redisCli(port, 'DEL', a);
      } finally {
        await redlock.idle();
        redlock.close();
      }
    });

    test('leftovers on fewer than a quorum do not make it locked', async () => {
      const redlock = new Redlock(clients(), { ttlMs: 5000, nodeTimeoutMs: 200 });
      const resource = `inspect:${name}:leftover`;
      try {
        // A failed attempt's keys on 2 of 5 nodes, and a third node with another token.
        redisCli(nodes.ports[0], 'SET', resource, 'left', 'PX', '5000');
        redisCli(nodes.ports[1], 'SET', resource, 'left', 'PX', '5000');
        redisCli(nodes.ports[2], 'SET', resource, 'other', 'PX', '5000');
        assert.equal(await redlock.isLocked(resource), false);
        // The same token on a third node makes a quorum.
        redisCli(nodes.ports[3], 'SET', resource, 'left', 'PX', '5000');
        assert.equal(await redlock.isLocked(resource), true);
      } finally {
        for (const port of nodes.ports) redisCli(port, 'DEL', resource);
        await redlock.idle();
        redlock.close();
      }
    });
  });
}

describe('inspections with nodes down (ioredis)', () => {
  test('one node paused: the other four decide; three paused: NodesFailingError', async () => {
    const redlock = new Redlock(ioredis, { ttlMs: 5000, nodeTimeoutMs: 150 });
    const resource = 'inspect:down';
    const paused = [];
    try {
      const lock = await redlock.acquire(resource);
      nodes.pause(0);
      paused.push(0);
      assert.equal(await redlock.isLocked(resource), true);
      assert.equal(await lock.isOwned(), true);
      nodes.pause(1);
      paused.push(1);
      nodes.pause(2);
      paused.push(2);
      await assert.rejects(redlock.isLocked(resource), (error) => {
        assert.ok(error instanceof NodesFailingError, `${error}`);
        assert.equal(error.code, 'nodes_failing');
        assert.equal(error.nodes.length, 5);
        return true;
      });
      await assert.rejects(lock.isOwned(), NodesFailingError);
      for (const index of paused.splice(0)) nodes.resume(index);
      await lock.release();
    } finally {
      for (const index of paused) nodes.resume(index);
      await redlock.idle();
      redlock.close();
    }
  });
});
