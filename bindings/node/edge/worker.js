// A Cloudflare Worker that locks resources on Redis nodes over `cloudflare:sockets`,
// with the WASM core and the raw-socket transport. Run by test/workerd.test.js inside
// workerd (the runtime of Cloudflare Workers) with the config from workerd-config.js.
//
//   GET /acquire?ports=P1,P2,...&resource=R            -> { token, validityMs, nodes }
//   GET /release?ports=...&resource=R&token=T           -> { released, nodes }
//   GET /cycle?ports=...&resource=R                     -> acquire, contend, extend, release
// Each takes `password` and `db` for the nodes' AUTH and SELECT.

import { connect } from 'cloudflare:sockets';

import wasm from '../wasm/redlock_wasm_bg.wasm';
import { LockError, Redlock, init, rawSocket } from '../edge.js';

// workerd refuses to compile WebAssembly from bytes: the module arrives precompiled.
init(wasm);

function redlockFor(url, options) {
  const ports = url.searchParams.get('ports').split(',').map(Number);
  // `password` and `db`: every node's AUTH and SELECT.
  const password = url.searchParams.get('password') ?? undefined;
  const db = url.searchParams.has('db') ? Number(url.searchParams.get('db')) : undefined;
  const connections = ports.map((port) => rawSocket(connect, { hostname: '127.0.0.1', port, password, db }));
  return new Redlock(connections, options);
}

async function handle(url, ctx) {
  const resource = url.searchParams.get('resource');
  // Every request opens new sockets (scripts first, then the command): a node timeout
  // that a busy test machine meets.
  const redlock = redlockFor(url, { ttlMs: 5000, attempts: 2, retryDelayMs: 20, retryJitterMs: 10, nodeTimeoutMs: 300 });
  try {
    switch (url.pathname) {
      case '/acquire': {
        const started = performance.now();
        // Held past this request (released by token by a later one): detached, so that
        // closing this request's Redlock does not release it.
        const lock = (await redlock.acquire(resource)).detach();
        return {
          token: lock.token,
          validityMs: lock.validityMs,
          nodes: lock.nodes,
          elapsedMs: performance.now() - started,
        };
      }
      case '/release': {
        const lock = redlock.lock(resource, url.searchParams.get('token'));
        return await lock.release();
      }
      case '/cycle': {
        const lock = await redlock.acquire(resource);
        let second;
        try {
          await redlock.acquire(resource);
          second = 'acquired twice';
        } catch (error) {
          second = error instanceof LockError ? `${error.name}: ${error.code}` : String(error);
        }
        await lock.extend();
        const released = await lock.release();
        return { token: lock.token, second, extensions: lock.extensions, released: released.released };
      }
      default:
        return { error: `unknown path ${url.pathname}` };
    }
  } finally {
    // Releases decide at a quorum: let the commands to the other nodes finish after
    // the response, then close the sockets.
    ctx.waitUntil(redlock.idle().finally(() => redlock.close()));
  }
}

export default {
  async fetch(request, env, ctx) {
    const url = new URL(request.url);
    try {
      const body = await handle(url, ctx);
      body.runtime = navigator.userAgent;
      return Response.json(body);
    } catch (error) {
      return Response.json({ error: `${error.name}: ${error.message}`, code: error.code }, { status: 500 });
    }
  },
};
