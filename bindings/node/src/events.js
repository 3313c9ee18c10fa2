// A small event emitter with the surface of Node's EventEmitter that redlock's users
// reach for (on, once, off, emit, ...), without Node.js modules, so the Redlock is one
// on edge runtimes too.

/** Listeners by event name; `on` / `once` / `off` / `emit` as Node's EventEmitter. */
export class Emitter {
  #listeners = new Map();
  #count = 0;

  /** Adds `listener` for `name`; returns this. */
  on(name, listener) {
    if (typeof listener !== 'function') throw new TypeError('a listener must be a function');
    const list = this.#listeners.get(name);
    if (list === undefined) this.#listeners.set(name, [listener]);
    else list.push(listener);
    this.#count++;
    return this;
  }

  /** Same as `on`. */
  addListener(name, listener) {
    return this.on(name, listener);
  }

  /** Adds `listener` for the next `name` event only; returns this. */
  once(name, listener) {
    if (typeof listener !== 'function') throw new TypeError('a listener must be a function');
    const wrapper = (...args) => {
      this.off(name, wrapper);
      return listener.apply(this, args);
    };
    wrapper.listener = listener;
    return this.on(name, wrapper);
  }

  /** Removes the last-added `listener` of `name` (or its `once` wrapper); returns this. */
  off(name, listener) {
    const list = this.#listeners.get(name);
    if (list === undefined) return this;
    for (let i = list.length - 1; i >= 0; i--) {
      if (list[i] === listener || list[i].listener === listener) {
        list.splice(i, 1);
        this.#count--;
        break;
      }
    }
    if (list.length === 0) this.#listeners.delete(name);
    return this;
  }

  /** Same as `off`. */
  removeListener(name, listener) {
    return this.off(name, listener);
  }

  /** Removes every listener of `name`, or of every event; returns this. */
  removeAllListeners(name) {
    if (name === undefined) {
      this.#listeners.clear();
      this.#count = 0;
    } else {
      this.#count -= this.#listeners.get(name)?.length ?? 0;
      this.#listeners.delete(name);
    }
    return this;
  }

  /** Calls every listener of `name` with `args`, in order; true if there were any. */
  emit(name, ...args) {
    const list = this.#listeners.get(name);
    if (list === undefined) {
      if (name === 'error') throw args[0] instanceof Error ? args[0] : new Error(`unhandled error event: ${args[0]}`);
      return false;
    }
    for (const listener of [...list]) listener.apply(this, args);
    return true;
  }

  /** How many listeners `name` has. */
  listenerCount(name) {
    return this.#listeners.get(name)?.length ?? 0;
  }

  /** The listeners of `name`, in order. */
  listeners(name) {
    return (this.#listeners.get(name) ?? []).map((l) => l.listener ?? l);
  }

  /** The names that have listeners. */
  eventNames() {
    return [...this.#listeners.keys()];
  }

  /** @internal Whether anyone listens to anything (events are built only then). */
  get _listening() {
    return this.#count > 0;
  }
}
