// What the core's links and error classes give every client library at its default
// settings: a frozen node does not pile commands up in the client, and a connection
// that cannot be made names its cause (a wrong password, an untrusted TLS certificate,
// a refused port).

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import Redis from 'ioredis';
import { createClient } from 'redis';

import { InvalidArgumentError, NodesFailingError, Redlock, netSocket } from '../index.js';
import { RedisNodes, sleep } from './helpers.js';

describe('a frozen node with ioredis defaults', () => {
  const nodes = new RedisNodes(7215);
  let clients;

  before(async () => {
    const urls = nodes.start();
    clients = urls.map((url) => {
      const client = new Redis(url);
      client.on('error', () => {});
      return client;
    });
    await Promise.all(clients.map((client) => new Promise((resolve) => client.once('ready', resolve))));
  });

  after(() => {
    try {
      clients?.forEach((client) => client.disconnect());
    } finally {
      nodes.stop();
    }
  });

  test('commands for it stay bounded over hundreds of cycles, and the heap does not grow', async () => {
    const redlock = new Redlock(clients, { ttlMs: 3000 });
    try {
      for (let i = 0; i < 50; i++) await (await redlock.acquire('frozen:warm')).release();
      nodes.pause(0);
      let heapAfterWarmUp;
      try {
        for (let i = 0; i < 600; i++) {
          const lock = await redlock.acquire(`frozen:${i % 10}`);
          await lock.release();
          if (i === 100) heapAfterWarmUp = process.memoryUsage().heapUsed;
        }
        const frozen = clients[0];
        const queued = frozen.commandQueue.length + frozen.offlineQueue.length;
        // The link writes at most 64 commands (plus its 3 script loads) to a node that
        // does not answer, then nothing until it answers again.
        assert.ok(queued <= 67, `${queued} commands queued in ioredis for the frozen node`);
        const grown = process.memoryUsage().heapUsed - heapAfterWarmUp;
        assert.ok(grown < 32 * 1024 * 1024, `heap grew by ${grown} bytes over 500 cycles`);
      } finally {
        nodes.resume(0);
      }
      // Once it answers, it takes part again.
      for (let tries = 0; ; tries++) {
        const lock = await redlock.acquire('frozen:back');
        await lock.release();
        if (lock.nodes[0].result === 'success') break;
        assert.ok(tries < 400, 'the resumed node never took part again');
        await sleep(25);
      }
    } finally {
      redlock.close();
    }
  });
});

describe('connection failures name their cause', () => {
  const tlsNode = new RedisNodes(7225, 1, ['--tls']);
  const passwordNode = new RedisNodes(7226, 1, ['--requirepass', 'right-password']);
  const refusedPort = 7227;
  let tlsUrl;
  let passwordUrl;

  before(() => {
    [tlsUrl] = tlsNode.start();
    [passwordUrl] = passwordNode.start();
  });

  after(() => {
    try {
      tlsNode.stop();
    } finally {
      passwordNode.stop();
    }
  });

  /** The causes an acquisition on one node reports, over a few attempts. */
  async function causeOf(client) {
    const redlock = new Redlock([client], { ttlMs: 2000, attempts: 1 });
    try {
      const causes = new Set();
      for (let i = 0; i < 10; i++) {
        const error = await redlock.acquire(`cause:${i}`).then(
          () => assert.fail('locked through a failing connection'),
          (e) => e,
        );
        assert.ok(error instanceof NodesFailingError, String(error));
        causes.add(error.nodes[0].cause);
        if (error.nodes[0].cause !== 'timeout') return error.nodes[0];
        await sleep(60);
      }
      return { cause: [...causes].join(',') };
    } finally {
      redlock.close();
    }
  }

  const wrongPassword = () => passwordUrl.replace('right-password', 'wrong-password');
  const plainTls = () => tlsUrl; // rediss:// without the test CA: the certificate is untrusted
  /** Each expected cause, with a URL whose connection fails with it. */
  const failingUrls = () => [
    ['auth', wrongPassword()],
    ['tls', plainTls()],
    ['refused', `redis://127.0.0.1:${refusedPort}`],
  ];

  test('ioredis: wrong password, untrusted certificate, refused port', async () => {
    const cases = failingUrls();
    for (const [expected, url] of cases) {
      const client = new Redis(url);
      client.on('error', () => {});
      try {
        const node = await causeOf(client);
        assert.equal(node.cause, expected, `${url}: ${JSON.stringify(node)}`);
      } finally {
        client.disconnect();
      }
    }
  });

  test('raw sockets: wrong password, untrusted certificate, refused port', async () => {
    const cases = failingUrls();
    for (const [expected, url] of cases) {
      const node = await causeOf(netSocket(url));
      assert.equal(node.cause, expected, `${url}: ${JSON.stringify(node)}`);
      if (expected === 'auth') assert.match(node.error, /AUTH refused: WRONGPASS/);
    }
  });

  test('raw sockets: the password and the database of the URL are used on every connection', async () => {
    const url = passwordUrl.replace(/\/?$/, '/2');
    const redlock = new Redlock([netSocket(url)], { ttlMs: 5000, attempts: 1 });
    const check = new Redis(url);
    const database0 = new Redis(passwordUrl);
    try {
      const lock = await redlock.acquire('login:raw');
      assert.equal(await check.get('login:raw'), lock.token);
      assert.equal(await database0.get('login:raw'), null);
      await lock.release();
      assert.equal(await check.get('login:raw'), null);
      // The same as an object, with the user named: AUTH default <password>.
      const password = new URL(passwordUrl).password;
      const port = Number(new URL(passwordUrl).port);
      const named = new Redlock([netSocket({ host: '127.0.0.1', port, username: 'default', password, db: 2 })], {
        ttlMs: 5000,
        attempts: 1,
      });
      try {
        const again = await named.acquire('login:raw');
        assert.equal(await check.get('login:raw'), again.token);
        await again.release();
      } finally {
        named.close();
      }
    } finally {
      redlock.close();
      check.disconnect();
      database0.disconnect();
    }
    assert.throws(() => netSocket({ host: '127.0.0.1', port: 1, db: -1 }), (e) => e instanceof InvalidArgumentError && /db \(the database\) must be a whole number between 0 and/.test(e.message));
    assert.throws(() => netSocket({ host: '127.0.0.1', port: 1, username: 'u' }), /needs its password/);
    assert.throws(() => netSocket('redis://127.0.0.1:1/x'), /database/);
  });

  test('node-redis: wrong password, untrusted certificate, refused port', async () => {
    const cases = failingUrls();
    for (const [expected, url] of cases) {
      const client = createClient({ url });
      client.on('error', () => {});
      // The first connection fails; the client keeps retrying on its own.
      client.connect().catch(() => {});
      try {
        const node = await causeOf(client);
        assert.equal(node.cause, expected, `${url}: ${JSON.stringify(node)}`);
      } finally {
        await Promise.resolve(client.destroy?.() ?? client.disconnect()).catch(() => {});
      }
    }
  });
});
