// Node.js entry point: the core is loaded on import.

export * from './api.js';
import type { SocketNode } from './api.js';
import type { ConnectionOptions } from 'node:tls';

/**
 * One node over raw TCP (or TLS) sockets, speaking RESP through the core's codec.
 * `address`: `redis://[[user]:password@]host:port[/db]`, `rediss://...`, `host:port`, or
 * an object. With a password, every connection sends `AUTH` (and `SELECT` for a database
 * other than 0) before it counts as open; a refused `AUTH` fails the node with `auth`.
 */
export function netSocket(
  address: string | { host: string; port: number; tls?: ConnectionOptions; username?: string; password?: string; db?: number },
): SocketNode;

/**
 * The master that Redis Sentinels name for `name`, as one node over raw sockets (a
 * single-instance lock). Each connection asks the Sentinels again, in turn, and checks
 * with ROLE that it reached a master. `tls`: options to reach the master over TLS;
 * `sentinelTimeoutMs`: the most one Sentinel (connect, answer), and the master's
 * connection and ROLE, may take; default the core's
 * (`core.defaults().sentinelQueryTimeoutDefaultMs`, 500 ms). The node's connect timeout is
 * the core's `core.sentinelConnectTimeoutMs(sentinels.length, sentinelTimeoutMs,
 * connectTimeoutDefaultMs)`, so every Sentinel can be asked in turn.
 */
export function sentinelSocket(options: {
  sentinels: Array<string | { host: string; port: number; tls?: ConnectionOptions; username?: string; password?: string }>;
  name: string;
  tls?: ConnectionOptions;
  sentinelTimeoutMs?: number;
  /** The master's ACL user (with `password`). */
  username?: string;
  /** The master's password: `AUTH` on every connection, before `ROLE`. */
  password?: string;
  /** The master's database (`SELECT`), default 0. */
  db?: number;
}): SocketNode;
