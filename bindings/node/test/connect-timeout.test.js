// The connect timeout of every connection the package opens is the link's (and the core
// Subscriptions') to enforce: each link gets the user's client's connect timeout when it
// has one, else the core's default, and a transport gives up the attempt the link (or
// the Subscriptions) closes. No Redis needed: the nodes are fakes, or a server in this
// process that accepts connections and never answers.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import Redis from 'ioredis';
import { createClient } from 'redis';
import { createClient as createClient4 } from 'redis4';

import { InvalidArgumentError, NodesFailingError, Redlock, StreamTransport, core, netSocket } from '../index.js';
import { toTransport } from '../src/clients.js';
import { Driver } from '../src/driver.js';
import { silentServer } from './helpers.js';

/** The links' connect timeouts (ms) of a driver made as a Redlock makes it, for `clients`. */
function linkTimeouts(clients) {
  const driver = new Driver(clients.map((client, index) => toTransport(client, index)));
  try {
    return driver.nodes.map((node) => node.connectTimeoutMs);
  } finally {
    driver.close();
    driver.free();
  }
}

test("each link gets its client's connect timeout, else the core's", () => {
  const coreMs = core.defaults().connectTimeoutDefaultMs;
  const ioredis = new Redis({ lazyConnect: true, port: 7201, connectTimeout: 750 });
  const ioredisDefault = new Redis({ lazyConnect: true, port: 7202 });
  const ioredisNone = new Redis({ lazyConnect: true, port: 7203, connectTimeout: 0 });
  const nodeRedis = createClient({ socket: { port: 7204, connectTimeout: 1500 } });
  const nodeRedisDefault = createClient({ socket: { port: 7205 } });
  const nodeRedis4 = createClient4({ socket: { port: 7206, connectTimeout: 2500 } });
  const sockets = netSocket('127.0.0.1:7207');
  const connection = { send: async () => ({ type: 'ok' }) };
  try {
    const clients = [ioredis, ioredisDefault, ioredisNone, nodeRedis, nodeRedisDefault, nodeRedis4, sockets, connection];
    assert.deepEqual(linkTimeouts(clients), [
      750, // ioredis connectTimeout
      10_000, // ioredis's own default
      coreMs, // connectTimeout: 0, no limit in ioredis: the core's
      1500, // node-redis socket.connectTimeout
      5000, // node-redis's own default
      2500, // node-redis v4
      coreMs, // raw sockets set none
      coreMs, // a connection of the caller's own
    ]);
    const custom = Object.assign(new StreamTransport(async () => new Promise(() => {})), { connectTimeoutMs: 321 });
    assert.deepEqual(linkTimeouts([{ createTransport: () => custom }]), [321]);
  } finally {
    ioredis.disconnect();
    ioredisDefault.disconnect();
    ioredisNone.disconnect();
    sockets.close();
  }
});

test('a transport with a connect timeout that is not a positive number is refused', () => {
  for (const bad of [0, -5, NaN, Infinity, '300']) {
    const transport = Object.assign(new StreamTransport(async () => new Promise(() => {})), { connectTimeoutMs: bad });
    assert.throws(
      () => new Redlock([{ createTransport: () => transport }]),
      (error) =>
        error instanceof InvalidArgumentError &&
        /node 0: connectTimeoutMs must be a positive number of milliseconds/.test(error.message),
      String(bad),
    );
  }
});

/**
 * A StreamTransport whose connections never open (the opener keeps every attempt
 * pending until its signal aborts), with `connectTimeoutMs`; `attempts` records each
 * opening: when it started and when it was given up.
 */
function silentNode(connectTimeoutMs) {
  const attempts = [];
  const open = ({ signal }) =>
    new Promise((_, reject) => {
      const attempt = { started: performance.now(), abandoned: undefined };
      attempts.push(attempt);
      signal.addEventListener('abort', () => {
        attempt.abandoned = performance.now();
        reject(new Error('given up'));
      });
    });
  const transport = () => new StreamTransport(open, { label: 'silent', address: 'silent.invalid:1' });
  return { attempts, node: { createTransport: () => Object.assign(transport(), { connectTimeoutMs }) } };
}

test("a link gives up an attempt at its client's connect timeout: the transport aborts it", async () => {
  const { attempts, node } = silentNode(300);
  // A node timeout well past the connect timeout: the failure is the link's, not the command's.
  const redlock = new Redlock([node], { ttlMs: 10_000, attempts: 1, nodeTimeoutMs: 2500, notices: false });
  try {
    const started = performance.now();
    const error = await redlock.acquire('r').then(
      () => assert.fail('locked on a node that never opens'),
      (e) => e,
    );
    const took = performance.now() - started;
    assert.ok(error instanceof NodesFailingError, String(error));
    assert.equal(error.nodes[0].cause, 'timeout', JSON.stringify(error.nodes));
    assert.match(error.nodes[0].error, /no connection within 300 ms; given up/);
    assert.ok(took >= 290 && took < 2000, `failed after ${took} ms`);
    assert.equal(attempts.length, 1);
    // The close came before the failure was delivered: the attempt is already given up.
    assert.notEqual(attempts[0].abandoned, undefined, 'the attempt was aborted');
    const held = attempts[0].abandoned - attempts[0].started;
    assert.ok(held >= 290 && held < 2000, `given up after ${held} ms`);
  } finally {
    redlock.close();
  }
});

test('subscriber connections that never open are given up too, at the same timeout', async () => {
  const { attempts, node } = silentNode(250);
  const redlock = new Redlock([node], { ttlMs: 10_000, nodeTimeoutMs: 1000, retryDelayMs: 100, retryJitterMs: 0 });
  let closedAt;
  try {
    // Two waits for the same resource at once: the second listens from its start (the
    // core: its client waited for the resource a moment ago), so the node's subscriber
    // connection opens alongside the link's.
    const failed = (e) => e;
    const [error] = await Promise.all(
      [0, 1].map(() => redlock.acquire('r', { waitMs: 1200 }).then(() => assert.fail('locked on a node that never opens'), failed)),
    );
    assert.ok(error instanceof NodesFailingError, String(error));
    assert.equal(error.nodes[0].cause, 'timeout', JSON.stringify(error.nodes));
  } finally {
    closedAt = performance.now();
    redlock.close();
  }
  // The link's attempt and the subscriber's (the failed attempt ends the wait: nodes
  // failing), each given up at 250 ms; any under way when the Redlock closed, then.
  assert.ok(attempts.length >= 2, `${attempts.length} attempts`);
  for (const attempt of attempts) {
    assert.notEqual(attempt.abandoned, undefined, `an attempt left open: ${JSON.stringify(attempts)}`);
    const held = attempt.abandoned - attempt.started;
    // (Upper bounds with room for a loaded machine; without the give-up nothing is abandoned.)
    if (attempt.abandoned >= closedAt) assert.ok(held < 1000, `held ${held} ms before the close`);
    else assert.ok(held >= 240 && held < 1000, `given up after ${held} ms: ${JSON.stringify(attempts)}`);
  }
  // Both kinds: the subscriber's attempt opened while the link's was under way.
  const overlapping = attempts.some((a, i) =>
    attempts.some((b, j) => i !== j && b.started >= a.started && b.started < a.abandoned),
  );
  assert.ok(overlapping, `no subscriber attempt alongside a link's: ${JSON.stringify(attempts)}`);
});

test("real sockets the core gives up (the link's and the subscriber's) are closed: none stays open", async () => {
  // A server that accepts TCP connections and never answers: a TLS client's handshake
  // waits forever. The node's transport names a connect timeout of 400 ms (netSocket
  // sets none, and gets the core's 2 s). Two waits start together: the second listens
  // from its start (its client waited for the resource a moment ago), so the node's
  // subscriber socket opens alongside the link's, and both are opened again after their
  // pauses while the acquisitions keep trying.
  const { port, connections, close: closeServer } = await silentServer();
  const openSockets = () => process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap').length;
  const before = openSockets();
  const node = netSocket({ host: '127.0.0.1', port, tls: { rejectUnauthorized: false, servername: 'silent.invalid' } });
  const quick = { createTransport: () => Object.assign(node.createTransport(), { connectTimeoutMs: 400 }) };
  const redlock = new Redlock([quick], { ttlMs: 10_000, nodeTimeoutMs: 1000 });
  try {
    const started = performance.now();
    const [error] = await Promise.all(
      [0, 1].map(() =>
        redlock.acquire('silent', { waitMs: 1500 }).then(
          () => assert.fail('locked on a node that never answers'),
          (e) => e,
        ),
      ),
    );
    assert.ok(error instanceof NodesFailingError, String(error));
    assert.equal(error.nodes[0].cause, 'timeout', JSON.stringify(error.nodes));
    // The core's text: the link gave the attempt up, not a timer of the transport's.
    assert.match(error.nodes[0].error, /no connection within 400 ms; given up/);
    assert.ok(performance.now() - started >= 390);
    // Before the Redlock closes: every socket is given up at its 400 ms (the last
    // subscriber's too, once nobody waits), and the server sees it close.
    const deadline = performance.now() + 2000;
    while (connections.some((c) => c.closed === undefined) && performance.now() < deadline) {
      await new Promise((r) => setTimeout(r, 10));
    }
    assert.ok(connections.length >= 2, JSON.stringify(connections));
    for (const c of connections) {
      assert.notEqual(c.closed, undefined, `a socket left open: ${JSON.stringify(connections)}`);
      const held = c.closed - c.opened;
      assert.ok(held >= 350 && held < 1500, `a socket given up after ${held} ms: ${JSON.stringify(connections)}`);
    }
    const overlapping = connections.some((a, i) =>
      connections.some((b, j) => i !== j && b.opened >= a.opened && b.opened < a.closed),
    );
    assert.ok(overlapping, `no subscriber socket alongside a link's: ${JSON.stringify(connections)}`);
    assert.equal(openSockets(), before, 'no socket left in this process, client side or server side');
  } finally {
    redlock.close();
    node.close();
    await closeServer();
  }
});
