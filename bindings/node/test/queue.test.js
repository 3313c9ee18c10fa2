// The queue of waiters end to end on 5 real local nodes, through each subscriber path
// (ioredis, node-redis, raw sockets): a release's notice names the waiter first in the
// resource's queue, which tries at once while the others give it a node timeout, so
// waiters get the lock in the order they started waiting, each soon after a release.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { Redis } from 'ioredis';
import { createClient } from 'redis';

import { Redlock, netSocket } from '../index.js';
import { RedisNodes, sleep } from './helpers.js';

const nodes = new RedisNodes(7291);
let urls;
let inspectors;

before(async () => {
  urls = nodes.start();
  inspectors = nodes.ports.map((port) => new Redis({ host: '127.0.0.1', port }).on('error', () => {}));
});

after(() => {
  try {
    inspectors?.forEach((client) => client.disconnect());
  } finally {
    nodes.stop();
  }
});

const CLIENTS = {
  ioredis: async () => {
    const clients = urls.map((url) => new Redis(url).on('error', () => {}));
    await Promise.all(clients.map((client) => new Promise((resolve) => client.once('ready', resolve))));
    return { clients, close: () => clients.forEach((client) => client.disconnect()) };
  },
  'node-redis': async () => {
    const clients = await Promise.all(urls.map((url) => createClient({ url }).on('error', () => {}).connect()));
    return { clients, close: () => Promise.all(clients.map((client) => client.quit())) };
  },
  'raw sockets': async () => {
    const clients = urls.map((url) => netSocket(url));
    return { clients, close: () => clients.forEach((client) => client.close()) };
  },
};

/** Polls `check` (async, true when done) every 10 ms; fails with `what()` after ~3 s. */
async function until(check, what) {
  for (let tries = 0; !(await check()); tries++) {
    assert.ok(tries < 300, await what());
    await sleep(10);
  }
}

const perNode = (call) => Promise.all(inspectors.map(call));

// A 2 s retry delay: only a notice explains a hand-off within a few hundred ms. A node
// timeout of 200 ms: the waiters a notice did not name give the named one that long, so
// a slow turn on a loaded machine does not let them race it.
const OPTIONS = { ttlMs: 10_000, nodeTimeoutMs: 200, retryDelayMs: 2000, retryJitterMs: 0 };
const HOLD_MS = 50;
const BOUND_MS = 500;

for (const [name, connect] of Object.entries(CLIENTS)) {
  test(`${name}: each release hands the lock to the first waiter in the queue`, async () => {
    const resource = `queue:fifo:${name}`;
    const channel = `redlock:released:${resource}`;
    const queue = `{${resource}}:waiters`;
    const { clients, close } = await connect();
    const holder = new Redlock(clients, OPTIONS);
    const waiters = [0, 1, 2].map(() => new Redlock(clients, OPTIONS));
    // What each release published on node 0, and where: the id it named on that waiter's
    // channel, or nothing on the resource's notice channel.
    const heard = [];
    const listener = new Redis(urls[0]).on('error', () => {});
    listener.on('messageBuffer', (where, message) => heard.push([where.toString(), message.toString()]));
    listener.on('pmessageBuffer', (_pattern, where, message) => heard.push([where.toString(), message.toString()]));
    try {
      await listener.subscribe(channel);
      await listener.psubscribe(`redlock:waiter:*:${resource}`);
      const held = await holder.acquire(resource);
      const order = [];
      const handOffs = [];
      let releasedAt;
      const runs = [];
      for (const [i, redlock] of waiters.entries()) {
        runs.push(
          redlock.acquire(resource, { waitMs: 5000 }).then(async (lock) => {
            handOffs.push(performance.now() - releasedAt);
            order.push(i);
            await sleep(HOLD_MS);
            releasedAt = performance.now();
            await lock.release();
          }),
        );
        // Its first attempt failed and queued it on every node before the next starts.
        await until(
          async () => (await perNode((client) => client.zcard(queue))).every((n) => n === i + 1),
          async () => `queue lengths ${await perNode((client) => client.zcard(queue))}, want ${i + 1}`,
        );
      }
      // Every waiter listens on every node (node 0 also has the test's listener).
      const listening = async () => perNode(async (client) => Number((await client.pubsub('NUMSUB', channel))[1]));
      await until(
        async () => (await listening()).every((n, node) => n === waiters.length + (node === 0 ? 1 : 0)),
        async () => `subscribers ${await listening()}`,
      );
      // The same queue, in the order they started, on every node.
      const ids = await inspectors[0].zrange(queue, 0, -1);
      assert.equal(ids.length, 3);
      assert.deepEqual(await perNode((client) => client.zrange(queue, 0, -1)), Array(5).fill(ids));

      releasedAt = performance.now();
      await held.release();
      await Promise.all(runs);

      const shown = `order ${order}, hand-offs ${handOffs.map((ms) => ms.toFixed(1)).join(', ')} ms`;
      assert.deepEqual(order, [0, 1, 2], `first come, first served: ${shown}`);
      assert.ok(Math.max(...handOffs) < BOUND_MS, `every hand-off well inside the retry delay: ${shown}`);
      // Each release named the next waiter in the queue, on that waiter's channel alone
      // (its client's listener id, the id's first 16 characters); the last one nobody, on
      // the notice channel.
      await until(
        async () => heard.length === 4,
        async () => `heard ${JSON.stringify(heard)}`,
      );
      const waiterChannel = (id) => `redlock:waiter:${id.slice(0, 16)}:${resource}`;
      assert.deepEqual(heard, [...ids.map((id) => [waiterChannel(id), id]), [channel, '']]);
      assert.equal(new Set(ids.map((id) => id.slice(0, 16))).size, 3, 'each client its own listener id');
      // Every waiter left the queue on every node.
      assert.deepEqual(await perNode((client) => client.exists(queue)), Array(5).fill(0));
      console.log(`named hand-offs (${name}): ${shown}`);
    } finally {
      listener.disconnect();
      holder.close();
      waiters.forEach((redlock) => redlock.close());
      await close();
    }
  });
}
