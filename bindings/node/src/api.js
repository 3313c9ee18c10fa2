// What every entry point (Node.js, edge) exports.

export { Redlock, Lock } from './redlock.js';
export {
  RedlockError,
  LockError,
  LockHeldError,
  NodesFailedError,
  LockLostError,
} from './errors.js';
export { fromIoredis, fromNodeRedis } from './clients.js';
export { RespConnection, rawSocket, socketStreams } from './resp.js';
export { drive } from './driver.js';
export { nowUs } from './clock.js';
export * as core from '../wasm/redlock_wasm.js';
