// The Node.js / edge API: Redlock (acquire, using), Lock (extend, release, dispose).
// Every decision is the core's; this file only drives operations and arms timers at
// the instants the core names.

import { Config, Redlock as CoreRedlock, scripts } from '../wasm/redlock_wasm.js';
import { nowUs } from './clock.js';
import { toConnection } from './clients.js';
import { connectionFailed, drive } from './driver.js';
import {
  LockError,
  LockHeldError,
  LockLostError,
  NodesFailedError,
  RedlockError,
  core,
  nodeDetails,
} from './errors.js';

const asyncDispose = Symbol.asyncDispose ?? Symbol.for('Symbol.asyncDispose');

// Options in milliseconds (fractions allowed) -> the core's microseconds.
const MILLISECOND_OPTIONS = {
  driftFixedMs: 'driftFixedUs',
  nodeTimeoutMs: 'nodeTimeoutUs',
  minValidityMs: 'minValidityUs',
  retryDelayMs: 'retryDelayUs',
  retryJitterMs: 'retryJitterUs',
};
const PLAIN_OPTIONS = ['ttlMs', 'driftFactor', 'attempts', 'keyPrefix', 'tokenBytes', 'maxExtensions'];
const DEFAULT_TTL_MS = 10_000;

function coreOptions(nodes, options) {
  const result = { nodes, ttlMs: DEFAULT_TTL_MS };
  for (const [key, value] of Object.entries(options)) {
    if (value === undefined) continue;
    if (key in MILLISECOND_OPTIONS) {
      if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
        throw new RedlockError(`${key} must be a non-negative number of milliseconds`, 'invalid_argument');
      }
      result[MILLISECOND_OPTIONS[key]] = Math.round(value * 1000);
    } else if (PLAIN_OPTIONS.includes(key)) {
      result[key] = value;
    } else {
      throw new RedlockError(`unknown option ${key}`, 'invalid_argument');
    }
  }
  return result;
}

function resourceList(resources) {
  return Array.isArray(resources) ? [...resources] : [resources];
}

function delayUntil(instantUs, round) {
  return Math.max(0, round((instantUs - nowUs()) / 1000));
}

/**
 * Distributed locks over N independent Redis nodes (N = 1 is a single-instance lock).
 */
export class Redlock {
  #core;
  #connections;
  #labels;

  /**
   * @param clients one per node: ioredis or node-redis clients, or connections
   *   (`{ send(args) }`, e.g. `netSocket(...)`, `rawSocket(...)`)
   * @param options the lock's settings; durations in milliseconds
   */
  constructor(clients, options = {}) {
    if (!Array.isArray(clients) || clients.length === 0) {
      throw new RedlockError('give one client per Redis node (at least one)', 'no_nodes');
    }
    this.#connections = clients.map(toConnection);
    this.#labels = this.#connections.map((c, i) => c.label ?? `node ${i}`);
    const config = core(() => new Config(coreOptions(clients.length, options)));
    this.#core = new CoreRedlock(config);
    config.free();
  }

  /** Every setting of the core's configuration (durations in microseconds). */
  get settings() {
    const config = this.#core.config;
    try {
      return config.settings();
    } finally {
      config.free();
    }
  }

  /** The nodes' labels, in order. */
  get nodes() {
    return [...this.#labels];
  }

  /**
   * Acquires a lock on `resources` (one name or several, all or none) for `ttlMs`
   * (default: the configured TTL). Throws LockHeldError when someone else holds it,
   * NodesFailedError when nodes fail, after the configured attempts.
   */
  async acquire(resources, ttlMs) {
    const names = resourceList(resources);
    const options = ttlMs === undefined ? undefined : { ttlMs };
    const op = core(() => this.#core.acquire(names, nowUs(), options));
    const outcome = await this._drive(op);
    if (outcome.kind === 'acquired') {
      return new Lock(this, outcome.lease, names, outcome);
    }
    const detail = {
      reason: outcome.reason,
      nodes: nodeDetails(outcome.nodes, this.#labels),
      resources: names,
      attempts: outcome.attempts,
    };
    if (outcome.reason === 'conflict') {
      throw new LockHeldError(
        `${names.join(', ')} is locked by someone else (${outcome.attempts} attempts)`,
        'lock_held',
        detail,
      );
    }
    throw new NodesFailedError(
      `could not lock ${names.join(', ')}: ${outcome.reason} (${outcome.attempts} attempts)`,
      outcome.reason,
      detail,
    );
  }

  /** Same as `lock.extend(ttlMs)`. */
  extend(lock, ttlMs) {
    return lock.extend(ttlMs);
  }

  /** Same as `lock.release()`. */
  release(lock) {
    return lock.release();
  }

  /**
   * A lock rebuilt from a token kept elsewhere (another process, a log), to release or
   * extend it. Its validity is unknown (zero).
   */
  lock(resources, token) {
    const names = resourceList(resources);
    const lease = core(() => this.#core.lease(names, token, 0));
    return new Lock(this, lease, names, undefined);
  }

  /**
   * Acquires `resources`, runs `fn(signal, lock)`, and releases the lock whatever
   * happens. While `fn` runs the lock is extended on the core's schedule; `signal` is
   * aborted with a LockLostError the moment the lock is lost (an extension found it
   * taken, or its validity ran out). If `fn` returns after that, `using` rejects with
   * that error rather than return as if the lock had been held throughout.
   *
   * `ttlMs` may be omitted: `using(resources, fn)`.
   */
  async using(resources, ttlMs, fn) {
    if (typeof ttlMs === 'function') {
      fn = ttlMs;
      ttlMs = undefined;
    }
    if (typeof fn !== 'function') throw new TypeError('using(resources, ttlMs, fn) needs a function');
    const lock = await this.acquire(resources, ttlMs);
    const controller = new AbortController();
    const keeper = new KeepAlive(lock, controller);
    try {
      const result = await fn(controller.signal, lock);
      if (controller.signal.aborted) throw controller.signal.reason;
      return result;
    } finally {
      await keeper.stop();
      await lock.release();
    }
  }

  /**
   * Resolves once every command sent so far has its reply or has passed its deadline.
   * Operations decide at a quorum, so a release can return while its commands to the
   * slower nodes are still out: wait for this before closing connections (in a worker,
   * hand it to `ctx.waitUntil`) so they still delete the lock's keys.
   */
  async idle() {
    while (this.#late.size > 0) await Promise.all(this.#late);
  }

  /**
   * Loads the core's three scripts into every node's script cache (SCRIPT LOAD) now.
   * Connections already do this before their first command and after the
   * reconnections they can see (see `scriptLoads` in resp.js for why); this warms up
   * explicitly. Resolves to how each node answered; never throws for node failures.
   */
  async loadScripts() {
    const { acquire, release, extend } = scripts();
    return Promise.all(
      this.#connections.map(async (connection, node) => {
        const replies = await Promise.all(
          [acquire, release, extend].map((script) =>
            Promise.resolve()
              .then(() => connection.send(['SCRIPT', 'LOAD', script.text]))
              .catch(connectionFailed),
          ),
        );
        const failed = replies.find((reply) => reply.type === 'error' || reply.type === 'connection_failed');
        return failed
          ? { node, label: this.#labels[node], result: 'error', error: failed.value }
          : { node, label: this.#labels[node], result: 'success' };
      }),
    );
  }

  /** Closes the connections this package opened (raw sockets); clients stay yours. */
  close() {
    for (const connection of this.#connections) connection.close?.();
  }

  // ---- for Lock ----------------------------------------------------------------

  #late = new Set();

  /** Keeps a command that outlived its operation until it settles or its deadline. */
  #track = (reply, deadline) => {
    let timer;
    const done = Promise.race([
      reply.then(
        () => {},
        () => {},
      ),
      new Promise((resolve) => {
        timer = setTimeout(resolve, delayUntil(deadline, Math.ceil));
      }),
    ]).then(() => {
      clearTimeout(timer);
      this.#late.delete(done);
    });
    this.#late.add(done);
  };

  /** @internal */
  _drive(op) {
    return drive(op, this.#connections, nowUs, this.#track);
  }

  /** @internal */
  _run(start) {
    const op = core(() => start(this.#core, nowUs()));
    return this._drive(op);
  }

  /** @internal */
  _details(results) {
    return nodeDetails(results, this.#labels);
  }

  /** @internal */
  _nextExtension(lease) {
    return this.#core.nextExtension(lease, nowUs());
  }
}

/** A held lock. Dispose of it (`await using`) or call `release()`. */
export class Lock {
  #redlock;
  #lease;
  #released = false;

  constructor(redlock, lease, resources, acquired) {
    this.#redlock = redlock;
    this.#lease = lease;
    /** The locked resource names, in order. */
    this.resources = resources;
    /** Attempts the acquisition took (undefined for a lock rebuilt from a token). */
    this.attempts = acquired?.attempts;
    /** How each node answered the acquisition. */
    this.nodes = acquired ? redlock._details(acquired.nodes) : [];
  }

  /** The token stored under every key. */
  get token() {
    return this.#lease.token;
  }

  /** Until when the lock is held, in microseconds on `performance.now()`'s clock. */
  get validUntilUs() {
    return this.#lease.validUntil;
  }

  /** Milliseconds of validity left now (0 once expired). */
  get validityMs() {
    return this.#lease.validity(nowUs()) / 1000;
  }

  /** True while the lock is valid now. */
  get isValid() {
    return !this.#released && this.#lease.isValid(nowUs());
  }

  /** Successful extensions so far. */
  get extensions() {
    return this.#lease.extensions;
  }

  /** The TTL of the last acquisition or extension, in milliseconds. */
  get ttlMs() {
    return this.#lease.ttlMs;
  }

  /** True once `release()` was called. */
  get released() {
    return this.#released;
  }

  /** The core's lease (for the low-level API). */
  get lease() {
    return this.#lease;
  }

  /**
   * Extends the lock by `ttlMs` (default: its own TTL) from now. A missing key is never
   * re-created. Throws LockLostError when the lock is gone, NodesFailedError (with
   * `validUntilUs` and `retryAt`) when nodes failed but the lock still holds until then.
   */
  async extend(ttlMs) {
    if (this.#released) throw new RedlockError('the lock was released', 'released');
    const outcome = await this.#redlock._run((client, now) => client.extend(this.#lease, now, ttlMs));
    this.#lease = outcome.lease;
    if (outcome.kind === 'extended') return this;
    const detail = {
      reason: outcome.reason,
      nodes: this.#redlock._details(outcome.nodes),
      resources: this.resources,
    };
    if (outcome.lost) {
      throw new LockLostError(`the lock on ${this.resources.join(', ')} is lost`, 'lock_lost', detail);
    }
    const error = new NodesFailedError(
      `could not extend the lock on ${this.resources.join(', ')}: ${outcome.reason}; it holds for ${(outcome.validityUs / 1000).toFixed(1)} ms more`,
      outcome.reason,
      detail,
    );
    error.validUntilUs = outcome.lease.validUntil;
    error.retryAt = outcome.retryAt;
    throw error;
  }

  /**
   * Releases the lock on every node (only keys holding this lock's token are deleted).
   * Never throws for node failures: the keys expire anyway; the result says how each
   * node answered.
   */
  async release() {
    this.#released = true;
    const outcome = await this.#redlock._run((client, now) => client.release(this.#lease, now));
    return { released: outcome.released, nodes: this.#redlock._details(outcome.nodes) };
  }

  /** For `await using lock = await redlock.acquire(...)`. */
  async [asyncDispose]() {
    if (!this.#released) await this.release();
  }

  /** @internal */
  _nextExtension() {
    return this.#redlock._nextExtension(this.#lease);
  }
}

/**
 * Keeps a lock alive for `using`: extends it when the core says to, and aborts the
 * signal when the lock is lost: an extension reports it lost, or its validity ends.
 */
class KeepAlive {
  #lock;
  #controller;
  #extendTimer;
  #expiryTimer;
  #extending = Promise.resolve();
  #stopped = false;

  constructor(lock, controller) {
    this.#lock = lock;
    this.#controller = controller;
    this.#schedule();
  }

  async stop() {
    this.#stopped = true;
    clearTimeout(this.#extendTimer);
    clearTimeout(this.#expiryTimer);
    await this.#extending;
  }

  #schedule() {
    clearTimeout(this.#expiryTimer);
    // Rounded down: the signal may fire a little before validUntil, never after it
    // by our own doing.
    this.#expiryTimer = setTimeout(
      () => this.#lose(new LockLostError(`the lock on ${this.#lock.resources.join(', ')} expired`, 'lock_lost', {
        reason: 'expired',
        resources: this.#lock.resources,
      })),
      delayUntil(this.#lock.validUntilUs, Math.floor),
    );
    const at = this.#lock._nextExtension();
    if (at !== undefined) this.#extendAt(at);
  }

  #extendAt(at) {
    clearTimeout(this.#extendTimer);
    this.#extendTimer = setTimeout(() => {
      if (this.#stopped) return;
      this.#extending = this.#lock.extend().then(
        () => {
          if (!this.#stopped) this.#schedule();
        },
        (error) => {
          if (this.#stopped) return;
          if (error instanceof LockLostError) {
            this.#lose(error);
          } else if (error instanceof LockError && error.retryAt != null) {
            this.#extendAt(error.retryAt);
          }
          // Otherwise no round fits before validUntil: the expiry timer aborts then.
        },
      );
    }, delayUntil(at, Math.ceil));
  }

  #lose(error) {
    clearTimeout(this.#extendTimer);
    clearTimeout(this.#expiryTimer);
    if (!this.#controller.signal.aborted) this.#controller.abort(error);
  }
}
