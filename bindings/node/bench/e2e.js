// End-to-end lock latency against 5 real local Redis nodes, side by side in one run:
// redlock-core (over ioredis, node-redis and raw sockets) and node-redlock (the npm
// `redlock` package, 5.0.0-beta.2 and 4.2.0) on the same nodes, healthy and then with
// one node frozen (SIGSTOP). With a frozen node every ioredis client gets a 50 ms
// command timeout, as node-redlock needs to return at all.
//
// The healthy run interleaves the contenders (one acquire + release pair each, in
// turn, the order rotating every round): on a machine shared with other work the load
// changes from second to second, and contenders measured one after the other would
// compare different loads. The floors (the same commands sent straight through each
// client, all nodes at once, no lock logic) show what the client and the nodes cost.
//
//   node bench/e2e.js            (nodes on ports 7270..7274, started and stopped here)

import { createClient } from 'redis';
import { Redis } from 'ioredis';
import NodeRedlock5 from 'redlock';
import NodeRedlock4 from 'redlock4';
import { Bench } from 'tinybench';

import { Redlock, core, netSocket } from '../index.js';
import { RedisNodes } from '../test/helpers.js';

const nodes = new RedisNodes(7270);
const TTL_MS = 10_000;

/**
 * Time spent inside the ioredis clients' `sendCommand` (building a command and writing
 * it to the socket, synchronously), in ms: every contender over ioredis pays it, so
 * what is left of its CPU per pair is what the lock library itself costs.
 */
let inIoredisMs = 0;

function timeSendCommand(client) {
  const send = client.sendCommand;
  client.sendCommand = function (...args) {
    const start = performance.now();
    try {
      return send.apply(this, args);
    } finally {
      inIoredisMs += performance.now() - start;
    }
  };
}

async function ioredisClients(urls, options = {}) {
  const clients = urls.map((url) => new Redis(url, options));
  clients.forEach(timeSendCommand);
  clients.forEach((client) => client.on('error', () => {}));
  await Promise.all(clients.map((client) => new Promise((resolve) => client.once('ready', resolve))));
  return clients;
}

/** The floor: SET NX PX on 5 nodes, then the release script on 5 nodes, all at once. */
function ioredisFloor(clients) {
  const release = core.scripts().release;
  let n = 0;
  return async () => {
    const key = 'bench:floor';
    const token = `floor-${n++}`;
    await Promise.all(clients.map((c) => c.set(key, token, 'PX', TTL_MS, 'NX').catch(() => null)));
    await Promise.all(
      clients.map((c) =>
        c.evalsha(release.sha1, 1, key, token).catch(() => c.eval(release.text, 1, key, token)).catch(() => null),
      ),
    );
  };
}

// Without node-redis 5+'s per-command timeout (a timer and an AbortSignal per command),
// as redlock-core's node-redis transport sends its commands.
const NO_TIMEOUT = { timeout: 0 };

/** The floor through node-redis: SET NX PX on 5 nodes, then the release script, all at once. */
function nodeRedisFloor(clients) {
  const release = core.scripts().release;
  const ttl = String(TTL_MS);
  let n = 0;
  return async () => {
    const key = 'bench:floor-node-redis';
    const token = `floor-${n++}`;
    await Promise.all(clients.map((c) => c.sendCommand(['SET', key, token, 'PX', ttl, 'NX'], NO_TIMEOUT).catch(() => null)));
    await Promise.all(
      clients.map((c) =>
        c
          .sendCommand(['EVALSHA', release.sha1, '1', key, token], NO_TIMEOUT)
          .catch(() => c.sendCommand(['EVAL', release.text, '1', key, token]))
          .catch(() => null),
      ),
    );
  };
}

/** Every client, connected while all nodes answer (a frozen node never finishes a handshake). */
async function connect(urls) {
  return {
    io: await ioredisClients(urls),
    // With a frozen node, clients without their own timeout would wait forever for it:
    // node-redlock (and the floor) need one; redlock-core does not, but gets the same.
    ioTimeout: await ioredisClients(urls, { commandTimeout: 50 }),
    nodeRedis: await Promise.all(urls.map((url) => createClient({ url }).connect())),
    raw: urls.map((url) => netSocket(url)),
  };
}

async function disconnect({ io, ioTimeout, nodeRedis, raw }) {
  for (const redlock of made) redlock.close();
  [...io, ...ioTimeout].forEach((c) => c.disconnect());
  await Promise.all(nodeRedis.map((c) => c.destroy?.() ?? c.disconnect()));
  raw.forEach((c) => c.close());
}

// Every Redlock made, closed at the end: an open one keeps reconnecting its links to
// clients that were disconnected, and the process would never exit.
const made = [];

function contenders(clients, frozen) {
  const io = frozen ? clients.ioTimeout : clients.io;
  const ours = (nodeClients) => {
    const redlock = new Redlock(nodeClients, { ttlMs: TTL_MS, nodeTimeoutMs: 50 });
    made.push(redlock);
    return async () => {
      const lock = await redlock.acquire('bench:core');
      await lock.release();
    };
  };
  const v5 = new NodeRedlock5(io, { retryCount: 0 });
  const v4 = new NodeRedlock4(io, { retryCount: 0 });
  const list = [
    ['redlock-core + ioredis', ours(io)],
    ['redlock-core + node-redis', ours(clients.nodeRedis)],
    ['redlock-core + raw sockets', ours(clients.raw)],
    ['node-redlock 5.0.0-beta.2 + ioredis', async () => {
      const lock = await v5.acquire(['bench:v5'], TTL_MS);
      await lock.release();
    }],
    ['node-redlock 4.2.0 + ioredis', async () => {
      const lock = await v4.lock('bench:v4', TTL_MS);
      await lock.unlock();
    }],
    ['floor: ioredis SET NX PX + release script, Promise.all', ioredisFloor(io)],
  ];
  if (!frozen) list.push(['floor: node-redis, the same', nodeRedisFloor(clients.nodeRedis)]);
  if (frozen) {
    // The core's deadlines hold without any client timeout.
    list.splice(1, 0, ['redlock-core + ioredis without command timeout', ours(clients.io)]);
  }
  return list;
}

function report(title, tasks) {
  console.log(`\n${title}`);
  console.log('  p50 / p75 / p99 / mean, microseconds per acquire + release pair');
  if (tasks.some((task) => task.cpuUs !== undefined)) {
    console.log("  (CPU: this process's user + system time while the pair ran, mean; in ioredis: of the");
    console.log('  elapsed time, the part spent inside the ioredis clients\' sendCommand, mean)');
  }
  for (const task of tasks) {
    const l = task.result?.latency;
    if (!l) {
      console.log(`  ${task.name}: failed: ${task.result?.error ?? 'no result'}`);
      continue;
    }
    const us = (ms) => Math.round(ms * 1000).toString().padStart(7);
    const details = [`${l.samplesCount} pairs`];
    if (task.cpuUs !== undefined) details.push(`CPU ${Math.round(task.cpuUs)} us per pair`);
    if (task.ioredisUs > 0) details.push(`in ioredis ${Math.round(task.ioredisUs)} us`);
    console.log(
      `  ${task.name.padEnd(52)} ${us(l.p50)} ${us(l.p75)} ${us(l.p99)} ${us(l.mean)}   (${details.join(', ')})`,
    );
  }
}

/** One node frozen: each contender in turn (tinybench), as a timeout dominates anyway. */
async function runFrozen(clients) {
  const bench = new Bench({ time: 3000, warmupTime: 200, iterations: 20, throws: true });
  for (const [name, fn] of contenders(clients, true)) bench.add(name, fn);
  await bench.run();
  return bench.tasks;
}

/** Healthy: every contender in turn, one pair each per round, the order rotating. */
async function runInterleaved(clients, ms = 6000, warmupRounds = 100) {
  const list = contenders(clients, false);
  const samples = list.map(() => []);
  const cpu = list.map(() => 0);
  const inIoredis = list.map(() => 0);
  for (let round = 0; round < warmupRounds; round++) for (const [, fn] of list) await fn();
  const until = performance.now() + ms;
  for (let round = 0; performance.now() < until; round++) {
    for (let i = 0; i < list.length; i++) {
      const k = (round + i) % list.length;
      const cpuStart = process.cpuUsage();
      const ioredisStart = inIoredisMs;
      const start = performance.now();
      await list[k][1]();
      samples[k].push(performance.now() - start);
      const used = process.cpuUsage(cpuStart);
      cpu[k] += used.user + used.system;
      inIoredis[k] += inIoredisMs - ioredisStart;
    }
  }
  return list.map(([name], k) => {
    const sorted = samples[k].sort((a, b) => a - b);
    const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
    const mean = sorted.reduce((sum, x) => sum + x, 0) / sorted.length;
    const cpuUs = cpu[k] / sorted.length;
    const ioredisUs = (inIoredis[k] * 1000) / sorted.length;
    return { name, cpuUs, ioredisUs, result: { latency: { p50: at(0.5), p75: at(0.75), p99: at(0.99), mean, samplesCount: sorted.length } } };
  });
}

// node-redlock 4.2 leaves some commands' rejections unhandled when a node times out.
let unhandled = 0;
process.on('unhandledRejection', () => {
  unhandled += 1;
});

const urls = nodes.start();
try {
  const clients = await connect(urls);
  try {
    console.log(`5 local Redis nodes, one client process, Node ${process.version}, TTL ${TTL_MS} ms`);
    report('healthy, interleaved', await runInterleaved(clients));
    nodes.pause(0);
    try {
      report('node 0 frozen (SIGSTOP); ioredis commandTimeout 50 ms; redlock-core node timeout 50 ms', await runFrozen(clients));
    } finally {
      nodes.resume(0);
    }
    if (unhandled > 0) console.log(`\n(${unhandled} promise rejections left unhandled by a contender)`);
  } finally {
    await disconnect(clients);
  }
} finally {
  nodes.stop();
}
