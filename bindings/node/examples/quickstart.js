// Acquire, work, release; then a lock extended while the work runs.
//   REDLOCK_NODES=redis://127.0.0.1:7000,redis://127.0.0.1:7001,... node quickstart.js
import { Redis } from 'ioredis';
import { Redlock, LockHeldError, CancelledError } from 'redlock-core';

// One client per independent Redis node, in the same order everywhere, default settings.
const urls = (process.env.REDLOCK_NODES ?? 'redis://127.0.0.1:6379').split(',');
const clients = urls.map((url) => new Redis(url));
const redlock = new Redlock(clients, { ttlMs: 10_000 });

// Acquire, work, release.
const lock = await redlock.acquire('orders:42');
try {
  console.log(`holding orders:42 for ${lock.validityMs} ms more`);
} finally {
  await lock.release();
}

// Give up waiting: an AbortSignal cancels the acquisition (whatever it may have set is
// released) and it rejects with a CancelledError.
try {
  const quick = await redlock.acquire('orders:43', { ttlMs: 5000, signal: AbortSignal.timeout(2000) });
  await quick.release();
} catch (error) {
  if (!(error instanceof CancelledError)) throw error;
}

// Or let the core's keep-alive extend the lock while the work runs; `signal` is aborted
// the moment the lock is lost (an extension found it taken or gone, or its validity
// ran out).
await redlock.using('orders:42', async (signal) => {
  await doWork({ signal });
});

// Someone else holding it is an error of its own, with every node's answer.
const held = await redlock.acquire('orders:42');
const impatient = new Redlock(clients, { attempts: 1 });
try {
  await impatient.acquire('orders:42');
} catch (error) {
  if (!(error instanceof LockHeldError)) throw error;
  console.log(`held elsewhere: ${error.nodes.map((node) => node.result).join(', ')}`);
} finally {
  await held.release();
}

await redlock.idle(); // let the slower nodes answer, then close the clients
clients.forEach((client) => client.disconnect());

async function doWork({ signal }) {
  await new Promise((resolve) => setTimeout(resolve, 100));
  signal.throwIfAborted();
  console.log('work done under the lock');
}
