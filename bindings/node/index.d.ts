// Node.js entry point: the core is loaded on import.

export * from './api.js';
import type { RespConnection } from './api.js';
import type { ConnectionOptions } from 'node:tls';

/**
 * A raw TCP (or TLS) connection to one node, speaking RESP through the core's codec.
 * `address`: `redis://host:port`, `rediss://host:port`, `host:port`, or an object.
 */
export function netSocket(
  address: string | { host: string; port: number; tls?: ConnectionOptions },
  options?: { maxPending?: number },
): RespConnection;
