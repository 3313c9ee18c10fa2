// Node.js entry point: the core is loaded on import.

export * from './api.js';
import type { SocketNode } from './api.js';
import type { ConnectionOptions } from 'node:tls';

/**
 * One node over raw TCP (or TLS) sockets, speaking RESP through the core's codec.
 * `address`: `redis://host:port`, `rediss://host:port`, `host:port`, or an object.
 */
export function netSocket(address: string | { host: string; port: number; tls?: ConnectionOptions }): SocketNode;
