// The driver loop: one core Link per node, and the operations that use them. It decides
// nothing: the operation decides quorum, validity, deadlines and retries; each link
// decides order, the bound in flight, stalled nodes, owed releases, resends, scripts
// and reconnecting. This file moves outputs to where they go and arms the wake-ups the
// core names (an operation's wait, a link's pollTimeout), nothing else.

import { Link } from '../wasm/redlock_wasm.js';
import { nowUs } from './clock.js';
import { replyFromValue } from './clients.js';
import { CancelledError, UsedAfterCloseError } from './errors.js';
import { Notices, canSubscribe } from './notices.js';
import { endWithError, recordEvent, startSpan } from './tracing.js';

// Timers run before the event loop reads sockets: a timer that fires late (a busy
// machine, a long GC) would time out replies already received. The wake-up therefore
// runs just after this turn's I/O (setImmediate where there is one).
const afterIo = globalThis.setImmediate ?? ((call) => setTimeout(call, 0));

/** Runs `call` at `at` (us on nowUs's clock) unless a sooner wake-up is armed. */
class Alarm {
  #timer = undefined;
  #at = Infinity;
  #call;

  constructor(call) {
    this.#call = call;
  }

  /** Arms for `at`; an alarm already armed sooner stays (waking early is harmless). */
  arm(at) {
    if (at === undefined || at >= this.#at) return;
    clearTimeout(this.#timer);
    this.#at = at;
    this.#timer = setTimeout(() => {
      this.#at = Infinity;
      this.#timer = undefined;
      afterIo(this.#call);
    }, Math.max(0, Math.ceil((at - nowUs()) / 1000)));
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
    const timer = this.#timer;
    if (typeof timer === 'object' && timer !== null) {
      if (keep) timer.ref?.();
      else timer.unref?.();
    }
  }
}

// The inputs of a transport's events, as #input calls them.
const CONNECTED = (link, now) => link.handleConnected(now);
const CLOSED = (link, now, cause, text) => link.handleClosed(cause, text, now);
const REPLY = (link, now, id, reply) => link.handleReply(id, reply, now);
const DATA = (link, now, bytes) => link.handleData(bytes, now);
const TIMEOUT = (link, now) => link.handleTimeout(now);

/** One node: its link and its transport. */
class Node {
  constructor(driver, transport) {
    this.driver = driver;
    this.transport = transport;
    // Replies stay in the link until flush() hands them to their operations: they never
    // become JS objects on the way. A connection attempt gets the client's connect
    // timeout when the transport names one (`connectTimeoutMs`), else the core's
    // default: the link gives it up past that (`close`) and counts it failed.
    const options = { resp: transport.resp === true, holdReplies: true };
    const connectTimeoutMs = transport.connectTimeoutMs;
    if (connectTimeoutMs != null) options.connectTimeoutMs = connectTimeoutMs;
    this.link = new Link(options);
    this.alarm = new Alarm(() => this.#input(TIMEOUT));
    transport.attach(this);
  }

  /**
   * Does what the link outputs (`count` of them: what the input returned, or until
   * none is left), then arms its next wake-up. A reply (`arm` false) can only push the
   * link's wake-up later, unless it makes the link write or connect.
   */
  pump(count = Infinity, arm = true) {
    const link = this.link;
    for (let i = 0; i < count; i++) {
      const output = link.pollOutput();
      if (output === undefined) break;
      // A delivery: its tag (the reply stays in the link until flush()).
      if (typeof output === 'number') {
        this.driver.deliveries.push(this, output);
        continue;
      }
      switch (output.type) {
        case 'write':
          this.transport.write(output);
          arm = true;
          break;
        case 'connect':
          this.transport.connect();
          arm = true;
          break;
        case 'close':
          // The connection, or the attempt to open one under way (past the connect
          // timeout): the transport closes or gives it up and reports nothing more for
          // it (a client library's transport takes it as a hint).
          this.transport.close();
          arm = true;
          break;
      }
    }
    if (arm) this.alarm.arm(link.pollTimeout());
  }

  /**
   * A value the core refused (a client gave something unexpected): the connection can
   * no longer be trusted.
   */
  #refused(error) {
    this.link.handleClosed('closed', String(error?.message ?? error), nowUs());
    this.transport.close();
  }

  /** After every input: the link's outputs, then the replies it delivered. */
  #after() {
    this.pump();
    this.driver.flush();
  }

  // ---- events from the transport (each an input, then #after) -------------------

  /** Hands `call(link, now, a, b)` to the link (a module-level function: no closure). */
  #input(call, a, b) {
    if (this.driver.closed) return;
    try {
      call(this.link, nowUs(), a, b);
    } catch (error) {
      this.#refused(error);
    }
    this.#after();
  }

  connected() {
    this.#input(CONNECTED);
  }

  /** @param {'refused' | 'auth' | 'tls' | 'timeout' | 'closed'} cause */
  closed(cause, text) {
    this.#input(CLOSED, cause, text);
  }

  /** The reply to write `id`, as a core reply object. */
  reply(id, reply) {
    this.#input(REPLY, id, reply);
  }

  /**
   * The reply to write `id` as a client library's value, mapped as replyFromValue
   * (clients.js) says; the values of every lock cycle (`OK`, a safe integer) go in
   * without an object.
   */
  value(id, value) {
    if (this.driver.closed) return;
    let count;
    try {
      const link = this.link;
      if (value === 'OK') count = link.handleReplyOk(id, nowUs());
      else if (Number.isSafeInteger(value)) count = link.handleReplyInteger(id, value, nowUs());
      else count = link.handleReply(id, replyFromValue(value), nowUs());
    } catch (error) {
      this.#refused(error);
      this.#after();
      return;
    }
    this.pump(count, false);
    this.driver.flush();
  }

  data(bytes) {
    this.#input(DATA, bytes);
  }
}

/** An operation under way: its promise's settlers and its wake-up. */
class Task {
  constructor(op, resolve, reject) {
    this.op = op;
    this.resolve = resolve;
    this.reject = reject;
    /** When the operation's wait ends (us), while it waits. */
    this.until = undefined;
    this.detach = undefined;
    /** `() => channels`: what to listen on once the core says the operation listens. */
    this.watch = undefined;
    /** The notice channels listened on for this task (ids), once watching. */
    this.watching = undefined;
    /** Whether string replies are bulk strings (an inspection's GET / MGET). */
    this.bulk = false;
    /** The OpenTelemetry span of this operation, when tracing. */
    this.span = undefined;
  }
}

export class Driver {
  /** The links' `deliver` outputs as pairs (node, tag), handed on by flush(). */
  deliveries = [];
  closed = false;
  #tasks = new Map();
  /**
   * The operations' wake-up: one timer for all of them, armed for the soonest wait (a
   * timer per operation was a visible part of a lock cycle's cost).
   */
  #waits = new Alarm(() => this.#wake());
  #nextTag = 1;
  #flushing = false;
  #idleWaiters = [];
  /**
   * Where the operations' events go (`{ _listening, _emitEvent(event) }`): drained from
   * the core after each input only while `_listening`, so without listeners no event is
   * built.
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
    this.nodes = transports.map((transport) => new Node(this, transport));
    this.notices =
      notices && transports.some(canSubscribe)
        ? new Notices(transports, (tag, node, message) => this.#notice(tag, node, message))
        : undefined;
  }

  /**
   * Runs `op` (a core Operation) to its outcome. With `signal`, aborting it abandons
   * the operation (the links still get the release it emits) and rejects with a
   * CancelledError. With `watch` (acquisitions), `watch()` names the notice channels to
   * listen on from when the core says the operation listens (`op.listens`) until it
   * ends. The caller frees `op`.
   */
  run(op, signal, watch, { bulk = false, resources } = {}) {
    return new Promise((resolve, reject) => {
      const tag = this.#nextTag++;
      const task = new Task(op, resolve, reject);
      task.bulk = bulk;
      if (this.tracer !== undefined) task.span = startSpan(this.tracer, op.kind, resources);
      if (this.notices) task.watch = watch;
      this.#tasks.set(tag, task);
      if (signal) {
        const abort = () => this.#abandon(tag, signal.reason);
        signal.addEventListener('abort', abort, { once: true });
        task.detach = () => signal.removeEventListener('abort', abort);
      }
      this.#step(tag, task);
      this.flush();
    });
  }

  /** Hands queued deliveries to their operations until none is left. */
  flush() {
    if (this.#flushing) return;
    if (this.closed) {
      this.deliveries.length = 0; // nobody waits for them, and the links may be freed
      return;
    }
    this.#flushing = true;
    try {
      const now = nowUs();
      const deliveries = this.deliveries;
      // Delivering may queue more (an operation's next command answered at once).
      for (let i = 0; i < deliveries.length; i += 2) {
        const link = deliveries[i].link;
        const tag = deliveries[i + 1];
        const task = this.#tasks.get(tag);
        // An operation already finished or abandoned: its late replies change nothing.
        if (task === undefined) {
          link.dropHeld(tag);
          continue;
        }
        let first;
        try {
          // `bulk`: the client gave the GET's bulk strings as strings (see replyFromValue).
          first = link.deliverHeld(tag, task.op, now, task.bulk);
        } catch (error) {
          this.#finish(tag, task, 'error');
          task.reject(error);
          continue;
        }
        this.#step(tag, task, first);
      }
    } finally {
      this.deliveries.length = 0;
      this.#flushing = false;
    }
    if (this.#idleWaiters.length > 0) this.#checkIdle();
  }

  /**
   * The one output rule: poll until a wait or the outcome. `first`: the output a link's
   * deliverHeld already polled.
   */
  #step(tag, task, first) {
    const op = task.op;
    const now = nowUs();
    // After every input, before its commands go out: the core says when an acquisition
    // listens (with a wait limit from the first refusal by a held key, or from its start
    // after a recent wait for the resource; else as a failed attempt's cleanup goes out).
    if (task.watching === undefined && task.watch !== undefined && op.listens) this.#watch(tag, task);
    for (let output = first ?? op.pollOutputToLink(); ; output = op.pollOutputToLink()) {
      if (output === undefined) {
        this.#drain(task);
        return;
      }
      if (output.type === 'send') {
        const node = this.nodes[output.node];
        node.pump(node.link.submit(tag, op, now));
      } else if (output.type === 'wait') {
        task.until = output.until;
        this.#waits.arm(output.until);
        this.#waits.keepAlive(true);
        this.#drain(task);
        return;
      } else {
        this.#drain(task);
        this.#finish(tag, task);
        task.resolve(output.outcome);
        return;
      }
    }
  }

  /** The operations whose wait ended get handleTimeout; the timer is armed for the rest. */
  #wake() {
    if (this.closed) return;
    const now = nowUs();
    for (const [tag, task] of this.#tasks) {
      if (task.until === undefined || task.until > now) continue;
      task.until = undefined;
      task.op.handleTimeout(now);
      this.#step(tag, task);
    }
    let next = Infinity;
    for (const task of this.#tasks.values()) {
      if (task.until !== undefined && task.until < next) next = task.until;
    }
    if (next !== Infinity) this.#waits.arm(next);
    this.flush();
  }

  /** Hands the operation's unread events to `events` if anyone listens, and to its span. */
  #drain(task) {
    const events = this.events;
    const listening = events !== undefined && events._listening;
    if (!listening && task.span === undefined) return;
    const op = task.op;
    for (let event = op.pollEvent(); event !== undefined; event = op.pollEvent()) {
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
    task.until = undefined;
    // Left armed for the next operation (re-arming it for each was a visible cost),
    // but not keeping the process alive with nothing waiting.
    if (this.#tasks.size === 0) this.#waits.keepAlive(false);
    task.detach?.();
    if (task.watching !== undefined) this.notices.unwatch(tag, task.watching);
  }

  /** Starts listening for the task's notice channels, once. */
  #watch(tag, task) {
    if (task.watch === undefined || task.watching !== undefined) return;
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
    const task = this.#tasks.get(tag);
    if (task === undefined || this.closed) return;
    try {
      if (message === undefined) task.op.handleSubscribed(node, nowUs());
      else task.op.handleNoticeMessage(node, message, nowUs());
    } catch (error) {
      this.#finish(tag, task, 'error');
      task.reject(error);
      return;
    }
    this.#step(tag, task);
    this.flush();
  }

  #abandon(tag, reason) {
    const task = this.#tasks.get(tag);
    if (task === undefined) return;
    this.#finish(tag, task, 'cancelled');
    const op = task.op;
    const now = nowUs();
    op.abandon(now);
    // What must still be sent (the release of an attempt whose SETs are out) goes to
    // the links under a tag nobody waits for.
    for (let output = op.pollOutputToLink(); output !== undefined; output = op.pollOutputToLink()) {
      if (output.type !== 'send') continue;
      const node = this.nodes[output.node];
      node.link.submit(0, op, now);
      node.pump();
    }
    task.reject(new CancelledError('the operation was cancelled', { cause: reason }));
    this.flush();
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
    const now = nowUs();
    const busy = this.nodes.filter((node) => !node.link.isIdle && !node.link.isStalled(now));
    if (busy.length === 0) {
      const waiters = this.#idleWaiters;
      this.#idleWaiters = [];
      for (const resolve of waiters) resolve();
      return;
    }
    // Look again when the busy links next wake (a reply also triggers a look).
    for (const node of busy) {
      node.idleAlarm ??= new Alarm(() => this.#checkIdle());
      node.idleAlarm.arm(node.link.pollTimeout() ?? now + 1000);
    }
  }

  /** Stops everything: timers, listeners on the clients, sockets this package opened. */
  close() {
    this.closed = true;
    this.#waits.clear();
    for (const node of this.nodes) {
      node.alarm.clear();
      node.idleAlarm?.clear();
      node.transport.detach?.();
    }
    this.notices?.close();
    for (const [tag, task] of this.#tasks) {
      this.#finish(tag, task, 'closed');
      task.reject(new UsedAfterCloseError('the Redlock was closed while the operation ran'));
    }
    const waiters = this.#idleWaiters;
    this.#idleWaiters = [];
    for (const resolve of waiters) resolve();
  }

  /** Frees the links' memory (after close). */
  free() {
    for (const node of this.nodes) node.link.free();
  }
}
