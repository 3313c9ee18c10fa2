// Node connections: what the driver sends commands through, one per Redis node.
// Each maps its client's results to the core's replies and never decides anything.
//
// A connection is any object with `send(args) => Promise<Reply>` (args: the command's
// name and arguments as strings or Uint8Arrays; Reply: the core's reply object) and an
// optional `label` and `close()`. ioredis (v5+) and node-redis (v4+) clients are wrapped
// automatically.

import { RespConnection, scriptLoads } from './resp.js';

/** @param {string | Uint8Array} arg */
function toClientArg(arg) {
  return typeof arg === 'string' ? arg : Buffer.from(arg.buffer, arg.byteOffset, arg.byteLength);
}

/**
 * A client's JS value as a core reply. Both clients give status and bulk replies alike
 * as strings; they are passed as status replies (the only text reply the core's
 * commands expect is SET's `OK`).
 */
export function replyFromValue(value) {
  if (value === null || value === undefined) return { type: 'nil' };
  if (typeof value === 'string') return value === 'OK' ? { type: 'ok' } : { type: 'status', value };
  if (typeof value === 'number') return { type: 'integer', value };
  if (typeof value === 'bigint') return { type: 'integer', value };
  if (typeof value === 'boolean') return { type: 'integer', value: value ? 1 : 0 };
  if (value instanceof Uint8Array) return { type: 'bulk', value };
  if (Array.isArray(value)) return { type: 'array', value: value.map(replyFromValue) };
  if (value instanceof Map) {
    return { type: 'array', value: [...value].flat().map(replyFromValue) };
  }
  return { type: 'status', value: String(value) };
}

function hasConstructorNamed(error, name) {
  for (let proto = Object.getPrototypeOf(error); proto; proto = Object.getPrototypeOf(proto)) {
    if (proto.constructor?.name === name) return true;
  }
  return false;
}

/** An error reply from Redis (its full text), or a failure of the client itself. */
function replyFromError(error, isRedisError) {
  if (isRedisError(error)) return { type: 'error', value: error.message };
  const text = error instanceof Error ? error.message : String(error);
  return { type: 'connection_failed', value: text || 'connection failed' };
}

const isIoredisReplyError = (error) => error?.name === 'ReplyError';
const isNodeRedisErrorReply = (error) =>
  error instanceof Error && hasConstructorNamed(error, 'ErrorReply');

function ioredisLabel(client) {
  const o = client.options ?? {};
  return o.path ?? `${o.host ?? 'localhost'}:${o.port ?? 6379}`;
}

function nodeRedisLabel(client) {
  const o = client.options ?? {};
  if (o.url) return String(o.url).replace(/\/\/[^@/]*@/, '//');
  const s = o.socket ?? {};
  return s.path ?? `${s.host ?? 'localhost'}:${s.port ?? 6379}`;
}

/** A connection over an ioredis (v5+) client. */
export function fromIoredis(client, label = ioredisLabel(client)) {
  return {
    label,
    send(args) {
      const [name, ...rest] = args;
      return client.call(toClientArg(name), ...rest.map(toClientArg)).then(replyFromValue, (error) =>
        replyFromError(error, isIoredisReplyError),
      );
    },
  };
}

/** A connection over a node-redis (v4+) client. */
export function fromNodeRedis(client, label = nodeRedisLabel(client)) {
  return {
    label,
    send(args) {
      let pending;
      try {
        pending = client.sendCommand(args.map(toClientArg));
      } catch (error) {
        return Promise.resolve(replyFromError(error, isNodeRedisErrorReply));
      }
      return Promise.resolve(pending).then(replyFromValue, (error) =>
        replyFromError(error, isNodeRedisErrorReply),
      );
    },
  };
}

// Per client, whether the scripts were loaded since it last connected: one `ready`
// listener per client, however many Redlock instances share it.
const scriptState = new WeakMap();

function scriptStateOf(client, watchReconnects) {
  let state = scriptState.get(client);
  if (!state) {
    state = { loaded: false };
    if (watchReconnects) client.on('ready', () => (state.loaded = false));
    scriptState.set(client, state);
  }
  return state;
}

/**
 * `connection`, loading the core's scripts (see `scriptLoads`) ahead of its first command
 * and of its first command after each reconnection `state` is told about. The loads go
 * out on the same connection just before the command, and both clients keep a
 * connection's commands in order, so the command finds the scripts loaded.
 */
function loadingScripts(connection, state) {
  return {
    label: connection.label,
    close: connection.close,
    send(args) {
      if (!state.loaded) {
        state.loaded = true;
        for (const load of scriptLoads()) {
          connection.send(load).then((reply) => {
            if (reply.type === 'error' || reply.type === 'connection_failed') state.loaded = false;
          });
        }
      }
      return connection.send(args);
    },
  };
}

const isIoredis = (c) => typeof c?.call === 'function' && typeof c?.callBuffer === 'function';
const isNodeRedis = (c) => typeof c?.sendCommand === 'function' && 'isOpen' in c;

/** One node's connection from an ioredis client, a node-redis client or a connection. */
export function toConnection(client, index) {
  if (isIoredis(client)) return loadingScripts(fromIoredis(client), scriptStateOf(client, true));
  if (isNodeRedis(client)) return loadingScripts(fromNodeRedis(client), scriptStateOf(client, true));
  // A raw socket loads the scripts itself on every new stream.
  if (client instanceof RespConnection) return client;
  if (typeof client?.send === 'function') {
    // Any other connection: loaded once; its reconnections cannot be seen from here.
    const connection = {
      label: client.label ?? `node ${index}`,
      send: (args) => client.send(args),
      close: client.close?.bind(client),
    };
    return loadingScripts(connection, scriptStateOf(client, false));
  }
  throw new TypeError(
    `node ${index} is neither an ioredis client, a node-redis client, nor a connection with send(args)`,
  );
}
