// Acquire + release with fencing against without, on the same 5 local Redis nodes in
// the same run: the pairs alternate (one fenced, one plain, ...), so load on the machine
// falls on both alike. Fencing costs one more round (the write-back) per acquisition.
//
//   node bench/fencing.js        (nodes on ports 7280..7284, started and stopped here)
//   REDLOCK_BENCH_PAIRS=5000 node bench/fencing.js

import { Redis } from 'ioredis';
import { createClient } from 'redis';

import { Redlock, netSocket } from '../index.js';
import { RedisNodes } from '../test/helpers.js';

const PAIRS = Number(process.env.REDLOCK_BENCH_PAIRS ?? 3000);
const WARM_UP = 300;
const nodes = new RedisNodes(7280);

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

async function measure(name, clients) {
  const plain = new Redlock(clients, { ttlMs: 10_000 });
  const fenced = new Redlock(clients, { ttlMs: 10_000, fencing: true });
  const cycle = async (redlock, resource) => {
    const started = performance.now();
    const lock = await redlock.acquire(resource);
    await lock.release();
    return performance.now() - started;
  };
  for (let i = 0; i < WARM_UP; i++) {
    await cycle(plain, 'bench:plain');
    await cycle(fenced, 'bench:fenced');
  }
  const times = { plain: [], fenced: [] };
  for (let i = 0; i < PAIRS; i++) {
    times.plain.push(await cycle(plain, 'bench:plain'));
    times.fenced.push(await cycle(fenced, 'bench:fenced'));
  }
  await plain.idle();
  plain.close();
  fenced.close();
  const stats = {};
  for (const [kind, list] of Object.entries(times)) {
    list.sort((a, b) => a - b);
    stats[kind] = { p50: percentile(list, 50), p99: percentile(list, 99) };
  }
  const us = (ms) => `${Math.round(ms * 1000)}`.padStart(6);
  console.log(
    `  ${name.padEnd(12)} unfenced p50 ${us(stats.plain.p50)} p99 ${us(stats.plain.p99)}   fenced p50 ${us(stats.fenced.p50)} p99 ${us(stats.fenced.p99)}   fenced/unfenced p50 ${(stats.fenced.p50 / stats.plain.p50).toFixed(2)}x`,
  );
}

const urls = nodes.start();
try {
  console.log(`acquire + release, fenced vs unfenced, 5 local Redis nodes, ${PAIRS} pairs each, Node ${process.version}`);
  console.log('  microseconds per acquire + release pair (target: fenced p50 <= 1.6x unfenced)');
  const io = urls.map((url) => new Redis(url));
  await Promise.all(io.map((client) => new Promise((resolve) => client.once('ready', resolve))));
  await measure('ioredis', io);
  io.forEach((client) => client.disconnect());
  const nodeRedis = await Promise.all(urls.map((url) => createClient({ url }).connect()));
  await measure('node-redis', nodeRedis);
  await Promise.all(nodeRedis.map((client) => client.quit()));
  const raw = urls.map((url) => netSocket(url));
  await measure('raw sockets', raw);
  raw.forEach((client) => client.close());
} finally {
  nodes.stop();
}
