// What every entry point (Node.js, edge) exports.

export { Redlock, Lock } from './redlock.js';
export { fencedSet } from './fenced.js';
export {
  RedlockError,
  LockError,
  LockHeldError,
  NodesFailingError,
  NodesFailingError as NodesFailedError,
  LockLostError,
  NotHeldError,
  InvalidArgumentError,
  UsedAfterCloseError,
  CancelledError,
} from './errors.js';
export { linkCause, replyFromValue } from './clients.js';
export { SocketNode, StreamTransport, rawSocket, socketStreams } from './resp.js';
export { nowUs } from './clock.js';
export * as core from '../wasm/redlock_wasm.js';
