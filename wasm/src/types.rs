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
}

export interface AcquireOptions {
  /** A TTL for this lock only (whole milliseconds), checked against the configuration. */
  ttlMs?: number;
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

/** How one node answered the round an outcome reports on. */
export type NodeResult = "not_asked" | "pending" | "success" | "conflict" | "timeout" | { error: string };

export type CommandKind = "set" | "acquire" | "release" | "extend";
export type OperationKind = "acquire" | "extend" | "release";
export type FailureReason = "conflict" | "nodes_failed" | "mixed" | "validity_too_short";

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

/** Call handleTimeout at `until` if no reply came before. */
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
  nodes: NodeResult[];
}

export interface NotAcquired {
  kind: "not_acquired";
  reason: FailureReason;
  attempts: number;
  /** The last attempt's token (already released on every node). */
  token: string;
  nodes: NodeResult[];
}

export interface Extended {
  kind: "extended";
  lease: Lease;
  validityUs: number;
  nodes: NodeResult[];
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
}

export interface Released {
  kind: "released";
  /** Nodes that deleted at least one key holding the token. */
  released: number;
  nodes: NodeResult[];
}

export type Outcome = Acquired | NotAcquired | Extended | NotExtended | Released;

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
}

export interface Limits {
  maxNodes: number;
  maxTtlMs: number;
  minTokenBytes: number;
  maxTokenBytes: number;
  maxAttempts: number;
  maxResources: number;
  maxTokenText: number;
}

export interface Defaults {
  driftFactor: number;
  driftFixedUs: number;
  nodeTimeoutCapUs: number;
  attempts: number;
  retryDelayUs: number;
  retryJitterUs: number;
  tokenBytes: number;
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
}
