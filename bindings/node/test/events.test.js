// The core's events on a Redlock (docs/observability.md), against real Redis: acquired
// and released with their timings, retry while another holds the lock, node_failed with
// cause refused for a closed port, lost from the keep-alive; a throwing listener leaves
// the lock alone; without listeners no event is built.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { Redlock, netSocket } from '../index.js';
import { RedisNodes, redisCli, sleep } from './helpers.js';

const nodes = new RedisNodes(7245);
// A port nothing listens on (the tracing test uses 7255-7257 only).
const closedPort = 7259;
let clients;

before(() => {
  nodes.start();
  clients = nodes.ports.map((port) => netSocket(`redis://127.0.0.1:${port}`));
});

after(() => {
  try {
    clients?.forEach((client) => client.close());
  } finally {
    nodes.stop();
  }
});

function record(redlock, kinds) {
  const events = [];
  for (const kind of kinds) redlock.on(kind, (event) => events.push(event));
  return events;
}

describe('events on 5 nodes', () => {
  test("the README's listeners print what they say", async () => {
    const redlock = new Redlock(clients, { ttlMs: 5000, attempts: 2, retryDelayMs: 20, retryJitterMs: 0 });
    const holder = await redlock.acquire('events:readme');
    const printed = [];
    const log = console.log;
    console.log = (line) => printed.push(line);
    try {
      redlock.on('retry', (e) => console.log(`attempt ${e.attempt} failed (${e.reason}); next at ${e.retryAtUs}`));
      redlock.on('node_failed', (e) => console.log(`node ${e.node} failed: ${e.cause}`));
      redlock.on('lost', (e) => console.log(`lock lost (${e.lostReason}) after ${e.elapsedUs} us`));
      await assert.rejects(redlock.acquire('events:readme'));
    } finally {
      console.log = log;
      await holder.release();
      await redlock.idle();
      redlock.close();
    }
    assert.equal(printed.length, 1, `${printed}`);
    assert.match(printed[0], /^attempt 1 failed \(conflict\); next at \d+/);
  });

  test('acquired and released, with their timings and nodes', async () => {
    const redlock = new Redlock(clients, { ttlMs: 5000 });
    const events = record(redlock, ['acquired', 'released', 'retry', 'node_failed']);
    try {
      const before = performance.now() * 1000;
      const lock = await redlock.acquire('events:one');
      assert.equal(events.length, 1, 'the acquired event came before acquire resolved');
      const [acquired] = events;
      assert.equal(acquired.kind, 'acquired');
      assert.equal(acquired.operation, 'acquire');
      assert.equal(acquired.attempt, 1);
      assert.ok(acquired.atUs >= before && acquired.atUs <= performance.now() * 1000, `atUs ${acquired.atUs}`);
      assert.ok(acquired.elapsedUs >= 0 && acquired.elapsedUs < 1_000_000, `elapsedUs ${acquired.elapsedUs}`);
      assert.equal(acquired.reason, null);
      assert.equal(acquired.lostReason, null);
      assert.equal(acquired.nodes.length, 5);
      assert.ok(acquired.nodes.filter((n) => n === 'success').length >= 3, `${acquired.nodes}`);
      await lock.release();
      const released = events.at(-1);
      assert.equal(released.kind, 'released');
      assert.equal(released.operation, 'release');
      assert.ok(released.atUs >= acquired.atUs);
      assert.equal(events.length, 2, `${events.map((e) => e.kind)}`);
    } finally {
      await redlock.idle();
      redlock.close();
    }
  });

  test('retry while another holds the lock, then not_acquired', async () => {
    const redlock = new Redlock(clients, { ttlMs: 5000, attempts: 3, retryDelayMs: 20, retryJitterMs: 0 });
    const events = record(redlock, ['retry', 'not_acquired', 'acquired']);
    const holder = await redlock.acquire('events:busy');
    events.length = 0;
    try {
      await assert.rejects(redlock.acquire('events:busy'));
      assert.deepEqual(events.map((e) => e.kind), ['retry', 'retry', 'not_acquired']);
      const [first, second] = events;
      assert.equal(first.attempt, 1);
      assert.equal(second.attempt, 2);
      assert.equal(first.reason, 'conflict');
      assert.ok(first.retryAtUs > first.atUs, 'the next attempt starts later');
      assert.ok(first.retryAtUs - first.atUs <= 20_000 + 1000, `retry after ${first.retryAtUs - first.atUs} us`);
      assert.equal(events[2].attempt, 3);
      await holder.release();
    } finally {
      await redlock.idle();
      redlock.close();
    }
  });

  test('node_failed with cause refused for a closed port', async () => {
    const mixed = [...clients.slice(0, 4), netSocket(`redis://127.0.0.1:${closedPort}`)];
    const redlock = new Redlock(mixed, { ttlMs: 5000 });
    const failed = record(redlock, ['node_failed']);
    try {
      const lock = await redlock.acquire('events:refused');
      await lock.release();
      await redlock.idle();
      assert.ok(failed.length >= 1, 'a node_failed event');
      for (const event of failed) {
        assert.equal(event.node, 4);
        assert.equal(event.cause, 'refused');
        assert.equal(event.nodes.length, 1);
      }
    } finally {
      redlock.close();
      mixed[4].close();
    }
  });

  test('lost from the keep-alive when the keys are taken', async () => {
    const redlock = new Redlock(clients, { ttlMs: 300 });
    const lost = record(redlock, ['lost']);
    // Microseconds from just before the acquisition (using() starts it) to the abort seen.
    const before = performance.now();
    let heldAtMost;
    try {
      await assert.rejects(
        redlock.using('events:lost', async (signal) => {
          // Someone else's token on every node: the next extension finds it taken.
          for (const port of nodes.ports) redisCli(port, 'SET', 'events:lost', 'intruder', 'PX', '5000');
          while (!signal.aborted) await sleep(20);
          heldAtMost = (performance.now() - before) * 1000;
        }),
        (error) => error.code === 'lock_lost',
      );
      assert.equal(lost.length, 1);
      assert.equal(lost[0].kind, 'lost');
      assert.equal(lost[0].operation, null);
      assert.equal(lost[0].lostReason, 'taken');
      // Counted from the acquisition: within the time using() held the lock.
      assert.ok(lost[0].elapsedUs > 0 && lost[0].elapsedUs <= heldAtMost, `${lost[0].elapsedUs} of ${heldAtMost} us`);
    } finally {
      for (const port of nodes.ports) redisCli(port, 'DEL', 'events:lost');
      await redlock.idle();
      redlock.close();
    }
  });

  test('a throwing listener leaves the lock alone; its error goes to error listeners', async () => {
    const redlock = new Redlock(clients, { ttlMs: 5000 });
    const errors = [];
    redlock.on('acquired', () => {
      throw new Error('listener bug');
    });
    redlock.on('error', (error) => errors.push(error));
    const released = record(redlock, ['released']);
    try {
      const lock = await redlock.acquire('events:throw');
      assert.equal(await lock.isOwned(), true);
      await lock.release();
      assert.equal(released.length, 1, 'later events still arrive');
      assert.equal(errors.length, 1);
      assert.equal(errors[0].message, 'listener bug');
    } finally {
      await redlock.idle();
      redlock.close();
    }
  });

  test('once, off, and no listeners', async () => {
    const redlock = new Redlock(clients, { ttlMs: 5000 });
    let onceCalls = 0;
    const listener = () => assert.fail('removed listener called');
    redlock.once('acquired', () => onceCalls++);
    redlock.on('acquired', listener);
    redlock.off('acquired', listener);
    try {
      for (let i = 0; i < 2; i++) await (await redlock.acquire('events:once')).release();
      assert.equal(onceCalls, 1);
      assert.equal(redlock.listenerCount('acquired'), 0);
      assert.deepEqual(redlock.eventNames(), []);
      // Without listeners the lock works the same.
      await (await redlock.acquire('events:once')).release();
    } finally {
      await redlock.idle();
      redlock.close();
    }
  });
});
