// The cost of the core's decisions through WebAssembly, without I/O: one N = 5
// acquire + release cycle with every node answering at once, building every command
// and polling every output, as core/benches/cycle.rs measures natively. Then the whole
// driver without I/O: acquire + release through a Redlock whose five transports answer
// each command on the next microtask, which is what this package adds to a lock cycle
// on top of the client library and the network.
//
//   node bench/cycle.js            (after `cargo bench -p redlock-core --bench cycle`,
//                                   the native figure is read from target/criterion/)

import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';

import { Bench } from 'tinybench';

import { Redlock, core } from '../index.js';

const OK = { type: 'ok' };
const ONE = { type: 'integer', value: 1 };

/** Polls `op` until empty; collects sends and returns the outcome, if any. */
function poll(op, sends) {
  let outcome;
  for (let output = op.pollOutput(); output !== undefined; output = op.pollOutput()) {
    if (output.type === 'send') sends.push(output);
    else if (output.type === 'outcome') outcome = output.outcome;
  }
  return outcome;
}

function cycle(client) {
  const acquire = client.acquire('orders:42', 1_000);
  const sends = [];
  poll(acquire, sends);
  let lease;
  for (const command of sends) {
    acquire.handleReply(command.requestId, OK, 1_200);
    const outcome = poll(acquire, []);
    if (outcome?.kind === 'acquired') lease = outcome.lease;
  }
  acquire.free();
  const release = client.release(lease, 2_000);
  sends.length = 0;
  poll(release, sends);
  let released = 0;
  for (const command of sends) {
    release.handleReply(command.requestId, ONE, 2_200);
    const outcome = poll(release, []);
    if (outcome?.kind === 'released') released = outcome.released;
  }
  release.free();
  lease.free();
  return released;
}

const config = new core.Config({ nodes: 5, ttlMs: 10_000 });
const seeded = new core.Redlock(config, new Uint8Array(32).fill(42));
const os = new core.Redlock(config);
// The release decides once a quorum (3 of 5) confirmed; the last replies are late ones.
if (cycle(seeded) !== 3 || cycle(os) !== 3) throw new Error('the cycle did not release at the quorum');

const bench = new Bench({ time: 3000, warmupTime: 500 });
bench
  .add('wasm acquire_release_n5_seeded', () => cycle(seeded))
  .add('wasm acquire_release_n5_os_random', () => cycle(os));
await bench.run();

const native = (name) => {
  const file = new URL(`../../../target/criterion/core/${name}/new/estimates.json`, import.meta.url);
  if (!existsSync(file)) return undefined;
  return JSON.parse(readFileSync(file, 'utf8')).median.point_estimate / 1000; // ns -> us
};

console.log(`N = 5 acquire + release decision cycle, no I/O (Node ${process.version})`);
for (const task of bench.tasks) {
  const { latency } = task.result;
  const name = task.name.replace('wasm ', '');
  const rust = native(name);
  const ratio = rust === undefined ? '(run cargo bench -p redlock-core --bench cycle for the native figure)' : `native ${rust.toFixed(2)} us, ratio ${(latency.p50 * 1000 / rust).toFixed(1)}x`;
  console.log(
    `  ${task.name}: p50 ${(latency.p50 * 1000).toFixed(2)} us, mean ${(latency.mean * 1000).toFixed(2)} us, ` +
      `p99 ${(latency.p99 * 1000).toFixed(2)} us over ${latency.samplesCount} cycles; ${ratio}`,
  );
}

/**
 * A node that answers every command on the next microtask, with what a Redis node would
 * answer a lock cycle: SCRIPT LOAD its script's SHA-1, SET OK, the release script a
 * key deleted and nobody notified.
 */
class InstantTransport {
  resp = false;

  constructor(index) {
    this.label = `instant-${index}`;
    this.address = `instant-${index}.invalid:6379`;
  }

  attach(node) {
    this.node = node;
  }

  connect() {
    queueMicrotask(() => this.node.connected());
  }

  write(id, args) {
    const name = String(args[0]).toUpperCase();
    const value =
      name === 'SET' ? 'OK' : name === 'SCRIPT' ? createHash('sha1').update(String(args[2])).digest('hex') : 1;
    queueMicrotask(() => this.node.value(id, value));
  }

  close() {}

  detach() {}
}

const redlock = new Redlock(
  [0, 1, 2, 3, 4].map((index) => ({ createTransport: () => new InstantTransport(index) })),
  { ttlMs: 10_000 },
);
const driverCycle = async () => {
  const lock = await redlock.acquire('bench:driver');
  const released = await lock.release();
  if (released.released < 3) throw new Error('the driver cycle did not release at the quorum');
};
await driverCycle();
const driverBench = new Bench({ time: 3000, warmupTime: 500 });
driverBench.add('driver acquire + release, 5 instant nodes', driverCycle);
await driverBench.run();
redlock.close();
for (const task of driverBench.tasks) {
  const { latency } = task.result;
  console.log(
    `  ${task.name}: p50 ${(latency.p50 * 1000).toFixed(2)} us, mean ${(latency.mean * 1000).toFixed(2)} us, ` +
      `p99 ${(latency.p99 * 1000).toFixed(2)} us over ${latency.samplesCount} cycles`,
  );
}
