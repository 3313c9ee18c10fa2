// The driver loop: the core's Engine holds one Link per node and the operations that
// use them, and routes each reply from its link to its operation inside WebAssembly. It
// decides nothing: the operations decide quorum, validity, deadlines and retries; each
// link decides order, the bound in flight, stalled nodes, owed releases, resends,
// scripts and reconnecting. This file hands the transports' events to the engine, does
// the actions it gives back (write, connect, close, an operation's end), and arms the
// one wake-up it names (`nextWake`), nothing else.

import { Engine } from '../wasm/redlock_wasm.js';
import { nowUs } from './clock.js';
import { replyFromValue } from './clients.js';
import { CancelledError, UsedAfterCloseError } from './errors.js';
import { Notices, canSubscribe } from './notices.js';
import { endWithError, recordEvent, startSpan } from './tracing.js';

// The engine's action codes (`code % 8`; `Math.floor(code / 8)` is the node or the tag).
const WRITE = 1;
const CONNECT = 2;
const CLOSE = 3;
const DONE = 4;
const FAILED = 5;
const LISTEN = 6;
const WRITE_SAME = 7;
// In what an input returns: the count of actions waiting, and a bit set when the next
// wake-up became sooner than `nextWake` last said (only then is it read again).
const COUNT = 0x7fffffff;
const WAKE_EARLIER = 0x80000000;

// Timers run before the event loop reads sockets: a timer that fires late (a busy
// machine, a long GC) would time out replies already received. The wake-up therefore
// runs just after this turn's I/O (setImmediate where there is one).
const afterIo = globalThis.setImmediate ?? ((call) => setTimeout(call, 0));

/** Runs `call` at `at` (us on nowUs's clock) unless a sooner wake-up is armed. */
class Alarm {
  #timer = undefined;
  #at = Infinity;
  #call;
  /** Whether a timer keeps the process alive (ref/unref only when this changes). */
  #keep = true;

  constructor(call) {
    this.#call = call;
  }

  /** Arms for `at`; an alarm already armed sooner stays (waking early is harmless). */
  arm(at) {
    if (at >= this.#at) return;
    clearTimeout(this.#timer);
    this.#at = at;
    this.#timer = setTimeout(() => {
      this.#at = Infinity;
      this.#timer = undefined;
      afterIo(this.#call);
    }, Math.max(0, Math.ceil((at - nowUs()) / 1000)));
    if (!this.#keep) this.#timer.unref?.();
  }

  clear() {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#at = Infinity;
  }

  /**
   * Whether the armed timer keeps the process alive (Node.js timers; elsewhere a no-op):
   * one left armed while nothing waits on it must not.
   */
  keepAlive(keep) {
    if (keep === this.#keep) return;
    this.#keep = keep;
    const timer = this.#timer;
    if (typeof timer === 'object' && timer !== null) {
      if (keep) timer.ref?.();
      else timer.unref?.();
    }
  }
}

// The engine's inputs for a transport's events, as Driver.input calls them.
const CONNECTED = (engine, node, now) => engine.connected(node, now);
const CLOSED = (engine, node, now, cause, text) => engine.closed(node, cause, text, now);
const REPLY = (engine, node, now, id, reply) => engine.reply(node, id, reply, now);
const DATA = (engine, node, now, bytes) => engine.data(node, bytes, now);

/**
 * One node's transport, reporting its events to the driver under the node's index.
 *
 * A transport (clients.js, resp.js) has `attach(node)`, `connect()`, `write(id, data)`
 * (`data`: the command's arguments, or its RESP bytes when `resp` is true), `close()`
 * and optionally `detach()`, `connectTimeoutMs` and `subscriber(events)`; it reports to
 * the node given to `attach`: `connected()`, `closed(cause, text)`, and for write `id`
 * `value(id, value)` or `reply(id, reply)` (or `data(bytes)` for RESP).
 */
class Node {
  constructor(driver, index, transport) {
    this.driver = driver;
    this.index = index;
    this.transport = transport;
    /** Whether its writes come as RESP bytes (a socket of this package's). */
    this.resp = transport.resp === true;
    transport.attach(this);
  }

  /** The link's connect timeout in milliseconds. */
  get connectTimeoutMs() {
    return this.driver.engine.connectTimeoutMs(this.index);
  }

  connected() {
    this.driver.input(CONNECTED, this.index);
  }

  /** @param {'refused' | 'auth' | 'tls' | 'timeout' | 'closed'} cause */
  closed(cause, text) {
    this.driver.input(CLOSED, this.index, cause, text);
  }

  /** The reply to write `id`, as a core reply object. */
  reply(id, reply) {
    this.driver.input(REPLY, this.index, id, reply);
  }

  /**
   * The reply to write `id` as a client library's value, mapped as replyFromValue
   * (clients.js) says; the values of every lock cycle (`OK`, a safe integer) go in
   * without an object.
   */
  value(id, value) {
    const driver = this.driver;
    if (driver.closed) return;
    const engine = driver.engine;
    let count;
    try {
      if (value === 'OK') count = engine.replyOk(this.index, id, nowUs());
      else if (Number.isSafeInteger(value)) count = engine.replyInteger(this.index, id, value, nowUs());
      else count = engine.reply(this.index, id, replyFromValue(value), nowUs());
    } catch (error) {
      driver.refused(this.index, error);
      return;
    }
    driver.after(count);
  }

  data(bytes) {
    this.driver.input(DATA, this.index, bytes);
  }
}

/** An operation under way: its promise's settlers and what its end needs. */
class Task {
  constructor(resolve, reject, finish) {
    this.resolve = resolve;
    this.reject = reject;
    /** `(outcome, tag, engine) => value`: what the promise resolves to, at its end. */
    this.finish = finish;
    this.detach = undefined;
    /** `() => channels`: what to listen on once the engine says the operation listens. */
    this.watch = undefined;
    /** The notice channels listened on for this task (ids), once watching. */
    this.watching = undefined;
    /** The OpenTelemetry span of this operation, when tracing. */
    this.span = undefined;
  }
}

export class Driver {
  closed = false;
  #tasks = new Map();
  /** The one wake-up: the engine's `nextWake` (its links' and operations' soonest). */
  #alarm = new Alarm(() => this.#wake());
  #idleAlarm = new Alarm(() => this.#checkIdle());
  #idleWaiters = [];
  /** Whether operations started now make events (the engine's `recordEvents`). */
  #observed = true;
  /** The arguments array of the last `write` action, for the `write the same` after it. */
  #args = undefined;
  /**
   * Where the operations' events go (`{ _listening, _emitEvent(event) }`): operations
   * started while nobody listens (and no tracer) make none, and events are drained from
   * the core after each input only while `_listening`.
   */
  events = undefined;
  /** An OpenTelemetry Tracer: one span per operation (see tracing.js), or undefined. */
  tracer = undefined;

  /**
   * @param transports one per node (see clients.js and resp.js)
   * @param {{ notices?: boolean }} [options] `notices: false`: never subscribe (nor
   *   when no transport can)
   */
  constructor(transports, { notices = true } = {}) {
    // A connection attempt gets the client's connect timeout when the transport names
    // one (`connectTimeoutMs`), else the core's default: the link gives it up past that
    // (`close`) and counts it failed.
    this.engine = new Engine(
      transports.map((transport) => {
        const options = { resp: transport.resp === true };
        const connectTimeoutMs = transport.connectTimeoutMs;
        if (connectTimeoutMs != null) options.connectTimeoutMs = connectTimeoutMs;
        return options;
      }),
    );
    this.nodes = transports.map((transport, index) => new Node(this, index, transport));
    this.notices =
      notices && transports.some(canSubscribe)
        ? new Notices(transports, (tag, node, message) => this.#notice(tag, node, message))
        : undefined;
  }

  /**
   * Runs the operation `start(engine, now)` starts (it returns the operation's tag) to
   * its outcome. With `signal`, aborting it abandons the operation (the links still get
   * the release it emits) and rejects with a CancelledError. With `watch`
   * (acquisitions), `watch()` names the notice channels to listen on from when the
   * engine says the operation listens until it ends. With `finish`, the promise
   * resolves to `finish(outcome, tag, engine)`, called at the operation's end while the
   * engine still has it (an extension's outcome for KeepAlive, an inspection's for
   * isHeldBy); otherwise to the outcome.
   */
  run(start, { signal, watch, finish, kind, resources } = {}) {
    return new Promise((resolve, reject) => {
      if (this.closed) {
        reject(new UsedAfterCloseError('the Redlock was closed'));
        return;
      }
      // Operations make events only while someone listens or traces.
      const observed = this.tracer !== undefined || this.events?._listening === true;
      if (observed !== this.#observed) {
        this.#observed = observed;
        this.engine.recordEvents = observed;
      }
      let tag;
      try {
        tag = start(this.engine, nowUs());
      } catch (error) {
        reject(error);
        return;
      }
      const task = new Task(resolve, reject, finish);
      if (this.tracer !== undefined) task.span = startSpan(this.tracer, kind, resources);
      if (this.notices) task.watch = watch;
      this.#tasks.set(tag, task);
      // While an operation runs, its wake-up keeps the process alive.
      if (this.#tasks.size === 1) this.#alarm.keepAlive(true);
      if (signal) {
        const abort = () => this.#abandon(tag, signal.reason);
        signal.addEventListener('abort', abort, { once: true });
        task.detach = () => signal.removeEventListener('abort', abort);
      }
      this.after(1, true);
    });
  }

  /** Hands an event of node `node`'s transport to the engine: `call(engine, node, now, a, b)`. */
  input(call, node, a, b) {
    if (this.closed) return;
    let count;
    try {
      count = call(this.engine, node, nowUs(), a, b);
    } catch (error) {
      this.refused(node, error);
      return;
    }
    this.after(count);
  }

  /**
   * An event the engine refused (a transport gave something unexpected): the connection
   * can no longer be trusted.
   */
  refused(node, error) {
    if (this.closed) return;
    let count = 0;
    try {
      count = this.engine.closed(node, 'closed', String(error?.message ?? error), nowUs());
    } catch {
      // Not one of the engine's nodes: nothing to close.
    }
    this.nodes[node]?.transport.close();
    this.after(count);
  }

  /**
   * After an input (`result`: what it returned): the engine's actions, then the
   * wake-up, read again when it became sooner (or `readWake`: after starting an
   * operation, and after the alarm fired).
   */
  after(result, readWake = result >= WAKE_EARLIER) {
    if ((result & COUNT) > 0) this.#drain();
    if (this.events?._listening || this.tracer !== undefined) this.#drainAllEvents();
    if (readWake) {
      const at = this.engine.nextWake;
      if (at >= 0) this.#alarm.arm(at);
    }
    if (this.#idleWaiters.length > 0) this.#checkIdle();
  }

  /** Does the engine's actions until none is left. */
  #drain() {
    const engine = this.engine;
    for (let code = engine.poll(); code !== 0; code = engine.poll()) {
      const kind = code % 8;
      const x = (code - kind) / 8;
      switch (kind) {
        case WRITE: {
          const node = this.nodes[x];
          if (node.resp) {
            node.transport.write(engine.writeId, engine.writeBytes());
          } else {
            const args = engine.writeArgs();
            this.#args = args;
            node.transport.write(engine.writeId, args);
          }
          break;
        }
        case WRITE_SAME: {
          // The arguments of the write before (the N writes of a round share them).
          const node = this.nodes[x];
          node.transport.write(engine.writeId, node.resp ? engine.writeBytes() : this.#args);
          break;
        }
        case CONNECT:
          this.nodes[x].transport.connect();
          break;
        case CLOSE:
          // The connection, or the attempt to open one under way (past the connect
          // timeout): the transport closes or gives it up and reports nothing more for
          // it (a client library's transport takes it as a hint).
          this.nodes[x].transport.close();
          break;
        case DONE:
          this.#done(x);
          break;
        case FAILED:
          this.#failed(x);
          break;
        case LISTEN:
          this.#watch(x);
          break;
        default:
          break;
      }
    }
  }

  /** Operation `tag` has its outcome. */
  #done(tag) {
    const engine = this.engine;
    const task = this.#tasks.get(tag);
    if (task === undefined) {
      engine.forget(tag);
      return;
    }
    this.#drainEvents(tag, task);
    let result;
    let failure;
    try {
      const outcome = engine.outcome(tag);
      result = task.finish === undefined ? outcome : task.finish(outcome, tag, engine);
    } catch (error) {
      failure = error;
      engine.forget(tag);
    }
    // Otherwise the engine forgets the operation at its next input.
    if (failure !== undefined) {
      this.#finish(tag, task, 'error');
      task.reject(failure);
      return;
    }
    this.#finish(tag, task);
    task.resolve(result);
  }

  /** Operation `tag` cannot go on (the engine says why). */
  #failed(tag) {
    const engine = this.engine;
    const task = this.#tasks.get(tag);
    const error = engine.error(tag);
    if (task === undefined) return;
    this.#finish(tag, task, 'error');
    task.reject(error);
  }

  /** The operations whose time came, and the links'. */
  #wake() {
    if (this.closed) return;
    // Left armed for the next operation, but not keeping the process alive with
    // nothing waiting (told here, where the timer fires, rather than at every end:
    // that changed a timer's ref twice per lock cycle).
    if (this.#tasks.size === 0) this.#alarm.keepAlive(false);
    let count;
    try {
      count = this.engine.timeout(nowUs());
    } catch {
      count = 0; // nowUs is always a valid time: nothing to do
    }
    this.after(count, true);
  }

  /** Hands the unread events of every operation to `events` and to their spans. */
  #drainAllEvents() {
    for (const [tag, task] of this.#tasks) this.#drainEvents(tag, task);
  }

  /** Hands the operation's unread events to `events` if anyone listens, and to its span. */
  #drainEvents(tag, task) {
    const events = this.events;
    const listening = events !== undefined && events._listening;
    if (!listening && task.span === undefined) return;
    const engine = this.engine;
    for (let event = engine.pollEvent(tag); event !== undefined; event = engine.pollEvent(tag)) {
      if (task.span !== undefined) recordEvent(task.span, event);
      if (listening) events._emitEvent(event);
    }
  }

  #finish(tag, task, error) {
    if (task.span !== undefined) {
      if (error === undefined) task.span.end();
      else endWithError(task.span, error);
      task.span = undefined;
    }
    this.#tasks.delete(tag);
    task.detach?.();
    if (task.watching !== undefined) this.notices.unwatch(tag, task.watching);
  }

  /** Starts listening for operation `tag`'s notice channels, once. */
  #watch(tag) {
    const task = this.#tasks.get(tag);
    if (task === undefined || task.watch === undefined || task.watching !== undefined) return;
    let channels;
    try {
      channels = task.watch();
    } catch {
      channels = undefined; // no notices for this one: it waits on the retry schedule
    }
    task.watching = channels === undefined ? [] : this.notices.watch(tag, channels);
  }

  /**
   * A release notice from `node` for the operation tagged `tag`, with its message's
   * bytes; without (undefined), a confirmed subscription there (the core decides whether
   * a release may have gone unheard).
   */
  #notice(tag, node, message) {
    if (this.closed || !this.#tasks.has(tag)) return;
    let count;
    try {
      count =
        message === undefined ? this.engine.subscribed(tag, node, nowUs()) : this.engine.notice(tag, node, message, nowUs());
    } catch (error) {
      const task = this.#tasks.get(tag);
      this.engine.forget(tag);
      this.#finish(tag, task, 'error');
      task.reject(error);
      count = 0;
    }
    this.after(count);
  }

  #abandon(tag, reason) {
    const task = this.#tasks.get(tag);
    if (task === undefined || this.closed) return;
    this.#finish(tag, task, 'cancelled');
    // What must still be sent (the release of an attempt whose SETs are out) goes to
    // the links under a tag nobody waits for.
    const count = this.engine.abandon(tag, nowUs());
    task.reject(new CancelledError('the operation was cancelled', { cause: reason }));
    this.after(count);
  }

  /**
   * Resolves once every link is idle (nothing queued or awaiting a reply) or stalled
   * (what it awaits is past its deadline): before closing connections, so a release
   * that decided at a quorum still reaches the slower nodes.
   */
  idle() {
    return new Promise((resolve) => {
      this.#idleWaiters.push(resolve);
      this.#checkIdle();
    });
  }

  #checkIdle() {
    if (this.closed) return;
    const at = this.engine.idleWake(nowUs());
    if (at < 0) {
      this.#idleAlarm.clear();
      const waiters = this.#idleWaiters;
      this.#idleWaiters = [];
      for (const resolve of waiters) resolve();
      return;
    }
    // Look again when the busy links next wake (a reply also triggers a look).
    this.#idleAlarm.arm(at);
  }

  /** Stops everything: timers, listeners on the clients, sockets this package opened. */
  close() {
    this.closed = true;
    this.#alarm.clear();
    this.#idleAlarm.clear();
    for (const node of this.nodes) node.transport.detach?.();
    this.notices?.close();
    for (const [tag, task] of this.#tasks) {
      this.#finish(tag, task, 'closed');
      task.reject(new UsedAfterCloseError('the Redlock was closed while the operation ran'));
    }
    const waiters = this.#idleWaiters;
    this.#idleWaiters = [];
    for (const resolve of waiters) resolve();
  }

  /** Frees the engine's memory (after close). */
  free() {
    this.engine.free();
  }
}
