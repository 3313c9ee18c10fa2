package io.github.redlockcore.core;

/**
 * One command for one node: send it, hand the reply back under {@link #requestId()}, stop
 * waiting at {@link #deadline()}. {@link #resp()} is the exact RESP bytes; {@link #args()}
 * the argv (command name first), for clients that take arguments.
 */
public final class Command {
  /** What a command does. */
  public enum Kind {
    SET,
    ACQUIRE,
    RELEASE,
    EXTEND,
    /** A fenced acquisition: the keys set and the fence counters raised. */
    FENCED_ACQUIRE,
    /** A fenced acquisition's write-back of the token. */
    WRITE_BACK,
    /** An inspection's read of the lock's keys ({@code GET} or {@code MGET}). */
    INSPECT,
    /**
     * A waiting acquisition's attempt: the keys set if free, else the waiter registered in
     * the resource's queue on the node.
     */
    QUEUED_ACQUIRE;

    static Kind of(long code) {
      switch ((int) code) {
        case 0:
          return SET;
        case 1:
          return ACQUIRE;
        case 2:
          return RELEASE;
        case 3:
          return EXTEND;
        case 4:
          return FENCED_ACQUIRE;
        case 5:
          return WRITE_BACK;
        case 6:
          return INSPECT;
        case 7:
          return QUEUED_ACQUIRE;
        default:
          throw new io.github.redlockcore.RedlockStateException(
              "unsupported_output", "unknown command kind " + code);
      }
    }
  }

  private final int node;
  private final long requestId;
  private final long deadline;
  private final Kind kind;
  private final boolean eval;
  private final byte[] resp;
  private final byte[][] args;

  Command(int node, long requestId, long deadline, Kind kind, boolean eval, byte[] resp,
      byte[][] args) {
    this.node = node;
    this.requestId = requestId;
    this.deadline = deadline;
    this.kind = kind;
    this.eval = eval;
    this.resp = resp;
    this.args = args;
  }

  public int node() {
    return node;
  }

  public long requestId() {
    return requestId;
  }

  public long deadline() {
    return deadline;
  }

  public Kind kind() {
    return kind;
  }

  public boolean isEval() {
    return eval;
  }

  /** The command in RESP, or null if the operation was polled for arguments only. */
  public byte[] resp() {
    return resp;
  }

  /** The argv, or null if the operation was polled for RESP only. */
  public byte[][] args() {
    return args;
  }

  @Override
  public String toString() {
    return kind + " -> node " + node + " as request " + requestId + " by " + deadline + "us";
  }
}
