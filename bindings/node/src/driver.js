// The driver loop: start an operation, send what it says, feed replies and timeouts
// back, return the outcome. It decides nothing: quorum, validity, deadlines and retries
// are the core's. It never waits for a node past the deadline the core gives, whatever
// the Redis client's own settings.

import { nowUs } from './clock.js';

/**
 * A core reply for a failure of the transport itself (refused, reset, closed).
 * @param {unknown} error
 */
export function connectionFailed(error) {
  const text = error instanceof Error ? error.message : String(error);
  return { type: 'connection_failed', value: text || 'connection failed' };
}

/**
 * Runs `op` (a core Operation) to its outcome over `nodes` (one connection per node,
 * each with `send(args) => Promise<Reply>`), then frees it.
 *
 * The core may decide before every node answered (a quorum); the commands still out
 * are then handed to `late(reply, deadline)`, so a caller can wait for them (for
 * instance before closing connections) up to their deadline.
 * @returns {Promise<object>} the core's outcome
 */
export function drive(op, nodes, clock = nowUs, late = undefined) {
  return new Promise((resolve, reject) => {
    let finished = false;
    let timer;
    const inFlight = new Map();

    const finish = (settle, value) => {
      finished = true;
      clearTimeout(timer);
      // Replies still in flight are ignored from here on: after the outcome they
      // change nothing in the core.
      op.free();
      if (late) for (const [reply, deadline] of inFlight.values()) late(reply, deadline);
      settle(value);
    };

    const pump = () => {
      for (;;) {
        const output = op.pollOutput();
        if (output === undefined) return;
        if (output.type === 'send') {
          send(output);
        } else if (output.type === 'wait') {
          arm(output.until);
        } else {
          finish(resolve, output.outcome);
          return;
        }
      }
    };

    const input = (call) => {
      if (finished) return;
      try {
        call();
        pump();
      } catch (error) {
        finish(reject, error);
      }
    };

    const send = (command) => {
      let reply;
      try {
        reply = Promise.resolve(nodes[command.node].send(command.args));
      } catch (error) {
        reply = Promise.reject(error);
      }
      inFlight.set(command.requestId, [reply, command.deadline]);
      reply.then(
        (value) => {
          inFlight.delete(command.requestId);
          input(() => op.handleReply(command.requestId, value, clock()));
        },
        (error) => {
          inFlight.delete(command.requestId);
          input(() => op.handleReply(command.requestId, connectionFailed(error), clock()));
        },
      );
    };

    // One timer: the core's next deadline (a round's, or the end of a retry delay).
    // Firing early is harmless: the core answers with another wait.
    const arm = (until) => {
      clearTimeout(timer);
      const delayMs = Math.max(0, Math.ceil((until - clock()) / 1000));
      timer = setTimeout(() => input(() => op.handleTimeout(clock())), delayMs);
    };

    input(() => {});
  });
}
