// Errors of the package: exactly one class per error class of the core (held_elsewhere,
// nodes_failing, lock_lost, not_held, invalid_argument, used_after_close, cancelled).
// `code` is the class's stable code; `reason` the finer cause (a failure reason, a
// configuration or usage rule). Nothing else is thrown for a documented failure or
// misuse.

/** Any error of this package; `code` is the core's error class. */
export class RedlockError extends Error {
  /**
   * @param {string} message
   * @param {{ reason?: string, cause?: unknown }} [options]
   */
  constructor(message, { reason, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = new.target.name;
    this.code = new.target.code;
    if (reason !== undefined) this.reason = reason;
  }
}

function describe(details) {
  return details
    .filter((d) => d.result !== 'success')
    .map((d) => `${d.label}: ${d.result}${d.error === undefined ? '' : ` (${d.cause}: ${d.error})`}`)
    .join(', ');
}

/** A lock operation that did not succeed; carries how every node answered. */
export class LockError extends RedlockError {
  constructor(message, { reason, nodes, resources, attempts, cause } = {}) {
    const detail = describe(nodes ?? []);
    super(detail ? `${message} [${detail}]` : message, { reason, cause });
    /** Per node: `{ node, label, result, error?, cause? }`. */
    this.nodes = nodes ?? [];
    this.resources = resources ?? [];
    if (attempts !== undefined) this.attempts = attempts;
  }
}

/** held_elsewhere: conflicts alone made the quorum impossible; someone else holds it. */
export class LockHeldError extends LockError {
  static code = 'held_elsewhere';
}

/**
 * nodes_failing: nodes failed (each node's `cause` says why: refused, auth, tls,
 * timeout, stalled, connection, error), alone or mixed with conflicts, or a quorum came
 * too late. For an extension the lock still holds until `validUntilUs`; for a release,
 * the keys may stay until their TTL.
 */
export class NodesFailingError extends LockError {
  static code = 'nodes_failing';
}

/** lock_lost: an extension found the lock taken, or its validity ran out. */
export class LockLostError extends LockError {
  static code = 'lock_lost';
}

/** not_held: the lock's keys are gone (expired or released) and nobody else holds them. */
export class NotHeldError extends LockError {
  static code = 'not_held';
}

/** invalid_argument: a configuration or argument broke a rule; `reason` names it. */
export class InvalidArgumentError extends RedlockError {
  static code = 'invalid_argument';
}

/** used_after_close: a call on a Redlock after close(), or on a lock after release(). */
export class UsedAfterCloseError extends RedlockError {
  static code = 'used_after_close';
}

/** cancelled: the caller aborted the operation (its AbortSignal); `cause` is the signal's reason. */
export class CancelledError extends RedlockError {
  static code = 'cancelled';
}

/** The class for each of the core's error class codes. */
export const ERROR_CLASSES = {
  held_elsewhere: LockHeldError,
  nodes_failing: NodesFailingError,
  lock_lost: LockLostError,
  not_held: NotHeldError,
  invalid_argument: InvalidArgumentError,
  used_after_close: UsedAfterCloseError,
  cancelled: CancelledError,
};

/**
 * An error thrown by the WASM core (configuration, usage, a value of the wrong type):
 * every one is an argument that broke a rule.
 */
export function fromCore(error) {
  if (error instanceof RedlockError) return error;
  if (error instanceof Error && typeof error.code === 'string') {
    return new InvalidArgumentError(error.message, { reason: error.code, cause: error });
  }
  return new InvalidArgumentError(String(error?.message ?? error), { cause: error });
}

/** Calls `fn`, turning the core's errors into InvalidArgumentErrors. */
export function core(fn) {
  try {
    return fn();
  } catch (error) {
    throw fromCore(error);
  }
}

/** How each node answered: `{ node, label, result, error?, cause? }`. */
export function nodeDetails(results, labels) {
  return results.map((result, node) =>
    typeof result === 'string'
      ? result === 'timeout'
        ? { node, label: labels[node], result, cause: 'timeout' }
        : { node, label: labels[node], result }
      : { node, label: labels[node], result: 'error', error: result.error, cause: result.cause },
  );
}
