// OpenTelemetry spans against real Redis: one span per operation, recorded by
// @opentelemetry/sdk-trace-base's InMemorySpanExporter: names, attributes, status, the
// retry and node_failed span events, a cancelled acquisition's span, and `tracer: true`
// through @opentelemetry/api's global tracer.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { trace } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';

import { CancelledError, InvalidArgumentError, Redlock, netSocket } from '../index.js';
import { RedisNodes } from './helpers.js';

const nodes = new RedisNodes(7255, 3);
// A port nothing listens on (no test file starts nodes on 7258-7259).
const closedPort = 7258;
let clients;
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const tracer = provider.getTracer('redlock-test');

const ERROR = 2;
const OK = 1;

before(() => {
  nodes.start();
  clients = nodes.ports.map((port) => netSocket(`redis://127.0.0.1:${port}`));
});

after(async () => {
  try {
    clients?.forEach((client) => client.close());
    await provider.shutdown();
  } finally {
    nodes.stop();
  }
});

describe('OpenTelemetry spans', () => {
  test('acquire, extend, inspect and release: one span each, with the outcome', async () => {
    exporter.reset();
    // A node timeout a loaded machine meets: the first acquisition also opens the
    // connections and loads the scripts, and one attempt is asserted below.
    const redlock = new Redlock(clients, { ttlMs: 5000, nodeTimeoutMs: 500, tracer });
    try {
      const lock = await redlock.acquire(['trace:a', 'trace:b']);
      await lock.extend();
      assert.equal(await lock.isOwned(), true);
      await lock.release();
    } finally {
      await redlock.idle();
      redlock.close();
    }
    const spans = exporter.getFinishedSpans();
    assert.deepEqual(spans.map((s) => s.name), ['redlock.acquire', 'redlock.extend', 'redlock.inspect', 'redlock.release']);
    for (const span of spans) {
      assert.deepEqual(span.attributes['redlock.resources'], ['trace:a', 'trace:b']);
      assert.equal(span.status.code, OK, `${span.name}: ${span.status.message}`);
      assert.equal(span.attributes['redlock.operation'], span.name.slice('redlock.'.length));
    }
    assert.deepEqual(spans.map((s) => s.attributes['redlock.outcome']), ['acquired', 'extended', 'inspected', 'released']);
    assert.equal(spans[0].attributes['redlock.attempts'], 1);
    assert.ok(spans[0].attributes['redlock.elapsed_us'] >= 0);
  });

  test('retries and a failed node are span events; a failed acquisition is an error', async () => {
    exporter.reset();
    const mixed = [...clients, netSocket(`redis://127.0.0.1:${closedPort}`)];
    // 4 nodes (3 up), quorum 3.
    const redlock = new Redlock(mixed, { ttlMs: 5000, attempts: 2, retryDelayMs: 10, retryJitterMs: 0, tracer });
    const other = new Redlock(clients, { ttlMs: 5000 });
    try {
      const holder = await other.acquire('trace:busy');
      await assert.rejects(redlock.acquire('trace:busy'));
      await holder.release();
    } finally {
      await redlock.idle();
      await other.idle();
      redlock.close();
      other.close();
      mixed[3].close();
    }
    const [span] = exporter.getFinishedSpans();
    assert.equal(span.name, 'redlock.acquire');
    assert.equal(span.status.code, ERROR);
    assert.match(span.status.message, /^not_acquired/);
    assert.equal(span.attributes['redlock.outcome'], 'not_acquired');
    assert.equal(span.attributes['redlock.attempts'], 2);
    const names = span.events.map((e) => e.name);
    assert.equal(names.filter((n) => n === 'retry').length, 1, `${names}`);
    const failed = span.events.filter((e) => e.name === 'node_failed');
    assert.ok(failed.length >= 1, `${names}`);
    for (const event of failed) {
      assert.equal(event.attributes['redlock.node'], 3);
      assert.equal(event.attributes['redlock.cause'], 'refused');
    }
  });

  test('a cancelled acquisition ends its span with an error', async () => {
    exporter.reset();
    const redlock = new Redlock(clients, { ttlMs: 5000, tracer });
    const other = new Redlock(clients, { ttlMs: 5000 });
    try {
      const holder = await other.acquire('trace:cancel');
      const controller = new AbortController();
      const waiting = redlock.acquire('trace:cancel', { waitMs: 10_000, signal: controller.signal });
      setTimeout(() => controller.abort(), 50);
      await assert.rejects(waiting, CancelledError);
      await holder.release();
    } finally {
      await redlock.idle();
      await other.idle();
      redlock.close();
      other.close();
    }
    const [span] = exporter.getFinishedSpans();
    assert.equal(span.name, 'redlock.acquire');
    assert.equal(span.status.code, ERROR);
    assert.equal(span.status.message, 'cancelled');
  });

  test('tracer: true uses the global tracer of @opentelemetry/api; a bad tracer is refused', async () => {
    exporter.reset();
    assert.ok(trace.setGlobalTracerProvider(provider));
    const redlock = new Redlock(clients, { ttlMs: 5000, tracer: true });
    try {
      await (await redlock.acquire('trace:global')).release();
    } finally {
      await redlock.idle();
      redlock.close();
      trace.disable();
    }
    assert.deepEqual(exporter.getFinishedSpans().map((s) => s.name), ['redlock.acquire', 'redlock.release']);
    assert.throws(() => new Redlock(clients, { tracer: {} }), InvalidArgumentError);
    // Without a tracer nothing is recorded.
    exporter.reset();
    const plain = new Redlock(clients, { ttlMs: 5000 });
    try {
      await (await plain.acquire('trace:none')).release();
    } finally {
      await plain.idle();
      plain.close();
    }
    assert.equal(exporter.getFinishedSpans().length, 0);
  });
});
