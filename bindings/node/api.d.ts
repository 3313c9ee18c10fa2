// Types shared by the Node.js (index.js) and edge (edge.js) entry points.

import type * as core from './wasm/redlock_wasm.js';

/**
 * The core itself (WebAssembly). A driver of one's own hands each release notice to
 * `core.Operation.handleNoticeMessage(node, message, nowUs)` with the message's bytes as
 * received (the waiter the release named first in the resource's queue, or empty);
 * `handleNotice(node, nowUs)` is the same notice naming nobody, and
 * `handleSubscribed(node, nowUs)` takes each confirmed subscription to one of the
 * operation's channels (docs/bindings.md, rule 13).
 */
export * as core from './wasm/redlock_wasm.js';

/** A resource name: text (sent as UTF-8) or raw bytes. */
export type Resource = string | Uint8Array;

/** A reply as the core takes it. */
export type Reply = core.Reply;

/**
 * A connection of the caller's own: sends one command (its name first) and resolves to
 * the core's reply; it should not reject (a rejection counts as a connection failure).
 * Treated as always open.
 */
export interface Connection {
  /** Sends one command (argv, the command's name first) and resolves to its reply. */
  send(args: Array<string | Uint8Array>): Promise<Reply>;
  /** Shown in errors' per-node detail. */
  label?: string;
  /** `host:port`, compared to refuse the same server twice. */
  address?: string;
  /** Closes the connection (called by `Redlock.close()` for connections it opened). */
  close?(): void;
}

/** An ioredis (v5+) client, as far as this package uses it. */
export interface IoredisLike {
  /** Sends a command, replies decoded as text. */
  call(command: string | Buffer, ...args: Array<string | Buffer>): Promise<unknown>;
  /** Sends a command, bulk replies as Buffers. */
  callBuffer(command: string | Buffer, ...args: Array<string | Buffer>): Promise<unknown>;
}

/** A node-redis (v4+) client, as far as this package uses it. */
export interface NodeRedisLike {
  /** Sends a command given as argv. */
  sendCommand(args: Array<string | Buffer>, ...rest: any[]): Promise<unknown>;
  /** Whether the client is connected. */
  readonly isOpen: boolean;
}

/** One node's client: an ioredis or node-redis client, a `SocketNode`, or any `Connection`. */
export type Client = IoredisLike | NodeRedisLike | SocketNode | Connection;

/** The lock's settings. Durations are milliseconds (fractions allowed below the TTL). */
export interface RedlockOptions {
  /** The lock's TTL on every node, whole milliseconds. Default 10000. */
  ttlMs?: number;
  /** Default 0.01 (1 % of the TTL). */
  driftFactor?: number;
  /** Default 2. */
  driftFixedMs?: number;
  /** How long one node may take to answer; default the smaller of 50 and ttlMs / 10. */
  nodeTimeoutMs?: number;
  /** Least validity an acquisition or extension must leave. Default 0. */
  minValidityMs?: number;
  /** Attempts of one acquisition, the first included. Default 3. */
  attempts?: number;
  /** Base delay between attempts. Default 200. */
  retryDelayMs?: number;
  /** Jitter around the base delay, at most the delay. Default 100. */
  retryJitterMs?: number;
  /** Put in front of every resource name to form its key. Default none. */
  keyPrefix?: string | Uint8Array;
  /** Random bytes per token (16 to 64). Default 20. */
  tokenBytes?: number;
  /** Most automatic extensions of one lock in `using`; null or absent: unbounded. */
  maxExtensions?: number | null;
  /**
   * Hand out a fencing token with every lock (`lock.fencingToken`, docs/fencing.md):
   * one more round trip per acquisition. Default false.
   */
  fencing?: boolean;
  /**
   * Listen for release notices while an acquisition waits to retry, on a subscriber
   * connection per node made from each client (`duplicate()`, or a socket of its own):
   * a waiter then tries again as soon as the lock is released, and waiters with `waitMs`
   * get it in the order they started waiting (each notice's message names the first;
   * `core.Operation.handleNoticeMessage`). Default true. Clients that cannot subscribe
   * (a `Connection` of your own) simply get no notices.
   */
  notices?: boolean;
  /**
   * OpenTelemetry tracing: one span per operation (`redlock.acquire`, `.extend`,
   * `.release`, `.inspect`) with the outcome as attributes and status, retries and
   * failed nodes as span events. An OpenTelemetry `Tracer`, or `true` for the global
   * tracer of `@opentelemetry/api` (an optional peer dependency; Node.js entry only).
   * Default: no spans.
   */
  tracer?: boolean | { startSpan(name: string, options?: object): unknown };
}

/**
 * What one node did: `success` (it agreed), `conflict` (the key is held with another
 * token), `timeout` (no answer by the core's deadline), `error` (an error reply or a
 * connection failure), `pending` (asked, undecided when the operation decided),
 * `not_asked`.
 */
export type NodeOutcome = 'not_asked' | 'pending' | 'success' | 'conflict' | 'missing' | 'timeout' | 'error';

/** How one node answered. */
export interface NodeDetail {
  /** The node's position in the clients given to `Redlock`. */
  node: number;
  /** The connection's label (its address for the clients this package knows). */
  label: string;
  /** What the node did. */
  result: NodeOutcome;
  /** The error text, for `result: 'error'`. */
  error?: string;
  /** Why the node failed, for `error` and `timeout` results. */
  cause?: core.NodeCause;
}

/** What a release did. */
export interface ReleaseResult {
  /** Nodes that deleted the lock's keys. */
  released: number;
  /** How each node answered. */
  readonly nodes: NodeDetail[];
}

/** Options of one acquisition. */
export interface AcquireOptions {
  /** A TTL for this lock only (whole milliseconds). Default: the configured TTL. */
  ttlMs?: number;
  /**
   * A wait limit in milliseconds: keep trying until then (instead of the configured
   * attempts), trying again at once when a release is announced. Gives up with
   * LockHeldError (or NodesFailingError) at the limit. 0 tries once.
   */
  waitMs?: number;
  /** A fencing token for this lock (or none), whatever the Redlock's `fencing` setting. */
  fencing?: boolean;
  /**
   * Aborting it cancels the acquisition: what it may have set is released on every
   * node, and the promise rejects with a CancelledError.
   */
  signal?: AbortSignal;
}

/**
 * Any error of this package. `code` is the core's error class (one subclass each);
 * `reason` the finer cause where there is one.
 */
export class RedlockError extends Error {
  /** The core's error class: `held_elsewhere`, `nodes_failing`, `lock_lost`, `not_held`, `invalid_argument`, `used_after_close`, `cancelled`. */
  readonly code: core.ErrorClass;
  /** The specific rule or reason, where there is one (`ttl_zero`, `duplicate_node`, `conflict`, ...). */
  readonly reason?: string;
}

/** A lock operation that did not succeed, with how every node answered. */
export class LockError extends RedlockError {
  /** The core's failure reason (conflict, nodes_failed, mixed, validity_too_short, not_held), a lost lock's reason (taken, expired, extension_limit), `not_released`, or `released`. */
  readonly reason: string;
  /** How each node answered, with its cause for a failure. */
  readonly nodes: NodeDetail[];
  /** The resources of the lock. */
  readonly resources: Resource[];
  /** Attempts made (acquisitions). */
  readonly attempts?: number;
}

/** `held_elsewhere`: the lock is held by someone else. */
export class LockHeldError extends LockError {
  /** Always `held_elsewhere`. */
  readonly code: 'held_elsewhere';
}

/**
 * `nodes_failing`: nodes fail (see each node's `cause`), or a quorum came too late.
 * After a failed extension the lock still holds until `validUntilUs`; `retryAt` says
 * when to retry. After a release, the keys may stay until their TTL.
 */
export class NodesFailingError extends LockError {
  /** Always `nodes_failing`. */
  readonly code: 'nodes_failing';
  /** After a failed extension: until when the lock still holds (microseconds). */
  readonly validUntilUs?: number;
  /** After a failed extension: when to try again (microseconds), or null for never. */
  readonly retryAt?: number | null;
}

/** The former name of NodesFailingError. */
export { NodesFailingError as NodesFailedError };

/** `lock_lost`: the lock was taken, or its validity ran out. */
export class LockLostError extends LockError {
  /** Always `lock_lost`. */
  readonly code: 'lock_lost';
}

/** `not_held`: the lock's keys are gone (expired or released) and nobody else holds them. */
export class NotHeldError extends LockError {
  /** Always `not_held`. */
  readonly code: 'not_held';
}

/** `invalid_argument`: a configuration or argument broke a rule, named by `reason`. */
export class InvalidArgumentError extends RedlockError {
  /** Always `invalid_argument`. */
  readonly code: 'invalid_argument';
  /** The rule that was broken (`ttl_zero`, `duplicate_node`, ...). */
  readonly reason: core.ConfigErrorCode | string;
}

/** `used_after_close`: a call on a closed Redlock, or a second release of a lock. */
export class UsedAfterCloseError extends RedlockError {
  /** Always `used_after_close`. */
  readonly code: 'used_after_close';
}

/** `cancelled`: the caller aborted the operation; `cause` is the signal's reason. */
export class CancelledError extends RedlockError {
  /** Always `cancelled`. */
  readonly code: 'cancelled';
}

/** A held lock. */
export class Lock implements AsyncDisposable {
  private constructor();
  /** The locked resources. */
  readonly resources: Resource[];
  /** Attempts the acquisition took (undefined for a lock rebuilt from a token). */
  readonly attempts: number | undefined;
  /** How each node answered the acquisition. */
  readonly nodes: NodeDetail[];
  /** The random value stored under every key; keep it to release from elsewhere. */
  readonly token: string;
  /**
   * The fencing token (acquired with `fencing`): strictly greater than that of every
   * earlier lock of these resources whose acquisition completed; send it with every write
   * to the protected resource (`fencedSet`). Undefined without fencing.
   */
  readonly fencingToken: number | undefined;
  /** Until when the lock is held, microseconds on `performance.now()`'s clock. */
  readonly validUntilUs: number;
  /** Milliseconds of validity left now (0 once expired). */
  readonly validityMs: number;
  /** Whether validity is left now and the lock was not released. */
  readonly isValid: boolean;
  /** Extensions so far. */
  readonly extensions: number;
  /** The TTL the lock was taken or last extended with. */
  readonly ttlMs: number;
  /** Whether a release was confirmed by a quorum (by `release()` or by the Redlock's `close()`). */
  readonly released: boolean;
  /** The core's lease (for the low-level API). */
  readonly lease: core.Lease;
  /**
   * Extends by `ttlMs` (default: the lock's TTL) from now. Rejects with LockLostError,
   * NotHeldError (also after `release()`), NodesFailingError, or UsedAfterCloseError.
   */
  extend(ttlMs?: number): Promise<this>;
  /**
   * Releases on every node, deciding at a quorum. Rejects with NodesFailingError when
   * fewer than a quorum confirmed (the lock is then not marked released), and with
   * UsedAfterCloseError when already released or when its Redlock was closed.
   */
  release(): Promise<ReleaseResult>;
  /**
   * Leaves the lock out of the Redlock's `close()`, which otherwise releases it: for a
   * lock meant to outlive the Redlock (released later by its token). Returns the lock.
   */
  detach(): this;
  /**
   * Whether this lock still holds, read from the nodes (docs/inspection.md): a quorum
   * hold its token and its validity has not run out. False once released. Rejects with
   * NodesFailingError when fewer than a quorum of nodes answered.
   */
  isOwned(): Promise<boolean>;
  /** Releases (`await using held = await redlock.acquire(...)`). */
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * One of the core's events (docs/observability.md): `kind` names it, `atUs` and
 * `elapsedUs` time it, and the fields that do not apply to its kind are null.
 */
export type RedlockEvent = core.RedlockEvent;

/** The event names a Redlock emits: the core's event kinds. */
export type RedlockEventName = core.EventKind;

/**
 * Locks over N independent Redis nodes; every decision is the core's. An event
 * emitter: `on(kind, (event) => ...)` receives the core's events (`acquired`, `retry`,
 * `node_failed`, `lost`, ...). A listener that throws leaves the lock alone; its error
 * goes to the `error` listeners, or to console.error when there are none.
 */
export class Redlock {
  /** Calls `listener` with every event of this kind. */
  on(name: RedlockEventName, listener: (event: RedlockEvent) => void): this;
  /** Calls `listener` with errors thrown by event listeners. */
  on(name: 'error', listener: (error: unknown) => void): this;
  /** Same as `on`. */
  addListener(name: RedlockEventName, listener: (event: RedlockEvent) => void): this;
  /** Calls `listener` with the next event of this kind only. */
  once(name: RedlockEventName, listener: (event: RedlockEvent) => void): this;
  /** Removes `listener`. */
  off(name: RedlockEventName | 'error', listener: (...args: any[]) => void): this;
  /** Same as `off`. */
  removeListener(name: RedlockEventName | 'error', listener: (...args: any[]) => void): this;
  /** Removes every listener of `name`, or of every event. */
  removeAllListeners(name?: RedlockEventName | 'error'): this;
  /** Calls the listeners of `name` with `args`; true if there were any. */
  emit(name: string, ...args: unknown[]): boolean;
  /** How many listeners `name` has. */
  listenerCount(name: RedlockEventName | 'error'): number;
  /** The listeners of `name`. */
  listeners(name: RedlockEventName | 'error'): Array<(...args: any[]) => void>;
  /** The names that have listeners. */
  eventNames(): string[];
  /** Throws InvalidArgumentError (`duplicate_node`) when two clients reach one server. */
  constructor(clients: Client[], options?: RedlockOptions);
  /** The configuration the core validated (defaults filled in). */
  readonly settings: core.ConfigSettings;
  /** The nodes' labels, in order. */
  readonly nodes: string[];
  /** True once `close()` was called: every call then rejects with `UsedAfterCloseError`. */
  readonly closed: boolean;
  /**
   * Acquires a lock on one resource or several (all or none), retrying as configured.
   * `options` is a TTL in milliseconds or `{ ttlMs, waitMs, signal, fencing }`. Rejects with `LockHeldError`
   * (held elsewhere), `NodesFailingError`, or `CancelledError` when `signal` aborts.
   */
  acquire(resources: Resource | Resource[], options?: number | AcquireOptions): Promise<Lock>;
  /** Extends `lock` by `ttlMs` (default its TTL) from now; same as `lock.extend()`. */
  extend(lock: Lock, ttlMs?: number): Promise<Lock>;
  /** Releases `lock` on every node; same as `lock.release()`. */
  release(lock: Lock): Promise<ReleaseResult>;
  /**
   * Whether someone holds the lock on `resources`, read from the nodes (it changes no
   * key; docs/inspection.md): a quorum hold one token on every key. Rejects with
   * NodesFailingError when fewer than a quorum of nodes answered.
   */
  isLocked(resources: Resource | Resource[]): Promise<boolean>;
  /** A lock rebuilt from a token kept elsewhere, to release or extend it. */
  lock(resources: Resource | Resource[], token: string): Lock;
  /**
   * Acquires, runs `fn` while extending the lock in the background, and releases. The
   * signal is aborted the moment the lock is lost.
   */
  using<T>(
    resources: Resource | Resource[],
    options: number | AcquireOptions | undefined,
    fn: (signal: AbortSignal, lock: Lock) => T | Promise<T>,
  ): Promise<T>;
  /** `using` with the configured TTL. */
  using<T>(resources: Resource | Resource[], fn: (signal: AbortSignal, lock: Lock) => T | Promise<T>): Promise<T>;
  /**
   * Resolves once every node's link is idle (or stalled): operations decide at a
   * quorum, so wait for this before closing connections.
   */
  idle(): Promise<void>;
  /**
   * Stops this Redlock: releases every lock of it still held (all at once, within 2 s),
   * then its listeners leave the clients (which stay yours) and sockets it opened are
   * closed; resolves when done (a second call returns the same promise). From the call
   * on, every use of the Redlock and of its locks rejects with UsedAfterCloseError.
   */
  close(): Promise<void>;
}

/** What a fenced write did. */
export type FencedSetResult =
  /** The item now holds the value, and `token` is the highest it accepted. */
  | { accepted: true; token: number }
  /** Nothing changed: the item had already accepted `seen` (>= token): a stale holder. */
  | { accepted: false; token: number; seen: number };

/**
 * Writes `value` to the Redis key `item` only if `token` is greater than every token
 * the item accepted before (atomically, through `client`: the resource's own server).
 * Rejects with InvalidArgumentError (`invalid_fencing_token`, ...) for bad arguments and
 * NodesFailingError (`fenced_write_failed`) when the server answers an error or fails.
 */
export function fencedSet(
  client: IoredisLike | NodeRedisLike | Connection,
  item: string | Uint8Array,
  value: string | Uint8Array,
  token: number,
): Promise<FencedSetResult>;

/** The link cause of a Node.js or client error: refused, auth, tls, timeout or closed. */
export function linkCause(error: unknown): core.LinkCause;

/** A client library's value as a core reply (`OK` is ok, other strings status, ...). */
export function replyFromValue(value: unknown): Reply;

/**
 * Opens a byte stream: resolves once connected. `signal` aborts when the attempt is
 * given up (not open within the link's connect timeout, or the Redlock closed): abandon
 * the connection under way then (rejecting is fine; nothing more is reported for it,
 * and a stream still resolved is closed at once).
 */
export type StreamOpener = (handlers: {
  onData(bytes: Uint8Array): void;
  onClose(error?: unknown): void;
  signal: AbortSignal;
}) => Promise<{ write(bytes: Uint8Array): void; close(): void }>;

/** One connection at a time over a byte stream: the transport of a RESP link. */
export class StreamTransport {
  /** A transport opening its streams with `open`; `label` is shown in errors. */
  constructor(open: StreamOpener, options?: { label?: string; address?: string });
  /** Shown in errors' per-node detail. */
  readonly label: string;
  /** `host:port`, compared to refuse the same server twice. */
  readonly address: string;
  /**
   * How long a connection (the link's, and the subscriber connections') may take to
   * open before it is given up with cause `timeout`, in milliseconds: unset, the core's
   * default (`core.defaults().connectTimeoutDefaultMs`, 2 s). Read when a Redlock is
   * made with this transport.
   */
  connectTimeoutMs: number | undefined;
}

/** A node reached over raw sockets; every Redlock given it opens its own connection. */
export class SocketNode {
  /**
   * A node whose connections `open` makes (see `netSocket` and `rawSocket`);
   * `connectTimeoutMs` is its transports' (unset: the core's default).
   */
  constructor(open: StreamOpener, options: { label: string; address?: string; connectTimeoutMs?: number });
  /** Shown in errors' per-node detail. */
  readonly label: string;
  /** `host:port`, compared to refuse the same server twice. */
  readonly address: string;
  /**
   * The connect timeout its transports get (ms), or unset for the core's default. A
   * `sentinelSocket` sets the core's `sentinelConnectTimeoutMs` for its Sentinels.
   */
  readonly connectTimeoutMs: number | undefined;
  /** A transport of its own, one per Redlock. */
  createTransport(): StreamTransport;
  /** Closes every connection opened through this node. */
  close(): void;
}

/** A socket with web streams, as `connect()` from `cloudflare:sockets` returns. */
export interface StreamSocket {
  /** Bytes from the node. */
  readable: ReadableStream<Uint8Array>;
  /** Bytes to the node. */
  writable: WritableStream<Uint8Array>;
  /** Resolves once connected. */
  opened?: Promise<unknown>;
  /** Closes the socket. */
  close(): Promise<void>;
}

/** Opens a socket, as `connect` from `cloudflare:sockets` does. */
export type Connect = (address: { hostname: string; port: number }) => StreamSocket;

/** How a raw connection logs in before it counts as open: `AUTH`, then `SELECT`. */
export interface Login {
  /** An ACL user (with `password`); the default user without it. */
  username?: string;
  /** Sent with `AUTH` on every connection. */
  password?: string;
  /** Selected on every connection when other than 0. */
  db?: number;
}

/**
 * The `StreamOpener` of a `Connect` function and an address; with `login`, each
 * connection logs in before it counts as open.
 */
export function socketStreams(connect: Connect, address: { hostname: string; port: number }, login?: Login): StreamOpener;

/**
 * A raw-socket node through `connect` (e.g. from `cloudflare:sockets`). With `password`
 * (and `username`) every connection sends `AUTH`, and with `db` `SELECT`, before it
 * counts as open; a refused `AUTH` fails the node with the cause `auth`.
 */
export function rawSocket(connect: Connect, address: { hostname: string; port: number } & Login): SocketNode;

/** The package's clock: microseconds from `performance.now()`. */
export function nowUs(): number;
