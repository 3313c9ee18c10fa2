package io.github.redlockcore.core;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;

/**
 * How an operation ended, as the core decided. Losing a lock is an outcome, not an error.
 * An outcome with a lease owns it: close the lease when done (a Cleaner frees it otherwise).
 */
public final class Outcome {
  /** The outcomes, with the core's codes. */
  public enum Kind {
    ACQUIRED("acquired"),
    NOT_ACQUIRED("not_acquired"),
    EXTENDED("extended"),
    NOT_EXTENDED("not_extended"),
    RELEASED("released"),
    NOT_RELEASED("not_released"),
    INSPECTED("inspected"),
    NOT_INSPECTED("not_inspected");

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
  private final long fencingToken;
  /** Inspections: whether the inspected lease holds the lock (the core's is_held_by). */
  private final boolean heldByLease;

  /** The core's error classes, by their stable numbers (from 1). */
  private static final String[] ERROR_CLASSES = {null, "held_elsewhere", "nodes_failing",
      "lock_lost", "not_held", "invalid_argument", "used_after_close", "cancelled"};

  private Outcome(Kind kind, Reason reason, int attempts, long validityMicros, long retryAt,
      int released, String token, Lease lease, List<NodeResult> nodes, String errorClass,
      long fencingToken, boolean heldByLease) {
    this.heldByLease = heldByLease;
    this.errorClass = errorClass;
    this.fencingToken = fencingToken;
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
    List<NodeResult> nodes = new ArrayList<>(codes.length);
    for (int i = 0; i < codes.length; i++) {
      nodes.add(NodeResult.of(nodeKind(codes[i]), texts == null ? null : texts[i],
          NodeResult.causeOf(causes[i])));
    }
    return of(n, 0, token, nodes);
  }

  private static final NodeResult.Kind[] NODE_KINDS = NodeResult.Kind.values();
  private static final Kind[] KINDS = Kind.values();
  private static final Reason[] REASONS = Reason.values();

  private static NodeResult.Kind nodeKind(long code) {
    if (code < 0 || code >= NODE_KINDS.length) {
      throw new io.github.redlockcore.RedlockStateException(
          "unsupported_output", "unknown node result " + code);
    }
    return NODE_KINDS[(int) code];
  }

  /** From the outcome's numbers at {@code n[at]} (layout in the native crate's convert.rs). */
  private static Outcome of(long[] n, int at, String token, List<NodeResult> nodes) {
    long errorClass = n[at + 10];
    if (errorClass < 0 || errorClass >= ERROR_CLASSES.length) {
      throw new io.github.redlockcore.RedlockStateException(
          "unsupported_output", "unknown error class " + errorClass);
    }
    long kind = n[at];
    long reason = n[at + 1];
    if (kind < 0 || kind >= KINDS.length || reason >= REASONS.length) {
      throw new io.github.redlockcore.RedlockStateException(
          "unsupported_output", "unknown outcome " + kind + "/" + reason);
    }
    boolean inspection = kind == 6 || kind == 7;
    if (inspection && n[at + 6] == 0) {
      token = null;
    }
    Lease lease = n[at + 8] != 0
        ? new Lease(n[at + 8], token, n[at + 3], (int) n[at + 7], n[at + 9], n[at + 11])
        : null;
    return new Outcome(
        KINDS[(int) kind],
        reason < 0 ? null : REASONS[(int) reason],
        (int) n[at + 2],
        n[at + 4],
        n[at + 5],
        inspection ? 0 : (int) n[at + 6],
        token,
        lease,
        Collections.unmodifiableList(nodes),
        ERROR_CLASSES[(int) errorClass],
        n[at + 11],
        kind == 6 && n[at + 7] == 1);
  }

  /**
   * The outcome of a loop event ({@link io.github.redlockcore.internal.CoreLinks#OUTCOME}):
   * its numbers from {@code records[at]}, its token and node texts from {@code
   * bytes[byteAt]}. For the client's loop; {@link #eventBytes} says how many bytes it used.
   */
  public static Outcome fromEvent(io.github.redlockcore.internal.CoreLinks links, int at,
      int byteAt) {
    long[] r = links.records();
    byte[] bytes = links.bytes();
    int tokenLength = (int) r[at + 12];
    int count = (int) r[at + 13];
    // Tokens are ASCII; an inspection's holder is whatever a node held (UTF-8 here).
    String token = tokenLength == 0 ? null
        : new String(bytes, byteAt, tokenLength,
            r[at] == 6 ? StandardCharsets.UTF_8 : StandardCharsets.ISO_8859_1);
    int offset = byteAt + tokenLength;
    List<NodeResult> nodes = new ArrayList<>(count);
    for (int i = 0; i < count; i++) {
      int base = at + 15 + 3 * i;
      int textLength = (int) r[base + 2];
      String text = null;
      if (textLength >= 0) {
        text = new String(bytes, offset, textLength, StandardCharsets.UTF_8);
        offset += textLength;
      }
      nodes.add(NodeResult.of(nodeKind(r[base]), text, NodeResult.causeOf((int) r[base + 1])));
    }
    return of(r, at, token, nodes);
  }

  /** The bytes an outcome event at {@code records[at]} uses (its token and node texts). */
  public static int eventBytes(long[] r, int at) {
    int total = (int) r[at + 12];
    int count = (int) r[at + 13];
    for (int i = 0; i < count; i++) {
      total += Math.max(0, (int) r[at + 15 + 3 * i + 2]);
    }
    return total;
  }

  /** The fencing token the lock was handed with (fenced acquisitions and their leases). */
  public java.util.OptionalLong fencingToken() {
    return fencingToken < 0 ? java.util.OptionalLong.empty()
        : java.util.OptionalLong.of(fencingToken);
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

  /** True for acquired, extended, released and inspected. */
  public boolean isSuccess() {
    return kind == Kind.ACQUIRED || kind == Kind.EXTENDED || kind == Kind.RELEASED
        || kind == Kind.INSPECTED;
  }

  /**
   * inspected: the token a quorum of nodes hold on every key of the lock, empty when
   * nobody holds it (the core's {@code Inspected::holder}).
   */
  public Optional<String> holder() {
    return kind == Kind.INSPECTED ? Optional.ofNullable(token) : Optional.empty();
  }

  /** inspected: someone holds the lock (the core's {@code Inspected::is_locked}). */
  public boolean isLocked() {
    return kind == Kind.INSPECTED && token != null;
  }

  /**
   * inspected, for an inspection started with a lease: that lease holds the lock, with
   * its validity not run out (the core's {@code Inspected::is_held_by}).
   */
  public boolean isHeldByLease() {
    return heldByLease;
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
