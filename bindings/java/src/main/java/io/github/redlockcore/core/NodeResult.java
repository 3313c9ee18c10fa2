package io.github.redlockcore.core;

import java.util.Objects;

/** How one node answered the round an outcome reports on. */
public final class NodeResult {
  /** The kinds, with the core's codes. */
  public enum Kind {
    NOT_ASKED("not_asked"),
    PENDING("pending"),
    SUCCESS("success"),
    CONFLICT("conflict"),
    ERROR("error"),
    TIMEOUT("timeout"),
    /** An extension found the key gone on this node (expired or released, held by nobody). */
    MISSING("missing");

    private final String code;

    Kind(String code) {
      this.code = code;
    }

    public String code() {
      return code;
    }
  }

  private final Kind kind;
  private final String error;
  private final String cause;

  /** The core's node causes, by their numbers (from 1). */
  private static final String[] CAUSES = {null, "refused", "auth", "tls", "timeout", "stalled",
      "connection", "error"};

  NodeResult(Kind kind, String error) {
    this(kind, error, null);
  }

  NodeResult(Kind kind, String error, String cause) {
    this.kind = kind;
    this.error = error;
    this.cause = cause;
  }

  /** The immutable results without text or cause, shared (most outcomes are made of them). */
  private static final NodeResult[] PLAIN = new NodeResult[Kind.values().length];

  static {
    for (Kind kind : Kind.values()) {
      PLAIN[kind.ordinal()] = new NodeResult(kind, null, null);
    }
  }

  static NodeResult of(Kind kind, String error, String cause) {
    return error == null && cause == null ? PLAIN[kind.ordinal()]
        : new NodeResult(kind, error, cause);
  }

  static String causeOf(int number) {
    return number > 0 && number < CAUSES.length ? CAUSES[number] : null;
  }

  /**
   * The core's cause of a failed node ({@code refused}, {@code auth}, {@code tls}, {@code
   * timeout}, {@code stalled}, {@code connection}, {@code error}), or null.
   */
  public String cause() {
    return cause;
  }

  public Kind kind() {
    return kind;
  }

  /** The error text for {@link Kind#ERROR}, else null. */
  public String error() {
    return error;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof NodeResult
        && ((NodeResult) o).kind == kind
        && Objects.equals(((NodeResult) o).error, error);
  }

  @Override
  public int hashCode() {
    return Objects.hash(kind, error);
  }

  @Override
  public String toString() {
    return kind == Kind.ERROR ? "error(" + cause + ": " + error + ")" : kind.code();
  }
}
