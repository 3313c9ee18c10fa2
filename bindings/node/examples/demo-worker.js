// A worker for `make demo` (scripts/demo.sh): DEMO_ROUNDS increments of the shared
// counter file, each a read, a ~5 ms pause and a write, under the lock; one JSON line
// per acquisition appended to DEMO_STATS. Contends with the Rust workers for the same
// resource on the same nodes.
//
// With DEMO_FENCE set, locks carry fencing tokens and the counter is fenced: a write goes
// ahead only if the lock's token is above the one recorded in DEMO_FENCE, which then
// records it; a stale token exits with status 3. Each stats line then carries
// "fencing_token".
//
//   node examples/demo-worker.js ioredis|node-redis|raw

import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

import { Redis } from 'ioredis';
import { createClient } from 'redis';

import { Redlock, netSocket } from '../index.js';

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set (run this from scripts/demo.sh)`);
  return value;
};
const urls = env('REDLOCK_NODES').split(',');
const resource = env('DEMO_RESOURCE');
const counter = env('DEMO_COUNTER');
const stats = env('DEMO_STATS');
const rounds = Number(env('DEMO_ROUNDS'));
const kind = process.argv[2] ?? 'ioredis';
const fence = process.env.DEMO_FENCE || undefined;

// The counter's fencing check: the token must be above the last one it accepted.
function checkFence(token) {
  if (fence === undefined) return;
  const seen = Number(readFileSync(fence, 'utf8').trim() || '0');
  if (token === undefined || !(token > seen)) {
    process.stderr.write(`worker: stale fencing token ${token}, counter saw ${seen}\n`);
    process.exit(3);
  }
}

function recordFence(token) {
  if (fence !== undefined) writeFileSync(fence, `${token}\n`);
}

async function connect() {
  switch (kind) {
    case 'ioredis': {
      const clients = urls.map((url) => new Redis(url, { enableOfflineQueue: false, autoResendUnfulfilledCommands: false }));
      await Promise.all(clients.map((c) => new Promise((resolve) => c.once('ready', resolve))));
      return { clients, close: () => clients.forEach((c) => c.disconnect()) };
    }
    case 'node-redis': {
      const clients = await Promise.all(urls.map((url) => createClient({ url, disableOfflineQueue: true }).connect()));
      return { clients, close: () => Promise.all(clients.map((c) => c.quit())) };
    }
    case 'raw': {
      const clients = urls.map((url) => netSocket(url));
      return { clients, close: () => clients.forEach((c) => c.close()) };
    }
    default:
      throw new Error(`unknown client ${kind} (ioredis, node-redis, raw)`);
  }
}

const { clients, close } = await connect();
// Same settings as the Rust workers: keep retrying every ~10 ms until the lock is free.
const redlock = new Redlock(clients, {
  ttlMs: 5000,
  attempts: 100_000,
  retryDelayMs: 10,
  retryJitterMs: 8,
  fencing: fence !== undefined,
});
try {
  for (let round = 0; round < rounds; round++) {
    const started = performance.now();
    await redlock.using(resource, async (signal, lock) => {
      const acquireUs = Math.round((performance.now() - started) * 1000);
      const line = { event: 'acquired', attempts: lock.attempts, acquire_us: acquireUs };
      if (fence !== undefined) line.fencing_token = lock.fencingToken;
      appendFileSync(stats, `${JSON.stringify(line)}\n`);
      checkFence(lock.fencingToken);
      const value = Number(readFileSync(counter, 'utf8').trim());
      await sleep(5);
      signal.throwIfAborted();
      checkFence(lock.fencingToken);
      writeFileSync(counter, `${value + 1}\n`);
      recordFence(lock.fencingToken);
    });
  }
  await redlock.idle();
} finally {
  await close();
}
