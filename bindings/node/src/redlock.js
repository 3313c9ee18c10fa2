// The Node.js / edge API: Redlock (acquire, using), Lock (extend, release, dispose).
// Every decision is the core's: operations decide locks, links decide each node's
// commands, KeepAlive decides when to extend and when a lock is lost, and the error
// classes decide what is thrown. This file starts operations and maps outcomes.

import {
  Config,
  KeepAlive,
  Redlock as CoreRedlock,
  duplicateNode,
  version,
} from '../wasm/redlock_wasm.js';
import { nowUs } from './clock.js';
import { clientRefusal, toTransport } from './clients.js';
import { Driver } from './driver.js';
import { Emitter } from './events.js';
import { resolveTracer } from './tracing.js';
import { checkSetting, durationMs, namesText, positiveDurationMs, ttlMs as checkTtlMs } from './args.js';
import {
  CancelledError,
  ERROR_CLASSES,
  InvalidArgumentError,
  LockLostError,
  NotHeldError,
  UsedAfterCloseError,
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
const PLAIN_OPTIONS = ['ttlMs', 'driftFactor', 'attempts', 'keyPrefix', 'tokenBytes', 'maxExtensions', 'fencing'];
// Options of this package, not of the core's configuration.
const DRIVER_OPTIONS = ['notices', 'tracer'];
const DEFAULT_TTL_MS = 10_000;
// How many unreleased locks a Redlock tracks before it drops those whose validity ran out.
const HELD_PRUNE_FIRST = 1024;
// How long close() waits for its releases at most (each also ends at its own deadlines).
const CLOSE_RELEASE_LIMIT_MS = 2000;

function invalid(message, reason = 'invalid_argument') {
  return new InvalidArgumentError(message, { reason });
}

function coreOptions(nodes, options) {
  const result = { nodes, ttlMs: DEFAULT_TTL_MS };
  for (const [key, value] of Object.entries(options)) {
    if (value === undefined) continue;
    if (key in MILLISECOND_OPTIONS) {
      result[MILLISECOND_OPTIONS[key]] = Math.round(checkSetting(key, value) * 1000);
    } else if (PLAIN_OPTIONS.includes(key)) {
      result[key] = checkSetting(key, value);
    } else if (!DRIVER_OPTIONS.includes(key)) {
      throw invalid(`unknown option ${key}`);
    }
  }
  return result;
}

function resourceList(resources) {
  return Array.isArray(resources) ? [...resources] : [resources];
}

const ACQUIRE_OPTIONS = ['ttlMs', 'waitMs', 'signal', 'fencing'];

/** `acquire(resources, ttlMs)` or `acquire(resources, { ttlMs, waitMs, signal, fencing })`. */
function acquireOptions(options) {
  if (options === undefined) return { ttlMs: undefined };
  if (typeof options === 'number') return { ttlMs: checkTtlMs('ttlMs', options) };
  if (typeof options !== 'object' || options === null) {
    throw invalid('acquire options are a TTL in milliseconds or { ttlMs, waitMs, signal, fencing }');
  }
  for (const key of Object.keys(options)) {
    if (!ACQUIRE_OPTIONS.includes(key)) throw invalid(`unknown acquire option ${key}`);
  }
  const { ttlMs, waitMs, signal, fencing } = options;
  if (signal !== undefined && !(typeof signal?.aborted === 'boolean' && typeof signal.addEventListener === 'function')) {
    throw invalid('signal must be an AbortSignal');
  }
  if (ttlMs !== undefined) checkTtlMs('ttlMs', ttlMs);
  if (waitMs !== undefined) durationMs('waitMs', waitMs);
  if (fencing !== undefined && typeof fencing !== 'boolean') throw invalid('fencing must be true or false');
  return { ttlMs, waitMs, signal, fencing };
}

/** The error for a failed outcome: the class the core names. */
function outcomeError(outcome, message, detail) {
  const ErrorClass = ERROR_CLASSES[outcome.errorClass];
  const error = new ErrorClass(message, detail);
  if (outcome.kind === 'not_extended') {
    error.validUntilUs = outcome.lease.validUntil;
    error.retryAt = outcome.retryAt;
  }
  return error;
}

/**
 * Distributed locks over N independent Redis nodes (N = 1 is a single-instance lock).
 * An event emitter: `redlock.on('acquired' | 'retry' | 'node_failed' | 'lost' | ...,
 * (event) => ...)` receives the core's events (docs/observability.md).
 */
/**
 * 32 bytes from the platform's CSPRNG (`crypto.getRandomValues`), read once per core
 * client: the core draws tokens and retry jitter from a ChaCha20 stream seeded with them,
 * instead of crossing into JavaScript for fresh bytes on every acquisition.
 */
function seed() {
  return globalThis.crypto.getRandomValues(new Uint8Array(32));
}

export class Redlock extends Emitter {
  #core;
  /** The core client for acquisitions that ask for the other fencing setting. */
  #otherCore = undefined;
  #options;
  #driver;
  #labels;
  #closed = false;
  /** close()'s promise, once it started. */
  #closing = undefined;
  /**
   * The locks this Redlock handed out (acquired or rebuilt from a token) and not
   * released yet: close() releases them. Locks whose validity ran out are dropped now
   * and then, so that locks a program never released do not pile up.
   */
  #held = new Set();
  #pruneAt = HELD_PRUNE_FIRST;

  /**
   * @param clients one per node: ioredis or node-redis clients, `netSocket(...)` /
   *   `rawSocket(...)` transports, or connections with `send(args)`
   * @param options the lock's settings; durations in milliseconds
   */
  constructor(clients, options = {}) {
    super();
    if (!Array.isArray(clients) || clients.length === 0) {
      throw invalid('give one client per Redis node (at least one)', 'no_nodes');
    }
    const transports = clients.map((client, index) => {
      const refusal = clientRefusal(client);
      if (refusal !== undefined) throw invalid(`node ${index}: ${refusal}`);
      const transport = toTransport(client, index);
      if (transport === undefined) {
        throw invalid(
          `node ${index} is neither an ioredis client, a node-redis client, a socket transport, nor a connection with send(args)`,
        );
      }
      // The connect timeout its links get (unset: the core's default).
      const timeout = transport.connectTimeoutMs;
      if (timeout != null) positiveDurationMs(`node ${index}: connectTimeoutMs`, timeout);
      return transport;
    });
    const duplicate = duplicateNode(transports.map((t) => t.address));
    if (duplicate !== undefined) {
      const [i, j] = duplicate;
      throw invalid(
        `nodes ${i} and ${j} are the same server (${transports[i].address}): Redlock needs independent nodes`,
        'duplicate_node',
      );
    }
    if (options.notices !== undefined && typeof options.notices !== 'boolean') {
      throw invalid('notices must be true or false');
    }
    const tracer = resolveTracer(options.tracer, version());
    if (tracer === null) {
      throw invalid(
        options.tracer === true
          ? 'tracer: true needs @opentelemetry/api (an optional peer dependency) installed'
          : 'tracer must be an OpenTelemetry Tracer, true or false',
      );
    }
    this.#options = coreOptions(clients.length, options);
    const config = core(() => new Config(this.#options));
    this.#core = new CoreRedlock(config, seed());
    config.free();
    this.#labels = transports.map((t) => t.label);
    this.#driver = new Driver(transports, { notices: options.notices !== false });
    this.#driver.events = this;
    this.#driver.tracer = tracer;
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

  /** True once close() was called. */
  get closed() {
    return this.#closed;
  }

  /**
   * Acquires a lock on `resources` (one name or several, all or none) for `ttlMs`
   * (default: the configured TTL). Options: `{ ttlMs, waitMs, signal, fencing }`.
   * `waitMs` keeps trying until that much time has passed (instead of the configured
   * attempts), trying again at once when a release is announced; aborting `signal`
   * cancels the acquisition (what it may have set is released) with a CancelledError;
   * `fencing` asks for a fencing token (or none) whatever the Redlock's setting.
   * Throws LockHeldError when someone else holds it, NodesFailingError when nodes fail.
   */
  async acquire(resources, options) {
    this.#open();
    const { ttlMs, waitMs, signal, fencing } = acquireOptions(options);
    if (signal?.aborted) throw new CancelledError('the acquisition was cancelled before it started', { cause: signal.reason });
    const names = resourceList(resources);
    const client = this.#coreFor(fencing);
    let coreOptions;
    if (ttlMs !== undefined || waitMs !== undefined) {
      coreOptions = { ttlMs, waitUs: waitMs === undefined ? undefined : Math.round(waitMs * 1000) };
    }
    // The channels to listen on for release notices, once the core says the acquisition
    // listens (the engine's `listen` action).
    const watch = () => client.noticeChannels(names);
    // One resource named by a string (the usual lock) crosses as the string itself.
    const one = names.length === 1 && typeof names[0] === 'string' ? names[0] : undefined;
    const start =
      one === undefined
        ? (engine, now) => core(() => engine.acquire(client, names, now, coreOptions))
        : (engine, now) => core(() => engine.acquireOne(client, one, now, coreOptions));
    const outcome = await this.#driver.run(start, {
      signal,
      watch,
      kind: 'acquire',
      resources: names,
    });
    if (outcome.kind === 'acquired') {
      const lock = new Lock(this, outcome.lease, names, outcome);
      if (this.#closed) {
        // close() started while this acquisition ran: release what it took, then refuse.
        await this.#releaseAll([lock]);
        throw new UsedAfterCloseError('this Redlock was closed while the acquisition ran (the lock was released)');
      }
      this._track(lock);
      return lock;
    }
    const what = outcome.errorClass === 'held_elsewhere' ? 'is locked by someone else' : `could not be locked: ${outcome.reason}`;
    throw outcomeError(outcome, `${namesText(names)} ${what} (${outcome.attempts} attempts)`, {
      reason: outcome.reason,
      nodes: this._details(outcome.nodes),
      resources: names,
      attempts: outcome.attempts,
    });
  }

  /** The core client for an acquisition's fencing setting (the configured one by default). */
  #coreFor(fencing) {
    if (fencing === undefined || fencing === this.#options.fencing || (fencing === false && !this.#options.fencing)) {
      return this.#core;
    }
    if (this.#otherCore === undefined) {
      const config = core(() => new Config({ ...this.#options, fencing }));
      this.#otherCore = new CoreRedlock(config, seed());
      config.free();
    }
    return this.#otherCore;
  }

  /**
   * Whether someone holds the lock on `resources` now (docs/inspection.md): reads the
   * keys on every node (it never changes one) and resolves true when a quorum of nodes
   * hold one token on every key. Keys left on fewer than a quorum (a failed attempt, a
   * lost holder) do not make it locked. Rejects with NodesFailingError when fewer than
   * a quorum of nodes answered: nothing can be said then.
   */
  async isLocked(resources) {
    const names = resourceList(resources);
    return this._inspect(names, (outcome) => outcome.locked);
  }

  /**
   * @internal Inspects `names`; resolves to `decide(outcome, heldBy)` for an `inspected`
   * outcome, where `heldBy(lease)` says whether `lease` holds the lock by it.
   */
  async _inspect(names, decide) {
    this.#open();
    const client = this.#core;
    const { outcome, value } = await this.#driver.run((engine, now) => core(() => engine.inspect(client, names, now)), {
      kind: 'inspect',
      resources: names,
      // At the inspection's end, while the engine still has its outcome.
      finish: (outcome, tag, engine) =>
        outcome.kind === 'inspected'
          ? { outcome, value: decide(outcome, (lease) => core(() => engine.isHeldBy(tag, lease, nowUs()))) }
          : { outcome },
    });
    if (outcome.kind === 'inspected') return value;
    throw outcomeError(outcome, `the lock on ${namesText(names)} could not be inspected: too few nodes answered`, {
      reason: outcome.kind,
      nodes: this._details(outcome.nodes),
      resources: names,
    });
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
    this.#open();
    const names = resourceList(resources);
    const lease = core(() => this.#core.lease(names, token, 0));
    const lock = new Lock(this, lease, names, undefined);
    this._track(lock);
    return lock;
  }

  /**
   * Acquires `resources`, runs `fn(signal, lock)`, and releases the lock whatever
   * happens. While `fn` runs the lock is kept alive by the core's KeepAlive; `signal`
   * is aborted with a LockLostError (or NotHeldError) the moment the lock is lost. If
   * `fn` returns after that, `using` rejects with that error.
   *
   * `options` (a TTL in milliseconds or `{ ttlMs, signal }`) may be omitted.
   */
  async using(resources, options, fn) {
    if (typeof options === 'function') {
      fn = options;
      options = undefined;
    }
    if (typeof fn !== 'function') throw invalid('using(resources, options, fn) needs a function');
    const lock = await this.acquire(resources, options);
    const controller = new AbortController();
    const keeper = new Keeper(this, lock, controller);
    try {
      const result = await fn(controller.signal, lock);
      if (controller.signal.aborted) throw controller.signal.reason;
      return result;
    } finally {
      await keeper.stop();
      if (!this.#closed) await lock.release().catch((error) => {
        // The lock's keys expire anyway; a lost lock has nothing left to release.
        if (!controller.signal.aborted) throw error;
      });
    }
  }

  /**
   * Resolves once every node's link is idle (or stalled): operations decide at a
   * quorum, so a release can return while its commands to slower nodes are still out.
   * Wait for this before closing the clients (in a worker, hand it to `ctx.waitUntil`).
   */
  idle() {
    if (this.#closed) return Promise.resolve();
    return this.#driver.idle();
  }

  /**
   * Stops this Redlock: releases every lock of it still held (all at once, each within
   * its release's deadlines, and within 2 s in all), then its listeners leave the
   * clients (which stay yours) and sockets this package opened are closed. Resolves
   * once that is done; calling it again returns the same promise. From the moment it is
   * called, every use of the Redlock and of its locks (acquire, extend, release,
   * isOwned, ...) throws UsedAfterCloseError.
   */
  close() {
    if (this.#closing !== undefined) return this.#closing;
    this.#closed = true;
    const held = [...this.#held].filter((lock) => !lock.released);
    this.#held.clear();
    if (held.length === 0) {
      // Nothing to release: closed at once, as before any lock was taken.
      this.#driver.close();
      this.#closing = Promise.resolve();
    } else {
      this.#closing = this.#releaseAll(held).finally(() => this.#driver.close());
    }
    return this.#closing;
  }

  /**
   * Releases `locks` through the driver, whatever #closed says, within
   * CLOSE_RELEASE_LIMIT_MS; a lock is marked released only where a quorum confirmed it.
   */
  async #releaseAll(locks) {
    const pending = locks.filter((lock) => !lock.released);
    if (pending.length === 0) return;
    const client = this.#core;
    const releases = pending.map((lock) => {
      lock._keepAlive?.stop();
      const lease = lock.lease;
      return this.#driver
        .run((engine, now) => core(() => engine.release(client, lease, now)), {
          kind: 'release',
          resources: lock.resources,
        })
        .then(
          (outcome) => {
            if (outcome.kind === 'released') lock._markReleased();
          },
          () => {},
        );
    });
    let timer;
    const limit = new Promise((resolve) => {
      timer = setTimeout(resolve, CLOSE_RELEASE_LIMIT_MS);
      timer.unref?.();
    });
    try {
      await Promise.race([Promise.all(releases), limit]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** @internal Tracks a lock handed out, for close(). */
  _track(lock) {
    const held = this.#held;
    if (held.size >= this.#pruneAt) {
      for (const old of held) if (!old.isValid) held.delete(old);
      this.#pruneAt = Math.max(HELD_PRUNE_FIRST, held.size * 2);
    }
    held.add(lock);
  }

  /** @internal A lock released (confirmed by a quorum): close() has nothing left to do for it. */
  _untrack(lock) {
    this.#held.delete(lock);
  }

  #open() {
    if (this.#closed) throw new UsedAfterCloseError('this Redlock was closed');
  }

  // ---- for Lock and Keeper -------------------------------------------------------

  /**
   * @internal Runs the operation `start(engine, core, now)` starts (it returns its tag);
   * resolves to its outcome, which `keepAlive` is told of.
   */
  _run(start, keepAlive, resources, kind) {
    if (this.#closed) return Promise.reject(new UsedAfterCloseError('this Redlock was closed'));
    const client = this.#core;
    return this.#driver.run((engine, now) => core(() => start(engine, client, now)), {
      kind,
      resources,
      finish:
        keepAlive === undefined
          ? undefined
          : (outcome, tag, engine) => {
              keepAlive.handleOutcomeOf(engine, tag, nowUs());
              return outcome;
            },
    });
  }

  /**
   * @internal Hands one core event to its listeners (`event.kind` names it). A listener
   * that throws does not touch the lock: the operation goes on and its outcome is
   * unchanged; the error is emitted as an `error` event to the `error` listeners, or,
   * when there are none, printed with console.error.
   */
  _emitEvent(event) {
    try {
      this.emit(event.kind, event);
    } catch (error) {
      try {
        if (this.listenerCount('error') > 0) {
          this.emit('error', error);
          return;
        }
      } catch (again) {
        error = again;
      }
      console.error(`redlock: a listener of '${event.kind}' threw:`, error);
    }
  }

  /** @internal */
  _details(results) {
    return nodeDetails(results, this.#labels);
  }

  /** @internal A KeepAlive for `lease` under this Redlock's configuration. */
  _keepAlive(lease) {
    const config = this.#core.config;
    try {
      return new KeepAlive(config, lease);
    } finally {
      config.free();
    }
  }
}

/** A held lock. Dispose of it (`await using`) or call `release()`. */
export class Lock {
  #redlock;
  #lease;
  #released = false;
  /** The release under way, so that a second release() waits for it instead of racing it. */
  #releasing = undefined;
  /** The acquisition's outcome, for its per-node results, made into details when first read. */
  #acquired;
  #nodes = undefined;
  /** The KeepAlive of `using`, told about every extension. */
  _keepAlive = undefined;
  /** The Keeper of `using`, kicked by an extension made by hand. */
  _keeper = undefined;

  constructor(redlock, lease, resources, acquired) {
    this.#redlock = redlock;
    this.#lease = lease;
    /** The locked resource names, in order. */
    this.resources = resources;
    /** Attempts the acquisition took (undefined for a lock rebuilt from a token). */
    this.attempts = acquired?.attempts;
    // The outcome, not its node results: they are made when first read.
    this.#acquired = acquired;
    /** @internal When the lock was acquired (or rebuilt), for the `lost` event. */
    this._heldSinceUs = nowUs();
  }

  /** How each node answered the acquisition (none for a lock rebuilt from a token). */
  get nodes() {
    this.#nodes ??= this.#acquired ? this.#redlock._details(this.#acquired.nodes) : [];
    return this.#nodes;
  }

  /** The token stored under every key. */
  get token() {
    return this.#lease.token;
  }

  /**
   * The fencing token (acquired with `fencing`): a whole number, strictly greater than
   * that of every earlier lock of these resources whose acquisition completed. Send it
   * with every write to the protected resource, which refuses a token lower than one it
   * has seen (`fencedSet`). `undefined` without fencing or for a lock rebuilt from a token.
   */
  get fencingToken() {
    return this.#lease.fencingToken;
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

  /** True once a quorum confirmed a release (by `release()`, or by the Redlock's `close()`). */
  get released() {
    return this.#released;
  }

  /** The core's lease (for the low-level API). */
  get lease() {
    return this.#lease;
  }

  /**
   * Extends the lock by `ttlMs` (default: its own TTL) from now. A missing key is never
   * re-created. Throws LockLostError when the lock is taken or expired, NotHeldError when
   * its keys are gone (released), NodesFailingError (with `validUntilUs` and `retryAt`)
   * when nodes failed but the lock still holds until then.
   */
  async extend(ttlMs) {
    this.#checkOpen();
    if (ttlMs !== undefined) checkTtlMs('ttlMs', ttlMs);
    if (this.#released) {
      throw new NotHeldError(`the lock on ${namesText(this.resources)} was released`, {
        reason: 'released',
        resources: this.resources,
      });
    }
    const lease = this.#lease;
    const outcome = await this.#redlock._run(
      (engine, client, now) => engine.extend(client, lease, now, ttlMs),
      this._keepAlive,
      this.resources,
      'extend',
    );
    this.#lease = outcome.lease;
    // By hand, under using(): the keep-alive follows the new lease (a shorter TTL makes
    // its next extension due sooner than the timer it set from the old one).
    this._keeper?.kick();
    if (outcome.kind === 'extended') return this;
    const what = {
      lock_lost: 'is lost',
      not_held: 'is not held: its keys are gone',
      nodes_failing: `could not be extended: ${outcome.reason}; it holds for ${(outcome.validityUs / 1000).toFixed(1)} ms more`,
    }[outcome.errorClass];
    throw outcomeError(outcome, `the lock on ${namesText(this.resources)} ${what}`, {
      reason: outcome.reason,
      nodes: this.#redlock._details(outcome.nodes),
      resources: this.resources,
    });
  }

  /**
   * Releases the lock on every node (only keys holding this lock's token are deleted).
   * Resolves once a quorum confirmed the keys are gone; throws NodesFailingError when
   * fewer than a quorum could (the keys may stay until their TTL; the lock is not marked
   * released, and release() may be called again), UsedAfterCloseError when the lock was
   * already released or its Redlock closed (close() released it).
   */
  async release() {
    this.#checkOpen();
    if (this.#released) throw new UsedAfterCloseError('the lock was already released');
    if (this.#releasing !== undefined) {
      // One release at a time: a second call while one runs gets its outcome's error.
      await this.#releasing.catch(() => {});
      return this.release();
    }
    this._keepAlive?.stop();
    const lease = this.#lease;
    const redlock = this.#redlock;
    const running = redlock._run((engine, client, now) => engine.release(client, lease, now), undefined, this.resources, 'release');
    this.#releasing = running;
    let outcome;
    try {
      outcome = await running;
    } finally {
      this.#releasing = undefined;
    }
    if (outcome.kind === 'released') {
      this._markReleased();
      return new Released(redlock, outcome);
    }
    throw outcomeError(outcome, `the lock on ${namesText(this.resources)} was not released on a quorum`, {
      reason: outcome.kind,
      nodes: redlock._details(outcome.nodes),
      resources: this.resources,
    });
  }

  /**
   * Whether this lock still holds now, read from the nodes (docs/inspection.md): a
   * quorum of nodes hold its token on every key and its validity has not run out (the
   * core decides). False once released. Rejects with NodesFailingError when fewer than
   * a quorum of nodes answered.
   */
  async isOwned() {
    this.#checkOpen();
    if (this.#released) return false;
    return this.#redlock._inspect(this.resources, (outcome, heldBy) => heldBy(this.#lease));
  }

  /** For `await using lock = await redlock.acquire(...)`. */
  async [asyncDispose]() {
    if (!this.#released && !this.#redlock.closed) await this.release();
  }

  /**
   * Makes the lock no longer this Redlock's to release at `close()`: for a lock meant to
   * outlive the Redlock (released later by its token, by another process or request).
   * Everything else is unchanged while the Redlock is open. Returns the lock.
   */
  detach() {
    this.#redlock._untrack(this);
    return this;
  }

  #checkOpen() {
    if (this.#redlock.closed) {
      throw new UsedAfterCloseError(
        `the Redlock of the lock on ${namesText(this.resources)} was closed (close() released the locks it held)`,
      );
    }
  }

  /** @internal A quorum confirmed the release. */
  _markReleased() {
    this.#released = true;
    this.#redlock._untrack(this);
  }

  /** @internal The lease the KeepAlive settled on. */
  _setLease(lease) {
    this.#lease = lease;
  }
}

/**
 * What `release()` resolves to: `released`, how many nodes confirmed the keys are gone,
 * and `nodes`, how each node answered (made into details when first read: most callers
 * never look). A class rather than an object literal with a getter, which cost about a
 * microsecond per release; `toJSON` keeps `nodes` in its JSON.
 */
class Released {
  #redlock;
  #outcome;
  #nodes = undefined;

  constructor(redlock, outcome) {
    this.#redlock = redlock;
    this.#outcome = outcome;
    this.released = outcome.released;
  }

  get nodes() {
    this.#nodes ??= this.#redlock._details(this.#outcome.nodes);
    return this.#nodes;
  }

  toJSON() {
    return { ...this, nodes: this.nodes };
  }
}

const LOST_MESSAGES = {
  taken: 'was taken by someone else',
  not_held: 'is gone (its keys expired or were deleted)',
  expired: 'expired before an extension succeeded',
  extension_limit: 'expired after the last allowed extension',
};

/**
 * Runs the core's KeepAlive for `using`: extends when it says so, and aborts the signal
 * when it says the lock is lost.
 */
class Keeper {
  #redlock;
  #lock;
  #controller;
  #keepAlive;
  #timer;
  #extending = Promise.resolve();
  #busy = false;
  #stopped = false;

  constructor(redlock, lock, controller) {
    this.#redlock = redlock;
    this.#lock = lock;
    this.#controller = controller;
    this.#keepAlive = redlock._keepAlive(lock.lease);
    lock._keepAlive = this.#keepAlive;
    lock._keeper = this;
    this.#step();
  }

  /**
   * An extension made by hand: its outcome went to the KeepAlive, whose next action may
   * be due sooner (a shorter TTL), so the timer set from the old lease is set again.
   */
  kick() {
    if (!this.#stopped && !this.#busy) this.#step();
  }

  async stop() {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#keepAlive.stop();
    await this.#extending;
    this.#lock._keepAlive = undefined;
    this.#lock._keeper = undefined;
  }

  #step() {
    if (this.#stopped) return;
    clearTimeout(this.#timer);
    const action = this.#keepAlive.poll(nowUs());
    switch (action.type) {
      case 'extend':
        this.#busy = true;
        this.#extending = this.#lock.extend().then(
          () => {},
          (error) => {
            // An extension that could not run at all (not a node failure: those are
            // outcomes the KeepAlive already has).
            if (!(error instanceof Error && 'nodes' in error)) this.#keepAlive.handleFailure(nowUs());
          },
        ).then(() => {
          this.#busy = false;
          if (this.#stopped) return;
          this.#lock._setLease(this.#keepAlive.lease);
          this.#step();
        });
        break;
      case 'wait':
        this.#timer = setTimeout(() => this.#step(), Math.max(0, Math.floor((action.until - nowUs()) / 1000)));
        break;
      case 'lost': {
        const ErrorClass = action.reason === 'not_held' ? NotHeldError : LockLostError;
        const error = new ErrorClass(`the lock on ${namesText(this.#lock.resources)} ${LOST_MESSAGES[action.reason]}`, {
          reason: action.reason,
          nodes: this.#redlock._details(this.#keepAlive.lastFailure()),
          resources: this.#lock.resources,
        });
        if (this.#redlock._listening) {
          const event = this.#keepAlive.lostEvent(this.#lock._heldSinceUs, nowUs());
          if (event !== undefined) this.#redlock._emitEvent(event);
        }
        if (!this.#controller.signal.aborted) this.#controller.abort(error);
        break;
      }
      default:
        break;
    }
  }
}
