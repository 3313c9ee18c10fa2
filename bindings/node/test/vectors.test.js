// Replays every conformance vector (tests/vectors/*.json, fencing/*.json, waiting/*.json,
// inspect/*.json, keepalive/*.json
// and resp/*.json) through the WebAssembly build, as the Rust core's own replayer does
// (see tests/vectors/README.md and core/tests/vectors.rs).

import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { test } from 'node:test';

import { core } from '../index.js';

const vectorsDir = new URL('../../../tests/vectors/', import.meta.url);
const jsonFiles = (dir) =>
  readdirSync(dir)
    .filter((name) => name.endsWith('.json'))
    .sort()
    .map((name) => new URL(name, dir));

const scripts = core.scripts();
const placeholders = {
  '{{ACQUIRE_SCRIPT}}': scripts.acquire.text,
  '{{RELEASE_SCRIPT}}': scripts.release.text,
  '{{EXTEND_SCRIPT}}': scripts.extend.text,
  '{{FENCED_ACQUIRE_SCRIPT}}': scripts.fencedAcquire.text,
  '{{WRITE_BACK_SCRIPT}}': scripts.writeBack.text,
};
const lossy = new TextDecoder('utf-8');
const text = (arg) => (typeof arg === 'string' ? arg : lossy.decode(arg));

function expand(value) {
  if (typeof value === 'string') return placeholders[value] ?? value;
  if (Array.isArray(value)) return value.map(expand);
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, expand(v)]));
  }
  return value;
}

const CONFIG_FIELDS = {
  nodes: 'nodes',
  ttl_ms: 'ttlMs',
  drift_factor: 'driftFactor',
  drift_fixed_us: 'driftFixedUs',
  node_timeout_us: 'nodeTimeoutUs',
  min_validity_us: 'minValidityUs',
  attempts: 'attempts',
  retry_delay_us: 'retryDelayUs',
  retry_jitter_us: 'retryJitterUs',
  key_prefix: 'keyPrefix',
  token_bytes: 'tokenBytes',
  fencing: 'fencing',
};

function configOptions(config) {
  const options = {};
  for (const [key, value] of Object.entries(config)) {
    assert.ok(key in CONFIG_FIELDS, `unknown config field ${key}`);
    options[CONFIG_FIELDS[key]] = value;
  }
  return options;
}

/** The vectors' per-node form: an error is `{ error }` (its cause is checked apart). */
function nodesJson(nodes) {
  return nodes.map((node) => {
    if (typeof node === 'string') return node;
    assert.ok(
      ['refused', 'auth', 'tls', 'timeout', 'stalled', 'connection', 'error'].includes(node.cause),
      `a failed node names its cause: ${JSON.stringify(node)}`,
    );
    return { error: node.error };
  });
}

const EXPECTED_CLASS = {
  acquired: () => null,
  extended: () => null,
  released: () => null,
  not_released: () => 'nodes_failing',
  inspected: () => null,
  not_inspected: () => 'nodes_failing',
  not_acquired: (o) => (o.reason === 'conflict' ? 'held_elsewhere' : 'nodes_failing'),
  not_extended: (o) =>
    o.reason === 'conflict' ? 'lock_lost' : o.reason === 'not_held' ? 'not_held' : o.validityUs === 0 ? 'lock_lost' : 'nodes_failing',
};

function outcomeJson(outcome) {
  assert.equal(outcome.errorClass, EXPECTED_CLASS[outcome.kind](outcome), `error class of ${outcome.kind}`);
  return outcomeFields({ ...outcome, nodes: nodesJson(outcome.nodes) });
}

function outcomeFields(outcome) {
  switch (outcome.kind) {
    case 'acquired': {
      assert.equal(outcome.fencingToken, outcome.lease.fencingToken ?? null, 'the outcome and its lease agree on the fencing token');
      const fields = {
        kind: 'acquired',
        token: outcome.lease.token,
        valid_until: outcome.lease.validUntil,
        validity: outcome.validityUs,
        attempts: outcome.attempts,
        nodes: outcome.nodes,
      };
      if (outcome.fencingToken !== null) fields.fencing_token = outcome.fencingToken;
      return fields;
    }
    case 'not_acquired':
      return {
        kind: 'not_acquired',
        reason: outcome.reason,
        attempts: outcome.attempts,
        token: outcome.token,
        nodes: outcome.nodes,
      };
    case 'extended':
      return {
        kind: 'extended',
        token: outcome.lease.token,
        valid_until: outcome.lease.validUntil,
        validity: outcome.validityUs,
        extensions: outcome.lease.extensions,
        nodes: outcome.nodes,
      };
    case 'not_extended':
      return {
        kind: 'not_extended',
        reason: outcome.reason,
        valid_until: outcome.lease.validUntil,
        validity: outcome.validityUs,
        retry_at: outcome.retryAt,
        nodes: outcome.nodes,
      };
    case 'released':
    case 'not_released':
      return { kind: outcome.kind, released: outcome.released, nodes: outcome.nodes };
    case 'inspected':
      assert.equal(outcome.locked, outcome.holder !== null, 'locked is holder !== null');
      return { kind: outcome.kind, holder: outcome.holder, nodes: outcome.nodes };
    case 'not_inspected':
      return { kind: outcome.kind, nodes: outcome.nodes };
    default:
      throw new Error(`unknown outcome ${outcome.kind}`);
  }
}

function hexBytes(hex) {
  assert.equal(hex.length % 2, 0, 'odd hex length');
  return Uint8Array.from(hex.match(/../g) ?? [], (pair) => parseInt(pair, 16));
}

/** A keep-alive action as the vectors write it. */
function keepAliveActionJson(action) {
  switch (action.type) {
    case 'extend':
      return { extend: {} };
    case 'wait':
      return { wait: action.until };
    case 'lost':
      return { lost: action.reason };
    case 'stopped':
      return { stopped: {} };
    default:
      throw new Error(`unknown keep-alive action ${JSON.stringify(action)}`);
  }
}

class Replay {
  constructor(config) {
    this.config = config;
    this.client = new core.Redlock(config, new Uint8Array(32));
    this.ops = new Map();
    this.leases = new Map();
    // The operation that handed out the last outcome under each name (for
    // keepalive_outcome: the WASM KeepAlive reads an operation's last outcome).
    this.outcomes = new Map();
    this.keepAlives = new Map();
    this.last = undefined;
  }

  keepAlive(name) {
    const keepAlive = this.keepAlives.get(name);
    assert.ok(keepAlive, `no keep-alive named ${name}`);
    return keepAlive;
  }

  /**
   * A keep-alive step (keepalive, keepalive_outcome, keepalive_failure, keepalive_stop,
   * keepalive_poll): its input, then one poll at `now`; the outputs
   * `[<action>, { valid_until }]`, or undefined for a step of another kind. The
   * keep-alive's lease afterwards is kept under its name, for extensions of it
   * (core/tests/vectors.rs keepalive_step).
   */
  keepAliveStep(step) {
    const { name } = step;
    if (name === undefined) return undefined;
    const now = step.now ?? 0;
    if (step.keepalive) {
      const lease = this.leases.get(step.keepalive.lease);
      assert.ok(lease, `no lease named ${step.keepalive.lease}`);
      this.keepAlives.get(name)?.free();
      this.keepAlives.set(name, new core.KeepAlive(this.config, lease));
    } else if (step.keepalive_outcome) {
      const op = this.outcomes.get(step.keepalive_outcome.op);
      assert.ok(op, `no outcome of ${step.keepalive_outcome.op}`);
      this.keepAlive(name).handleOutcome(op, now);
    } else if (step.keepalive_failure) {
      this.keepAlive(name).handleFailure(now);
    } else if (step.keepalive_stop) {
      this.keepAlive(name).stop();
    } else if (!step.keepalive_poll) {
      return undefined;
    }
    const keepAlive = this.keepAlive(name);
    const action = keepAliveActionJson(keepAlive.poll(now));
    const { lease } = keepAlive;
    this.leases.set(name, lease);
    return [action, { valid_until: lease.validUntil }];
  }

  drain(name) {
    const op = this.ops.get(name);
    const outputs = [];
    for (let output = op.pollOutput(); output !== undefined; output = op.pollOutput()) {
      if (output.type === 'send') {
        outputs.push({
          send: {
            node: output.node,
            request: output.requestId,
            deadline: output.deadline,
            argv: output.args.map(text),
          },
        });
      } else if (output.type === 'wait') {
        outputs.push({ wait: output.until });
      } else {
        outputs.push({ outcome: outcomeJson(output.outcome) });
        this.outcomes.set(name, op);
        if (output.outcome.lease) this.leases.set(name, output.outcome.lease);
      }
      assert.ok(outputs.length < 10_000, 'outputs never end');
    }
    return outputs;
  }

  /** Runs one step; returns [error code or undefined, outputs]. */
  step(step) {
    const now = step.now ?? 0;
    const keepAliveOutputs = this.keepAliveStep(step);
    if (keepAliveOutputs !== undefined) return [undefined, keepAliveOutputs];
    let target;
    try {
      if (step.acquire) {
        target = step.op;
        const options = { random: hexBytes(step.acquire.random) };
        if (step.acquire.wait_ms !== undefined) options.waitUs = step.acquire.wait_ms * 1000;
        const op = this.client.acquire(step.acquire.resources, now, options);
        this.ops.set(target, op);
        this.last = target;
      } else if (step.extend || step.release) {
        target = step.op;
        const name = (step.extend ?? step.release).lease;
        const lease = this.leases.get(name);
        assert.ok(lease, `no lease named ${name}`);
        const op = step.extend
          ? this.client.extend(lease, now, step.extend.ttl_ms)
          : this.client.release(lease, now);
        this.ops.set(target, op);
        this.last = target;
      } else if (step.inspect) {
        target = step.op;
        const op = this.client.inspect(step.inspect.resources, now);
        this.ops.set(target, op);
        this.last = target;
      } else if (step.lease) {
        const { resources, token, valid_until: validUntil } = step.lease;
        this.leases.set(step.name, this.client.lease(resources, token, validUntil ?? 0));
        return [undefined, []];
      } else if (step.reply) {
        target = step.op ?? this.last;
        this.ops.get(target).handleReply(step.reply.request, step.reply.value, now);
      } else if (step.timeout) {
        target = step.op ?? this.last;
        this.ops.get(target).handleTimeout(now);
      } else if (step.notice) {
        target = step.op ?? this.last;
        if (step.notice.message === undefined) this.ops.get(target).handleNotice(step.notice.node, now);
        else this.ops.get(target).handleNoticeMessage(step.notice.node, new TextEncoder().encode(step.notice.message), now);
      } else if (step.subscribed) {
        target = step.op ?? this.last;
        this.ops.get(target).handleSubscribed(step.subscribed.node, now);
      } else if (step.abandon) {
        target = step.op ?? this.last;
        this.ops.get(target).abandon(now);
      } else {
        throw new Error(`unknown step ${JSON.stringify(step)}`);
      }
    } catch (error) {
      if (error?.name === 'RedlockError') {
        assert.ok(error instanceof Error, 'core errors are real JS Errors');
        return [error.code, []];
      }
      throw error;
    }
    return [undefined, this.drain(target)];
  }
}

const vectorFiles = jsonFiles(vectorsDir);
const fencingFiles = jsonFiles(new URL('fencing/', vectorsDir));
const waitingFiles = jsonFiles(new URL('waiting/', vectorsDir));
const inspectFiles = jsonFiles(new URL('inspect/', vectorsDir));
const keepAliveFiles = jsonFiles(new URL('keepalive/', vectorsDir));

// How many vectors carry a notice's message: the runner must reach handleNoticeMessage.
const namedNotices = waitingFiles.filter((file) =>
  JSON.parse(readFileSync(file, 'utf8')).steps.some((step) => step.notice?.message !== undefined),
).length;

test('there are conformance vectors to replay', () => {
  assert.ok(vectorFiles.length >= 40, `only ${vectorFiles.length} vectors`);
  assert.ok(fencingFiles.length >= 3, `only ${fencingFiles.length} fencing vectors`);
  assert.ok(waitingFiles.length >= 6, `only ${waitingFiles.length} waiting vectors`);
  assert.ok(namedNotices >= 2, `only ${namedNotices} waiting vectors with a notice's message`);
  assert.ok(inspectFiles.length >= 2, `only ${inspectFiles.length} inspect vectors`);
  // A moved keep-alive folder must not pass as "nothing failed".
  assert.ok(keepAliveFiles.length >= 4, `only ${keepAliveFiles.length} keep-alive vectors`);
});

for (const file of [...vectorFiles, ...fencingFiles, ...waitingFiles, ...inspectFiles, ...keepAliveFiles]) {
  const vector = JSON.parse(readFileSync(file, 'utf8'));
  test(`vector ${vector.name}`, () => {
    assert.equal(`${vector.name}.json`, file.pathname.split('/').pop());
    let config;
    try {
      config = new core.Config(configOptions(vector.config));
    } catch (error) {
      assert.equal(error.name, 'RedlockError');
      assert.equal(error.code, vector.config_error, `config rejected: ${error.message}`);
      return;
    }
    assert.equal(vector.config_error, undefined, `config accepted, expected ${vector.config_error}`);
    const replay = new Replay(config);
    vector.steps.forEach((step, i) => {
      const [error, outputs] = replay.step(step);
      assert.equal(error, step.error, `step ${i}: error`);
      if (step.lease) return;
      assert.deepStrictEqual(outputs, expand(step.expect), `step ${i}: outputs`);
      // Whether the operation listens for release notices now (the core says).
      if (step.listens !== undefined) {
        assert.equal(replay.ops.get(step.op ?? replay.last).listens, step.listens, `step ${i}: listens`);
      }
    });
  });
}

function replyJson(reply) {
  switch (reply.type) {
    case 'bulk':
      return { type: 'bulk', value: lossy.decode(reply.value) };
    case 'array':
      return { type: 'array', value: reply.value.map(replyJson) };
    default:
      return reply;
  }
}

const respFiles = jsonFiles(new URL('resp/', vectorsDir));

test('there are RESP vectors to replay', () => {
  assert.ok(respFiles.length >= 10, `only ${respFiles.length} RESP vectors`);
});

for (const file of respFiles) {
  const vector = JSON.parse(readFileSync(file, 'utf8'));
  test(`resp vector ${vector.name}`, () => {
    const decoder = new core.Decoder();
    const replies = [];
    let error = null;
    chunks: for (const chunk of vector.chunks) {
      decoder.feed(hexBytes(chunk));
      for (;;) {
        let reply;
        try {
          reply = decoder.nextReply();
        } catch (e) {
          assert.equal(e.name, 'RedlockError');
          error = e.code;
          break chunks;
        }
        if (reply === undefined) break;
        replies.push(replyJson(reply));
      }
    }
    decoder.free();
    assert.deepStrictEqual(replies, vector.replies);
    assert.equal(error, vector.error);
  });
}
