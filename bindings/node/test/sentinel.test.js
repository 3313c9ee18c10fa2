// Single-instance locks (N = 1) on the master a real Redis Sentinel names: over raw
// sockets (sentinelSocket) and through the user's ioredis client configured with
// `sentinels`. Master on 7276 (scripts/redis-nodes.sh), its replica on 7277 and the
// Sentinel on 7278 (redis-server processes started here); nothing listens on 7279.
// 7235 and 7236 are hanging Sentinels: listening sockets of this test that accept a
// connection and never answer; 7237 one whose TLS handshake takes 300 ms before it stops
// answering. A master with a password on 7238, its own Sentinel (with the master's
// password, and one of its own) on 7239.
// The last test fails the master over to the replica and follows it.

import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import Redis from 'ioredis';
import { createCluster, createSentinel } from 'redis';

import { InvalidArgumentError, LockHeldError, NodesFailingError, Redlock, core, sentinelSocket } from '../index.js';
import { RedisNodes, redisCli, sleep } from './helpers.js';

const MASTER = 7276;
const REPLICA = 7277;
const SENTINEL = 7278;
const NOBODY = 7279;
const HANGING = [7235, 7236];
const SLOW_TLS = 7237;
const runtime = process.env.REDLOCK_RUNTIME ?? fileURLToPath(new URL('../../../.runtime', import.meta.url));

/** A redis-server process of this test (the replica, the Sentinel), stopped by stop(). */
function server(args) {
  const child = spawn('redis-server', args, { stdio: 'ignore' });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.once('error', () => {}); // no redis-server: the wait below fails with the reason
  return {
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

/** A server on `port` that accepts connections and never answers (a hung Sentinel). */
async function hangingServer(port) {
  const sockets = new Set();
  let accepted = 0;
  const server = net.createServer((socket) => {
    accepted += 1;
    sockets.add(socket);
    socket.on('error', () => {});
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  return {
    /** How many connections it accepted so far. */
    accepted: () => accepted,
    async stop() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/**
 * A Sentinel over TLS on `port` that takes `delayMs` to complete the handshake, then
 * never answers: connecting and answering each take part of its bound. Its certificate
 * is self-signed, made here with openssl into `dir`.
 */
async function slowTlsServer(port, delayMs, dir) {
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=127.0.0.1', '-days', '1',
    '-keyout', `${dir}/slow.key`, '-out', `${dir}/slow.crt`,
  ], { stdio: 'ignore' });
  const context = { key: readFileSync(`${dir}/slow.key`), cert: readFileSync(`${dir}/slow.crt`) };
  const sockets = new Set();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    socket.on('close', () => sockets.delete(socket));
    setTimeout(() => {
      if (socket.destroyed) return;
      const secure = new tls.TLSSocket(socket, { isServer: true, ...context });
      secure.on('error', () => {});
      sockets.add(secure);
    }, delayMs);
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  return {
    async stop() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** Polls `check()` (true when done) every 100 ms for up to `ms`. */
async function eventually(what, ms, check) {
  const until = Date.now() + ms;
  for (;;) {
    let last;
    try {
      if (check()) return;
    } catch (error) {
      last = error;
    }
    assert.ok(Date.now() < until, `${what}${last ? `: ${last.message}` : ''}`);
    await sleep(100);
  }
}

/** The master the Sentinel names for `service`, as `host:port`. */
function namedMaster(service = 'mymaster') {
  return redisCli(SENTINEL, 'SENTINEL', 'get-master-addr-by-name', service).trim().split('\n').join(':');
}

/**
 * Acquires `key`, trying again while the node fails: a new connection goes through the
 * Sentinel first, which a loaded machine may not finish within the first command's
 * node timeout.
 */
async function lockSoon(redlock, key) {
  for (let tries = 0; ; tries++) {
    const lock = await redlock.acquire(key).catch((error) => error);
    if (!(lock instanceof NodesFailingError) || tries >= 50) {
      if (lock instanceof Error) throw lock;
      return lock;
    }
    await sleep(50);
  }
}

describe('Sentinel: a single-instance lock on the master the Sentinels name', () => {
  const master = new RedisNodes(MASTER, 1);
  let replica;
  let sentinel;
  const hanging = [];
  let slowTls;
  const made = [];
  const make = (clients, options) => {
    const redlock = new Redlock(clients, options);
    made.push(redlock);
    return redlock;
  };
  const ioredisClients = [];
  const ioredisSentinel = (options = {}) => {
    const client = new Redis({ sentinels: [{ host: '127.0.0.1', port: SENTINEL }], name: 'mymaster', ...options });
    client.on('error', () => {}); // an unreachable Sentinel: the lock's error says it
    ioredisClients.push(client);
    return client;
  };
  const get = (port, key) => redisCli(port, 'GET', key).trim();

  before(async () => {
    master.start();
    const dir = `${runtime}/sentinel-${SENTINEL}`;
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    replica = server([
      '--port', String(REPLICA), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
      '--dir', dir, '--replicaof', '127.0.0.1', String(MASTER),
    ]);
    await eventually('the replica did not sync', 10_000, () =>
      /master_link_status:up/.test(redisCli(REPLICA, 'INFO', 'replication')),
    );
    // Started after the replica is in sync, the Sentinel's first look at the master lists it.
    writeFileSync(
      `${dir}/sentinel.conf`,
      `port ${SENTINEL}\nbind 127.0.0.1\ndir ${dir}\nsentinel monitor mymaster 127.0.0.1 ${MASTER} 1\n` +
        'sentinel down-after-milliseconds mymaster 2000\nsentinel failover-timeout mymaster 5000\n',
    );
    sentinel = server([`${dir}/sentinel.conf`, '--sentinel']);
    await eventually('the Sentinel did not name the master', 10_000, () => namedMaster() === `127.0.0.1:${MASTER}`);
    for (const port of HANGING) hanging.push(await hangingServer(port));
    slowTls = await slowTlsServer(SLOW_TLS, 300, dir);
  });

  after(async () => {
    for (const redlock of made) redlock.close();
    for (const client of ioredisClients) client.disconnect();
    for (const server of hanging) await server.stop();
    await slowTls?.stop();
    await sentinel?.stop();
    await replica?.stop();
    master.stop();
  });

  test('raw sockets: the lock is written on the named master; a second client is refused; release', async () => {
    const sentinels = [`redis://127.0.0.1:${NOBODY}`, `redis://127.0.0.1:${SENTINEL}`];
    // The README's sample (the first Sentinel is not reachable: the next one is asked).
    const redlock = new Redlock([sentinelSocket({ sentinels, name: 'mymaster' })], { ttlMs: 10_000 });
    made.push(redlock);
    assert.deepEqual(redlock.nodes, ['sentinel master mymaster']);
    const lock = await lockSoon(redlock, 'sentinel:raw');
    assert.equal(get(MASTER, 'sentinel:raw'), lock.token);
    // A node timeout a new connection through the Sentinel meets on a loaded machine.
    const other = make([sentinelSocket({ sentinels, name: 'mymaster' })], { ttlMs: 10_000, attempts: 1, nodeTimeoutMs: 1000 });
    await assert.rejects(other.acquire('sentinel:raw'), LockHeldError);
    await lock.release();
    assert.equal(get(MASTER, 'sentinel:raw'), '');
  });

  test("raw sockets: one Sentinel's bound and the node's connect timeout are the core's", () => {
    const { sentinelQueryTimeoutDefaultMs: queryMs, connectTimeoutDefaultMs: connectMs } = core.defaults();
    const three = [`127.0.0.1:${HANGING[0]}`, `127.0.0.1:${HANGING[1]}`, `127.0.0.1:${SENTINEL}`];
    const byDefault = sentinelSocket({ sentinels: three, name: 'mymaster' });
    assert.equal(byDefault.connectTimeoutMs, core.sentinelConnectTimeoutMs(3, queryMs, connectMs));
    assert.equal(byDefault.connectTimeoutMs, 3 * 500 + 2000);
    const bounded = sentinelSocket({ sentinels: three.slice(1), name: 'mymaster', sentinelTimeoutMs: 250 });
    assert.equal(bounded.connectTimeoutMs, 2 * 250 + 2000);
    // Each Redlock's link gets it: the transport carries it.
    assert.equal(bounded.createTransport().connectTimeoutMs, 2 * 250 + 2000);
  });

  // Hanging Sentinels in front of the working one: each is given the core's default bound
  // (500 ms), then skipped, and the link's connect timeout leaves time for all of them.
  // Before, one Sentinel had 1000 ms and the whole attempt 2000 ms: two hanging ones
  // used it up and the working one was never asked.
  for (const count of [1, 2]) {
    test(`raw sockets: ${count} hanging Sentinel(s) first, the next one is asked and the lock taken in time`, async () => {
      const sentinels = [...HANGING.slice(0, count).map((port) => `127.0.0.1:${port}`), `127.0.0.1:${SENTINEL}`];
      const before = hanging.map((server) => server.accepted());
      const started = Date.now();
      // One attempt, and a node timeout longer than the whole lookup: the lock is taken
      // on the first connection or not at all.
      const redlock = make([sentinelSocket({ sentinels, name: 'mymaster' })], {
        ttlMs: 30_000,
        attempts: 1,
        nodeTimeoutMs: 5000,
      });
      const key = `sentinel:hanging:${count}`;
      const lock = await redlock.acquire(key);
      const elapsed = Date.now() - started;
      assert.equal(get(MASTER, key), lock.token);
      // Each hanging Sentinel was connected to, and waited for (500 ms each) ...
      for (let i = 0; i < count; i++) assert.ok(hanging[i].accepted() > before[i], `hanging Sentinel ${i} was asked`);
      assert.ok(elapsed >= count * 500 - 50, `took ${elapsed} ms: the hanging Sentinels were not waited for`);
      // ... and no longer: under 2 s for one, 2.5 s for two (the working one answers at once).
      const bound = count === 1 ? 2000 : 2500;
      assert.ok(elapsed < bound, `took ${elapsed} ms, over ${bound} ms`);
      await lock.release();
      assert.equal(get(MASTER, key), '');
    });
  }

  // One bound covers a Sentinel's connecting and answering together: one that takes
  // 300 ms to connect (its TLS handshake) and then never answers is skipped 500 ms after
  // it was first asked, not 800 ms (300 ms to connect, then 500 ms more to answer).
  test('raw sockets: a Sentinel slow to connect and then silent is given one bound in all', async () => {
    const slow = { host: '127.0.0.1', port: SLOW_TLS, tls: { rejectUnauthorized: false } };
    const redlock = make([sentinelSocket({ sentinels: [slow, `127.0.0.1:${SENTINEL}`], name: 'mymaster' })], {
      ttlMs: 30_000,
      attempts: 1,
      nodeTimeoutMs: 5000,
    });
    const started = Date.now();
    const lock = await redlock.acquire('sentinel:slow-tls');
    const elapsed = Date.now() - started;
    assert.ok(elapsed >= 450, `took ${elapsed} ms: the slow Sentinel was not waited for`);
    assert.ok(elapsed < 750, `took ${elapsed} ms: connecting and answering each had the whole bound`);
    await lock.release();
  });

  test('ioredis with sentinels: the same through the user client', async () => {
    // The README's sample.
    const client = new Redis({ sentinels: [{ host: '127.0.0.1', port: SENTINEL }], name: 'mymaster' });
    const redlock = new Redlock([client], { ttlMs: 10_000 });
    ioredisClients.push(client);
    made.push(redlock);
    assert.deepEqual(redlock.nodes, ['sentinel master mymaster']);
    const lock = await lockSoon(redlock, 'sentinel:io');
    assert.equal(get(MASTER, 'sentinel:io'), lock.token);
    const other = make([ioredisSentinel()], { ttlMs: 10_000, attempts: 1, nodeTimeoutMs: 1000 });
    await assert.rejects(other.acquire('sentinel:io'), LockHeldError);
    await lock.release();
    assert.equal(get(MASTER, 'sentinel:io'), '');
  });

  test('no Sentinel reachable, or no such service: the node fails with that cause', async () => {
    const unreachable = make([sentinelSocket({ sentinels: [`127.0.0.1:${NOBODY}`], name: 'mymaster' })], {
      ttlMs: 10_000,
      attempts: 1,
      nodeTimeoutMs: 1000,
    });
    let error = await unreachable.acquire('sentinel:x').then(() => assert.fail('locked'), (e) => e);
    assert.ok(error instanceof NodesFailingError, String(error));
    assert.equal(error.nodes[0].cause, 'refused', JSON.stringify(error.nodes));
    assert.match(error.nodes[0].error, /no Sentinel reachable/, JSON.stringify(error.nodes));

    const unknown = make([sentinelSocket({ sentinels: [`127.0.0.1:${SENTINEL}`], name: 'nosuchmaster' })], {
      ttlMs: 10_000,
      attempts: 1,
      nodeTimeoutMs: 1000,
    });
    error = await unknown.acquire('sentinel:x').then(() => assert.fail('locked'), (e) => e);
    assert.ok(error instanceof NodesFailingError, String(error));
    assert.match(error.nodes[0].error, /no master named "nosuchmaster"/, JSON.stringify(error.nodes));

    // Through ioredis: its own text (and its Sentinel's answer), in the same error class,
    // once it has asked every Sentinel.
    const cases = [
      [{ sentinels: [{ host: '127.0.0.1', port: NOBODY }] }, 'connection', /All sentinels are unreachable.*failed to connect to sentinel 127\.0\.0\.1:7279/],
      [{ name: 'nosuchmaster' }, 'connection', /All sentinels are unreachable.*No such master with that name/],
    ];
    for (const [options, cause, text] of cases) {
      const client = ioredisSentinel(options);
      await new Promise((resolve) => client.once('error', resolve));
      const redlock = make([client], { ttlMs: 10_000, attempts: 1 });
      error = await redlock.acquire('sentinel:x').then(() => assert.fail('locked'), (e) => e);
      assert.ok(error instanceof NodesFailingError, `${JSON.stringify(options)}: ${error}`);
      assert.equal(error.nodes[0].cause, cause, JSON.stringify(error.nodes));
      assert.match(error.nodes[0].error, text, JSON.stringify(error.nodes));
    }
    assert.equal(get(MASTER, 'sentinel:x'), '');
  });

  test("node-redis's Sentinel, ioredis Sentinel clients of a replica and cluster clients are refused", () => {
    const nodeRedis = createSentinel({ name: 'mymaster', sentinelRootNodes: [{ host: '127.0.0.1', port: SENTINEL }] });
    assert.throws(() => new Redlock([nodeRedis]), (e) => e instanceof InvalidArgumentError && /createSentinel/.test(e.message));
    const replicaClient = new Redis({
      sentinels: [{ host: '127.0.0.1', port: SENTINEL }],
      name: 'mymaster',
      role: 'slave',
      lazyConnect: true,
    });
    assert.throws(() => new Redlock([replicaClient]), (e) => e instanceof InvalidArgumentError && /role "slave"/.test(e.message));
    replicaClient.disconnect();
    const cluster = new Redis.Cluster([{ host: '127.0.0.1', port: MASTER }], { lazyConnect: true });
    assert.throws(() => new Redlock([cluster]), (e) => e instanceof InvalidArgumentError && /Cluster/.test(e.message));
    cluster.disconnect();
    const nodeRedisCluster = createCluster({ rootNodes: [{ url: `redis://127.0.0.1:${MASTER}` }] });
    assert.throws(() => new Redlock([nodeRedisCluster]), (e) => e instanceof InvalidArgumentError && /Cluster/.test(e.message));
  });

  test('after a failover the next locks go to the new master', async () => {
    const raw = make([sentinelSocket({ sentinels: [`redis://127.0.0.1:${SENTINEL}`], name: 'mymaster' })], {
      ttlMs: 10_000,
      attempts: 1,
    });
    const io = make([ioredisSentinel()], { ttlMs: 10_000, attempts: 1 });
    // Both connected to the first master.
    await (await lockSoon(raw, 'failover:warm')).release();
    await (await lockSoon(io, 'failover:warm')).release();

    await eventually('SENTINEL FAILOVER was refused', 15_000, () => redisCli(SENTINEL, 'SENTINEL', 'FAILOVER', 'mymaster').trim() === 'OK');
    await eventually('the Sentinel did not name the replica', 15_000, () => namedMaster() === `127.0.0.1:${REPLICA}`);

    // The Sentinel turns the old master into a replica and closes its clients when it next
    // looks at it (up to 10 s later; until then the old master still takes writes, the
    // split brain of docs/safety.md). Do now what it will do: each link then reconnects,
    // asks again and reaches the new master.
    redisCli(MASTER, 'REPLICAOF', '127.0.0.1', String(REPLICA));
    redisCli(MASTER, 'CLIENT', 'KILL', 'TYPE', 'normal');
    for (const [name, redlock] of [['raw', raw], ['ioredis', io]]) {
      const key = `failover:${name}`;
      const until = Date.now() + 15_000;
      for (;;) {
        const lock = await redlock.acquire(key).catch((error) => error);
        if (!(lock instanceof Error)) {
          const onNewMaster = get(REPLICA, key) === lock.token;
          await lock.release();
          if (onNewMaster) {
            assert.equal(get(REPLICA, key), '', `${name}: released on the new master`);
            break;
          }
        }
        assert.ok(Date.now() < until, `${name}: no lock on the new master (${lock})`);
        await sleep(100);
      }
    }
  });
});

describe('Sentinel over raw sockets: a master with a password', () => {
  const PASSWORD_MASTER = 7238;
  const PASSWORD_SENTINEL = 7239;
  const master = new RedisNodes(PASSWORD_MASTER, 1, ['--requirepass', 'master-secret']);
  let sentinel;
  let masterUrl;

  before(async () => {
    [masterUrl] = master.start();
    const dir = `${runtime}/sentinel-${PASSWORD_SENTINEL}`;
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      `${dir}/sentinel.conf`,
      `port ${PASSWORD_SENTINEL}\nbind 127.0.0.1\ndir ${dir}\n` +
        `sentinel monitor mymaster 127.0.0.1 ${PASSWORD_MASTER} 1\nsentinel auth-pass mymaster master-secret\n` +
        'requirepass sentinel-secret\n',
    );
    sentinel = server([`${dir}/sentinel.conf`, '--sentinel']);
    await eventually('the Sentinel did not name the master', 10_000, () =>
      redisCli(PASSWORD_SENTINEL, '-a', 'sentinel-secret', '--no-auth-warning', 'SENTINEL', 'get-master-addr-by-name', 'mymaster').includes(
        String(PASSWORD_MASTER),
      ),
    );
  });

  after(async () => {
    await sentinel?.stop();
    master.stop();
  });

  test('the Sentinel and the master get AUTH (and the master SELECT) first; without the password the node fails with auth', async () => {
    const sentinels = [`redis://:sentinel-secret@127.0.0.1:${PASSWORD_SENTINEL}`];
    const options = { ttlMs: 30_000, attempts: 1, nodeTimeoutMs: 3000 };
    const redlock = new Redlock([sentinelSocket({ sentinels, name: 'mymaster', password: 'master-secret', db: 4 })], options);
    const check = new Redis(`${masterUrl}/4`);
    try {
      const lock = await lockSoon(redlock, 'sentinel:password');
      assert.equal(await check.get('sentinel:password'), lock.token);
      await lock.release();
      assert.equal(await check.get('sentinel:password'), null);
    } finally {
      redlock.close();
      check.disconnect();
    }
    const without = new Redlock([sentinelSocket({ sentinels, name: 'mymaster' })], options);
    try {
      const error = await without.acquire('sentinel:password').then(
        () => assert.fail('locked on a master with a password, without it'),
        (e) => e,
      );
      assert.ok(error instanceof NodesFailingError, String(error));
      assert.equal(error.nodes[0].cause, 'auth', JSON.stringify(error.nodes[0]));
      assert.match(error.nodes[0].error, /ROLE answered NOAUTH/);
    } finally {
      without.close();
    }
    const wrong = new Redlock([sentinelSocket({ sentinels, name: 'mymaster', password: 'wrong' })], options);
    try {
      const error = await wrong.acquire('sentinel:password').then(
        () => assert.fail('locked with a wrong password'),
        (e) => e,
      );
      assert.equal(error.nodes[0].cause, 'auth', JSON.stringify(error.nodes[0]));
    } finally {
      wrong.close();
    }
    // The Sentinel without its password: it answers NOAUTH, so it names no master.
    const unnamed = new Redlock(
      [sentinelSocket({ sentinels: [`127.0.0.1:${PASSWORD_SENTINEL}`], name: 'mymaster', password: 'master-secret' })],
      options,
    );
    try {
      const error = await unnamed.acquire('sentinel:password').then(
        () => assert.fail('locked through a Sentinel that refused us'),
        (e) => e,
      );
      assert.match(error.nodes[0].error, /NOAUTH/, JSON.stringify(error.nodes[0]));
    } finally {
      unnamed.close();
    }
    assert.throws(() => sentinelSocket({ sentinels, name: 'mymaster', db: 1.5 }), /database/);
  });
});
