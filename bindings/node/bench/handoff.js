// Hand-off between contenders for one lock, on 5 Redis nodes: C contenders (each with
// clients of its own, in this one process) loop acquire -> release as fast as they can,
// for a few seconds each, side by side in one run on the same nodes:
//
// - redlock-core with release notices (its default), waiting with acquire({ waitMs });
// - redlock-core without notices (`notices: false`: only the retry delay wakes a waiter);
// - node-redlock 5.0.0-beta.2 at its default settings (retryCount 10, retryDelay 200,
//   retryJitter 200); an acquisition that runs out of retries is called again.
//
// Every contender uses its library's default settings otherwise. Reported per run:
// acquisitions per second, and hand-offs per second (acquisitions by another client
// than the last holder); release-to-next-holder latency p50 / p99 (from the moment a
// holder starts releasing to the moment another client has the lock); and fairness:
// the longest single wait for the lock over the mean wait (every acquisition of every
// client), and the worst client's mean wait over the mean of the clients' mean waits.
// Also the mean attempts per acquisition, and how busy this one process was (all
// contenders share its event loop: near 100 %, the figures are its limit, not the
// nodes'). For scale, the latency of one uncontended acquisition on the same nodes.
//
//   node bench/handoff.js                              (5 nodes on ports 7290..7294, started here)
//   REDLOCK_BENCH_PORTS=7000,7001,7002,7003,7004 node bench/handoff.js   (nodes already running)
//   REDLOCK_BENCH_SECONDS=5 REDLOCK_BENCH_CONTENDERS=4,16 node bench/handoff.js
//
// Each run first warms up for REDLOCK_BENCH_WARMUP_SECONDS (0.5 s; 0 counts from the
// start): the same loop, nothing counted.

import { Redis } from 'ioredis';
import NodeRedlock5 from 'redlock';

import { Redlock } from '../index.js';
import { RedisNodes } from '../test/helpers.js';

const SECONDS = Number(process.env.REDLOCK_BENCH_SECONDS ?? 3);
const WARMUP_SECONDS = Number(process.env.REDLOCK_BENCH_WARMUP_SECONDS ?? 0.5);
const CONTENDERS = (process.env.REDLOCK_BENCH_CONTENDERS ?? '4,16').split(',').map(Number);
// REDLOCK_BENCH_ONLY=node-redlock (or redlock-core): only the libraries whose name starts so.
const ONLY = process.env.REDLOCK_BENCH_ONLY;
const TTL_MS = 10_000;
const WAIT_MS = 60_000;

// NaN for no samples (a run in which nobody handed the lock over): printed, not thrown.
const percentile = (sorted, p) =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
const mean = (list) => list.reduce((a, b) => a + b, 0) / list.length;

async function clientsFor(ports) {
  const clients = ports.map((port) => new Redis({ host: '127.0.0.1', port }));
  clients.forEach((client) => client.on('error', () => {}));
  await Promise.all(clients.map((client) => new Promise((resolve) => client.once('ready', resolve))));
  return clients;
}

/** Each library's acquire-then-release, as `lock()` resolving to `unlock()`. */
const LIBRARIES = {
  'redlock-core, notices': (clients) => {
    const redlock = new Redlock(clients, { ttlMs: TTL_MS });
    return {
      lock: async (resource) => {
        const lock = await redlock.acquire(resource, { waitMs: WAIT_MS });
        return { unlock: () => lock.release(), attempts: lock.attempts };
      },
      close: () => redlock.close(),
    };
  },
  'redlock-core, no notices': (clients) => {
    const redlock = new Redlock(clients, { ttlMs: TTL_MS, notices: false });
    return {
      lock: async (resource) => {
        const lock = await redlock.acquire(resource, { waitMs: WAIT_MS });
        return { unlock: () => lock.release(), attempts: lock.attempts };
      },
      close: () => redlock.close(),
    };
  },
  'node-redlock 5.0.0-beta.2': (clients) => {
    const redlock = new NodeRedlock5(clients);
    redlock.on('error', () => {});
    return {
      lock: async (resource) => {
        for (;;) {
          try {
            const lock = await redlock.acquire([resource], TTL_MS);
            return { unlock: () => lock.release(), attempts: lock.attempts.length };
          } catch (error) {
            // Out of retries: keep waiting, as a caller who needs the lock would.
            if (error?.name !== 'ExecutionError') throw error;
          }
        }
      },
      close: () => {},
    };
  },
};

async function run(ports, library, contenders) {
  const clientSets = await Promise.all(Array.from({ length: contenders }, () => clientsFor(ports)));
  const lockers = clientSets.map((clients) => LIBRARIES[library](clients));
  const resource = `bench:handoff:${library}:${contenders}`.replace(/[^a-z0-9:-]/gi, '-');
  const waits = lockers.map(() => []);
  const handOffs = [];
  let acquisitions = 0;
  let attempts = 0;
  let lastHolder;
  let lastReleaseStart;
  let holders = 0;
  let overlaps = 0;
  // The warm-up runs the same loop and counts nothing: the first waits of a cold process
  // measure its JIT compiling the code paths and its first connections, not the waiting.
  const measureFrom = performance.now() + WARMUP_SECONDS * 1000;
  const end = measureFrom + SECONDS * 1000;
  let cpuBefore;
  const warm = new Promise((resolve) => setTimeout(resolve, WARMUP_SECONDS * 1000)).then(() => {
    cpuBefore = process.cpuUsage();
  });
  await Promise.all(
    lockers.map(async (locker, index) => {
      while (performance.now() < end) {
        const asked = performance.now();
        const { unlock, attempts: tries } = await locker.lock(resource);
        const got = performance.now();
        holders += 1;
        if (holders > 1) overlaps += 1;
        if (asked >= measureFrom) {
          attempts += tries;
          waits[index].push(got - asked);
          acquisitions += 1;
          if (lastHolder !== undefined && lastHolder !== index) handOffs.push(got - lastReleaseStart);
        }
        lastHolder = index;
        holders -= 1;
        lastReleaseStart = performance.now();
        await unlock();
      }
    }),
  );
  await warm;
  const cpu = process.cpuUsage(cpuBefore);
  lockers.forEach((locker) => locker.close());
  clientSets.flat().forEach((client) => client.disconnect());
  const all = waits.flat();
  const clientMeans = waits.filter((w) => w.length > 0).map(mean);
  handOffs.sort((a, b) => a - b);
  return {
    acquisitions: acquisitions / SECONDS,
    attempts: attempts / acquisitions,
    cpu: (cpu.user + cpu.system) / 1000 / (SECONDS * 1000),
    rate: handOffs.length / SECONDS,
    p50: percentile(handOffs, 50),
    p99: percentile(handOffs, 99),
    fairness: Math.max(...all) / mean(all),
    p99Fairness: percentile([...all].sort((a, b) => a - b), 99) / mean(all),
    clientFairness: Math.max(...clientMeans) / mean(clientMeans),
    starved: waits.filter((w) => w.length === 0).length,
    overlaps,
  };
}

async function uncontended(ports) {
  const clients = await clientsFor(ports);
  const redlock = new Redlock(clients, { ttlMs: TTL_MS });
  const times = [];
  for (let i = 0; i < 1300; i++) {
    const started = performance.now();
    const lock = await redlock.acquire('bench:handoff:alone');
    if (i >= 300) times.push(performance.now() - started);
    await lock.release();
  }
  await redlock.idle();
  redlock.close();
  clients.forEach((client) => client.disconnect());
  times.sort((a, b) => a - b);
  return percentile(times, 50);
}

const given = process.env.REDLOCK_BENCH_PORTS;
const nodes = given ? undefined : new RedisNodes(7290);
const ports = given ? given.split(',').map(Number) : nodes.ports;
nodes?.start();
try {
  const alone = await uncontended(ports);
  console.log(`lock hand-off, ${ports.length} Redis nodes (ports ${ports.join(',')}), ${SECONDS} s per run after ${WARMUP_SECONDS} s of warm-up, Node ${process.version}`);
  console.log(`one uncontended acquisition (redlock-core + ioredis): p50 ${(alone * 1000).toFixed(0)} us`);
  console.log('contenders  library                     acquisitions/s  hand-offs/s  release->next p50 / p99 (ms)  longest/mean wait  p99/mean wait  worst client mean/mean  attempts per acquisition  CPU of this process');
  for (const contenders of CONTENDERS) {
    for (const library of Object.keys(LIBRARIES).filter((name) => !ONLY || name.startsWith(ONLY))) {
      const r = await run(ports, library, contenders);
      if (r.overlaps > 0) throw new Error(`${library}: two holders at once ${r.overlaps} times`);
      console.log(
        `${String(contenders).padStart(11)}  ${library.padEnd(26)}  ${r.acquisitions.toFixed(0).padStart(14)}  ${r.rate.toFixed(0).padStart(11)}  ${r.p50.toFixed(2).padStart(13)} / ${r.p99.toFixed(2).padEnd(13)}  ${r.fairness.toFixed(1).padStart(17)}  ${r.p99Fairness.toFixed(1).padStart(13)}  ${r.clientFairness.toFixed(1).padStart(22)}  ${r.attempts.toFixed(1).padStart(24)}  ${`${Math.round(r.cpu * 100)} %`.padStart(18)}${r.starved ? `  (${r.starved} never got it)` : ''}`,
      );
    }
  }
} finally {
  nodes?.stop();
}
