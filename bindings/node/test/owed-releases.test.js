// Releases a link owes a frozen node go out in the background once the node thaws, with
// no further call on the Redlock (docs/bindings.md, rules 2 and 10; the link's owed
// releases in core/src/link.rs), over every transport: ioredis, node-redis and raw
// sockets.
//
// Three of five nodes frozen (SIGSTOP) while an acquisition's SET is on its way to them:
// the acquisition fails (NodesFailingError). Once they thaw they run that SET, so they
// hold the key with its full TTL (30 s here) until the link writes the release it owes
// them; this must happen while the caller makes no call and keeps the Redlock open. The
// same for the one frozen node of a successful acquire and release; closing later leaves
// nothing either, nor does closing at once right after the thaw the documented way
// (`await redlock.idle(); redlock.close()`). One set of nodes on ports 7970-7974, the
// transports in turn.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';

import Redis from 'ioredis';

import { NodesFailingError, Redlock } from '../index.js';
import { RedisNodes, commandStats, sleep, transports } from './helpers.js';

const BASE_PORT = 7970;
const TTL_MS = 30_000;
// Far below the TTL, far above what a loaded machine needs to write a release.
const BOUND_MS = 5000;
const POLL_MS = 50;

describe('owed releases reach thawed nodes with no further call', () => {
  const nodes = new RedisNodes(BASE_PORT);
  const frozen = new Set();
  let urls;
  // Plain connections of our own, to look at the keys.
  let inspectors;

  const freeze = (...indices) => {
    for (const index of indices) {
      nodes.pause(index);
      frozen.add(index);
    }
  };
  const thaw = () => {
    for (const index of frozen) nodes.resume(index);
    frozen.clear();
  };

  before(async () => {
    urls = nodes.start();
    inspectors = nodes.ports.map((port) => {
      const client = new Redis({ host: '127.0.0.1', port });
      client.on('error', () => {});
      return client;
    });
  });

  after(() => {
    try {
      thaw();
      inspectors?.forEach((client) => client.disconnect());
    } finally {
      nodes.stop();
    }
  });

  const present = async (key) => {
    const exists = await Promise.all(inspectors.map((client) => client.exists(key)));
    return exists.flatMap((n, index) => (n ? [index] : []));
  };

  /** Polls every 50 ms, at most 5 s, until `key` exists on no node; how long it took. */
  const waitGone = async (key, what) => {
    const started = performance.now();
    for (;;) {
      const left = await present(key);
      const elapsed = performance.now() - started;
      if (left.length === 0) return elapsed;
      if (elapsed >= BOUND_MS) {
        const ttls = await Promise.all(left.map((index) => inspectors[index].pttl(key)));
        assert.fail(`${what}: ${key} still on nodes ${left} ${BOUND_MS} ms after the thaw (remaining TTL, ms: ${ttls})`);
      }
      await sleep(POLL_MS);
    }
  };

  const setCalls = (indices) => Object.fromEntries(indices.map((i) => [i, commandStats(nodes.ports[i]).set ?? 0]));

  // Waits (at most 5 s) until the thawed nodes ran the acquisition's SET: from then on
  // they hold the key until a release removes it, so a key found gone afterwards was
  // released (not merely not set yet).
  const waitSetRan = async (before, what) => {
    const started = performance.now();
    for (;;) {
      const now = setCalls(Object.keys(before).map(Number));
      if (Object.entries(before).every(([index, count]) => now[index] > count)) return;
      if (performance.now() - started >= BOUND_MS) {
        assert.fail(`${what}: the thawed nodes never ran the SET (${JSON.stringify({ before, now })})`);
      }
      await sleep(10);
    }
  };

  // Connections open first, so that the SET is written to the nodes frozen next; and
  // nothing of the warm-up still out (a release decides at a quorum), or a node frozen
  // with it unanswered would be stalled already and never get the SET.
  const warm = async (redlock) => {
    await (await redlock.acquire(`node:owed:warm:${randomUUID()}`, TTL_MS)).release();
    await redlock.idle();
  };

  const key = (name, scenario) => `node:owed:${name.replace(' ', '-')}:${scenario}:${randomUUID().slice(0, 8)}`;

  for (const [name, connect] of Object.entries(transports)) {
    test(`${name}: keys gone after the thaw while the Redlock makes no call`, async () => {
      const { clients, close } = await connect(urls);
      const redlock = new Redlock(clients);
      const three = key(name, 'three');
      const one = key(name, 'one');
      try {
        await warm(redlock);

        let sets = setCalls([2, 3, 4]);
        freeze(2, 3, 4);
        try {
          await assert.rejects(redlock.acquire(three, TTL_MS), NodesFailingError);
        } finally {
          thaw();
        }
        await waitSetRan(sets, name);
        let took = await waitGone(three, `${name}, three frozen, no call`);
        console.log(`${name}, three frozen: keys gone ${took.toFixed(0)} ms after the SET ran`);

        sets = setCalls([4]);
        freeze(4);
        try {
          const lock = await redlock.acquire(one, TTL_MS);
          await lock.release();
        } finally {
          thaw();
        }
        await waitSetRan(sets, name);
        took = await waitGone(one, `${name}, one frozen, no call`);
        console.log(`${name}, one frozen: key gone ${took.toFixed(0)} ms after the SET ran`);
      } finally {
        thaw();
        await redlock.idle();
        redlock.close();
        await close();
      }
      // Closed later: still nothing.
      assert.deepEqual(await present(three), []);
      assert.deepEqual(await present(one), []);
    });

    // With the core's link writing an owed release at once behind the SET (2484f47),
    // a Redlock closed right after the thaw leaves nothing either. Before that, idle()
    // (which counts a stalled link as idle) and close() (which detaches at once) dropped
    // the releases still queued for the thawed nodes, which kept the key its whole TTL.
    test(`${name}: thawed, then closed at once the documented way, nothing left`, async () => {
      const { clients, close } = await connect(urls);
      const redlock = new Redlock(clients);
      const resource = key(name, 'close');
      try {
        await warm(redlock);
        const sets = setCalls([2, 3, 4]);
        freeze(2, 3, 4);
        try {
          await assert.rejects(redlock.acquire(resource, TTL_MS), NodesFailingError);
        } finally {
          thaw();
        }
        // Instead of waiting: what a program does before it exits.
        await redlock.idle();
        redlock.close();
        await waitSetRan(sets, name);
        const took = await waitGone(resource, `${name}, thawed then closed`);
        console.log(`${name}, thawed then closed: keys gone ${took.toFixed(0)} ms after the close`);
      } finally {
        thaw();
        redlock.close();
        await close();
      }
    });
  }
});
