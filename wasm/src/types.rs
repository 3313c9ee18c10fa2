//! The TypeScript shapes of the plain objects that cross the boundary, and the
//! extern types that give wasm-bindgen's signatures those exact types.

use wasm_bindgen::prelude::*;

#[wasm_bindgen(typescript_custom_section)]
const TS_TYPES: &'static str = r#"
/** Microseconds on the caller's monotonic clock: a JS number, fraction dropped. */
export type Micros = number;

/** A resource name: text (sent as UTF-8) or raw bytes. */
export type Resource = string | Uint8Array;

/** Settings of a Config. Durations are microseconds except the TTL (Redis's PX unit). */
export interface ConfigOptions {
  /** Number of independent Redis nodes, N. */
  nodes: number;
  /** The lock's time to live on every node, in whole milliseconds. */
  ttlMs: number;
  /** Default 0.01 (1 % of the TTL). */
  driftFactor?: number;
  /** Default 2000 (2 ms). */
  driftFixedUs?: number;
  /** Default: the smaller of 50 ms and a tenth of the TTL. */
  nodeTimeoutUs?: number;
  /** Least validity an acquisition or extension must leave. Default 0. */
  minValidityUs?: number;
  /** Attempts of one acquisition, the first included. Default 3. */
  attempts?: number;
  /** Base delay between attempts. Default 200000. */
  retryDelayUs?: number;
  /** Jitter around the base delay, at most the delay. Default 100000. */
  retryJitterUs?: number;
  /** Put in front of every resource name to form its key. Default none. */
  keyPrefix?: string | Uint8Array;
  /** Random bytes per token (16 to 64). Default 20. */
  tokenBytes?: number;
  /** Most extensions nextExtension schedules for one lease; null or absent: unbounded. */
  maxExtensions?: number | null;
  /**
   * Hand out a fencing token with every lock (docs/fencing.md): one more script per
   * acquisition and a write-back round. Default false.
   */
  fencing?: boolean;
}

/** Every setting of a checked Config, derived values included. */
export interface ConfigSettings {
  nodes: number;
  quorum: number;
  ttlMs: number;
  driftFactor: number;
  driftFixedUs: number;
  driftUs: number;
  nodeTimeoutUs: number;
  minValidityUs: number;
  attempts: number;
  retryDelayUs: number;
  retryJitterUs: number;
  keyPrefix: string | Uint8Array;
  tokenBytes: number;
  maxExtensions: number | null;
  fencing: boolean;
}

export interface AcquireOptions {
  /** A TTL for this lock only (whole milliseconds), checked against the configuration. */
  ttlMs?: number;
  /**
   * A wait limit in whole microseconds: keep trying until this much time has passed
   * (instead of the configured attempts), never starting an attempt that could not end
   * by then. Release notices (`Operation.handleNoticeMessage`) make it try again early.
   */
  waitUs?: number;
  /**
   * Random bytes for tokens and retry jitter, drawn in the core's documented order;
   * at least attempts * tokenBytes + (attempts - 1) * 8. For tests and vectors: real
   * locks MUST use a CSPRNG.
   */
  random?: Uint8Array;
}

/** A node's reply as the driver hands it in, or its report that none came. */
export type Reply =
  | { type: "ok" }
  | { type: "status"; value: string }
  | { type: "nil" }
  | { type: "integer"; value: number | bigint }
  | { type: "bulk"; value: string | Uint8Array }
  | { type: "array"; value: Reply[] }
  | { type: "error"; value: string }
  | { type: "timeout" }
  | { type: "connection_failed"; value: string };

/** A reply decoded from RESP bytes: bulk strings as bytes, integers beyond 2^53 as bigint. */
export type DecodedReply =
  | { type: "ok" }
  | { type: "status"; value: string }
  | { type: "nil" }
  | { type: "integer"; value: number | bigint }
  | { type: "bulk"; value: Uint8Array }
  | { type: "array"; value: DecodedReply[] }
  | { type: "error"; value: string };

/**
 * Why one node failed: `refused` (nothing listens), `auth` (authentication failed or
 * required), `tls` (the TLS handshake failed), `timeout` (no reply or connection in
 * time), `stalled` (the node has a command unanswered past its deadline: nothing new
 * was sent), `connection` (the connection failed otherwise), `error` (the node
 * answered with an error).
 */
export type NodeCause = "refused" | "auth" | "tls" | "timeout" | "stalled" | "connection" | "error";

/** A failed node: the text of its error or connection failure, and why it failed. */
export interface NodeError {
  error: string;
  cause: NodeCause;
}

/** How one node answered the round an outcome reports on. */
export type NodeResult = "not_asked" | "pending" | "success" | "conflict" | "missing" | "timeout" | NodeError;

export type CommandKind = "set" | "acquire" | "release" | "extend" | "fenced_acquire" | "write_back" | "inspect" | "queued_acquire";
export type OperationKind = "acquire" | "extend" | "release" | "inspect";
/**
 * Why an acquisition or extension failed. `not_held` (extensions only): every conflict
 * found the key gone, none held by another token.
 */
export type FailureReason = "conflict" | "nodes_failed" | "mixed" | "validity_too_short" | "not_held";

/**
 * What kind of failure a binding reports, the same in every language:
 * - `held_elsewhere`: conflicts alone made the acquisition's quorum impossible;
 * - `nodes_failing`: nodes failed (see each node's cause), or a quorum came too late;
 * - `lock_lost`: an extension found the lock taken, or its validity ran out;
 * - `not_held`: an extension found the keys gone and nobody else holding them;
 * - `invalid_argument`: a configuration or argument broke a rule;
 * - `used_after_close`: a call on a client or lock after it was closed or released;
 * - `cancelled`: the caller cancelled the operation.
 */
export type ErrorClass =
  | "held_elsewhere"
  | "nodes_failing"
  | "lock_lost"
  | "not_held"
  | "invalid_argument"
  | "used_after_close"
  | "cancelled";

/** The `code` of a configuration error (each is `invalid_argument` class). */
export type ConfigErrorCode =
  | "no_nodes"
  | "too_many_nodes"
  | "ttl_zero"
  | "ttl_not_whole_milliseconds"
  | "ttl_too_large"
  | "drift_factor_invalid"
  | "drift_too_large"
  | "min_validity_too_large"
  | "node_timeout_zero"
  | "node_timeout_too_large"
  | "attempts_zero"
  | "too_many_attempts"
  | "jitter_too_large"
  | "retry_delay_too_short"
  | "token_too_short"
  | "token_too_long";

/** Why a connection closed or could not be opened, as the driver saw it. */
export type LinkCause = "refused" | "auth" | "tls" | "timeout" | "closed";

export interface LinkOptions {
  /** Writes as RESP bytes, and replies fed to `handleData` (raw sockets). Default false. */
  resp?: boolean;
  /**
   * How long a connection attempt may take before the link gives it up (a `close`
   * output) and counts it failed with `timeout`: the user's client's connect timeout
   * when it has one. Default: the core's, `defaults().connectTimeoutDefaultMs`.
   */
  connectTimeoutMs?: number;
}

/** Open a connection to the node; then `handleConnected`, or `handleClosed` on failure. */
export interface ConnectOutput {
  type: "connect";
}

/** Write this command now, in order; hand its reply to `handleReply(id, ...)`. */
export type WriteOutput =
  | {
      type: "write";
      id: number;
      /**
       * The command's arguments, its name first (links without `resp`). The writes of
       * one round to N links share this array: never change it.
       */
      readonly args: ReadonlyArray<string | Uint8Array>;
    }
  | {
      type: "write";
      id: number;
      /** The command in RESP (links made with `{ resp: true }`). */
      bytes: Uint8Array;
    };

/** Close the current connection; report nothing more for it. */
export interface CloseOutput {
  type: "close";
}

/** Hand `reply` to the operation tagged `tag`: `operation.handleReply(request, reply, now)`. */
export interface DeliverOutput {
  type: "deliver";
  tag: number;
  request: number;
  reply: Reply;
}

export type LinkOutput = ConnectOutput | WriteOutput | CloseOutput | DeliverOutput;

/** Why a held lock was lost. */
export type LostReason = "taken" | "not_held" | "expired" | "extension_limit";

/** What a KeepAlive's driver does next. */
export type KeepAliveAction =
  | { type: "extend" }
  | { type: "wait"; until: Micros }
  | { type: "lost"; reason: LostReason }
  | { type: "stopped" };

/** Send `args` to node `node`; hand its reply back under `requestId`; stop waiting at `deadline`. */
export interface SendOutput {
  type: "send";
  node: number;
  requestId: number;
  deadline: Micros;
  kind: CommandKind;
  /** True when the command carries the script's text (a NOSCRIPT fallback). */
  isEval: boolean;
  /** The command's arguments, its name first: text where valid UTF-8, bytes otherwise. */
  args: Array<string | Uint8Array>;
}

/** Call handleTimeout at `until` if no reply came before: the operation's only wake-up. */
export interface WaitOutput {
  type: "wait";
  until: Micros;
}

export interface OutcomeOutput {
  type: "outcome";
  outcome: Outcome;
}

export type Output = SendOutput | WaitOutput | OutcomeOutput;

export interface Acquired {
  kind: "acquired";
  lease: Lease;
  /** Validity left when the quorum was reached. */
  validityUs: number;
  attempts: number;
  /** The fencing token (a whole number below 2^53), or null without fencing. */
  fencingToken: number | null;
  nodes: NodeResult[];
  errorClass: null;
}

export interface NotAcquired {
  kind: "not_acquired";
  reason: FailureReason;
  attempts: number;
  /** The last attempt's token (already released on every node). */
  token: string;
  nodes: NodeResult[];
  /** `held_elsewhere` for a conflict, `nodes_failing` otherwise. */
  errorClass: "held_elsewhere" | "nodes_failing";
}

export interface Extended {
  kind: "extended";
  lease: Lease;
  validityUs: number;
  nodes: NodeResult[];
  errorClass: null;
}

export interface NotExtended {
  kind: "not_extended";
  reason: FailureReason;
  /** The lock as it stands: the old validUntil, or the decision's time when lost. */
  lease: Lease;
  validityUs: number;
  /** When to try again, or null when no time is left for another round (or lost). */
  retryAt: Micros | null;
  /** True when the lock is already lost, not merely unextended. */
  lost: boolean;
  nodes: NodeResult[];
  /**
   * `lock_lost` (taken, or no validity left), `not_held` (the keys are gone), or
   * `nodes_failing` (the lock still holds until the lease's validUntil).
   */
  errorClass: "lock_lost" | "not_held" | "nodes_failing";
}

export interface Released {
  kind: "released";
  /** Nodes that deleted at least one key holding the token. */
  released: number;
  nodes: NodeResult[];
  errorClass: null;
}

/**
 * Every node settled and fewer than a quorum confirmed the keys are gone: the lock may
 * still be held (by this token) until its keys' TTL. Not a success.
 */
export interface NotReleased {
  kind: "not_released";
  /** Nodes that deleted at least one key holding the token. */
  released: number;
  nodes: NodeResult[];
  errorClass: "nodes_failing";
}

/** An inspection a quorum of nodes answered (docs/inspection.md). */
export interface Inspected {
  kind: "inspected";
  /** The token a quorum of nodes hold on every key, or null: nobody holds the lock. */
  holder: string | null;
  /** Whether someone holds the lock (`holder !== null`). */
  locked: boolean;
  nodes: NodeResult[];
  errorClass: null;
}

/** An inspection fewer than a quorum of nodes answered: nothing can be said. */
export interface NotInspected {
  kind: "not_inspected";
  nodes: NodeResult[];
  errorClass: "nodes_failing";
}

/** What happened (docs/observability.md). */
export type EventKind =
  | "acquired" | "not_acquired" | "retry" | "extended" | "not_extended" | "lost"
  | "released" | "not_released" | "inspected" | "not_inspected" | "node_failed";

/**
 * One event of an operation (`Operation.pollEvent`) or of a lost lock
 * (`KeepAlive.lostEvent`): the core's `Event`, fields that do not apply are null.
 */
export interface RedlockEvent {
  kind: EventKind;
  /** The operation it happened in; null for `lost`. */
  operation: OperationKind | null;
  /** When it happened, microseconds on the caller's clock. */
  atUs: number;
  /** How long after the operation started (for `lost`: after the acquisition). */
  elapsedUs: number;
  /** The attempt it concerns, from 1. */
  attempt: number;
  /** Why an attempt or operation failed. */
  reason: FailureReason | null;
  /** When the next attempt starts (`retry`). */
  retryAtUs: number | null;
  /** The failed node's index (`node_failed`). */
  node: number | null;
  /** Why the node failed (`node_failed`). */
  cause: NodeCause | null;
  /** How the lock was lost (`lost`). */
  lostReason: LostReason | null;
  /** Per node: the round the event reports on, or the failed node's result alone. */
  nodes: NodeResult[];
}

export type Outcome = Acquired | NotAcquired | Extended | NotExtended | Released | NotReleased | Inspected | NotInspected;

export interface DecoderLimits {
  maxBulk?: number;
  maxElements?: number;
  maxDepth?: number;
  maxLine?: number;
}

export interface Script {
  text: string;
  sha1: string;
}

export interface Scripts {
  acquire: Script;
  release: Script;
  extend: Script;
  fencedAcquire: Script;
  writeBack: Script;
  /** The resource-side check FencedSet sends. */
  fencedSet: Script;
  /** A waiting acquisition's attempt, which keeps the queue of waiters. */
  queuedAcquire: Script;
}

/** What became of a fenced write (FencedSet.handleReply). */
export type FencedWrite =
  /** The item now holds the value; its guard holds `token`. */
  | { type: "accepted"; token: number }
  /** Nothing changed: the item had already accepted `seen` (>= token): a stale holder. */
  | { type: "stale"; token: number; seen: number }
  /** The server lacks the script: send `args(true)` and hand in that reply instead. */
  | { type: "retry_as_eval" }
  /** An error reply, a reply of the wrong shape, or no answer (`error` says which). */
  | { type: "failed"; error: string };

export interface Limits {
  maxNodes: number;
  maxTtlMs: number;
  minTokenBytes: number;
  maxTokenBytes: number;
  maxAttempts: number;
  maxResources: number;
  maxTokenText: number;
  /** The largest fencing token: 2^53 - 1. */
  maxFencingToken: number;
}

/** One error class with its stable number (from 1) and message. */
export interface ErrorClassInfo {
  code: ErrorClass;
  number: number;
  message: string;
}

export interface Defaults {
  driftFactor: number;
  driftFixedUs: number;
  nodeTimeoutCapUs: number;
  attempts: number;
  retryDelayUs: number;
  retryJitterUs: number;
  tokenBytes: number;
  /** How long a driver keeps a notice channel subscribed after its last waiter (ms). */
  noticeChannelLingerMs: number;
  /**
   * How long a failed notice subscriber connection stays closed before it is opened again
   * while someone waits, at first (ms); doubling while it keeps failing.
   */
  subscriberReopenFirstMs: number;
  /** The longest such pause (ms). */
  subscriberReopenMaxMs: number;
  /**
   * How long a connection may take to open, and a subscriber connection to confirm a
   * subscription, when the client sets no bound of its own (ms).
   */
  connectTimeoutDefaultMs: number;
  /**
   * How long one Redis Sentinel may take to connect and answer before the next one is
   * asked, when the user sets no bound (ms).
   */
  sentinelQueryTimeoutDefaultMs: number;
}
"#;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(typescript_type = "ConfigOptions")]
    pub type ConfigOptionsJs;
    #[wasm_bindgen(typescript_type = "ConfigSettings")]
    pub type ConfigSettingsJs;
    #[wasm_bindgen(typescript_type = "Resource | Resource[]")]
    pub type ResourcesJs;
    #[wasm_bindgen(typescript_type = "Resource[]")]
    pub type KeysJs;
    #[wasm_bindgen(typescript_type = "AcquireOptions")]
    pub type AcquireOptionsJs;
    #[wasm_bindgen(typescript_type = "Reply")]
    pub type ReplyJs;
    #[wasm_bindgen(typescript_type = "DecodedReply")]
    pub type DecodedReplyJs;
    #[wasm_bindgen(typescript_type = "Output")]
    pub type OutputJs;
    #[wasm_bindgen(typescript_type = "NodeResult[]")]
    pub type NodeResultsJs;
    #[wasm_bindgen(typescript_type = "Array<string | Uint8Array>")]
    pub type ArgsJs;
    #[wasm_bindgen(typescript_type = "DecoderLimits")]
    pub type DecoderLimitsJs;
    #[wasm_bindgen(typescript_type = "Scripts")]
    pub type ScriptsJs;
    #[wasm_bindgen(typescript_type = "Limits")]
    pub type LimitsJs;
    #[wasm_bindgen(typescript_type = "Defaults")]
    pub type DefaultsJs;
    #[wasm_bindgen(typescript_type = "LinkOptions")]
    pub type LinkOptionsJs;
    #[wasm_bindgen(typescript_type = "LinkOutput")]
    pub type LinkOutputJs;
    #[wasm_bindgen(typescript_type = "LinkCause")]
    pub type LinkCauseJs;
    #[wasm_bindgen(typescript_type = "KeepAliveAction")]
    pub type KeepAliveActionJs;
    #[wasm_bindgen(typescript_type = "LostReason")]
    pub type LostReasonJs;
    #[wasm_bindgen(typescript_type = "RedlockEvent")]
    pub type EventJs;
    #[wasm_bindgen(typescript_type = "string | Uint8Array")]
    pub type BytesJs;
    #[wasm_bindgen(typescript_type = "FencedWrite")]
    pub type FencedWriteJs;
    #[wasm_bindgen(typescript_type = "[number, number]")]
    pub type PairJs;
    #[wasm_bindgen(typescript_type = "ErrorClassInfo[]")]
    pub type ErrorClassesJs;
}
