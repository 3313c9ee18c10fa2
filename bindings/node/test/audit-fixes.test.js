// The five audit fixes of the core (commits e7765d0 and b849529) on 5 real local nodes
// (base port 7890), through the package's public API: a shortening extension ends the
// lease sooner and the keep-alive of `using` follows it, reserved auxiliary key names
// are refused before anything is sent, an aborted wait leaves the queue of waiters at
// once, a queue entry lives at most 5 s whatever the retry delay, and the release of a
// lock on several resources names each resource's own first waiter. Each fails on the
// core before the fixes.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { Redis } from 'ioredis';

import { CancelledError, InvalidArgumentError, Redlock } from '../index.js';
import { RedisNodes, sleep } from './helpers.js';

const nodes = new RedisNodes(7890);
let urls;
let inspectors;
const redlocks = [];
const clients = [];

before(() => {
  urls = nodes.start();
  inspectors = nodes.ports.map((port) => {
    const client = new Redis({ host: '127.0.0.1', port });
    client.on('error', () => {});
    return client;
  });
});

after(async () => {
  try {
    await Promise.all(redlocks.map((redlock) => redlock.close()));
    clients.forEach((client) => client.disconnect());
    inspectors?.forEach((client) => client.disconnect());
  } finally {
    nodes.stop();
  }
});

/** A Redlock over ioredis clients of its own. */
function make(options = {}) {
  const own = urls.map((url) => {
    const client = new Redis(url);
    client.on('error', () => {});
    return client;
  });
  clients.push(...own);
  const redlock = new Redlock(own, options);
  redlocks.push(redlock);
  return redlock;
}

const pttls = (key) => Promise.all(inspectors.map((client) => client.pttl(key)));
const queues = (key) => Promise.all(inspectors.map((client) => client.zrange(key, 0, -1)));
const exists = (key) => Promise.all(inspectors.map((client) => client.exists(key)));

/** Polls `check` (async, truthy when done) every 10 ms for at most `limitMs` (by default long enough on a loaded machine). */
async function until(check, limitMs = 8000) {
  const end = performance.now() + limitMs;
  for (;;) {
    if (await check()) return true;
    if (performance.now() >= end) return false;
    await sleep(10);
  }
}

// Queued on 3 nodes or more: a node whose SET of the holder's acquisition was still on its
// way (the acquisition decided at the quorum) may have granted the waiter's first attempt.
const queuedOnAQuorum = async (resource) => (await queues(`{${resource}}:waiters`)).filter((q) => q.length > 0).length >= 3;
const leftTheQueue = async (resource) =>
  (await queues(`{${resource}}:waiters`)).every((q) => q.length === 0) &&
  (await queues(`{${resource}}:waiters:expiry`)).every((q) => q.length === 0);

describe('a shortening extension', () => {
  test('extending a 10 s lock to 1 s leaves about 1 s', async () => {
    const redlock = make();
    const key = 'audit:node:shorten';
    const lock = await redlock.acquire(key, { ttlMs: 10_000 });
    assert.ok(lock.validityMs > 9000);
    const started = performance.now();
    await lock.extend(1000);
    assert.ok(lock.validityMs <= 1000 && lock.validityMs > 500, `validity ${lock.validityMs}`);
    assert.ok(lock.isValid);
    // The quorum decided: the last nodes' PEXPIRE may still be on its way (and a key may be
    // gone already if this process was kept waiting on a loaded machine).
    const shortened = async () => (await pttls(key)).every((pttl) => pttl === -2 || (pttl > 0 && pttl <= 1000));
    assert.ok(await until(shortened, 1000), `PTTL ${await pttls(key)}`);
    // Not valid 1.2 s after the extension started (read from the clock).
    await sleep(Math.max(0, started + 1200 - performance.now()));
    assert.ok(!lock.isValid, 'still valid 1.2 s after extending to 1 s');
    assert.equal(lock.validityMs, 0);
  });

  test('the keep-alive of using() follows a shortening extension', async () => {
    const redlock = make();
    const key = 'audit:node:shorten:kept';
    let extensions = 0;
    await redlock.using(key, { ttlMs: 10_000 }, async (signal, lock) => {
      const started = performance.now();
      await lock.extend(1000);
      assert.ok(lock.validityMs <= 1000, `validity ${lock.validityMs}`);
      // For 2.5 s the lock stays held and every key has at most 1 s left: the keep-alive
      // extends by 1 s on the new lease's schedule (before, on the 10 s lease's, and the
      // keys expired).
      while (performance.now() - started < 2500) {
        assert.ok(!signal.aborted, `lost: ${signal.reason}`);
        assert.ok(lock.isValid, `not valid ${performance.now() - started} ms after the extension`);
        assert.ok(lock.validityMs <= 1000, `validity ${lock.validityMs}`);
        const keys = await pttls(key);
        assert.ok(keys.every((pttl) => pttl <= 1000), `PTTL ${keys}`);
        assert.ok(keys.filter((pttl) => pttl > 0).length >= 3, `PTTL ${keys} at ${performance.now() - started} ms`);
        await sleep(50);
      }
      extensions = lock.extensions;
    });
    assert.ok(extensions >= 2, `${extensions} extensions`);
  });
});

describe('reserved names', () => {
  test('auxiliary key names are refused and nothing is sent', async () => {
    const redlock = make();
    const prefixed = make({ keyPrefix: 'app:' });
    for (const resource of ['{r}:waiters:turn', '{r}:fence', 'lock:{order}:fence', '{r}:waiters']) {
      for (const options of [{ ttlMs: 5000 }, { ttlMs: 5000, waitMs: 1000 }]) {
        await assert.rejects(redlock.acquire(resource, options), (error) => {
          assert.ok(error instanceof InvalidArgumentError, String(error));
          assert.equal(error.code, 'invalid_argument');
          assert.equal(error.reason, 'reserved_resource');
          return true;
        });
      }
      assert.deepEqual(await exists(resource), [0, 0, 0, 0, 0], resource);
    }
    await assert.rejects(prefixed.acquire('{r}:fence', 5000), (error) => error.reason === 'reserved_resource');
    assert.deepEqual(await exists('app:{r}:fence'), [0, 0, 0, 0, 0]);
    for (const resource of ['r:fence', 'orders:fence']) {
      const lock = await redlock.acquire(resource, 5000);
      await lock.release();
    }
  });

  test('a lock on the turn key of a waited-for resource is refused', async () => {
    const holder = make();
    const waiter = make({ retryDelayMs: 3000, retryJitterMs: 0 });
    const resource = 'audit:node:r';
    const held = await holder.acquire(resource, 10_000);
    const waiting = waiter.acquire(resource, { waitMs: 10_000 });
    assert.ok(await until(() => queuedOnAQuorum(resource)), JSON.stringify(await queues(`{${resource}}:waiters`)));
    await assert.rejects(holder.acquire(`{${resource}}:waiters:turn`, 10_000), (error) => error.reason === 'reserved_resource');
    await held.release();
    await (await waiting).release();
  });
});

describe('an aborted wait', () => {
  test('leaves the queue of waiters on every node at once', async () => {
    const holder = make();
    // A 4 s retry delay: the waiter's entry lives about 5 s after its refusal.
    const waiter = make({ retryDelayMs: 4000, retryJitterMs: 0 });
    const resource = 'audit:node:abandon';
    const held = await holder.acquire(resource, 30_000);
    const controller = new AbortController();
    const waiting = waiter.acquire(resource, { waitMs: 20_000, signal: controller.signal });
    waiting.catch(() => {});
    assert.ok(await until(() => queuedOnAQuorum(resource)), `not queued: ${JSON.stringify(await queues(`{${resource}}:waiters`))}`);
    const queued = performance.now();
    await sleep(300); // between attempts
    controller.abort(new Error('no longer needed'));
    await assert.rejects(waiting, CancelledError);
    // Before its entry's lifetime (5 s from its refusal) could end.
    assert.ok(await until(() => leftTheQueue(resource), 2500), `still queued: ${JSON.stringify(await queues(`{${resource}}:waiters`))}`);
    assert.ok(performance.now() - queued < 4500);
    assert.ok(held.isValid);
    await held.release();
  });
});

describe('a queue entry', () => {
  test('lives at most 5 s whatever the retry delay', async () => {
    const holder = make();
    const waiter = make({ retryDelayMs: 60_000, retryJitterMs: 0 });
    const resource = 'audit:node:lifetime';
    const expiry = `{${resource}}:waiters:expiry`;
    const held = await holder.acquire(resource, 30_000);
    const controller = new AbortController();
    const waiting = waiter.acquire(resource, { waitMs: 120_000, signal: controller.signal });
    waiting.catch(() => {});
    assert.ok(await until(() => queuedOnAQuorum(resource)));
    let checked = 0;
    for (const client of inspectors) {
      const [member] = await client.zrange(expiry, 0, 0);
      if (member === undefined) continue; // a node that granted the attempt, or never had it
      checked += 1;
      const score = Number(await client.zscore(expiry, member));
      const [seconds, micros] = await client.time();
      const left = score - (Number(seconds) * 1000 + Math.floor(Number(micros) / 1000));
      assert.ok(left > 0 && left <= 5000, `the entry lives ${left} ms more (retry delay 60 s)`);
    }
    assert.ok(checked >= 3);
    controller.abort();
    await assert.rejects(waiting, CancelledError);
    await held.release();
  });
});

describe('the release of a lock on several resources', () => {
  test('names the first waiter of each resource', async () => {
    const holder = make();
    // Both waiters retry every 5 s: only a notice explains a quick acquisition.
    const aWaiter = make({ retryDelayMs: 5000, retryJitterMs: 0 });
    const bWaiter = make({ retryDelayMs: 5000, retryJitterMs: 0 });
    const held = await holder.acquire(['a', 'b'], 30_000);
    const wait = async (redlock, resource) => {
      const lock = await redlock.acquire(resource, { waitMs: 10_000 });
      const at = performance.now();
      await lock.release();
      return at;
    };
    // A waiter of a, first in a's queue: before the fix the release named it for b too.
    const waitingA = wait(aWaiter, 'a');
    assert.ok(await until(() => queuedOnAQuorum('a')), JSON.stringify(await queues('{a}:waiters')));
    const waitingB = wait(bWaiter, 'b');
    assert.ok(await until(() => queuedOnAQuorum('b')), JSON.stringify(await queues('{b}:waiters')));
    await sleep(300); // the waiters' subscriptions settle
    const released = performance.now();
    await held.release();
    const [atA, atB] = await Promise.all([waitingA, waitingB]);
    assert.ok(atB - released < 2500, `the waiter of b acquired ${atB - released} ms after the release`);
    assert.ok(atA - released < 2500, `the waiter of a acquired ${atA - released} ms after the release`);
  });
});
