// Bad arguments and use after close, for every transport (audit): every numeric option
// and argument is refused with an InvalidArgumentError whose message names the rule and
// the range; close() releases every lock still held, and every later use of the Redlock
// and of its locks rejects with UsedAfterCloseError; a release no quorum confirmed never
// marks the lock released. Nodes on base ports 7640 (healthy) and 7645 (killed).

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import Redis from 'ioredis';

import { InvalidArgumentError, NodesFailingError, RedlockError, Redlock, UsedAfterCloseError, netSocket, sentinelSocket } from '../index.js';
import { RedisNodes, transports } from './helpers.js';

const BAD_NUMBERS = [-1000, -1, NaN, Infinity, -Infinity, 0.5, 1.5, 1e300, Number.MAX_VALUE, '1000', null, true, {}, [], 10n];
const ttlRule = /^ttlMs must be a whole number of milliseconds between 1 and 1000000000000, got /;

function invalidWith(pattern) {
  return (error) => {
    assert.ok(error instanceof InvalidArgumentError, `${error?.name}: ${error?.message}`);
    assert.ok(error instanceof RedlockError);
    assert.equal(error.code, 'invalid_argument');
    assert.match(error.message, pattern);
    assert.doesNotMatch(error.message, /invalid type|expected u(32|64)|floating point/);
    return true;
  };
}

describe('bad numeric arguments name the rule and the range', () => {
  const nodes = new RedisNodes(7640);
  let urls;
  let clients;

  before(() => {
    urls = nodes.start();
    clients = urls.map((url) => netSocket(url));
  });

  after(() => {
    try {
      clients?.forEach((client) => client.close());
    } finally {
      nodes.stop();
    }
  });

  test('reasons: the core code for a whole number out of its range, invalid_argument otherwise', async () => {
    const reason = (code) => (e) => e instanceof InvalidArgumentError && e.reason === code;
    assert.throws(() => new Redlock(clients, { ttlMs: 0 }), reason('ttl_zero'));
    assert.throws(() => new Redlock(clients, { ttlMs: 1e13 }), reason('ttl_too_large'));
    assert.throws(() => new Redlock(clients, { ttlMs: -1000 }), reason('invalid_argument'));
    assert.throws(() => new Redlock(clients, { attempts: 0 }), reason('attempts_zero'));
    assert.throws(() => new Redlock(clients, { tokenBytes: 8 }), reason('token_too_short'));
    assert.throws(() => new Redlock(clients, { driftFactor: 1 }), reason('drift_factor_invalid'));
    const redlock = new Redlock(clients);
    await assert.rejects(redlock.acquire('misuse:reason', 0), reason('invalid_ttl'));
    await assert.rejects(redlock.acquire('misuse:reason', 2.5), reason('invalid_argument'));
    await redlock.close();
  });

  test('ttlMs of -1000 says the rule, not serde', () => {
    assert.throws(
      () => new Redlock(clients, { ttlMs: -1000 }),
      invalidWith(/^ttlMs must be a whole number of milliseconds between 1 and 1000000000000, got -1000$/),
    );
  });

  const settings = {
    ttlMs: ttlRule,
    attempts: /^attempts must be a whole number between 1 and 1000000, got /,
    tokenBytes: /^tokenBytes must be a whole number of bytes between 16 and 64, got /,
    maxExtensions: /^maxExtensions must be a whole number between 0 and 4294967295, got /,
    driftFactor: /^driftFactor must be a number from 0 up to \(not including\) 1, got /,
    driftFixedMs: /^driftFixedMs must be a finite number of milliseconds between 0 and 9007199254740, got /,
    nodeTimeoutMs: /^nodeTimeoutMs must be a finite number of milliseconds between 0 and 9007199254740, got /,
    minValidityMs: /^minValidityMs must be a finite number of milliseconds between 0 and 9007199254740, got /,
    retryDelayMs: /^retryDelayMs must be a finite number of milliseconds between 0 and 9007199254740, got /,
    retryJitterMs: /^retryJitterMs must be a finite number of milliseconds between 0 and 9007199254740, got /,
  };
  // Values each setting accepts (a fraction of a millisecond is fine for durations).
  const fine = { driftFactor: [0.5], driftFixedMs: [0.5, 1.5], nodeTimeoutMs: [0.5, 1.5], minValidityMs: [0.5, 1.5], retryDelayMs: [0.5, 1.5], retryJitterMs: [0.5, 1.5] };

  for (const [name, rule] of Object.entries(settings)) {
    test(`the setting ${name}: NaN, Infinity, negative, fractional, huge, non-number`, () => {
      for (const value of BAD_NUMBERS) {
        if (fine[name]?.includes(value)) continue;
        assert.throws(() => new Redlock(clients, { [name]: value }), invalidWith(rule), `${name}: ${String(value)}`);
      }
    });
  }

  test('a message quotes what it got, the type of a non-number, and cuts long strings', () => {
    assert.throws(() => new Redlock(clients, { ttlMs: NaN }), invalidWith(/, got NaN$/));
    assert.throws(() => new Redlock(clients, { ttlMs: Infinity }), invalidWith(/, got Infinity$/));
    assert.throws(() => new Redlock(clients, { ttlMs: 1.5 }), invalidWith(/, got 1\.5$/));
    assert.throws(() => new Redlock(clients, { ttlMs: '1000' }), invalidWith(/, got "1000" \(a string\)$/));
    assert.throws(() => new Redlock(clients, { attempts: 10n }), invalidWith(/, got 10n \(a bigint\)$/));
    assert.throws(() => new Redlock(clients, { ttlMs: 'x'.repeat(1_000_000) }), (error) => error.message.length < 300);
  });

  test('per call: acquire(ttlMs), { ttlMs, waitMs }, extend(ttlMs); nothing is taken', async () => {
    // A node timeout a loaded machine meets: this test is about arguments, not deadlines.
    const redlock = new Redlock(clients, { ttlMs: 5000, nodeTimeoutMs: 1000 });
    try {
      for (const value of BAD_NUMBERS) {
        if (value !== null && typeof value === 'object') continue; // an object is the options form
        await assert.rejects(redlock.acquire('misuse:call', { ttlMs: value }), invalidWith(ttlRule), String(value));
        if (typeof value === 'number') await assert.rejects(redlock.acquire('misuse:call', value), invalidWith(ttlRule));
        if (value !== 0.5 && value !== 1.5) {
          await assert.rejects(
            redlock.acquire('misuse:call', { waitMs: value }),
            invalidWith(/^waitMs must be a finite number of milliseconds between 0 and 9007199254740, got /),
            String(value),
          );
        }
      }
      assert.equal(await redlock.isLocked('misuse:call'), false);
      const lock = await redlock.acquire('misuse:call');
      for (const value of BAD_NUMBERS) {
        if (value === null || typeof value === 'undefined') continue;
        await assert.rejects(lock.extend(value), invalidWith(ttlRule), String(value));
      }
      assert.ok(lock.isValid);
      await lock.release();
      await redlock.idle();
    } finally {
      await redlock.close();
    }
  });

  test('Sentinel timeouts and databases', () => {
    for (const value of [-1, 0, NaN, Infinity, '5']) {
      assert.throws(
        () => sentinelSocket({ sentinels: ['127.0.0.1:1'], name: 'mymaster', sentinelTimeoutMs: value }),
        invalidWith(/^sentinelTimeoutMs must be a positive number of milliseconds, at most 9007199254740, got /),
      );
    }
    for (const value of [-1, NaN, Infinity, '5', 1.5, 2 ** 60]) {
      assert.throws(
        () => netSocket({ host: '127.0.0.1', port: 1, db: value }),
        invalidWith(/db \(the database\) must be a whole number between 0 and 9007199254740991, got /),
      );
    }
  });

  test('a 1 MB resource name is cut in messages', async () => {
    const name = 'n'.repeat(1_000_000);
    const holder = new Redlock(clients, { ttlMs: 5000, nodeTimeoutMs: 1000 });
    const other = new Redlock(clients, { ttlMs: 5000, nodeTimeoutMs: 1000, attempts: 1 });
    try {
      const lock = await holder.acquire(name);
      await assert.rejects(other.acquire(name), (error) => {
        assert.ok(error.message.length < 1000, `${error.message.length} characters`);
        assert.match(error.message, /n… \(1000000 characters\)/);
        return true;
      });
      await lock.release();
      await holder.idle();
    } finally {
      await holder.close();
      await other.close();
    }
  });
});

for (const [name, connect] of Object.entries(transports)) {
  describe(`close() with ${name}: releases what is held, then every use is refused`, () => {
    const nodes = new RedisNodes(7650);
    let urls;
    let connection;
    let inspectors;

    before(async () => {
      urls = nodes.start();
      connection = await connect(urls);
      inspectors = nodes.ports.map((port) => {
        const client = new Redis({ host: '127.0.0.1', port });
        client.on('error', () => {});
        return client;
      });
    });

    after(async () => {
      try {
        await connection?.close();
        inspectors?.forEach((client) => client.disconnect());
      } finally {
        nodes.stop();
      }
    });

    const values = (key) => Promise.all(inspectors.map((client) => client.get(key)));

    test('acquire, close: the keys are gone from every node; then extend, release, extend, release, acquire', async () => {
      const redlock = new Redlock(connection.clients, { ttlMs: 30_000 });
      const lock = await redlock.acquire(`close:${name}:a`);
      const multi = await redlock.acquire([`close:${name}:b`, `close:${name}:c`]);
      const rebuilt = redlock.lock(`close:${name}:d`, 'f'.repeat(40));
      const done = await redlock.acquire(`close:${name}:e`);
      await done.release();
      const detached = (await redlock.acquire(`close:${name}:f`)).detach();
      assert.deepEqual(await values(`close:${name}:a`), Array(5).fill(lock.token));
      const closing = redlock.close();
      assert.equal(redlock.closed, true);
      assert.equal(redlock.close(), closing, 'a second close() returns the same promise');
      await closing;
      for (const key of ['a', 'b', 'c']) assert.deepEqual(await values(`close:${name}:${key}`), Array(5).fill(null), key);
      // A detached lock is left to its TTL (or to a release by its token).
      assert.deepEqual(await values(`close:${name}:f`), Array(5).fill(detached.token));
      assert.equal(detached.released, false);
      await Promise.all(inspectors.map((client) => client.del(`close:${name}:f`)));
      assert.ok(lock.released && multi.released && !lock.isValid);
      for (const held of [lock, multi, rebuilt, done]) {
        await assert.rejects(held.extend(), UsedAfterCloseError);
        await assert.rejects(held.release(), UsedAfterCloseError);
        await assert.rejects(held.extend(1000), UsedAfterCloseError);
        await assert.rejects(held.release(), UsedAfterCloseError);
        await assert.rejects(held.isOwned(), UsedAfterCloseError);
      }
      await assert.rejects(redlock.acquire(`close:${name}:a`), (e) => e instanceof UsedAfterCloseError && e.code === 'used_after_close');
      await assert.rejects(redlock.isLocked(`close:${name}:a`), UsedAfterCloseError);
      await assert.rejects(redlock.using(`close:${name}:a`, async () => {}), UsedAfterCloseError);
      assert.throws(() => redlock.lock(`close:${name}:a`, lock.token), UsedAfterCloseError);
      // Nothing was taken again by the refused calls.
      assert.deepEqual(await values(`close:${name}:a`), Array(5).fill(null));
    });

    test('close() while using() runs releases its lock', async () => {
      const redlock = new Redlock(connection.clients, { ttlMs: 30_000 });
      let signal;
      const running = redlock.using(`close:${name}:using`, async (s) => {
        signal = s;
        await redlock.close();
      });
      await running.catch(() => {});
      assert.ok(signal);
      assert.deepEqual(await values(`close:${name}:using`), Array(5).fill(null));
    });
  });
}

describe('a release no quorum confirmed never marks the lock released', () => {
  const nodes = new RedisNodes(7645);
  let clients;

  before(() => {
    const urls = nodes.start();
    clients = urls.map((url) => netSocket(url));
  });

  after(() => {
    try {
      clients?.forEach((client) => client.close());
    } finally {
      nodes.stop();
    }
  });

  test('release() and close() with three nodes of five down', async () => {
    const redlock = new Redlock(clients, { ttlMs: 30_000 });
    const lock = await redlock.acquire('unconfirmed');
    for (const index of [0, 1, 2]) nodes.kill(index);
    await assert.rejects(lock.release(), NodesFailingError);
    assert.equal(lock.released, false, 'a failed release marked the lock released');
    // Not "already released": a second release tries again (and fails again).
    await assert.rejects(lock.release(), NodesFailingError);
    assert.equal(lock.released, false);
    await redlock.close();
    assert.equal(lock.released, false, 'close() could not release it either');
    await assert.rejects(lock.release(), UsedAfterCloseError);
    await assert.rejects(lock.extend(), UsedAfterCloseError);
    await assert.rejects(lock.release(), UsedAfterCloseError);
    assert.equal(lock.released, false);
  });
});
