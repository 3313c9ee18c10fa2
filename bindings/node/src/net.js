// Raw-socket transports on Node.js (node:net, node:tls): one node at an address, or the
// master that Redis Sentinels name for a service.

import net from 'node:net';
import tls from 'node:tls';

import { Decoder, defaults, encodeCommand, sentinelConnectTimeoutMs } from '../wasm/redlock_wasm.js';
import { positiveDurationMs } from './args.js';
import { SocketNode, checkLogin, failure, login } from './resp.js';

/**
 * `{ host, port, tls?, username?, password?, db? }` from a `redis://[[user]:password@]host:port[/db]`
 * URL (`rediss://` for TLS), `host:port`, or such an object (checked).
 */
function parseAddress(address) {
  let target = address;
  if (typeof address === 'string') {
    const url = new URL(address.includes('://') ? address : `redis://${address}`);
    const path = url.pathname.replace(/^\//, '');
    target = {
      host: url.hostname || '127.0.0.1',
      port: Number(url.port || 6379),
      tls: url.protocol === 'rediss:' ? {} : undefined,
      username: url.username ? decodeURIComponent(url.username) : undefined,
      password: url.password ? decodeURIComponent(url.password) : undefined,
      db: path === '' ? undefined : /^\d+$/.test(path) ? Number(path) : path,
    };
  } else if (typeof address !== 'object' || address === null) {
    throw new TypeError('an address is a redis:// URL, host:port or { host, port }');
  }
  return checkLogin(target, 'an address');
}

/**
 * A TCP (or TLS) socket to `host:port`, with Nagle off; resolves once connected (TLS
 * handshake included), or rejects, the socket destroyed: when it fails, after
 * `timeoutMs` (ETIMEDOUT) when one is given, or as soon as `signal` aborts (the attempt
 * was given up).
 */
function connectWithin({ host, port, tls: tlsOptions }, timeoutMs, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(givenUp(`${host}:${port}`));
      return;
    }
    const socket = tlsOptions
      ? tls.connect({ host, port, servername: host, ...tlsOptions })
      : net.connect({ host, port });
    socket.setNoDelay(true);
    let timer;
    const abort = () => fail(givenUp(`${host}:${port}`));
    const settle = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', abort);
    };
    const fail = (error) => {
      settle();
      socket.destroy();
      reject(error);
    };
    if (timeoutMs !== undefined) {
      timer = setTimeout(
        () => fail(failure(`${host}:${port}: connecting took over ${timeoutMs} ms`, 'ETIMEDOUT')),
        timeoutMs,
      );
    }
    signal?.addEventListener('abort', abort, { once: true });
    socket.once('error', fail);
    socket.once('close', () => fail(new Error('connection closed')));
    socket.once(tlsOptions ? 'secureConnect' : 'connect', () => {
      settle();
      socket.removeListener('error', fail);
      resolve(socket);
    });
  });
}

/** The rejection of an attempt given up through its signal (nobody reports it). */
function givenUp(what) {
  return failure(`${what}: connection attempt given up`);
}

/** Hands a connected socket to the link's transport: its data, its close, write, close. */
function asStream(socket, { onData, onClose }) {
  let lastError;
  socket.on('data', onData);
  socket.on('error', (error) => {
    lastError = error;
  });
  socket.on('close', () => onClose(lastError ?? new Error('connection closed')));
  return {
    write: (bytes) => socket.write(bytes),
    close: () => socket.destroy(),
  };
}

/**
 * One node over Node.js TCP (or TLS) sockets, speaking RESP through the
 * core's codec. `address` is `redis://[[user]:password@]host:port[/db]`, `rediss://...`
 * for TLS, `host:port`, or `{ host, port, tls?: tls.ConnectionOptions, username?,
 * password?, db? }`. Every connection sends `AUTH` (with a password) and `SELECT` (with a
 * database other than 0) before the link counts it open; a refused `AUTH` fails the node
 * with the cause `auth`.
 */
export function netSocket(address) {
  const target = parseAddress(address);
  // No timer of its own: the link gives up an attempt that is not open within its
  // connect timeout (the core's, as this socket sets none) with a `close`, and the
  // transport then aborts `signal`, which destroys the socket.
  const where = `${target.host}:${target.port}`;
  const open = async (handlers) => {
    const socket = await connectWithin(target, undefined, handlers.signal);
    try {
      await login((args) => ask(socket, args, undefined, undefined, where, handlers.signal), target, where);
    } catch (error) {
      socket.destroy();
      throw error;
    }
    return asStream(socket, handlers);
  };
  return new SocketNode(open, { label: where });
}

// ---- Sentinel -----------------------------------------------------------------------

const text = new TextDecoder();

/**
 * Sends one command on a fresh socket and resolves to its first reply, then leaves the
 * socket as it is (the caller closes it or keeps it). At most `leftMs` (none when
 * undefined), what is left of the step's bound `boundMs` (named in the error), and no
 * longer once `signal` aborts.
 */
function ask(socket, args, leftMs, boundMs, what, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(givenUp(what));
      return;
    }
    const decoder = new Decoder();
    const onAbort = () => done(reject, givenUp(what));
    const done = (call, value) => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      socket.removeListener('data', onData);
      socket.removeListener('close', onClose);
      socket.removeListener('error', onError);
      decoder.free();
      call(value);
    };
    const onData = (bytes) => {
      let reply;
      try {
        decoder.feed(bytes);
        reply = decoder.nextReply();
      } catch (error) {
        done(reject, failure(`${what}: not a RESP reply (${error?.message ?? error})`));
        return;
      }
      if (reply !== undefined) done(resolve, reply);
    };
    const onClose = () => done(reject, failure(`${what}: connection closed`));
    const onError = (error) => done(reject, error);
    const timer =
      leftMs === undefined
        ? undefined
        : setTimeout(() => done(reject, failure(`${what}: no reply within its ${boundMs} ms`, 'ETIMEDOUT')), leftMs);
    signal?.addEventListener('abort', onAbort, { once: true });
    socket.on('data', onData);
    socket.once('close', onClose);
    socket.once('error', onError);
    socket.write(encodeCommand(args));
  });
}

/** From now, a function giving what is left of `boundMs` (whole ms, at least 1). */
function timeLeft(boundMs) {
  const started = performance.now();
  return () => Math.max(1, Math.ceil(boundMs - (performance.now() - started)));
}

function bulkText(reply) {
  return reply?.type === 'bulk' ? text.decode(reply.value) : reply?.type === 'status' ? reply.value : undefined;
}

/**
 * Asks each Sentinel in turn for the master of `name`: `{ host, port }`, or throws (no
 * Sentinel answered, they know no such service, or `signal` aborted).
 */
async function masterAddress(sentinels, name, timeoutMs, signal) {
  const problems = [];
  let unknown = 0;
  let lastCode;
  for (const sentinel of sentinels) {
    const where = `Sentinel ${sentinel.host}:${sentinel.port}`;
    if (signal?.aborted) throw givenUp(where);
    let socket;
    try {
      // One bound for the whole query: connecting and logging in take from the time
      // left to answer.
      const left = timeLeft(timeoutMs);
      socket = await connectWithin(sentinel, timeoutMs, signal);
      await login((args) => ask(socket, args, left(), timeoutMs, where, signal), sentinel, where);
      const reply = await ask(socket, ['SENTINEL', 'get-master-addr-by-name', name], left(), timeoutMs, where, signal);
      if (reply.type === 'nil' || (reply.type === 'array' && reply.value.length === 0)) {
        unknown += 1;
        problems.push(`${where} knows no master named ${JSON.stringify(name)}`);
        continue;
      }
      const [host, port] = reply.type === 'array' ? reply.value.map(bulkText) : [];
      if (reply.type === 'error') {
        problems.push(`${where} answered ${reply.value}`);
        continue;
      }
      if (!host || !/^\d+$/.test(port ?? '')) {
        problems.push(`${where} answered no address`);
        continue;
      }
      return { host, port: Number(port) };
    } catch (error) {
      lastCode = error?.code ?? lastCode;
      problems.push(`${where}: ${error?.message ?? error}`);
    } finally {
      socket?.destroy();
    }
  }
  if (unknown > 0) {
    throw failure(`no master named ${JSON.stringify(name)}: ${problems.join('; ')}`);
  }
  // No Sentinel answered: the cause is the last one's (refused, timed out).
  throw failure(`no Sentinel reachable for ${JSON.stringify(name)}: ${problems.join('; ')}`, lastCode);
}

function positiveMs(value, what) {
  if (value === undefined) return undefined;
  return positiveDurationMs(what, value);
}

/**
 * The master the Redis Sentinels name for `name`, as one node over raw sockets (a
 * single-instance lock, N = 1). Every connection the link opens asks the Sentinels
 * again, each in turn, and checks with ROLE that the server it reaches is a master, so
 * after a failover the next reconnection reaches the new master.
 *
 * `sentinels`: addresses as for `netSocket` (`redis://[:password@]host:26379` for a
 * Sentinel's own `AUTH`, `host:port`, `{ host, port, tls?, username?, password? }`);
 * `tls`: options to reach the master over TLS; `username`, `password`, `db`: the master's
 * `AUTH` and `SELECT`, sent before its `ROLE`; `sentinelTimeoutMs`: the most one Sentinel
 * (connecting, logging in, answering) and the master's connection, login and ROLE may
 * take; default the core's
 * (`defaults().sentinelQueryTimeoutDefaultMs`, 500), as in every binding. A Sentinel
 * past it is skipped like one that refused, and the next one is asked.
 *
 * The node's connect timeout (the whole attempt, which the link gives up past it) is the
 * core's composition, as in every binding: each Sentinel may use its whole bound in
 * turn, then the master's connection has the core's connect timeout
 * (`sentinelConnectTimeoutMs(sentinels.length, sentinelTimeoutMs, connectTimeoutDefaultMs)`).
 */
export function sentinelSocket({ sentinels, name, tls: tlsOptions, sentinelTimeoutMs, username, password, db } = {}) {
  if (!Array.isArray(sentinels) || sentinels.length === 0) {
    throw new TypeError('sentinels must be a non-empty array of Sentinel addresses');
  }
  if (typeof name !== 'string' || name === '') throw new TypeError('name must be the service name the Sentinels monitor');
  const addresses = sentinels.map(parseAddress);
  const masterLogin = checkLogin({ username, password, db }, 'the master');
  const core = defaults();
  const timeoutMs = positiveMs(sentinelTimeoutMs, 'sentinelTimeoutMs') ?? core.sentinelQueryTimeoutDefaultMs;
  // Each Sentinel, and then the master, gets one bound (timeoutMs) for connecting and
  // answering together; the whole attempt is the link's to give up
  // (its connect timeout, the core's composition for this many Sentinels), which aborts
  // `signal`. The core takes whole milliseconds: a fractional bound is rounded up.
  const connectTimeoutMs = sentinelConnectTimeoutMs(addresses.length, Math.ceil(timeoutMs), core.connectTimeoutDefaultMs);
  const open = async (handlers) => {
    const { signal } = handlers;
    const master = await masterAddress(addresses, name, timeoutMs, signal);
    const target = { ...master, tls: tlsOptions };
    const where = `${master.host}:${master.port} (master of ${JSON.stringify(name)})`;
    const left = timeLeft(timeoutMs);
    const socket = await connectWithin(target, timeoutMs, signal);
    try {
      await login((args) => ask(socket, args, left(), timeoutMs, where, signal), masterLogin, where);
      // During a failover a Sentinel can still name the old master: only a master takes
      // locks (a replica would answer READONLY to every write).
      const role = await ask(socket, ['ROLE'], left(), timeoutMs, where, signal);
      // NOAUTH here (a master with a password, none given) is the cause `auth`.
      if (role.type === 'error') throw failure(`${where}: ROLE answered ${role.value}`);
      const first = role.type === 'array' ? bulkText(role.value[0]) : undefined;
      if (first !== 'master') {
        throw failure(`${where} is not a master (ROLE: ${first ?? role.value ?? role.type})`);
      }
    } catch (error) {
      socket.destroy();
      throw error;
    }
    return asStream(socket, handlers);
  };
  return new SocketNode(open, { label: `sentinel master ${name}`, address: `sentinel master ${name}`, connectTimeoutMs });
}
