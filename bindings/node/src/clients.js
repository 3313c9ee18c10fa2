// Transports: the I/O of one node's core Link, and nothing else. A transport opens,
// writes and closes when the link says so, and reports what happened (connected,
// closed with a cause, a reply, bytes). It never queues, resends or decides anything.
//
// Over a client library that manages its own connection (ioredis v5+, node-redis v4+),
// the library's ready event is reported as connected and its close/error/reconnecting
// events as closed; `connect` and `close` from the link are hints.

/** @param {string | Uint8Array} arg */
function toClientArg(arg) {
  return typeof arg === 'string' ? arg : Buffer.from(arg.buffer, arg.byteOffset, arg.byteLength);
}

/**
 * A client's JS value as a core reply, one documented way: both clients give status and
 * bulk replies alike as strings, so `OK` is the `ok` reply, any other string a status
 * reply; null is nil; numbers and bigints integers; buffers bulk; arrays (and RESP3 maps,
 * flattened) arrays.
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

const TLS_CODES = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'HOSTNAME_MISMATCH',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

function errorCode(error) {
  if (typeof error?.code === 'string') return error.code;
  // AggregateError (several addresses tried): the first inner error's code.
  const inner = error?.errors?.[0] ?? error?.cause;
  return inner && inner !== error ? errorCode(inner) : undefined;
}

/**
 * Why a connection failed, from a Node.js or client error: `refused`, `auth`, `tls`,
 * `timeout` or `closed` (the core's link causes).
 */
export function linkCause(error) {
  const code = errorCode(error);
  const text = String(error?.message ?? error ?? '');
  if (code === 'ECONNREFUSED' || /ECONNREFUSED/.test(text)) return 'refused';
  if (/\b(WRONGPASS|NOAUTH)\b/.test(text) || /\bauth/i.test(code ?? '')) return 'auth';
  if (
    (code && (TLS_CODES.has(code) || code.startsWith('ERR_SSL_') || code.startsWith('ERR_TLS_'))) ||
    /certificate|self[- ]signed|\bSSL\b|\bTLS\b/i.test(text)
  ) {
    return 'tls';
  }
  if (code === 'ETIMEDOUT' || /ETIMEDOUT|timed? ?out/i.test(text)) return 'timeout';
  return 'closed';
}

function errorText(error, fallback) {
  const text = error instanceof Error ? error.message || errorCode(error) : error && String(error);
  return text || fallback;
}

function hasConstructorNamed(error, name) {
  for (let proto = Object.getPrototypeOf(error); proto; proto = Object.getPrototypeOf(proto)) {
    if (proto.constructor?.name === name) return true;
  }
  return false;
}

/** A client's connect timeout setting in milliseconds, or undefined for none (0, unset). */
function positiveMs(value) {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : undefined;
}

/** node-redis's `socket.connectTimeout` when the client sets none. */
const NODE_REDIS_CONNECT_TIMEOUT_MS = 5000;

const isIoredis = (c) => typeof c?.call === 'function' && typeof c?.callBuffer === 'function';
const isNodeRedis = (c) => typeof c?.sendCommand === 'function' && 'isOpen' in c;

/** An ioredis client configured with `sentinels`: it reaches the master they name. */
const isIoredisSentinel = (c) => Array.isArray(c.options?.sentinels) && c.options.sentinels.length > 0;

/** A node-redis Sentinel (`createSentinel`) or one of its leases. */
const isNodeRedisSentinel = (c) =>
  typeof c === 'object' && c !== null && (hasConstructorNamed(c, 'RedisSentinel') || hasConstructorNamed(c, 'RedisSentinelClient'));

/**
 * `host:port` (or a socket path) of an ioredis client; for a Sentinel client, the
 * service (`sentinel master mymaster`): the node is whichever master the Sentinels name.
 */
function ioredisAddress(client) {
  const o = client.options ?? {};
  if (isIoredisSentinel(client)) return `sentinel master ${o.name ?? 'mymaster'}`;
  return o.path ?? `${o.host ?? 'localhost'}:${o.port ?? 6379}`;
}

/**
 * Why `client` cannot be a node although it looks like a supported client, or
 * undefined. A cluster client follows MOVED/ASK redirects and retries on its own.
 * node-redis's Sentinel resends a command on another connection after a
 * READONLY reply or a lost connection, pools connections to the master, and replaces
 * the master without a ready event to load the scripts: all three are the link's to
 * decide. An ioredis Sentinel client for a replica would answer READONLY to every lock.
 */
export function clientRefusal(client) {
  if (client?.isCluster === true || (typeof client === 'object' && client !== null && hasConstructorNamed(client, 'RedisCluster'))) {
    return 'a Redis Cluster client cannot be a node: it follows redirects and resends commands on its own; give one primary';
  }
  if (isNodeRedisSentinel(client)) {
    return (
      "node-redis's Sentinel (createSentinel) cannot be a node: it resends commands and swaps the master " +
      'without a ready event; use an ioredis client with `sentinels` or sentinelSocket()'
    );
  }
  if (isIoredis(client) && isIoredisSentinel(client) && (client.options.role ?? 'master') !== 'master') {
    return `an ioredis Sentinel client with role ${JSON.stringify(client.options.role)} cannot take locks: use role "master"`;
  }
  return undefined;
}

/** `host:port` (or a socket path) of a node-redis client, without credentials. */
function nodeRedisAddress(client) {
  const o = client.options ?? {};
  if (o.url) {
    const url = new URL(String(o.url));
    return `${url.hostname || 'localhost'}:${url.port || 6379}`;
  }
  const s = o.socket ?? {};
  return s.path ?? `${s.host ?? 'localhost'}:${s.port ?? 6379}`;
}

/**
 * The common part of library transports: listeners on the client's events, removed by
 * detach(), and the cause of the last error seen.
 */
class LibraryTransport {
  resp = false;
  #listeners = [];
  lastError = undefined;

  constructor(client, address) {
    this.client = client;
    this.address = address;
    this.label = address;
  }

  listen(event, handler) {
    this.client.on(event, handler);
    this.#listeners.push([event, handler]);
  }

  /** True from a connection reported ready until it is reported down. */
  reported = false;

  /** Reports the client's current connection ready, once. */
  report(node) {
    if (this.reported) return;
    this.reported = true;
    node.connected();
  }

  /** Reports the connection down with the cause of the last error. */
  down(node, fallback) {
    this.reported = false;
    const error = this.lastError;
    this.lastError = undefined;
    this.lastDown = [linkCause(error ?? fallback), errorText(error, fallback)];
    node.closed(...this.lastDown);
  }

  /** The client is ready: no failure stands. */
  up(node) {
    this.lastDown = undefined;
    this.reported = false;
    this.report(node);
  }

  /**
   * The link asks for a connection the client does not have: the failure that brought
   * it down is reported now (the client retries on its own and reports ready), so an
   * unreachable node fails at once with its cause rather than at a deadline.
   */
  waitForReady(node) {
    const down = this.lastDown;
    if (down) queueMicrotask(() => node.closed(...down));
  }

  detach() {
    for (const [event, handler] of this.#listeners) this.client.removeListener(event, handler);
    this.#listeners = [];
  }
}

/** An ioredis (v5+) client's connection, as the link's transport. */
class IoredisTransport extends LibraryTransport {
  /** Set by `close()`: the connection the link closed; wait for the next ready. */
  #stale = false;

  attach(node) {
    this.node = node;
    this.listen('error', (error) => (this.lastError = error));
    if (isIoredisSentinel(this.client)) this.#attachSentinel(node);
    this.listen('ready', () => {
      this.#stale = false;
      this.up(node);
    });
    this.listen('close', () => this.down(node, 'connection closed'));
    if (this.client.status === 'ready') queueMicrotask(() => this.client.status === 'ready' && this.report(node));
  }

  /**
   * A Sentinel client that finds no master keeps connecting without a close event: it
   * emits `sentinelError` for each Sentinel, then `error` once all were asked. That
   * error is reported as the connection's failure (with the last Sentinel's answer), so
   * the node fails at once with it rather than at its deadline.
   */
  #attachSentinel(node) {
    let lastSentinelError;
    this.listen('sentinelError', (error) => (lastSentinelError = error));
    this.listen('error', (error) => {
      if (this.client.status === 'ready') return;
      const why = lastSentinelError?.message;
      lastSentinelError = undefined;
      this.lastError =
        why && !String(error?.message).includes(why) ? Object.assign(new Error(`${error.message} (${why})`), { code: error.code }) : error;
      this.down(node, 'no master from the Sentinels');
    });
  }

  connect() {
    const status = this.client.status;
    if (status === 'ready' && !this.#stale) queueMicrotask(() => this.client.status === 'ready' && this.report(this.node));
    else if (status === 'wait') this.client.connect().catch(() => {}); // lazyConnect: the events report it
    else if (status === 'end') queueMicrotask(() => this.node.closed('closed', 'the client was closed'));
    else this.waitForReady(this.node); // (re)connecting on its own: its ready event reports it
  }

  write(id, args) {
    const node = this.node;
    // One promise hop per command: this is on every lock's path.
    ioredisCall(this.client, args).then(
      (value) => node.value(id, value),
      (error) => node.reply(id, ioredisFailure(error)),
    );
  }

  /**
   * How long a connection may take to open (the link's connect timeout, and the
   * subscriber connections'): the client's `connectTimeout` (ioredis's default 10 s),
   * or undefined when it sets none (the core's default then).
   */
  get connectTimeoutMs() {
    return positiveMs(this.client.options?.connectTimeout);
  }

  /** The node's subscriber connection for release notices (see IoredisSubscriber). */
  subscriber(events) {
    return new IoredisSubscriber(this.client, events);
  }

  /** The link found the connection stuck: drop it; ioredis reconnects on its own. */
  close() {
    this.#stale = true;
    this.reported = false;
    this.client.disconnect(true);
  }
}

/** A node-redis (v4+) client's connection, as the link's transport. */
class NodeRedisTransport extends LibraryTransport {
  attach(node) {
    this.node = node;
    this.listen('error', (error) => {
      this.lastError = error;
      if (!this.client.isReady) this.down(node, error);
    });
    this.listen('ready', () => this.up(node));
    this.listen('reconnecting', () => this.down(node, 'reconnecting'));
    this.listen('end', () => this.down(node, 'connection closed'));
    if (this.client.isReady) queueMicrotask(() => this.client.isReady && this.report(node));
  }

  connect() {
    if (this.client.isReady) queueMicrotask(() => this.client.isReady && this.report(this.node));
    else if (this.lastDown) this.waitForReady(this.node); // its ready event reports a success
    else if (!this.client.isOpen) queueMicrotask(() => this.node.closed('closed', 'the client is not open'));
  }

  write(id, args) {
    const node = this.node;
    nodeRedisCall(this.client, args, LINK_COMMAND_OPTIONS).then(
      (value) => node.value(id, value),
      (error) => node.reply(id, nodeRedisFailure(error)),
    );
  }

  /**
   * How long a connection may take to open (the link's connect timeout, and the
   * subscriber connections'): the client's `socket.connectTimeout` (node-redis's
   * default 5 s).
   */
  get connectTimeoutMs() {
    return positiveMs(this.client.options?.socket?.connectTimeout) ?? NODE_REDIS_CONNECT_TIMEOUT_MS;
  }

  /** The node's subscriber connection for release notices (see NodeRedisSubscriber). */
  subscriber(events) {
    return new NodeRedisSubscriber(this.client, events);
  }

  /**
   * node-redis cannot drop one connection and keep the client: the stuck connection
   * stays, and the link writes again once it is reported ready.
   */
  close() {
    this.reported = false;
  }
}

/**
 * Release-notice subscriber connections over a client library: each opening is a new
 * `duplicate()` of the user's client (same options) whose own reconnection is switched
 * off, so that a connection opens only when the core's Subscriptions say `Open` and
 * subscribes only what they say: a lost one stays lost until the core opens it again,
 * after its pause. Events are reported for the current connection only (see notices.js):
 * `opened()` when it is ready, `lost()` when it could not be made or dropped,
 * `refused()` for a SUBSCRIBE answered with an error, `confirmed(channel)` when the
 * node confirms one (the promise of `subscribe`), `message(channel, bytes)`.
 */
class LibrarySubscriber {
  #client;
  events;
  /** The current connection (a duplicate of the client), or null. */
  sub = null;
  /** Counts connections: events of an older one are ignored. */
  generation = 0;

  constructor(client, events) {
    this.#client = client;
    this.events = events;
  }

  open() {
    this.close();
    const generation = this.generation;
    const sub = this.duplicate(this.#client);
    this.sub = sub;
    this.start(sub, () => generation === this.generation);
  }

  /** Reports the current connection `generation` lost, once. */
  lost(generation) {
    if (generation !== this.generation) return;
    this.close();
    this.events.lost();
  }

  subscribe(channel) {
    const sub = this.sub;
    if (sub === null) return;
    const generation = this.generation;
    this.send(sub, 'subscribe', channel).then(
      () => {
        if (generation === this.generation) this.events.confirmed(channel);
      },
      (error) => {
        if (generation !== this.generation) return;
        // An error reply (NOPERM from an ACL without pub/sub): refused. A connection
        // failure is reported by the connection's events, a silence by the core's timeout.
        if (this.isReplyError(error)) this.events.refused();
      },
    );
  }

  unsubscribe(channel) {
    if (this.sub !== null) this.send(this.sub, 'unsubscribe', channel).catch(() => {});
  }

  /** Forgets the current connection (nothing more is reported for it) and closes it. */
  close() {
    this.generation += 1;
    const sub = this.sub;
    this.sub = null;
    if (sub === null) return;
    try {
      Promise.resolve(this.end(sub)).catch(() => {});
    } catch {
      // Not open.
    }
  }
}

/** An ioredis subscriber connection: `retryStrategy` returning null, so no reconnection. */
class IoredisSubscriber extends LibrarySubscriber {
  duplicate(client) {
    return client.duplicate({ lazyConnect: true, autoResubscribe: false, retryStrategy: () => null });
  }

  start(sub, current) {
    const generation = this.generation;
    sub.on('error', () => {}); // its end (below) reports the loss
    sub.on('messageBuffer', (channel, message) => {
      if (current()) this.events.message(channel, message);
    });
    sub.once('ready', () => {
      if (current()) this.events.opened();
    });
    // Without reconnection, a connection that could not be made or dropped ends.
    sub.once('end', () => this.lost(generation));
    sub.connect().catch(() => {});
  }

  send(sub, method, channel) {
    return sub[method](toClientArg(channel));
  }

  isReplyError(error) {
    return error?.name === 'ReplyError';
  }

  end(sub) {
    sub.disconnect();
  }
}

/** A node-redis subscriber connection: `socket.reconnectStrategy: false`, so no reconnection. */
class NodeRedisSubscriber extends LibrarySubscriber {
  /** The current connection's listener (subscribe and unsubscribe name the same one). */
  #listener = undefined;

  duplicate(client) {
    // The socket options merged (node-redis's duplicate() replaces `socket` as a whole).
    return client.duplicate({ socket: { ...client.options?.socket, reconnectStrategy: false } });
  }

  start(sub, current) {
    const generation = this.generation;
    // Buffer mode: (message, channel) as Buffers, whatever bytes the channel holds.
    this.#listener = (message, channel) => {
      if (current()) this.events.message(channel, message);
    };
    // Without reconnection, an error on a connection not ready (or no longer) is its end.
    sub.on('error', () => {
      if (!sub.isReady) this.lost(generation);
    });
    sub.connect().then(
      () => {
        if (current()) this.events.opened();
      },
      () => this.lost(generation),
    );
  }

  send(sub, method, channel) {
    try {
      return Promise.resolve(sub[method](toClientArg(channel), this.#listener, true));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  isReplyError(error) {
    return error instanceof Error && hasConstructorNamed(error, 'ErrorReply');
  }

  // At once, connected or not: a node that never answers would otherwise keep a
  // connection attempt (and the process) alive.
  end(sub) {
    return typeof sub.destroy === 'function' ? sub.destroy() : sub.disconnect();
  }
}

/**
 * Any object with `send(args) => Promise<Reply>` (a connection of the caller's own):
 * always open; its replies go to the link.
 */
class SendTransport {
  resp = false;

  constructor(connection, index) {
    this.connection = connection;
    this.label = connection.label ?? `node ${index}`;
    this.address = connection.address ?? `connection-${index}.invalid:${index + 1}`;
  }

  attach(node) {
    this.node = node;
  }

  connect() {
    queueMicrotask(() => this.node.connected());
  }

  write(id, args) {
    const node = this.node;
    let pending;
    try {
      // A copy: the caller's code may change it, and the round's writes share it.
      pending = Promise.resolve(this.connection.send(args.slice()));
    } catch (error) {
      pending = Promise.reject(error);
    }
    pending.then(
      (reply) => node.reply(id, reply),
      (error) => node.reply(id, { type: 'connection_failed', value: `${linkCause(error)}: ${errorText(error, 'failed')}` }),
    );
  }

  close() {}

  detach() {
    this.connection.close?.();
  }
}

/**
 * Command names in lower case, as ioredis keeps them: it looks each name up in its
 * tables several times per command, lower-casing it each time. Redis reads names in
 * any case.
 */
const LOWER_NAMES = new Map();

function lowerName(name) {
  let lower = LOWER_NAMES.get(name);
  if (lower === undefined) {
    lower = name.toLowerCase();
    if (LOWER_NAMES.size < 64) LOWER_NAMES.set(name, lower);
  }
  return lower;
}

/** Sends `args` through an ioredis client: its promise of the client's value. */
function ioredisCall(client, args) {
  try {
    // The core gives strings for every argument that is UTF-8 (all of a lock's): they
    // go as they are; bytes go as Buffers.
    for (let i = 1; i < args.length; i++) {
      if (typeof args[i] !== 'string') return client.call(toClientArg(args[0]), ...args.slice(1).map(toClientArg));
    }
    const name = args[0];
    if (typeof name !== 'string') return client.call(toClientArg(name), ...args.slice(1));
    const lower = lowerName(name);
    // The lock's commands by their argument count, without a copy of the array.
    switch (args.length) {
      case 5:
        return client.call(lower, args[1], args[2], args[3], args[4]);
      case 6:
        return client.call(lower, args[1], args[2], args[3], args[4], args[5]);
      default:
        return client.call(lower, ...args.slice(1));
    }
  } catch (error) {
    return Promise.reject(error);
  }
}

/** An ioredis rejection as the core's reply: an error reply, or a connection failure. */
function ioredisFailure(error) {
  return error?.name === 'ReplyError'
    ? { type: 'error', value: error.message }
    : { type: 'connection_failed', value: `${linkCause(error)}: ${errorText(error, 'failed')}` };
}

/** Sends `args` through an ioredis client; resolves to the core's reply, never rejects. */
function ioredisSend(client, args) {
  return ioredisCall(client, args).then(replyFromValue, ioredisFailure);
}

/**
 * node-redis options for the links' commands. No client-side command timeout: the core
 * enforces every deadline itself (and node-redis 5's default timeout arms a timer and an
 * AbortSignal per command, which was a visible part of a lock cycle's cost). node-redis 4
 * reads no `timeout` option.
 */
const LINK_COMMAND_OPTIONS = Object.freeze({ timeout: 0 });

/** Sends `args` through a node-redis client: its promise of the client's value. */
function nodeRedisCall(client, args, options) {
  try {
    return Promise.resolve(client.sendCommand(args.map(toClientArg), options));
  } catch (error) {
    return Promise.reject(error);
  }
}

/** A node-redis rejection as the core's reply: an error reply, or a connection failure. */
function nodeRedisFailure(error) {
  return error instanceof Error && hasConstructorNamed(error, 'ErrorReply')
    ? { type: 'error', value: error.message }
    : { type: 'connection_failed', value: `${linkCause(error)}: ${errorText(error, 'failed')}` };
}

/** Sends `args` through a node-redis client; resolves to the core's reply, never rejects. */
function nodeRedisSend(client, args) {
  return nodeRedisCall(client, args).then(replyFromValue, nodeRedisFailure);
}

/**
 * A function that sends one command (`args`) through the user's own client (ioredis,
 * node-redis, or a connection with `send(args)`) and resolves to the core's reply, or
 * undefined for anything else. For one-off commands outside the links (fenced writes).
 */
export function commandSender(client) {
  if (isIoredis(client)) return (args) => ioredisSend(client, args);
  if (isNodeRedis(client)) return (args) => nodeRedisSend(client, args);
  if (typeof client?.send === 'function') {
    return (args) => {
      let pending;
      try {
        pending = Promise.resolve(client.send(args));
      } catch (error) {
        pending = Promise.reject(error);
      }
      return pending.catch((error) => ({
        type: 'connection_failed',
        value: `${linkCause(error)}: ${errorText(error, 'failed')}`,
      }));
    };
  }
  return undefined;
}

/** The address of a client for messages (`host:port`), when known. */
export function clientAddress(client) {
  if (isIoredis(client)) return ioredisAddress(client);
  if (isNodeRedis(client)) return nodeRedisAddress(client);
  return client?.label ?? client?.address ?? 'the resource';
}

/**
 * One node's transport from an ioredis client, a node-redis client, a socket node of
 * this package (`netSocket`, `rawSocket`), or a connection with `send(args)`.
 */
export function toTransport(client, index) {
  if (isIoredis(client)) return new IoredisTransport(client, ioredisAddress(client));
  if (isNodeRedis(client)) return new NodeRedisTransport(client, nodeRedisAddress(client));
  if (typeof client?.createTransport === 'function') return client.createTransport();
  if (typeof client?.send === 'function') return new SendTransport(client, index);
  return undefined;
}
