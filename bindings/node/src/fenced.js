// The resource-side fencing check for a resource that is a Redis key: one write through
// the user's own client, built and read by the core's FencedSet (the script, its
// arguments, what its reply means, when to fall back from EVALSHA to EVAL).

import { FencedSet } from '../wasm/redlock_wasm.js';
import { clientAddress, commandSender } from './clients.js';
import { InvalidArgumentError, NodesFailingError, core } from './errors.js';

/**
 * Writes `value` to the Redis key `item` only if `token` (a lock's `fencingToken`) is
 * greater than every token `item` has accepted before, atomically, on the item's own
 * server through `client` (ioredis, node-redis, or a connection with `send(args)`; it
 * need not be one of the lock's nodes). The highest accepted token is kept under the
 * core's guard key next to the item (`core.fenceGuardKey(item)`), which has no TTL.
 *
 * Resolves to `{ accepted: true, token }`, or `{ accepted: false, token, seen }` when
 * the item had already accepted `seen >= token`: the writer is a stale holder (its lock
 * expired and a newer holder wrote), and nothing changed. Rejects with
 * InvalidArgumentError for a bad token (reason `invalid_fencing_token`), item or value,
 * and with NodesFailingError (reason `fenced_write_failed`) when the server answered an
 * error or could not be reached: after a lost connection the write may or may not have
 * happened. It waits as long as `client` does.
 *
 * @param client the resource's Redis client
 * @param {string | Uint8Array} item
 * @param {string | Uint8Array} value
 * @param {number} token
 */
export async function fencedSet(client, item, value, token) {
  const send = commandSender(client);
  if (send === undefined) {
    throw new InvalidArgumentError('fencedSet needs an ioredis or node-redis client, or a connection with send(args)');
  }
  const write = core(() => new FencedSet(item, value, token));
  try {
    let result = write.handleReply(await send(write.args(false)));
    // The server had not cached the script: the same write with its text, once.
    if (result.type === 'retry_as_eval') result = write.handleReply(await send(write.args(true)));
    if (result.type === 'accepted') return { accepted: true, token: result.token };
    if (result.type === 'stale') return { accepted: false, token: result.token, seen: result.seen };
    const text = result.type === 'failed' ? result.error : 'NOSCRIPT answered to EVAL';
    const label = clientAddress(client);
    throw new NodesFailingError(`the fenced write to ${describeItem(item)} failed`, {
      reason: 'fenced_write_failed',
      nodes: [{ node: 0, label, result: 'error', error: text, cause: 'error' }],
      resources: [item],
    });
  } finally {
    write.free();
  }
}

function describeItem(item) {
  return typeof item === 'string' ? item : `a ${item?.length ?? 0}-byte item`;
}
