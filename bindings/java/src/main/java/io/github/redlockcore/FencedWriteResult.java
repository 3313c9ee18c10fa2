package io.github.redlockcore;

/**
 * What a fenced write to the protected resource came to: accepted, or refused because the
 * item had already accepted a token at least as high ({@link #seen()}): the writer is a
 * stale holder (its lease ran out while it was paused, and someone newer has written).
 */
public final class FencedWriteResult {
  private final boolean accepted;
  private final long token;
  private final long seen;

  FencedWriteResult(boolean accepted, long token, long seen) {
    this.accepted = accepted;
    this.token = token;
    this.seen = seen;
  }

  /** For drivers of the check outside this package. */
  public static FencedWriteResult accepted(long token) {
    return new FencedWriteResult(true, token, token);
  }

  /** For drivers of the check outside this package. */
  public static FencedWriteResult stale(long token, long seen) {
    return new FencedWriteResult(false, token, seen);
  }

  /** True when the item now holds the value. */
  public boolean isAccepted() {
    return accepted;
  }

  /** The token the write carried. */
  public long token() {
    return token;
  }

  /** The highest token the item has accepted (this write's, when accepted). */
  public long seen() {
    return seen;
  }

  @Override
  public String toString() {
    return accepted ? "accepted(" + token + ")" : "stale(" + token + ", seen " + seen + ")";
  }
}
