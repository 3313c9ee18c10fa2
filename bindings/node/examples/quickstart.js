// Acquire, work, release; then a lock extended while the work runs.
//   REDLOCK_NODES=redis://127.0.0.1:7000,redis://127.0.0.1:7001,... node quickstart.js
import { Redis } from 'ioredis';
import { Redlock, LockHeldError } from 'redlock-core';

// One client per independent Redis node, in the same order everywhere.
const urls = (process.env.REDLOCK_NODES ?? 'redis://127.0.0.1:6379').split(',');
const clients = urls.map(
  (url) => new Redis(url, { enableOfflineQueue: false, autoResendUnfulfilledCommands: false }),
);
await Promise.all(clients.map((client) => new Promise((ready) => client.once('ready', ready))));
const redlock = new Redlock(clients, { ttlMs: 10_000 });

// Acquire, work, release.
const lock = await redlock.acquire('orders:42');
try {
  console.log(`holding orders:42 for ${lock.validityMs} ms more`);
} finally {
  await lock.release();
}

// Or let the package extend the lock while the work runs; `signal` is aborted the
// moment the lock is lost (an extension found it taken, or its validity ran out).
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
