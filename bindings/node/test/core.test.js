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
    fencing: true,
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
      fencing: true,
    },
  );
  assert.equal(c.fencing, true);
  assert.equal(config().fencing, false);
  assert.throws(() => new core.Config({ nodes: 3, ttlMs: 1000, fencing: 'yes' }), isCode('invalid_argument'));
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
  assert.deepEqual(outcome.nodes, [{ error: 'unexpected reply: an integer reply', cause: 'error' }, 'success', 'success']);
  assert.equal(outcome.errorClass, null);
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
  assert.equal(scripts.release.sha1, '9a4c12ce2a7ef3e2864bdbe648b6d0f0ee05029b');
  assert.match(scripts.extend.text, /PEXPIRE/);
  assert.equal(core.limits().maxNodes, 255);
  assert.equal(core.defaults().driftFixedUs, 2000);
  assert.equal(core.defaults().noticeChannelLingerMs, 500);
  assert.equal(core.defaults().subscriberReopenFirstMs, 100);
  assert.equal(core.defaults().subscriberReopenMaxMs, 5000);
  assert.equal(core.defaults().connectTimeoutDefaultMs, 2000);
  // One Sentinel's bound, and the connect timeout of a node behind N of them: N * query
  // + connect, saturating (the same in every binding).
  assert.equal(core.defaults().sentinelQueryTimeoutDefaultMs, 500);
  assert.equal(core.sentinelConnectTimeoutMs(2, 500, 2000), 3000);
  assert.equal(core.sentinelConnectTimeoutMs(1, 250, 750), 1000);
  assert.equal(core.sentinelConnectTimeoutMs(0, 500, 2000), 2000);
  assert.equal(core.sentinelConnectTimeoutMs(3, 1e300, 5), 2 ** 64, 'saturates at the largest u64');
  assert.match(core.version(), /^\d+\.\d+\.\d+/);
});

const drainLink = (link) => {
  const outputs = [];
  for (let out = link.pollOutput(); out !== undefined; out = link.pollOutput()) outputs.push(out);
  return outputs;
};

test('Link: connect, scripts first, writes in order, deliveries to the tagged operation', () => {
  const client = new core.Redlock(new core.Config({ nodes: 1, ttlMs: 10_000, attempts: 1 }), new Uint8Array(32));
  const op = client.acquire('r', 1000);
  const link = new core.Link();
  const send = op.pollOutput();
  assert.equal(send.type, 'send');
  link.submit(7, op, 1000);
  assert.throws(() => link.submit(7, op, 1000), isCode('invalid_argument'), 'one submit per send');
  assert.deepEqual(drainLink(link), [{ type: 'connect' }]);
  assert.equal(op.pollOutput().type, 'wait');
  link.handleConnected(1100);
  const writes = drainLink(link);
  assert.deepEqual(
    writes.map((w) => [w.type, w.id, w.args[0]]),
    [
      ['write', 1, 'SCRIPT'],
      ['write', 2, 'SCRIPT'],
      ['write', 3, 'SCRIPT'],
      ['write', 4, 'SET'],
    ],
  );
  assert.equal(link.inFlight, 4);
  assert.equal(link.isIdle, false);
  for (const id of [1, 2, 3]) link.handleReply(id, { type: 'bulk', value: 'sha' }, 1200);
  assert.deepEqual(drainLink(link), [], 'script replies are the link\'s own');
  link.handleReply(4, { type: 'ok' }, 1300);
  const [delivery] = drainLink(link);
  assert.deepEqual(delivery, { type: 'deliver', tag: 7, request: send.requestId, reply: { type: 'ok' } });
  op.handleReply(delivery.request, delivery.reply, 1300);
  assert.equal(op.pollOutput().outcome.kind, 'acquired');
  assert.equal(link.isIdle, true);
  assert.equal(link.owed, 1);
  assert.throws(() => link.handleClosed('bogus', 'x', 1400), isCode('invalid_argument'));
  assert.throws(() => link.handleData(new Uint8Array(1), 1400), isCode('invalid_argument'));
});

test('Link: OK and integer replies go in without an object; a value out of range is refused', () => {
  const client = new core.Redlock(new core.Config({ nodes: 1, ttlMs: 10_000, attempts: 1 }), new Uint8Array(32));
  const link = new core.Link();
  const a = client.acquire('a', 1000);
  a.pollOutput();
  link.submit(1, a, 1000);
  drainLink(link);
  link.handleConnected(1000);
  const writes = drainLink(link);
  for (const w of writes.slice(0, 3)) link.handleReply(w.id, { type: 'bulk', value: 'sha' }, 1100);
  // Each input says how many outputs wait.
  assert.equal(link.handleReplyOk(writes[3].id, 1200), 1);
  assert.deepEqual(drainLink(link), [{ type: 'deliver', tag: 1, request: 1, reply: { type: 'ok' } }]);
  assert.throws(() => link.handleReplyInteger(writes[3].id, 0.5, 1200), isCode('invalid_argument'));
  assert.throws(() => link.handleReplyInteger(writes[3].id, 2 ** 53, 1200), isCode('invalid_argument'));
  const b = client.acquire('b', 1300);
  b.pollOutput();
  link.submit(2, b, 1300);
  const [write] = drainLink(link);
  assert.equal(link.handleReplyInteger(write.id, 7, 1400), 1);
  assert.deepEqual(drainLink(link), [{ type: 'deliver', tag: 2, request: 1, reply: { type: 'integer', value: 7 } }]);
  assert.throws(() => new core.Link({ holdReplies: true }), isCode('invalid_argument'), 'an option no more');
});

/** The engine's actions until none is left, as `[kind, x, writeId?, args or bytes?]`. */
const drainEngine = (engine) => {
  const actions = [];
  for (let code = engine.poll(); code !== 0; code = engine.poll()) {
    const kind = code % 8;
    const x = (code - kind) / 8;
    if (kind === 1) actions.push(['write', x, engine.writeId, engine.writeArgs() ?? engine.writeBytes()]);
    else if (kind === 7) actions.push(['same', x, engine.writeId]);
    else actions.push([{ 2: 'connect', 3: 'close', 4: 'done', 5: 'failed', 6: 'listen' }[kind], x]);
  }
  return actions;
};

/** An engine over `n` nodes, every link connected and its scripts loaded at 1000 us. */
const connectedEngine = (n, options = {}) => {
  const engine = new core.Engine(Array.from({ length: n }, () => options));
  for (let node = 0; node < n; node++) engine.connected(node, 1000);
  for (const [kind, node, id] of drainEngine(engine)) {
    assert.ok(kind === 'write' || kind === 'same');
    engine.reply(node, id, { type: 'bulk', value: 'sha' }, 1000);
  }
  assert.deepEqual(drainEngine(engine), []);
  return engine;
};

test('Engine: a lock cycle crosses as numbers; the round shares one arguments array', () => {
  const client = new core.Redlock(new core.Config({ nodes: 3, ttlMs: 10_000, attempts: 1 }), new Uint8Array(32));
  const engine = connectedEngine(3);
  assert.equal(engine.nextWake, -1, 'nothing waits on time');
  const tag = engine.acquireOne(client, 'r', 1000);
  const commands = drainEngine(engine);
  // The first SET carries its arguments; the other two nodes get the same array.
  assert.deepEqual(
    commands.map(([kind, node]) => [kind, node]),
    [
      ['write', 0],
      ['same', 1],
      ['same', 2],
    ],
  );
  const token = commands[0][3][2];
  assert.deepEqual(commands[0][3], ['SET', 'r', token, 'NX', 'PX', '10000']);
  assert.ok(engine.nextWake > 1000, 'the round has a deadline');
  // Two confirmations decide at the quorum: one `done` action, nothing else (and no
  // sooner wake-up than nextWake said).
  assert.equal(engine.replyOk(0, commands[0][2], 1100), 0);
  assert.equal(engine.replyOk(1, commands[1][2], 1100), 1);
  assert.deepEqual(drainEngine(engine), [['done', tag]]);
  const outcome = engine.outcome(tag);
  assert.equal(outcome.kind, 'acquired');
  assert.equal(outcome.lease.token, token);
  // Node results become an array when read, and are in the outcome's JSON.
  assert.deepEqual(outcome.nodes, ['success', 'success', 'pending']);
  assert.deepEqual(JSON.parse(JSON.stringify(outcome)).nodes, ['success', 'success', 'pending']);
  // The next input forgets the operation: the late reply changes nothing.
  assert.equal(engine.replyOk(2, commands[2][2], 1200), 0);
  assert.throws(() => engine.outcome(tag), isCode('invalid_argument'));
  // The release writes the same token string.
  const release = engine.release(client, outcome.lease, 1300);
  const writes = drainEngine(engine);
  assert.deepEqual(
    writes.map(([kind, node]) => [kind, node]),
    [
      ['write', 0],
      ['same', 1],
      ['same', 2],
    ],
  );
  assert.equal(writes[0][3][0], 'EVALSHA');
  assert.equal(writes[0][3][4], token);
  // The release decides at the quorum too; the third reply comes late.
  for (const [, node, id] of writes) engine.replyInteger(node, id, 1, 1400);
  assert.deepEqual(drainEngine(engine), [['done', release]]);
  const released = engine.outcome(release);
  assert.equal(released.kind, 'released');
  assert.equal(released.released, 2);
  assert.deepEqual(released.nodes, ['success', 'success', 'pending']);
});

test('Engine: a refused value closes its connection; a driver mistake throws a typed error', () => {
  const client = new core.Redlock(new core.Config({ nodes: 2, ttlMs: 10_000, attempts: 1 }), new Uint8Array(32));
  const engine = connectedEngine(2);
  engine.acquireOne(client, 'r', 1000);
  const [first] = drainEngine(engine);
  // Not a whole number: node 0's connection closes (the next action), nothing throws.
  assert.ok(engine.replyInteger(0, first[2], 0.5, 1100) >= 1);
  assert.deepEqual(drainEngine(engine)[0], ['close', 0]);
  for (const reply of [{ type: 'bogus' }, { type: 'integer', value: 2 ** 53 }, 'OK']) {
    const other = connectedEngine(1);
    assert.ok(other.reply(0, 5, reply, 1000) >= 1);
    assert.deepEqual(drainEngine(other)[0], ['close', 0]);
  }
  assert.throws(() => engine.replyOk(7, 1, 1100), isCode('unknown_node'));
  assert.throws(() => engine.replyOk(-1, 1, 1100), isCode('invalid_argument'));
  assert.throws(() => engine.closed(0, 'bogus', 'x', 1100), isCode('invalid_argument'));
  assert.throws(() => engine.data(0, new Uint8Array(1), 1100), isCode('invalid_argument'), 'not a RESP node');
  assert.throws(() => engine.replyOk(0, 1, Number.NaN), isCode('invalid_argument'));
  assert.throws(() => engine.outcome(99), isCode('invalid_argument'));
  assert.throws(() => engine.acquireOne(client, '', 1100), isCode('empty_resource'));
  assert.throws(() => new core.Engine([]), isCode('invalid_argument'));
  assert.throws(() => new core.Engine([{ bogus: true }]), isCode('invalid_argument'));
  assert.throws(() => new core.Engine([{ connectTimeoutMs: -1 }]), isCode('invalid_argument'));
  assert.equal(new core.Engine([{ connectTimeoutMs: 750 }]).connectTimeoutMs(0), 750);
  // An operation for more nodes than the engine has fails, saying so.
  const wide = new core.Redlock(new core.Config({ nodes: 3, ttlMs: 10_000 }), new Uint8Array(32));
  const tag = engine.acquireOne(wide, 'w', 1200);
  assert.deepEqual(
    drainEngine(engine).find(([kind]) => kind === 'failed'),
    ['failed', tag],
  );
  assert.match(engine.error(tag).message, /this engine has 2 nodes/);
});

test('Engine: deadlines, abandon, inspection and RESP', () => {
  const client = new core.Redlock(
    new core.Config({ nodes: 1, ttlMs: 10_000, attempts: 1, nodeTimeoutUs: 50_000 }),
    new Uint8Array(32),
  );
  // No reply before the deadline: the operation ends when the engine is told the time.
  const engine = connectedEngine(1);
  const late = engine.acquireOne(client, 'r', 1000);
  drainEngine(engine);
  assert.ok(engine.nextWake > 1000 && engine.nextWake <= 51_000, `wake ${engine.nextWake}`);
  let done = [];
  for (let i = 0; i < 10 && done.length === 0; i++) {
    engine.timeout(engine.nextWake);
    done = drainEngine(engine).filter(([kind]) => kind === 'done');
  }
  assert.deepEqual(done, [['done', late]]);
  assert.equal(engine.outcome(late).kind, 'not_acquired');
  // Abandoned after its SET went out: the release goes out under no tag.
  const fresh = connectedEngine(1);
  const gone = fresh.acquireOne(client, 's', 2000);
  assert.deepEqual(
    drainEngine(fresh).map(([kind]) => kind),
    ['write'],
  );
  // Bit 31 of what an input returns: the next wake-up is sooner than nextWake last said
  // (never read here); the count of actions is in the other bits.
  const result = fresh.abandon(gone, 2100);
  assert.ok(result >= 2 ** 31, `result ${result}`);
  assert.equal(result & 0x7fffffff, 1);
  assert.ok(fresh.nextWake > 2100);
  const abandoned = drainEngine(fresh);
  assert.equal(abandoned.length, 1);
  assert.equal(abandoned[0][3][0], 'EVALSHA');
  assert.throws(() => fresh.outcome(gone), isCode('invalid_argument'), 'forgotten at once');
  // An inspection counts status replies as the bulk strings a client gave them as.
  const inspect = fresh.inspect(client, 'r', 3000);
  const get = drainEngine(fresh).find(([, , , args]) => args?.[0] === 'GET');
  fresh.reply(0, get[2], { type: 'status', value: 'holder-token' }, 3100);
  assert.deepEqual(drainEngine(fresh), [['done', inspect]]);
  const inspected = fresh.outcome(inspect);
  assert.equal(inspected.kind, 'inspected');
  assert.equal(inspected.holder, 'holder-token');
  assert.equal(fresh.isHeldBy(inspect, client.lease('r', 'holder-token', 9_000_000), 3200), true);
  // RESP: bytes out, bytes in; a protocol error closes.
  const resp = new core.Engine([{ resp: true }]);
  const tag = resp.acquireOne(client, 'q', 4000);
  assert.deepEqual(drainEngine(resp), [['connect', 0]]);
  resp.connected(0, 4000);
  const writes = drainEngine(resp);
  assert.equal(writes.length, 4);
  assert.ok(writes.every(([, , , bytes]) => bytes instanceof Uint8Array));
  assert.match(Buffer.from(writes[3][3]).toString(), /^\*6\r\n\$3\r\nSET\r\n/);
  resp.data(0, Buffer.from('$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n+OK\r\n'), 4100);
  assert.deepEqual(drainEngine(resp), [['done', tag]]);
  assert.equal(resp.outcome(tag).kind, 'acquired');
  resp.data(0, Buffer.from('?bad\r\n'), 4200);
  assert.deepEqual(drainEngine(resp), [['close', 0]]);
});

test('Link over RESP: bytes out, bytes in, a protocol error closes; a refused node fails at once', () => {
  const client = new core.Redlock(new core.Config({ nodes: 1, ttlMs: 10_000, attempts: 1 }), new Uint8Array(32));
  const link = new core.Link({ resp: true });
  assert.throws(() => new core.Link({ bogus: true }), isCode('invalid_argument'));
  const op = client.acquire('r', 1000);
  op.pollOutput();
  link.submit(1, op, 1000);
  assert.deepEqual(drainLink(link), [{ type: 'connect' }]);
  link.handleConnected(1000);
  const writes = drainLink(link);
  assert.equal(writes.length, 4);
  assert.ok(writes.every((w) => w.bytes instanceof Uint8Array));
  assert.match(Buffer.from(writes[3].bytes).toString(), /^\*6\r\n\$3\r\nSET\r\n/);
  const replies = Buffer.from('$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n+OK\r\n');
  link.handleData(replies.subarray(0, 5), 1100);
  link.handleData(replies.subarray(5), 1100);
  assert.deepEqual(drainLink(link), [{ type: 'deliver', tag: 1, request: 1, reply: { type: 'ok' } }]);
  link.handleData(Buffer.from('?bad\r\n'), 1200);
  assert.deepEqual(drainLink(link), [{ type: 'close' }]);
  assert.equal(link.isOpen, false);
  // A refused connection: what is queued fails with the cause, and so does the next
  // command until the backoff ends.
  const refused = new core.Link({ resp: true });
  const op2 = client.acquire('s', 2000);
  op2.pollOutput();
  refused.submit(2, op2, 2000);
  assert.deepEqual(drainLink(refused), [{ type: 'connect' }]);
  refused.handleClosed('refused', 'ECONNREFUSED', 2100);
  const [failed] = drainLink(refused);
  assert.equal(failed.type, 'deliver');
  assert.deepEqual(failed.reply, { type: 'connection_failed', value: 'refused: ECONNREFUSED' });
  op2.handleReply(failed.request, failed.reply, 2100);
  // The failed attempt's release goes to the link too, which refuses it at once
  // (reconnecting waits for its backoff); then the outcome comes.
  let outcome;
  for (let out = op2.pollOutput(); out !== undefined && !outcome; out = op2.pollOutput()) {
    if (out.type === 'outcome') outcome = out.outcome;
    if (out.type !== 'send') continue;
    refused.submit(2, op2, 2100);
    for (const d of drainLink(refused)) op2.handleReply(d.request, d.reply, 2100);
  }
  assert.equal(outcome.kind, 'not_acquired');
  assert.equal(outcome.errorClass, 'nodes_failing');
  assert.equal(outcome.nodes[0].cause, 'refused');
  assert.ok(refused.pollTimeout() === undefined || refused.pollTimeout() > 2100);
});

test('Link connectTimeoutMs: an attempt not open in time is given up with a close, cause timeout', () => {
  assert.equal(new core.Link().connectTimeoutMs, core.defaults().connectTimeoutDefaultMs, "the core's default");
  assert.equal(new core.Link({ connectTimeoutMs: undefined }).connectTimeoutMs, 2000);
  assert.equal(new core.Link({ connectTimeoutMs: null }).connectTimeoutMs, 2000, 'null: unset');
  assert.equal(new core.Link({ resp: true, connectTimeoutMs: 750 }).connectTimeoutMs, 750);
  assert.equal(new core.Link({ connectTimeoutMs: 1234.5 }).connectTimeoutMs, 1234.5);
  assert.equal(new core.Link({ connectTimeoutMs: 0 }).connectTimeoutMs, 1, 'less than 1 ms counts as 1 ms');
  assert.equal(new core.Link({ connectTimeoutMs: 0.25 }).connectTimeoutMs, 1);
  for (const bad of [-1, NaN, Infinity, -Infinity, '100', true, {}]) {
    assert.throws(() => new core.Link({ connectTimeoutMs: bad }), isCode('invalid_argument'), String(bad));
  }
  assert.throws(() => new core.Link({ connectTimeoutMs: -1 }), /connectTimeoutMs must be a non-negative number of milliseconds/);

  // A node timeout longer than the connect timeout: the queued command is still waiting
  // when the attempt is given up, and fails with its cause.
  const client = new core.Redlock(
    new core.Config({ nodes: 1, ttlMs: 10_000, attempts: 1, nodeTimeoutUs: 1_000_000 }),
    new Uint8Array(32),
  );
  const op = client.acquire('r', 1000);
  assert.equal(op.pollOutput().type, 'send');
  const link = new core.Link({ resp: true, connectTimeoutMs: 300 });
  link.submit(1, op, 1000);
  assert.deepEqual(drainLink(link), [{ type: 'connect' }]);
  assert.equal(link.pollTimeout(), 1000 + 300_000, 'the link wakes at the attempt\'s deadline');
  link.handleTimeout(300_999);
  assert.deepEqual(drainLink(link), [], 'not yet');
  link.handleTimeout(301_000);
  assert.deepEqual(drainLink(link), [
    { type: 'close' },
    {
      type: 'deliver',
      tag: 1,
      request: 1,
      reply: { type: 'connection_failed', value: 'timeout: no connection within 300 ms; given up' },
    },
  ]);
  assert.equal(link.isOpen, false);
  // The given-up attempt's own failure, reported late, changes nothing.
  link.handleClosed('refused', 'ECONNREFUSED', 301_500);
  assert.deepEqual(drainLink(link), []);
  assert.equal(link.pollTimeout(), undefined, 'nothing queued: nothing to wake for');
  // The next command waits for the backoff (50 ms) and fails at once with the cause.
  const op2 = client.acquire('s', 320_000);
  op2.pollOutput();
  link.submit(2, op2, 320_000);
  const [failed] = drainLink(link);
  assert.deepEqual(failed.reply, { type: 'connection_failed', value: 'timeout: no connection within 300 ms; given up' });
  // After the backoff, a new attempt, with the same limit.
  const op3 = client.acquire('t', 400_000);
  op3.pollOutput();
  link.submit(3, op3, 400_000);
  assert.deepEqual(drainLink(link), [{ type: 'connect' }]);
  assert.equal(link.pollTimeout(), 700_000);
  link.handleConnected(500_000);
  assert.equal(link.isOpen, true);
  assert.ok(link.pollTimeout() === undefined || link.pollTimeout() > 700_000, 'an open link has no connect deadline');
});

test('abandon releases an acquisition in flight; the one output rule', () => {
  const client = new core.Redlock(config(), new Uint8Array(32));
  const op = client.acquire('r', 1000);
  assert.equal(typeof op.pollTimeout, 'undefined', 'no pollTimeout: wait is the only wake-up');
  const outputs = [];
  for (let out = op.pollOutput(); out !== undefined; out = op.pollOutput()) outputs.push(out);
  assert.deepEqual(outputs.map((o) => o.type), ['send', 'send', 'send', 'wait']);
  op.abandon(1100);
  const after = [];
  for (let out = op.pollOutput(); out !== undefined; out = op.pollOutput()) after.push(out);
  assert.deepEqual(after.map((o) => [o.type, o.kind]), [['send', 'release'], ['send', 'release'], ['send', 'release']]);
  assert.ok(after.every((o) => o.args.includes(op.token)));
  assert.equal(op.isFinished, true);
});

test('KeepAlive: extend when due, lost when taken', () => {
  const cfg = new core.Config({ nodes: 1, ttlMs: 3000, attempts: 1 });
  const client = new core.Redlock(cfg, new Uint8Array(32));
  const op = client.acquire('r', 0);
  const send = op.pollOutput();
  op.handleReply(send.requestId, { type: 'ok' }, 100);
  let outcome;
  for (let out = op.pollOutput(); out !== undefined; out = op.pollOutput()) if (out.type === 'outcome') outcome = out.outcome;
  const keepAlive = new core.KeepAlive(cfg, outcome.lease);
  const first = keepAlive.poll(200);
  assert.equal(first.type, 'wait');
  assert.ok(first.until > 200 && first.until < outcome.lease.validUntil);
  assert.deepEqual(keepAlive.poll(first.until), { type: 'extend' });
  assert.equal(keepAlive.isExtending, true);
  const extend = client.extend(keepAlive.lease, first.until);
  const ext = extend.pollOutput();
  extend.handleReply(ext.requestId, { type: 'integer', value: -1 }, first.until + 100);
  let extOutcome;
  for (let out = extend.pollOutput(); out !== undefined; out = extend.pollOutput()) if (out.type === 'outcome') extOutcome = out.outcome;
  assert.equal(extOutcome.errorClass, 'lock_lost');
  keepAlive.handleOutcome(extend, first.until + 100);
  assert.deepEqual(keepAlive.poll(first.until + 200), { type: 'lost', reason: 'taken' });
  assert.equal(keepAlive.lost, 'taken');
  keepAlive.stop();
  assert.equal(keepAlive.lost, 'taken', 'a lost lock stays lost');
});

test('duplicateNode and errorClasses', () => {
  assert.deepEqual(core.duplicateNode(['redis://a:1', 'localhost:6379', 'redis://user:pw@127.0.0.1/0']), [1, 2]);
  assert.equal(core.duplicateNode(['a:1', 'a:2']), undefined);
  const classes = core.errorClasses();
  assert.deepEqual(
    classes.map((c) => [c.code, c.number]),
    [
      ['held_elsewhere', 1],
      ['nodes_failing', 2],
      ['lock_lost', 3],
      ['not_held', 4],
      ['invalid_argument', 5],
      ['used_after_close', 6],
      ['cancelled', 7],
    ],
  );
});

test('FencedSet: exact arguments, every reply read, every bad input a clear error', () => {
  const scripts = core.scripts();
  const write = new core.FencedSet('orders:42', new Uint8Array([0xff]), 42);
  assert.equal(write.token, 42);
  const args = write.args(false);
  assert.deepEqual(args.slice(0, 6), ['EVALSHA', scripts.fencedSet.sha1, '2', 'orders:42', '{orders:42}:fence:accepted', '42']);
  assert.deepEqual([...args[6]], [0xff], 'a value that is not UTF-8 stays bytes');
  assert.deepEqual(write.args(true).slice(0, 3), ['EVAL', scripts.fencedSet.text, '2']);
  const pair = (a, b) => ({ type: 'array', value: [{ type: 'integer', value: a }, { type: 'integer', value: b }] });
  assert.deepEqual(write.handleReply(pair(1, 42)), { type: 'accepted', token: 42 });
  assert.deepEqual(write.handleReply(pair(0, 50)), { type: 'stale', token: 42, seen: 50 });
  assert.deepEqual(write.handleReply(pair(0, 42)), { type: 'stale', token: 42, seen: 42 });
  assert.deepEqual(write.handleReply({ type: 'error', value: 'NOSCRIPT No matching script.' }), { type: 'retry_as_eval' });
  assert.equal(write.handleReply(pair(0, 41)).type, 'failed', 'a refusal below the token cannot come from the script');
  assert.deepEqual(write.handleReply({ type: 'error', value: 'ERR boom' }), { type: 'failed', error: 'ERR boom' });
  assert.equal(write.handleReply({ type: 'timeout' }).type, 'failed');
  assert.throws(() => write.handleReply({ type: 'bogus' }), isCode('invalid_argument'));
  assert.throws(() => write.handleReply(undefined), isCode('invalid_argument'));
  write.free();
  for (const token of [0, -1, 0.5, 2 ** 53, Infinity, Number.NaN]) {
    assert.throws(() => new core.FencedSet('i', 'v', token), isCode('invalid_fencing_token'), String(token));
  }
  for (const token of ['1', 1n, null, undefined, {}]) {
    assert.throws(() => new core.FencedSet('i', 'v', token), isCode('invalid_argument'), String(token));
  }
  assert.equal(new core.FencedSet('i', '', 2 ** 53 - 1).token, 2 ** 53 - 1);
  assert.equal(core.limits().maxFencingToken, 2 ** 53 - 1);
  assert.throws(() => new core.FencedSet('', 'v', 1), isCode('empty_resource'));
  assert.throws(() => new core.FencedSet(7, 'v', 1), isCode('invalid_argument'));
  assert.throws(() => new core.FencedSet('i', [1], 1), isCode('invalid_argument'));
});

test('notice channels and fence keys are the core\'s names', () => {
  assert.equal(core.noticeChannel('orders:42'), 'redlock:released:orders:42');
  assert.deepEqual([...core.noticeChannel(new Uint8Array([0xff]))].slice(-1), [0xff]);
  assert.equal(core.fenceKey('r'), '{r}:fence');
  assert.equal(core.fenceKey('{tag}r'), '{tag}r:fence');
  assert.equal(core.fenceGuardKey('item'), '{item}:fence:accepted');
  assert.throws(() => core.noticeChannel(3), isCode('invalid_argument'));
  const redlock = new core.Redlock(new core.Config({ nodes: 3, ttlMs: 1000, keyPrefix: 'app:' }));
  // Per key its notice channel, then this client's waiter channel (its listener id, the
  // same for both keys and for every call).
  const channels = redlock.noticeChannels(['a', 'b']);
  assert.deepEqual(channels.slice(0, 2), ['redlock:released:app:a', 'redlock:released:app:b']);
  const listener = /^redlock:waiter:([0-9a-f]{16}):app:a$/.exec(channels[2])?.[1];
  assert.ok(listener, channels[2]);
  assert.equal(channels[3], `redlock:waiter:${listener}:app:b`);
  assert.deepEqual(redlock.noticeChannels(['a', 'b']), channels);
  const other = new core.Redlock(new core.Config({ nodes: 3, ttlMs: 1000, keyPrefix: 'app:' }));
  assert.notEqual(other.noticeChannels(['a'])[1], channels[2], 'each client has its own listener id');
  assert.throws(() => redlock.noticeChannels([]), isCode('no_resources'));
  assert.throws(() => redlock.noticeChannels(['a', 'a']), isCode('duplicate_resource'));
});

test('wait limits and notices: bad input is a clear error, never a crash', () => {
  const redlock = new core.Redlock(new core.Config({ nodes: 3, ttlMs: 1000 }));
  for (const waitUs of [-1, 1.5, 'soon', Number.NaN]) {
    assert.throws(() => redlock.acquire('r', 0, { waitUs }), isCode('invalid_argument'), String(waitUs));
  }
  const op = redlock.acquire('r', 0, { waitUs: 500_000, ttlMs: 900 });
  // The queued acquire script: ... token, TTL, waiter id, entry lifetime.
  const args = op.pollOutput().args;
  assert.equal(args[0], 'EVALSHA');
  assert.equal(args.at(-3), '900');
  assert.throws(() => op.handleNotice(3, 10), isCode('unknown_node'));
  assert.throws(() => op.handleNoticeMessage(3, new Uint8Array(), 10), isCode('unknown_node'));
  assert.throws(() => op.handleNoticeMessage(0.5, new Uint8Array(), 10), isCode('invalid_argument'));
  assert.throws(() => op.handleNoticeMessage(0, new Uint8Array(), -5), isCode('invalid_argument'));
  op.handleNoticeMessage(0, new TextEncoder().encode('not a waiter of this node'), 10);
  for (const message of [undefined, null, 'text', 7, {}]) {
    assert.throws(() => op.handleNoticeMessage(0, message, 10), isCode('invalid_argument'), String(message));
  }
  // The lean poll for drivers over links: a send without its argument strings.
  const lean = redlock.acquire('lean', 0);
  const first = lean.pollOutputToLink();
  assert.equal(first.type, 'send');
  assert.equal(first.kind, 'set');
  assert.equal(first.args, undefined);
  lean.free();
  for (const node of [-1, 0.5, Number.NaN]) assert.throws(() => op.handleNotice(node, 10), isCode('invalid_argument'));
  assert.throws(() => op.handleNotice(0, -5), isCode('invalid_argument'));
  op.handleNotice(0, 10); // during the attempt: remembered, nothing to poll but the wait
  op.free();
});

test('Subscriptions: the subscriber connections as the core decides them, bad input a clear error', () => {
  const { Open, Subscribe, Unsubscribe, Close } = core.SubscriberOutputKind;
  // A bad node count is the configuration's error; a bad number is an invalid argument.
  assert.throws(() => new core.Subscriptions(0, 100), isCode('no_nodes'));
  assert.throws(() => new core.Subscriptions(core.limits().maxNodes + 1, 100), isCode('too_many_nodes'));
  for (const nodes of [-1, 1.5, Number.NaN]) assert.throws(() => new core.Subscriptions(nodes, 100), isCode('invalid_argument'));
  for (const timeoutMs of [-1, Number.NaN, Infinity]) {
    assert.throws(() => new core.Subscriptions(2, timeoutMs), isCode('invalid_argument'), String(timeoutMs));
  }
  const s = new core.Subscriptions(2, 150);
  const ms = (n) => n * 1000;
  const outputs = () => {
    const seen = [];
    for (let kind = s.pollOutput(); kind !== undefined; kind = s.pollOutput()) {
      seen.push([kind, s.outputNode, s.outputChannel].filter((v) => v !== undefined));
    }
    return seen;
  };
  assert.equal(s.nodes, 2);
  assert.equal(s.pollTimeout(), undefined);
  // An unknown node is a usage error and changes nothing.
  for (const call of [() => s.handleOpened(2, 0), () => s.handleLost(2, 0), () => s.handleRefused(2, 0)]) {
    assert.throws(call, isCode('unknown_node'));
  }
  assert.throws(() => s.handleConfirmed(2, 'ch', 0), isCode('unknown_node'));
  assert.throws(() => s.handleOpened(0.5, 0), isCode('invalid_argument'));
  assert.throws(() => s.want(7, 0), isCode('invalid_argument'));
  assert.throws(() => s.want('ch', -1), isCode('invalid_argument'));
  assert.equal(s.unwant('nobody', 0), false);
  // A first listener opens every node; once open, the channel is subscribed there.
  s.want('ch', ms(0));
  assert.deepEqual(outputs(), [[Open, 0], [Open, 1]]);
  assert.equal(s.channelCount, 1);
  assert.equal(s.isOpen(0), false);
  s.handleOpened(0, ms(1));
  assert.deepEqual(outputs(), [[Subscribe, 0, 'ch']]);
  assert.equal(s.isOpen(0), true);
  // A confirmation counts once (given as bytes or text alike).
  assert.equal(s.handleConfirmed(0, new TextEncoder().encode('ch'), ms(2)), true);
  assert.equal(s.handleConfirmed(0, 'ch', ms(2)), false);
  assert.equal(s.isSubscribed(0, 'ch'), true);
  // Node 1 is refused: closed at once, opened again only after the core's pause.
  s.handleOpened(1, ms(1));
  assert.deepEqual(outputs(), [[Subscribe, 1, 'ch']]);
  s.handleRefused(1, ms(2));
  assert.deepEqual(outputs(), [[Close, 1]]);
  const reopen = ms(2 + core.defaults().subscriberReopenFirstMs);
  assert.equal(s.pollTimeout(), reopen);
  s.want('ch', ms(3)); // a new waiter does not cut the pause short
  assert.deepEqual(outputs(), []);
  s.handleTimeout(reopen);
  assert.deepEqual(outputs(), [[Open, 1]]);
  s.handleOpened(1, reopen + 1);
  assert.deepEqual(outputs(), [[Subscribe, 1, 'ch']]);
  assert.equal(s.handleConfirmed(1, 'ch', reopen + 2), true);
  // The last listeners leave: the channel lingers, then is unsubscribed and the idle
  // connections close.
  assert.equal(s.unwant('ch', ms(200)), true);
  assert.equal(s.unwant('ch', ms(200)), true);
  assert.equal(s.unwant('ch', ms(200)), false);
  assert.deepEqual(outputs(), []);
  const lingerEnds = ms(200 + core.defaults().noticeChannelLingerMs);
  assert.equal(s.pollTimeout(), lingerEnds);
  s.handleTimeout(lingerEnds - 1);
  assert.deepEqual(outputs(), []);
  s.handleTimeout(lingerEnds);
  assert.deepEqual(outputs(), [[Unsubscribe, 0, 'ch'], [Unsubscribe, 1, 'ch'], [Close, 0], [Close, 1]]);
  assert.equal(s.channelCount, 0);
  assert.equal(s.pollTimeout(), undefined);
  // Bytes that are not UTF-8 come back as bytes.
  s.want(new Uint8Array([0xff]), lingerEnds);
  outputs();
  s.handleOpened(0, lingerEnds);
  assert.deepEqual(outputs(), [[Subscribe, 0, new Uint8Array([0xff])]]);
  s.free();
});

test('Operation.listens: the core says when an acquisition listens for notices', () => {
  const attempts = (n) => new core.Redlock(new core.Config({ nodes: 3, ttlMs: 10_000, attempts: n }), new Uint8Array(32));
  const sendsOf = (op) => {
    const sends = [];
    for (let out = op.pollOutput(); out !== undefined; out = op.pollOutput()) if (out.type === 'send') sends.push(out);
    return sends;
  };
  // With a wait limit: from the first refusal by a held key; from its start when the
  // same client waited for the resource a moment ago (its channels still linger).
  const client = attempts(2);
  const waiting = client.acquire('r', 0, { waitUs: 2_000_000 });
  assert.equal(waiting.listens, false, 'with a wait limit, nothing refused it yet');
  const waitSends = sendsOf(waiting);
  waiting.handleReply(waitSends[0].requestId, { type: 'integer', value: 0 }, 100);
  assert.equal(waiting.listens, true, 'with a wait limit, from its first conflict');
  waiting.free();
  const again = client.acquire('r', 200, { waitUs: 2_000_000 });
  assert.equal(again.listens, true, 'with a wait limit, from its start after a wait a moment ago');
  again.free();
  for (const [n, after] of [[2, true], [1, false]]) {
    const op = attempts(n).acquire('r', 0);
    assert.equal(op.listens, false, 'a first attempt may win');
    const sends = sendsOf(op);
    op.handleReply(sends[0].requestId, { type: 'nil' }, 100);
    op.handleReply(sends[1].requestId, { type: 'nil' }, 100);
    assert.equal(op.listens, after, `attempts ${n}: listens once it failed only if another may follow`);
    op.free();
  }
});
