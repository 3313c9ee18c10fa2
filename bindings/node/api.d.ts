// Types shared by the Node.js (index.js) and edge (edge.js) entry points.

import type * as core from './wasm/redlock_wasm.js';

export * as core from './wasm/redlock_wasm.js';

/** A resource name: text (sent as UTF-8) or raw bytes. */
export type Resource = string | Uint8Array;

/** A reply as the core takes it. */
export type Reply = core.Reply;

/**
 * One node's connection: sends one command (its name first) and resolves to the
 * core's reply; it should not reject (a rejection counts as a connection failure).
 */
export interface Connection {
  /** Sends one command (argv, the command's name first) and resolves to its reply. */
  send(args: Array<string | Uint8Array>): Promise<Reply>;
  /** Shown in errors' per-node detail. */
  label?: string;
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

/** One node's client: an ioredis or node-redis client, or any `Connection`. */
export type Client = IoredisLike | NodeRedisLike | Connection;

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
}

/**
 * What one node did: `success` (it agreed), `conflict` (the key is held with another
 * token), `timeout` (no answer by the core's deadline), `error` (an error reply or a
 * connection failure), `pending` (asked, undecided when the operation decided),
 * `not_asked`.
 */
export type NodeOutcome = 'not_asked' | 'pending' | 'success' | 'conflict' | 'timeout' | 'error';

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
}

/** What a release did. */
export interface ReleaseResult {
  /** Nodes that deleted the lock's keys. */
  released: number;
  /** How each node answered. */
  nodes: NodeDetail[];
}

/** Any error of this package; `code` is stable. */
export class RedlockError extends Error {
  /** An error with a stable `code` (the core's snake_case name, or this package's). */
  constructor(message: string, code: string, options?: ErrorOptions);
  /** Stable identifier: `lock_held`, `nodes_failed`, `lock_lost`, `ttl_zero`, ... */
  readonly code: string;
}

/** A lock operation that did not succeed, with how every node answered. */
export class LockError extends RedlockError {
  /** The core's reason (`conflict`, `nodes_failed`, `mixed`, ...) or `expired`. */
  readonly reason: core.FailureReason | 'expired';
  /** How each node answered the last attempt. */
  readonly nodes: NodeDetail[];
  /** The resources of the lock. */
  readonly resources: Resource[];
  /** Attempts made (acquisitions). */
  readonly attempts?: number;
}

/** The lock is held by someone else (`code: 'lock_held'`). */
export class LockHeldError extends LockError {}

/**
 * Nodes are failing, or a quorum came too late (`code` is the reason). After a failed
 * extension the lock still holds until `validUntilUs`; `retryAt` says when to retry.
 */
export class NodesFailedError extends LockError {
  /** After a failed extension: until when the old lease still holds (microseconds). */
  readonly validUntilUs?: number;
  /** After a failed extension: when to try again (microseconds), or null for never. */
  readonly retryAt?: number | null;
}

/** The lock is lost (`code: 'lock_lost'`). */
export class LockLostError extends LockError {}

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
  /** Whether `release()` was called. */
  readonly released: boolean;
  /** The core's lease (for the low-level API). */
  readonly lease: core.Lease;
  /** Extends by `ttlMs` (default: the lock's TTL) from now. */
  extend(ttlMs?: number): Promise<this>;
  /** Releases on every node, deciding at a quorum; never throws for node failures. */
  release(): Promise<ReleaseResult>;
  /** Releases (`await using held = await redlock.acquire(...)`). */
  [Symbol.asyncDispose](): Promise<void>;
}

/** Locks over N independent Redis nodes; every decision is the core's. */
export class Redlock {
  /** One client per node, in the same order in every process; options as documented. */
  constructor(clients: Client[], options?: RedlockOptions);
  /** The configuration the core validated (defaults filled in). */
  readonly settings: core.ConfigSettings;
  /** The nodes' labels, in order. */
  readonly nodes: string[];
  /**
   * Acquires a lock on one resource or several (all or none), retrying as configured.
   * Rejects with `LockHeldError` (held elsewhere) or `NodesFailedError`.
   */
  acquire(resources: Resource | Resource[], ttlMs?: number): Promise<Lock>;
  /** Extends `lock` by `ttlMs` (default its TTL) from now; same as `lock.extend()`. */
  extend(lock: Lock, ttlMs?: number): Promise<Lock>;
  /** Releases `lock` on every node; same as `lock.release()`. */
  release(lock: Lock): Promise<ReleaseResult>;
  /** A lock rebuilt from a token kept elsewhere, to release or extend it. */
  lock(resources: Resource | Resource[], token: string): Lock;
  /**
   * Acquires, runs `fn` while extending the lock in the background, and releases. The
   * signal is aborted the moment the lock is lost.
   */
  using<T>(
    resources: Resource | Resource[],
    ttlMs: number | undefined,
    fn: (signal: AbortSignal, lock: Lock) => T | Promise<T>,
  ): Promise<T>;
  /** `using` with the configured TTL. */
  using<T>(resources: Resource | Resource[], fn: (signal: AbortSignal, lock: Lock) => T | Promise<T>): Promise<T>;
  /**
   * Loads the core's scripts into every node's script cache (SCRIPT LOAD) now. The
   * driver already does this on each connection before its first command and after
   * reconnections it can see (see the README); this warms up explicitly.
   */
  loadScripts(): Promise<NodeDetail[]>;
  /**
   * Resolves once every command sent so far has its reply or passed its deadline
   * (operations decide at a quorum; wait for this before closing connections).
   */
  idle(): Promise<void>;
  /** Closes the connections this package opened (raw sockets). */
  close(): void;
}

/** The `Connection` this package makes of an ioredis client (done for you by `Redlock`). */
export function fromIoredis(client: IoredisLike, label?: string): Connection;
/** The `Connection` this package makes of a node-redis client (done for you by `Redlock`). */
export function fromNodeRedis(client: NodeRedisLike, label?: string): Connection;

/** Opens a byte stream: resolves once connected. */
export type StreamOpener = (handlers: {
  onData(bytes: Uint8Array): void;
  onClose(error?: unknown): void;
}) => Promise<{ write(bytes: Uint8Array): void; close(): void }>;

/** A pipelined RESP connection over any byte stream, through the core's codec. */
export class RespConnection implements Connection {
  /** loadScripts (default true): write the core's SCRIPT LOADs first on every new stream. */
  constructor(open: StreamOpener, options?: { label?: string; maxPending?: number; loadScripts?: boolean });
  /** Shown in errors' per-node detail. */
  readonly label: string;
  /** Commands written and not yet answered. */
  readonly pending: number;
  /** Writes one command and resolves to its reply. */
  send(args: Array<string | Uint8Array>): Promise<Reply>;
  /** Closes the stream; pending commands resolve as connection failures. */
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

/** The `StreamOpener` of a `Connect` function and an address. */
export function socketStreams(connect: Connect, address: { hostname: string; port: number }): StreamOpener;

/** A raw-socket connection through `connect` (e.g. from `cloudflare:sockets`). */
export function rawSocket(
  connect: Connect,
  address: { hostname: string; port: number; maxPending?: number },
): RespConnection;

/** Runs a core operation to its outcome over the connections (the low-level loop). */
export function drive(op: core.Operation, connections: Connection[], clock?: () => number): Promise<core.Outcome>;

/** The package's clock: microseconds from `performance.now()`. */
export function nowUs(): number;
