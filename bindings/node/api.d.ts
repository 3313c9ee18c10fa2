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
  send(args: Array<string | Uint8Array>): Promise<Reply>;
  /** Shown in errors' per-node detail. */
  label?: string;
  close?(): void;
}

/** An ioredis (v5+) client, as far as this package uses it. */
export interface IoredisLike {
  call(command: string | Buffer, ...args: Array<string | Buffer>): Promise<unknown>;
  callBuffer(command: string | Buffer, ...args: Array<string | Buffer>): Promise<unknown>;
}

/** A node-redis (v4+) client, as far as this package uses it. */
export interface NodeRedisLike {
  sendCommand(args: Array<string | Buffer>, ...rest: any[]): Promise<unknown>;
  readonly isOpen: boolean;
}

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

export type NodeOutcome = 'not_asked' | 'pending' | 'success' | 'conflict' | 'timeout' | 'error';

/** How one node answered. */
export interface NodeDetail {
  node: number;
  label: string;
  result: NodeOutcome;
  /** The error text, for `result: 'error'`. */
  error?: string;
}

export interface ReleaseResult {
  /** Nodes that deleted the lock's keys. */
  released: number;
  nodes: NodeDetail[];
}

/** Any error of this package; `code` is stable. */
export class RedlockError extends Error {
  constructor(message: string, code: string, options?: ErrorOptions);
  readonly code: string;
}

/** A lock operation that did not succeed, with how every node answered. */
export class LockError extends RedlockError {
  readonly reason: core.FailureReason | 'expired';
  readonly nodes: NodeDetail[];
  readonly resources: Resource[];
  readonly attempts?: number;
}

/** The lock is held by someone else (`code: 'lock_held'`). */
export class LockHeldError extends LockError {}

/**
 * Nodes are failing, or a quorum came too late (`code` is the reason). After a failed
 * extension the lock still holds until `validUntilUs`; `retryAt` says when to retry.
 */
export class NodesFailedError extends LockError {
  readonly validUntilUs?: number;
  readonly retryAt?: number | null;
}

/** The lock is lost (`code: 'lock_lost'`). */
export class LockLostError extends LockError {}

/** A held lock. */
export class Lock implements AsyncDisposable {
  private constructor();
  readonly resources: Resource[];
  readonly attempts: number | undefined;
  readonly nodes: NodeDetail[];
  readonly token: string;
  /** Until when the lock is held, microseconds on `performance.now()`'s clock. */
  readonly validUntilUs: number;
  readonly validityMs: number;
  readonly isValid: boolean;
  readonly extensions: number;
  readonly ttlMs: number;
  readonly released: boolean;
  readonly lease: core.Lease;
  /** Extends by `ttlMs` (default: the lock's TTL) from now. */
  extend(ttlMs?: number): Promise<this>;
  /** Releases on every node, deciding at a quorum; never throws for node failures. */
  release(): Promise<ReleaseResult>;
  [Symbol.asyncDispose](): Promise<void>;
}

export class Redlock {
  constructor(clients: Client[], options?: RedlockOptions);
  readonly settings: core.ConfigSettings;
  readonly nodes: string[];
  acquire(resources: Resource | Resource[], ttlMs?: number): Promise<Lock>;
  extend(lock: Lock, ttlMs?: number): Promise<Lock>;
  release(lock: Lock): Promise<ReleaseResult>;
  /** A lock rebuilt from a token kept elsewhere, to release or extend it. */
  lock(resources: Resource | Resource[], token: string): Lock;
  using<T>(
    resources: Resource | Resource[],
    ttlMs: number | undefined,
    fn: (signal: AbortSignal, lock: Lock) => T | Promise<T>,
  ): Promise<T>;
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

export function fromIoredis(client: IoredisLike, label?: string): Connection;
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
  readonly label: string;
  readonly pending: number;
  send(args: Array<string | Uint8Array>): Promise<Reply>;
  close(): void;
}

/** A socket with web streams, as `connect()` from `cloudflare:sockets` returns. */
export interface StreamSocket {
  readable: ReadableStream<Uint8Array>;
  writable: WritableStream<Uint8Array>;
  opened?: Promise<unknown>;
  close(): Promise<void>;
}

export type Connect = (address: { hostname: string; port: number }) => StreamSocket;

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
