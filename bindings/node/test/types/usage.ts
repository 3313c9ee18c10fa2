// Compiled by `tsc` in the tests: the package's types must accept real use with both
// clients and raw sockets, and `await using` must release the lock (TypeScript lowers
// it to Symbol.asyncDispose where the runtime lacks the syntax).

import assert from 'node:assert/strict';

import { Redis } from 'ioredis';
import { createClient } from 'redis';

import {
  LockHeldError,
  LockLostError,
  NodesFailedError,
  Redlock,
  core,
  netSocket,
  type Lock,
  type NodeDetail,
} from '../../index.js';

export async function run(urls: string[]): Promise<void> {
  const ioredis = urls.map((url) => new Redis(url, { enableOfflineQueue: false }));
  await Promise.all(ioredis.map((c) => new Promise((resolve) => c.once('ready', resolve))));
  const nodeRedis = await Promise.all(urls.map((url) => createClient({ url }).connect()));
  const raw = urls.map((url) => netSocket(url));
  try {
    for (const clients of [ioredis, nodeRedis, raw]) {
      const redlock = new Redlock(clients, { ttlMs: 2000, retryDelayMs: 10, retryJitterMs: 5, attempts: 2 });
      let token: string;
      {
        await using lock = await redlock.acquire(['typed:a', 'typed:b']);
        token = lock.token;
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
      const errors: Array<typeof LockLostError | typeof NodesFailedError> = [LockLostError, NodesFailedError];
      assert.equal(errors.length, 2);
    }
    const settings: core.ConfigSettings = new Redlock(raw).settings;
    assert.equal(settings.quorum, 3);
  } finally {
    ioredis.forEach((c) => c.disconnect());
    await Promise.all(nodeRedis.map((c) => c.quit()));
    raw.forEach((c) => c.close());
  }
}
