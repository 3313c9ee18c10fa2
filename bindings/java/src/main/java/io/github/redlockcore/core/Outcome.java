package io.github.redlockcore.core;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;

/**
 * How an operation ended, as the core decided. Losing a lock is an outcome, not an error.
 * An outcome with a lease owns it: close the lease when done (a Cleaner frees it otherwise).
 */
public final class Outcome {
  /** The five outcomes, with the core's codes. */
  public enum Kind {
    ACQUIRED("acquired"),
    NOT_ACQUIRED("not_acquired"),
    EXTENDED("extended"),
    NOT_EXTENDED("not_extended"),
    RELEASED("released"),
    NOT_RELEASED("not_released");

    private final String code;

    Kind(String code) {
      this.code = code;
    }

    public String code() {
      return code;
    }
  }

  /** Why an acquisition or extension failed, with the core's codes. */
  public enum Reason {
    CONFLICT("conflict"),
    NODES_FAILED("nodes_failed"),
    MIXED("mixed"),
    VALIDITY_TOO_SHORT("validity_too_short"),
    NOT_HELD("not_held");

    private final String code;

    Reason(String code) {
      this.code = code;
    }

    public String code() {
      return code;
    }
  }

  private final Kind kind;
  private final Reason reason;
  private final int attempts;
  private final long validityMicros;
  private final long retryAt;
  private final int released;
  private final String token;
  private final Lease lease;
  private final List<NodeResult> nodes;
  private final String errorClass;

  /** The core's error classes, by their stable numbers (from 1). */
  private static final String[] ERROR_CLASSES = {null, "held_elsewhere", "nodes_failing",
      "lock_lost", "not_held", "invalid_argument", "used_after_close", "cancelled"};

  private Outcome(Kind kind, Reason reason, int attempts, long validityMicros, long retryAt,
      int released, String token, Lease lease, List<NodeResult> nodes, String errorClass) {
    this.errorClass = errorClass;
    this.kind = kind;
    this.reason = reason;
    this.attempts = attempts;
    this.validityMicros = validityMicros;
    this.retryAt = retryAt;
    this.released = released;
    this.token = token;
    this.lease = lease;
    this.nodes = nodes;
  }

  static Outcome fromNative(Object[] parts) {
    long[] n = (long[]) parts[0];
    String token = (String) parts[1];
    int[] codes = (int[]) parts[2];
    String[] texts = (String[]) parts[3];
    int[] causes = (int[]) parts[4];
    int errorClass = (int) n[10];
    if (errorClass < 0 || errorClass >= ERROR_CLASSES.length) {
      throw new io.github.redlockcore.RedlockStateException(
          "unsupported_output", "unknown error class " + errorClass);
    }
    Lease lease = n[8] != 0 ? new Lease(n[8], token, n[3], (int) n[7], n[9]) : null;
    List<NodeResult> nodes = new ArrayList<>(codes.length);
    NodeResult.Kind[] kinds = NodeResult.Kind.values();
    for (int i = 0; i < codes.length; i++) {
      if (codes[i] < 0 || codes[i] >= kinds.length) {
        throw new io.github.redlockcore.RedlockStateException(
            "unsupported_output", "unknown node result " + codes[i]);
      }
      nodes.add(new NodeResult(kinds[codes[i]], texts == null ? null : texts[i],
          NodeResult.causeOf(causes[i])));
    }
    return new Outcome(
        Kind.values()[(int) n[0]],
        n[1] < 0 ? null : Reason.values()[(int) n[1]],
        (int) n[2],
        n[4],
        n[5],
        (int) n[6],
        token,
        lease,
        Collections.unmodifiableList(nodes),
        ERROR_CLASSES[errorClass]);
  }

  /**
   * The core's error class of this outcome ({@code held_elsewhere}, {@code nodes_failing},
   * {@code lock_lost}, {@code not_held}), empty for a success.
   */
  public Optional<String> errorClass() {
    return Optional.ofNullable(errorClass);
  }

  public Kind kind() {
    return kind;
  }

  /** True for acquired, extended and released. */
  public boolean isSuccess() {
    return kind == Kind.ACQUIRED || kind == Kind.EXTENDED || kind == Kind.RELEASED;
  }

  /** The reason, for not_acquired and not_extended. */
  public Optional<Reason> reason() {
    return Optional.ofNullable(reason);
  }

  /** Attempts made (acquisitions). */
  public int attempts() {
    return attempts;
  }

  /** Validity left when the decision was made, in microseconds. */
  public long validityMicros() {
    return validityMicros;
  }

  /** not_extended: when to try again, if there is time for another round. */
  public Optional<Long> retryAt() {
    return retryAt < 0 ? Optional.empty() : Optional.of(retryAt);
  }

  /** released: nodes that deleted a key holding the token. */
  public int released() {
    return released;
  }

  /** The token (acquired, extended, not_extended: the lease's; not_acquired: the last). */
  public String token() {
    return token;
  }

  /** The lease, for acquired, extended and not_extended. */
  public Optional<Lease> lease() {
    return Optional.ofNullable(lease);
  }

  /** not_extended: the lock is already lost, not merely unextended. */
  public boolean isLost() {
    return kind == Kind.NOT_EXTENDED && (reason == Reason.CONFLICT || validityMicros == 0);
  }

  public List<NodeResult> nodes() {
    return nodes;
  }

  @Override
  public String toString() {
    return kind.code() + (reason != null ? "(" + reason.code() + ")" : "") + " nodes=" + nodes;
  }
}
