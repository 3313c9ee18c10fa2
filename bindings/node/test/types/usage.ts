// Compiled by `tsc` in the tests: the package's types must accept real use with both
// clients and raw sockets, and `await using` must release the lock (TypeScript lowers
// it to Symbol.asyncDispose where the runtime lacks the syntax).

import assert from 'node:assert/strict';

import { Redis } from 'ioredis';
import { createClient } from 'redis';

import {
  CancelledError,
  LockHeldError,
  LockLostError,
  NodesFailingError,
  NotHeldError,
  Redlock,
  StreamTransport,
  UsedAfterCloseError,
  core,
  fencedSet,
  netSocket,
  type FencedSetResult,
  type Lock,
  type NodeDetail,
  type RedlockEvent,
  type StreamOpener,
} from '../../index.js';

export async function run(urls: string[]): Promise<void> {
  const ioredis = urls.map((url) => new Redis(url));
  await Promise.all(ioredis.map((c) => new Promise((resolve) => c.once('ready', resolve))));
  const nodeRedis = await Promise.all(urls.map((url) => createClient({ url }).connect()));
  const raw = urls.map((url) => netSocket(url));
  try {
    for (const clients of [ioredis, nodeRedis, raw]) {
      const redlock = new Redlock(clients, { ttlMs: 2000, retryDelayMs: 10, retryJitterMs: 5, attempts: 2 });
      const seen: RedlockEvent[] = [];
      redlock.on('acquired', (event: RedlockEvent) => seen.push(event));
      let token: string;
      {
        await using lock = await redlock.acquire(['typed:a', 'typed:b']);
        token = lock.token;
        const owned: boolean = await lock.isOwned();
        assert.ok(owned);
        const locked: boolean = await redlock.isLocked(['typed:a', 'typed:b']);
        assert.ok(locked);
        const elapsed: number = seen[0].elapsedUs;
        assert.equal(seen[0].kind, 'acquired');
        assert.ok(elapsed >= 0);
        const validity: number = lock.validityMs;
        assert.ok(validity > 0);
        await assert.rejects(redlock.acquire('typed:a'), LockHeldError);
      }
      // Disposed at the end of the block: the resource is free again.
      const again: Lock = await redlock.acquire('typed:a');
      assert.notEqual(again.token, token);
      const released = await again.release();
      const details: NodeDetail[] = released.nodes;
      assert.equal(details.length, 5);
      const value: string = await redlock.using('typed:c', 1000, async (signal: AbortSignal) => {
        assert.equal(signal.aborted, false);
        return 'ok';
      });
      assert.equal(value, 'ok');
      const errors: Array<typeof LockLostError | typeof NodesFailingError | typeof NotHeldError> = [
        LockLostError,
        NodesFailingError,
        NotHeldError,
      ];
      assert.equal(errors.length, 3);
      const controller = new AbortController();
      controller.abort();
      await assert.rejects(redlock.acquire('typed:d', { ttlMs: 1000, signal: controller.signal }), CancelledError);
      // Held elsewhere for a moment: the acquisition below waits, and a notice wakes it.
      const holder = await redlock.acquire('orders:42');
      const handedOver = new Promise((resolve) => setTimeout(resolve, 50)).then(() => holder.release());
      const store = ioredis[0];
      // Wait up to 5 s for the lock, with a fencing token for the writes it guards.
      const lock = await redlock.acquire('orders:42', { waitMs: 5000, fencing: true });
      const result = await fencedSet(store, 'orders:42:state', 'shipped', lock.fencingToken!);
      if (!result.accepted) {
        throw new Error(`a newer holder wrote with token ${result.seen}: this lock's lease is over`);
      }
      await lock.release();
      await handedOver;
      const fencingToken: number | undefined = lock.fencingToken;
      assert.ok(fencingToken !== undefined && fencingToken > 0);
      // The same token twice: the second write is refused.
      const stale: FencedSetResult = await fencedSet(store, 'orders:42:state', 'late', fencingToken);
      assert.deepEqual(stale, { accepted: false, token: fencingToken, seen: fencingToken });
      const cause: string | undefined = again.nodes[0].cause;
      assert.equal(cause, undefined);
      redlock.close();
      await assert.rejects(again.extend(), UsedAfterCloseError);
    }
    const settingsRedlock = new Redlock(raw);
    const settings: core.ConfigSettings = settingsRedlock.settings;
    assert.equal(settings.quorum, 3);
    settingsRedlock.close();
    // A transport of one's own: its opener gives up an attempt when `signal` aborts, and
    // its connect timeout is the link's.
    const opener: StreamOpener = ({ signal }) =>
      new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('given up'))));
    const own = new StreamTransport(opener, { label: 'own', address: 'own.invalid:1' });
    own.connectTimeoutMs = 500;
    const ownMs: number | undefined = own.connectTimeoutMs;
    assert.equal(ownMs, 500);
    const link = new core.Link({ resp: true, connectTimeoutMs: 500 });
    const linkMs: number = link.connectTimeoutMs;
    assert.equal(linkMs, 500);
    link.free();
  } finally {
    ioredis.forEach((c) => c.disconnect());
    await Promise.all(nodeRedis.map((c) => c.quit()));
    raw.forEach((c) => c.close());
  }
}
