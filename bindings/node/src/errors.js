// Errors of the package. Losing a lock, a lock held by someone else and failing nodes
// are different classes; each lock error carries how every node answered.

/** Any error of this package; `code` is stable. */
export class RedlockError extends Error {
  /**
   * @param {string} message
   * @param {string} code
   * @param {ErrorOptions} [options]
   */
  constructor(message, code, options) {
    super(message, options);
    this.name = 'RedlockError';
    this.code = code;
  }
}

/** Rethrows an error of the WASM core as a RedlockError with the same code. */
export function fromCore(error) {
  if (error instanceof Error && typeof error.code === 'string' && !(error instanceof RedlockError)) {
    return new RedlockError(error.message, error.code, { cause: error });
  }
  return error;
}

/** Calls `fn`, turning the core's errors into RedlockErrors. */
export function core(fn) {
  try {
    return fn();
  } catch (error) {
    throw fromCore(error);
  }
}

/** How each node answered: `{ node, label, result, error? }`. */
export function nodeDetails(results, labels) {
  return results.map((result, node) =>
    typeof result === 'string'
      ? { node, label: labels[node], result }
      : { node, label: labels[node], result: 'error', error: result.error },
  );
}

function describe(details) {
  return details
    .map((d) => `${d.label}: ${d.result}${d.error === undefined ? '' : ` (${d.error})`}`)
    .join(', ');
}

/** A lock operation that did not succeed. */
export class LockError extends RedlockError {
  constructor(message, code, { reason, nodes, resources, attempts, cause } = {}) {
    super(`${message} [${describe(nodes ?? [])}]`, code, cause === undefined ? undefined : { cause });
    this.name = new.target.name;
    /** The core's reason: conflict, nodes_failed, mixed, validity_too_short (or expired). */
    this.reason = reason;
    /** Per node: `{ node, label, result, error? }`. */
    this.nodes = nodes ?? [];
    this.resources = resources ?? [];
    if (attempts !== undefined) this.attempts = attempts;
  }
}

/** The lock is held by someone else: enough nodes refused because the key exists. */
export class LockHeldError extends LockError {}

/**
 * Nodes are failing (errors, timeouts), or a quorum came too late to leave any validity:
 * nothing says the lock is held by someone else. For an extension, the lock is still
 * held until `validUntil`, and `retryAt` says when to try again (null: no time left).
 */
export class NodesFailedError extends LockError {}

/** The lock is lost: an extension found it gone or taken, or its validity ran out. */
export class LockLostError extends LockError {}
