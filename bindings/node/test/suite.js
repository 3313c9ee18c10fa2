// The integration suite every transport runs against 5 real local Redis nodes:
// contention with a mutual-exclusion check, a lock held by someone else, nodes down, a
// frozen node, extension, and a lost lock aborting `using`.

import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';

import Redis from 'ioredis';

import {
  CancelledError,
  InvalidArgumentError,
  LockHeldError,
  LockLostError,
  NodesFailingError,
  NotHeldError,
  Redlock,
  RedlockError,
  UsedAfterCloseError,
} from '../index.js';
import { RedisNodes, commandStats, noscriptCount, redisCli, sleep } from './helpers.js';

/**
 * @param {string} name
 * @param {number} basePort
 * @param {(urls: string[]) => Promise<{ clients: unknown[], close(): Promise<void> | void }>} connect
 */
export function integrationSuite(name, basePort, connect) {
  describe(`${name} against 5 local Redis nodes`, () => {
    const nodes = new RedisNodes(basePort);
    let urls;
    let clients;
    let closeClients;
    // An independent client per node to look at the keys.
    let inspectors;

    before(async () => {
      urls = nodes.start();
      ({ clients, close: closeClients } = await connect(urls));
      inspectors = nodes.ports.map((port) => {
        const client = new Redis({ host: '127.0.0.1', port, lazyConnect: false });
        client.on('error', () => {});
        return client;
      });
      // Warm up (the first cycles compile the code paths) with a generous node timeout:
      // the tests' 50 ms deadlines are about the nodes, not the JIT.
      const warmUp = new Redlock(clients, { ttlMs: 5000, nodeTimeoutMs: 1000 });
      for (let i = 0; i < 20; i++) await (await warmUp.acquire('warm-up')).release();
      warmUp.close();
    });

    // Waits until an acquisition gets every node (the clients reconnect on their own
    // schedule after a restart).
    const everyNodeBack = async (redlock) => {
      let clean = 0;
      for (let tries = 0; ; tries++) {
        const lock = await redlock.acquire(`probe:${tries}`).catch((error) => error);
        if (!(lock instanceof Error)) {
          await lock.release().catch(() => {});
          // `pending`: written, and the quorum decided before its reply. Twice in a row,
          // so a connection the client is still replacing does not count.
          clean = lock.nodes.every((n) => n.result === 'success' || n.result === 'pending') ? clean + 1 : 0;
          if (clean === 2) return;
        }
        assert.ok(tries < 200, `the nodes did not come back: ${lock}`);
        await sleep(25);
      }
    };

    after(async () => {
      try {
        await closeClients?.();
        inspectors?.forEach((client) => client.disconnect());
      } finally {
        nodes.stop();
      }
    });

    // Every Redlock of a test is closed after it (its listeners leave the clients).
    // Tests that are not about deadlines get a node timeout a loaded machine meets
    // (a tenth of the TTL, at most 300 ms); the others set theirs.
    let made = [];
    const make = (clients, options = {}) => {
      const ttlMs = options.ttlMs ?? 10_000;
      const nodeTimeoutMs = options.nodeTimeoutMs ?? Math.min(300, ttlMs / 10);
      const redlock = new Redlock(clients, { ...options, nodeTimeoutMs });
      made.push(redlock);
      return redlock;
    };
    afterEach(() => {
      for (const redlock of made) redlock.close();
      made = [];
    });

    const values = (key) => Promise.all(inspectors.map((client) => client.get(key)));

    test('acquire sets the token on every node, release deletes it', async () => {
      const redlock = make(clients, { ttlMs: 5000 });
      const lock = await redlock.acquire('rt:orders');
      assert.match(lock.token, /^[0-9a-f]{40}$/);
      assert.ok(lock.validityMs > 4000 && lock.validityMs <= 5000, `validity ${lock.validityMs}`);
      await sleep(20); // nodes still in flight at the quorum finish their SET
      assert.deepEqual(await values('rt:orders'), Array(5).fill(lock.token));
      const result = await lock.release();
      assert.ok(result.released >= 3, `released on ${result.released} nodes`);
      // The release decided at a quorum; the other nodes' commands finish in the background.
      await redlock.idle();
      assert.deepEqual(await values('rt:orders'), Array(5).fill(null));
    });

    test('several resources are locked all or none', async () => {
      const redlock = make(clients, { ttlMs: 5000, attempts: 1, nodeTimeoutMs: 500 });
      const lock = await redlock.acquire(['multi:a', 'multi:b']);
      await assert.rejects(redlock.acquire(['multi:b', 'multi:c']), LockHeldError);
      assert.deepEqual(await values('multi:c'), Array(5).fill(null), 'nothing left of the failed lock');
      await lock.release();
      await redlock.idle();
      assert.deepEqual(await values('multi:a'), Array(5).fill(null));
    });

    test('a lock held by someone else is a LockHeldError with per-node detail', async () => {
      const redlock = make(clients, { ttlMs: 5000, attempts: 2, retryDelayMs: 10, retryJitterMs: 5, nodeTimeoutMs: 500 });
      const held = await redlock.acquire('held:r');
      const error = await redlock.acquire('held:r').then(
        () => assert.fail('acquired a held lock'),
        (e) => e,
      );
      assert.ok(error instanceof LockHeldError, String(error));
      assert.equal(error.code, 'held_elsewhere');
      assert.equal(error.reason, 'conflict');
      assert.equal(error.attempts, 2);
      assert.equal(error.nodes.length, 5);
      assert.ok(error.nodes.filter((n) => n.result === 'conflict').length >= 3);
      assert.deepEqual(await values('held:r'), Array(5).fill(held.token), 'the holder keeps every key');
      await held.release();
    });

    test('contending workers never hold the lock at the same time', async () => {
      const redlock = make(clients, {
        ttlMs: 2000,
        attempts: 200,
        retryDelayMs: 4,
        retryJitterMs: 3,
      });
      let inside = 0;
      let acquisitions = 0;
      const worker = async (rounds) => {
        for (let i = 0; i < rounds; i++) {
          const lock = await redlock.acquire('contended');
          inside += 1;
          assert.equal(inside, 1, 'two holders at once');
          acquisitions += 1;
          await sleep(1);
          assert.ok(lock.isValid, 'the critical section outlived the lock');
          inside -= 1;
          await lock.release();
        }
      };
      await Promise.all(Array.from({ length: 4 }, () => worker(10)));
      assert.equal(acquisitions, 40);
      await redlock.idle();
      assert.deepEqual(await values('contended'), Array(5).fill(null));
    });

    test('two nodes down: still locks with the quorum; three down: NodesFailingError', async () => {
      const redlock = make(clients, { ttlMs: 3000, attempts: 1, nodeTimeoutMs: 200 });
      nodes.kill(3);
      nodes.kill(4);
      try {
        const started = performance.now();
        const lock = await redlock.acquire('down:r');
        assert.ok(performance.now() - started < 1000);
        assert.deepEqual(
          lock.nodes.slice(0, 3).map((n) => n.result),
          ['success', 'success', 'success'],
        );
        await lock.release();
        nodes.kill(2);
        const error = await redlock.acquire('down:r').then(
          () => assert.fail('acquired with 2 of 5 nodes'),
          (e) => e,
        );
        assert.ok(error instanceof NodesFailingError, String(error));
        assert.equal(error.code, 'nodes_failing');
        assert.equal(error.reason, 'nodes_failed');
        assert.ok(error.nodes.slice(2).every((n) => n.result === 'timeout' || n.result === 'error'));
        assert.ok(error.nodes.slice(2).every((n) => typeof n.cause === 'string'), JSON.stringify(error.nodes));
        assert.ok(!(error instanceof LockHeldError));
      } finally {
        for (const index of [2, 3, 4]) nodes.restart(index);
      }
      await everyNodeBack(redlock);
      assert.deepEqual(await values('down:r'), Array(5).fill(null), 'the failed attempt left nothing');
    });

    test('a restarted node is given the scripts before it has to release', async () => {
      // A restarted node has no scripts. Freeze it while the release decides at a quorum
      // of the others, so its answer comes after the decision, when the core sends no
      // EVAL fallback: only scripts loaded on reconnection let it delete the key.
      const redlock = make(clients, { ttlMs: 10_000, nodeTimeoutMs: 50, attempts: 1 });
      nodes.restart(0);
      let lock;
      for (let tries = 0; ; tries++) {
        // SET needs no script: wait until node 0's connection is back and takes one.
        lock = await redlock.acquire(`restarted:${tries}`).catch(() => undefined);
        if (lock?.nodes[0].result === 'success') break;
        assert.ok(tries < 100, 'node 0 never came back');
        await sleep(50);
      }
      const key = lock.resources[0];
      nodes.pause(0);
      try {
        await lock.release();
      } finally {
        nodes.resume(0);
      }
      await redlock.idle();
      for (let tries = 0; (await values(key))[0] !== null; tries++) {
        assert.ok(tries < 40, 'the restarted node kept the released key');
        await sleep(25);
      }
      assert.deepEqual(await values(key), Array(5).fill(null));
    });

    test('one frozen node does not stall acquire or release', async () => {
      const redlock = make(clients, { ttlMs: 3000, nodeTimeoutMs: 50 });
      nodes.pause(0);
      try {
        for (let i = 0; i < 5; i++) {
          const started = performance.now();
          const lock = await redlock.acquire('frozen:r');
          await lock.release();
          const elapsed = performance.now() - started;
          assert.ok(elapsed < 500, `acquire + release took ${elapsed} ms`);
          assert.notEqual(lock.nodes[0].result, 'success');
        }
      } finally {
        nodes.resume(0);
      }
    });

    test('extend renews the TTL on every node and never resurrects a lost lock', async () => {
      const redlock = make(clients, { ttlMs: 1000 });
      const lock = await redlock.acquire('ext:r');
      await sleep(300);
      await lock.extend();
      assert.equal(lock.extensions, 1);
      assert.ok(lock.validityMs > 900, `validity after extension ${lock.validityMs}`);
      // The extension decided at the quorum: at least 3 nodes carry the new TTL.
      const ttls = await Promise.all(inspectors.map((c) => c.pttl('ext:r')));
      assert.ok(ttls.filter((ttl) => ttl > 850).length >= 3, `PTTLs ${ttls}`);
      await lock.extend(5000);
      assert.ok(lock.validityMs > 4500);
      // Someone deletes the keys: the extension must fail (not held: nobody else has
      // them) and must not re-create them.
      await Promise.all(inspectors.map((c) => c.del('ext:r')));
      await assert.rejects(lock.extend(), (e) => e instanceof NotHeldError && e.reason === 'not_held');
      assert.deepEqual(await values('ext:r'), Array(5).fill(null));
      assert.ok(!lock.isValid);
    });

    test('using extends automatically while the work runs', async () => {
      const redlock = make(clients, { ttlMs: 600 });
      const result = await redlock.using('auto:r', async (signal, lock) => {
        await sleep(1500);
        assert.ok(!signal.aborted);
        assert.ok(lock.extensions >= 2, `extensions ${lock.extensions}`);
        return 'done';
      });
      assert.equal(result, 'done');
      await redlock.idle();
      assert.deepEqual(await values('auto:r'), Array(5).fill(null));
    });

    test('using aborts the signal the moment an extension finds the lock taken', async () => {
      const redlock = make(clients, { ttlMs: 900 });
      let abortedAfter;
      const outcome = redlock.using('lost:r', async (signal) => {
        const started = performance.now();
        // Someone else takes the resource (as after an expiry during a long pause).
        await Promise.all(inspectors.map((c) => c.set('lost:r', 'someone-else')));
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
        abortedAfter = performance.now() - started;
        assert.ok(signal.reason instanceof LockLostError);
        return 'finished without the lock';
      });
      await assert.rejects(outcome, LockLostError);
      // The first extension is due when ttl / 3 of validity is left (~580 ms in).
      assert.ok(abortedAfter > 300 && abortedAfter < 900, `aborted after ${abortedAfter} ms`);
      assert.deepEqual(await values('lost:r'), Array(5).fill('someone-else'), 'the other holder is untouched');
      await Promise.all(inspectors.map((c) => c.del('lost:r')));
    });

    test('using aborts when failing nodes let the validity run out', async () => {
      const redlock = make(clients, { ttlMs: 800 });
      let lock;
      let abortedAt;
      const outcome = redlock.using('expire:r', async (signal, held) => {
        lock = held;
        for (const index of [0, 1, 2]) nodes.pause(index);
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
        abortedAt = performance.now() * 1000;
        assert.equal(signal.reason.reason, 'expired');
      });
      try {
        await assert.rejects(outcome, LockLostError);
      } finally {
        for (const index of [0, 1, 2]) nodes.resume(index);
      }
      // Aborted at validUntil, not before the lock could have lapsed by much, nor late.
      const lateMs = (abortedAt - lock.validUntilUs) / 1000;
      assert.ok(lateMs > -5 && lateMs < 100, `aborted ${lateMs} ms after validUntil`);
    });

    test('Symbol.asyncDispose releases the lock (await using)', async () => {
      const redlock = make(clients, { ttlMs: 5000 });
      const lock = await redlock.acquire('dispose:r');
      assert.equal(typeof lock[Symbol.asyncDispose], 'function');
      await lock[Symbol.asyncDispose]();
      assert.ok(lock.released);
      await redlock.idle();
      assert.deepEqual(await values('dispose:r'), Array(5).fill(null));
    });

    test('bad input is an InvalidArgumentError naming the rule', async () => {
      const invalid = (reason) => (e) =>
        e instanceof InvalidArgumentError && e instanceof RedlockError && e.code === 'invalid_argument' && e.reason === reason;
      assert.throws(() => new Redlock(clients, { ttlMs: 0 }), invalid('ttl_zero'));
      assert.throws(() => new Redlock(clients, { ttl: 5 }), invalid('invalid_argument'));
      assert.throws(() => new Redlock(clients, { attempts: 3, retryDelayMs: 0.5, retryJitterMs: 0 }), invalid('retry_delay_too_short'));
      const redlock = make(clients);
      await assert.rejects(redlock.acquire([]), invalid('no_resources'));
      await assert.rejects(redlock.acquire(['a', 'a']), invalid('duplicate_resource'));
      await assert.rejects(redlock.acquire('a', 2.5), invalid('invalid_argument'));
      await assert.rejects(redlock.acquire('a', { ttl: 5 }), invalid('invalid_argument'));
      assert.throws(() => redlock.lock('a', 'has space'), invalid('invalid_token'));
      redlock.close();
    });

    test('the same node twice is refused (duplicate_node)', () => {
      assert.throws(
        () => new Redlock([clients[0], ...clients.slice(1, 4), clients[0]]),
        (e) => e instanceof InvalidArgumentError && e.reason === 'duplicate_node' && /nodes 0 and 4/.test(e.message),
      );
    });

    test('release after close rejects with UsedAfterCloseError; so does every call', async () => {
      const redlock = make(clients, { ttlMs: 5000 });
      const lock = await redlock.acquire('closed:r');
      redlock.close();
      await assert.rejects(lock.release(), UsedAfterCloseError);
      await assert.rejects(lock.extend(), UsedAfterCloseError);
      await assert.rejects(redlock.acquire('closed:other'), (e) => e instanceof UsedAfterCloseError && e.code === 'used_after_close');
      assert.throws(() => redlock.lock('closed:r', lock.token), UsedAfterCloseError);
      // The key stays until its TTL: clean it up for the other tests.
      await Promise.all(inspectors.map((c) => c.del('closed:r')));
    });

    test('extend after release is NotHeldError; a second release is UsedAfterCloseError', async () => {
      const redlock = make(clients, { ttlMs: 5000 });
      const lock = await redlock.acquire('released:r');
      await lock.release();
      await assert.rejects(lock.extend(), (e) => e instanceof NotHeldError && e.code === 'not_held');
      await assert.rejects(lock.release(), UsedAfterCloseError);
      // The same lock released through another handle: the core finds the keys gone.
      const other = await redlock.acquire('released:s');
      await redlock.lock('released:s', other.token).release();
      await assert.rejects(other.extend(), (e) => e instanceof NotHeldError && e.reason === 'not_held');
      await redlock.idle();
      assert.deepEqual(await values('released:s'), Array(5).fill(null));
      redlock.close();
    });

    test('an aborted acquisition rejects with CancelledError and leaves no key', async () => {
      const redlock = make(clients, { ttlMs: 5000, attempts: 50, retryDelayMs: 20, retryJitterMs: 5 });
      // Already aborted: nothing starts.
      await assert.rejects(redlock.acquire('abort:r', { signal: AbortSignal.abort() }), CancelledError);
      // Aborted while it retries against a holder: its own SETs are released.
      await Promise.all(inspectors.slice(0, 3).map((c) => c.set('abort:r', 'someone-else', 'PX', 5000)));
      const controller = new AbortController();
      const pending = redlock.acquire('abort:r', { signal: controller.signal });
      await sleep(60);
      controller.abort(new Error('stop'));
      await assert.rejects(pending, (e) => e instanceof CancelledError && e.code === 'cancelled' && e.cause?.message === 'stop');
      await redlock.idle();
      await sleep(20);
      assert.deepEqual((await values('abort:r')).slice(3), [null, null], 'the cancelled attempt left no key');
      // Aborted in the middle of a round against free nodes: nothing is left either.
      await Promise.all(inspectors.map((c) => c.del('abort:r')));
      for (let i = 0; i < 20; i++) {
        const c = new AbortController();
        const attempt = redlock.acquire(`abort:${i}`, { signal: c.signal });
        c.abort();
        await attempt.then((lock) => lock.release(), (e) => assert.ok(e instanceof CancelledError, String(e)));
      }
      await redlock.idle();
      await sleep(20);
      for (let i = 0; i < 20; i++) assert.deepEqual(await values(`abort:${i}`), Array(5).fill(null), `abort:${i}`);
      redlock.close();
    });

    test('a node restarted empty under use is used again at once, and no release leaves its key', async () => {
      const redlock = make(clients, { ttlMs: 10_000 });
      await everyNodeBack(redlock);
      const port = nodes.ports[1];
      redisCli(port, 'shutdown', 'nosave');
      nodes.restart(1);
      await everyNodeBack(redlock);
      for (let i = 0; i < 20; i++) {
        const lock = await redlock.acquire(`empty:${i}`);
        assert.ok(['success', 'pending'].includes(lock.nodes[1].result), `cycle ${i}: ${JSON.stringify(lock.nodes[1])}`);
        await lock.release();
      }
      await redlock.idle();
      for (let i = 0; i < 20; i++) assert.equal((await values(`empty:${i}`))[1], null, `empty:${i} left on the restarted node`);
      // Commands a client library took before it noticed the restart may reach the empty
      // node before the link's script loads: ioredis replays its queue on the new
      // connection before reporting it ready, and a replayed release is answered
      // NOSCRIPT. How many depends on timing; what must hold does not: the link loaded
      // the scripts on the new connection, and every release answered NOSCRIPT was
      // written again (after the loads, or as EVAL) and deleted its key. The node was
      // empty: every key on it now is one this test's locks (and probes) left behind.
      const stats = commandStats(port);
      assert.ok(stats['script|load'] >= 1, `no SCRIPT LOAD on the restarted node: ${JSON.stringify(stats)}`);
      assert.ok(stats.set >= 20, `the restarted node was not used: ${JSON.stringify(stats)}`);
      const left = redisCli(port, 'KEYS', '*').trim();
      assert.equal(left, '', `keys left on the restarted node (${noscriptCount(port)} NOSCRIPT): ${left}`);
      redlock.close();
    });

    test('a node restarted empty while idle gets the scripts before any EVALSHA', async () => {
      // Nothing in flight and nothing written while the node is down: no client queue can
      // hold a release, so everything the restarted node receives comes from the link
      // after the new connection was reported ready, and the link loads the scripts
      // first. Not one NOSCRIPT: a link that wrote EVALSHA before loading would get one
      // at the first release.
      const redlock = make(clients, { ttlMs: 10_000 });
      await everyNodeBack(redlock);
      await redlock.idle();
      const port = nodes.ports[3];
      nodes.kill(3);
      // One turn of the event loop lets the transport hear the close (the port is already
      // free; execFileSync in restart() would otherwise block it until the node is back).
      await sleep(50);
      nodes.restart(3);
      // Whether the client is back yet or not, the link writes nothing before it is.
      for (let i = 0; i < 20; i++) await (await redlock.acquire(`idle-restart:${i}`)).release();
      await everyNodeBack(redlock);
      await redlock.idle();
      for (let i = 0; i < 20; i++) assert.equal((await values(`idle-restart:${i}`))[3], null, `idle-restart:${i} left`);
      const stats = commandStats(port);
      assert.ok(stats['script|load'] >= 1, `no SCRIPT LOAD on the restarted node: ${JSON.stringify(stats)}`);
      assert.ok((stats.evalsha ?? 0) >= 1, `no EVALSHA reached the restarted node: ${JSON.stringify(stats)}`);
      assert.equal(noscriptCount(port), 0, `NOSCRIPT answered on the restarted node: ${JSON.stringify(stats)}`);
      redlock.close();
    });
  });
}
