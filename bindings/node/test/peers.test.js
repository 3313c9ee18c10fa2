// Mutual exclusion with node-redlock (npm `redlock`, 5.0.0-beta.2 and 4.2.0) on the same
// three local nodes (base port 7750): both write `SET <resource> <token> NX PX <ttl>`, so
// with no key prefix on our side a lock held by one refuses the other, and neither's
// release deletes the other's key. With a key prefix (`keyPrefix: 'locks:'`) ours meets
// node-redlock's lock on the resource 'locks:<name>'. docs/interop.md has the table.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import Redis from 'ioredis';
import NodeRedlock5 from 'redlock';
import NodeRedlock4 from 'redlock4';

import { LockHeldError, Redlock } from '../index.js';
import { RedisNodes } from './helpers.js';

const nodes = new RedisNodes(7750, 3);
let clients;
let ours;
let prefixed;
let v5;
let v4;

before(async () => {
  const urls = nodes.start();
  clients = urls.map((url) => new Redis(url, { maxRetriesPerRequest: 1 }));
  await Promise.all(clients.map((client) => client.ping()));
  const settings = { attempts: 1, nodeTimeoutMs: 200 };
  ours = new Redlock(clients, settings);
  prefixed = new Redlock(clients, { ...settings, keyPrefix: 'locks:' });
  v5 = new NodeRedlock5(clients, { retryCount: 0 });
  v4 = new NodeRedlock4(clients, { retryCount: 0 });
});

after(async () => {
  await ours.idle();
  clients.forEach((client) => client.disconnect());
  nodes.stop();
});

const values = (key) => Promise.all(clients.map((client) => client.get(key)));

// Each peer as { name, acquire(resource) -> handle, release(handle) }.
const peers = () => [
  {
    name: 'node-redlock 5.0.0-beta.2',
    acquire: (resource) => v5.acquire([resource], 5000),
    release: (lock) => lock.release(),
  },
  {
    name: 'node-redlock 4.2.0',
    acquire: (resource) => v4.lock(resource, 5000),
    release: (lock) => lock.unlock(),
  },
];

test('a lock of ours refuses node-redlock on the same name, and theirs refuses ours', async () => {
  for (const peer of peers()) {
    const resource = `peer:${peer.name}`;
    const lock = await ours.acquire(resource);
    await assert.rejects(peer.acquire(resource), undefined, `${peer.name} acquired our lock`);
    assert.deepEqual(await values(resource), [lock.token, lock.token, lock.token], peer.name);
    await lock.release();

    const theirs = await peer.acquire(resource);
    await assert.rejects(ours.acquire(resource), LockHeldError, `we acquired ${peer.name}'s lock`);
    const held = await values(resource);
    assert.ok(held.every((value) => value !== null && value === held[0]), peer.name);
    // Our release of a token we do not hold deletes nothing of theirs.
    const result = await ours.lock(resource, 'f'.repeat(40)).release();
    assert.equal(result.released, 0);
    assert.deepEqual(await values(resource), held, peer.name);
    await peer.release(theirs);
    assert.deepEqual(await values(resource), [null, null, null], peer.name);
  }
});

test('with keyPrefix, ours and node-redlock meet on the prefixed name', async () => {
  for (const peer of peers()) {
    const lock = await prefixed.acquire('report');
    await assert.rejects(peer.acquire('locks:report'), undefined, peer.name);
    // Without the prefix on their side they would not meet.
    const elsewhere = await peer.acquire('report');
    await peer.release(elsewhere);
    await lock.release();

    const theirs = await peer.acquire('locks:report');
    await assert.rejects(prefixed.acquire('report'), LockHeldError, peer.name);
    await peer.release(theirs);
  }
});
