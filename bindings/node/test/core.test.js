// The WebAssembly core's boundary: every bad value is a RedlockError with a stable code,
// never a crash, and leaves the object usable.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { core } from '../index.js';

const config = () => new core.Config({ nodes: 3, ttlMs: 10_000 });
const isCode = (code) => (error) => error instanceof Error && error.name === 'RedlockError' && error.code === code;

test('configuration: every setting, derived values, and typed errors', () => {
  const c = new core.Config({
    nodes: 5,
    ttlMs: 2000,
    driftFactor: 0.02,
    driftFixedUs: 1000,
    nodeTimeoutUs: 30_000,
    minValidityUs: 5000,
    attempts: 7,
    retryDelayUs: 50_000,
    retryJitterUs: 10_000,
    keyPrefix: new Uint8Array([0xff, 0x3a]),
    tokenBytes: 32,
    maxExtensions: 4,
  });
  const s = c.settings();
  assert.deepEqual(
    { ...s, keyPrefix: [...s.keyPrefix] },
    {
      nodes: 5,
      quorum: 3,
      ttlMs: 2000,
      driftFactor: 0.02,
      driftFixedUs: 1000,
      driftUs: 41_000,
      nodeTimeoutUs: 30_000,
      minValidityUs: 5000,
      attempts: 7,
      retryDelayUs: 50_000,
      retryJitterUs: 10_000,
      keyPrefix: [0xff, 0x3a],
      tokenBytes: 32,
      maxExtensions: 4,
    },
  );
  assert.equal(config().settings().maxExtensions, null);
  assert.equal(c.withTtl(5000).ttlMs, 5000);
  assert.throws(() => c.withTtl(1.5), isCode('invalid_argument'));
  assert.throws(() => new core.Config({ nodes: 0, ttlMs: 1000 }), isCode('no_nodes'));
  assert.throws(() => new core.Config({ nodes: 3, ttlMs: 1000, bogus: 1 }), isCode('invalid_argument'));
  assert.throws(() => new core.Config({ nodes: 3 }), isCode('invalid_argument'));
  assert.throws(() => new core.Config({ nodes: '3', ttlMs: 1000 }), isCode('invalid_argument'));
  assert.throws(() => new core.Config({ nodes: 3, ttlMs: 10.5 }), isCode('invalid_argument'));
  assert.throws(() => new core.Config(undefined), isCode('invalid_argument'));
  assert.throws(() => new core.Redlock(config(), new Uint8Array(31)), isCode('invalid_argument'));
});

test('bad replies and times are refused and leave the operation usable', () => {
  const client = new core.Redlock(config(), new Uint8Array(32));
  assert.throws(() => client.acquire('r', -1), isCode('invalid_argument'));
  assert.throws(() => client.acquire('r', Number.NaN), isCode('invalid_argument'));
  assert.throws(() => client.acquire(42, 0), isCode('invalid_argument'));
  assert.throws(() => client.acquire([], 0), isCode('no_resources'));
  const op = client.acquire('r', 1000);
  const sends = [];
  for (let out = op.pollOutput(); out !== undefined; out = op.pollOutput()) if (out.type === 'send') sends.push(out);
  assert.equal(sends.length, 3);
  assert.ok(Object.isFrozen(sends[0].args) && sends[0].args === sends[1].args, 'one shared frozen args array');
  const bad = [
    undefined,
    null,
    'ok',
    {},
    { type: 'bogus' },
    { type: 7 },
    { type: 'integer', value: 1.5 },
    { type: 'integer', value: 2 ** 60 },
    { type: 'status' },
    { type: 'bulk', value: 5 },
    { type: 'array', value: 'x' },
    { type: 'array', value: new Array(1e9) },
    { type: 'array', value: [{ type: 'array', value: [] }, 'nope'] },
  ];
  for (const reply of bad) {
    assert.throws(() => op.handleReply(sends[0].requestId, reply, 1100), isCode('invalid_argument'), String(reply?.type));
  }
  assert.throws(() => op.handleReply(0.5, { type: 'ok' }, 1100), isCode('invalid_argument'));
  assert.throws(() => op.handleReply(99, { type: 'ok' }, 1100), isCode('unknown_request'));
  // Still usable: the valid replies decide.
  op.handleReply(sends[0].requestId, { type: 'integer', value: 10n }, 1100);
  op.handleReply(sends[1].requestId, { type: 'ok' }, 1100);
  assert.throws(() => op.handleReply(sends[1].requestId, { type: 'ok' }, 1100), isCode('duplicate_reply'));
  op.handleReply(sends[2].requestId, { type: 'ok' }, 1200);
  let outcome;
  for (let out = op.pollOutput(); out !== undefined; out = op.pollOutput()) if (out.type === 'outcome') outcome = out.outcome;
  assert.equal(outcome.kind, 'acquired');
  assert.deepEqual(outcome.nodes, [{ error: 'unexpected reply: an integer reply' }, 'success', 'success']);
  const lease = outcome.lease;
  assert.deepEqual(lease.keys, ['r']);
  assert.ok(lease.isValid(1200) && !lease.isValid(lease.validUntil));
  const next = client.nextExtension(lease, 1200);
  assert.ok(next > 1200 && next < lease.validUntil);
  assert.equal(client.nextExtension(lease, lease.validUntil), undefined);
  assert.equal(lease.fencingToken, undefined);
});

test('per-call TTL together with caller random bytes', () => {
  const client = new core.Redlock(config(), new Uint8Array(32));
  const random = new Uint8Array(3 * 20 + 2 * 8).fill(0xab);
  const op = client.acquire(['a', new Uint8Array([0xc3, 0x28])], 0, { ttlMs: 3000, random });
  const send = op.pollOutput();
  assert.equal(send.type, 'send');
  assert.equal(send.kind, 'acquire');
  assert.equal(send.args.at(-1), '3000');
  assert.equal(send.args.at(-2), 'ab'.repeat(20));
  assert.deepEqual([...send.args[4]], [0xc3, 0x28], 'a key that is not UTF-8 stays bytes');
  assert.throws(() => client.acquire('a', 0, { ttlMs: 0, random }), isCode('invalid_ttl'));
  assert.throws(() => client.acquire('a', 0, { random: new Uint8Array(3) }), isCode('not_enough_random_bytes'));
  assert.throws(() => client.acquire('a', 0, { ttl: 5 }), isCode('invalid_argument'));
});

test('RESP codec, scripts, limits and version', () => {
  assert.deepEqual(
    Buffer.from(core.encodeCommand(['GET', new Uint8Array([0x6b])])).toString(),
    '*2\r\n$3\r\nGET\r\n$1\r\nk\r\n',
  );
  assert.throws(() => core.encodeCommand('GET'), isCode('invalid_argument'));
  assert.throws(() => core.encodeCommand([1]), isCode('invalid_argument'));
  const decoder = new core.Decoder({ maxBulk: 4 });
  decoder.feed(new TextEncoder().encode(':9007199254740993\r\n$5\r\n'));
  assert.deepEqual(decoder.nextReply(), { type: 'integer', value: 9007199254740993n });
  assert.throws(() => decoder.nextReply(), isCode('too_large'));
  assert.throws(() => new core.Decoder({ maxBulk: -1 }), isCode('invalid_argument'));
  const scripts = core.scripts();
  assert.equal(scripts.release.sha1, '77ca464c5e5c04fb844d50b9a72b30052642d9cd');
  assert.match(scripts.extend.text, /PEXPIRE/);
  assert.equal(core.limits().maxNodes, 255);
  assert.equal(core.defaults().driftFixedUs, 2000);
  assert.match(core.version(), /^\d+\.\d+\.\d+/);
});
