package io.github.redlockcore.core;

import io.github.redlockcore.internal.Native;
import io.github.redlockcore.internal.NativeHandle;
import java.nio.charset.StandardCharsets;

/**
 * The resource-side fencing check for a resource that is itself a Redis key (the core's
 * {@code FencedSet}): one script sets the item only if the writer's fencing token is
 * greater than the highest token the item accepted, and records it. Send {@link
 * #args(boolean)} ({@code EVALSHA} first) to the resource's server with any client, hand
 * the reply to {@link #handleReply}; on {@link Result#RETRY_AS_EVAL} send {@code
 * args(true)} once and hand that reply in instead. The guard key (the item's highest
 * accepted token) has no TTL.
 */
public final class FencedSet extends NativeHandle {
  /** What became of the write, as the core read the reply. */
  public enum Result {
    /** The item holds the value; its guard holds the token. */
    ACCEPTED,
    /** Nothing changed: the item had accepted {@link #seen()}, not below this token. */
    STALE,
    /** The server does not have the script cached: send {@code args(true)}. */
    RETRY_AS_EVAL,
    /** An error reply, a reply of the wrong shape, or no reply: {@link #failure()}. */
    FAILED
  }

  private final long token;
  private final long[] out = new long[2];
  private long seen;
  private String failure;

  /**
   * A write of {@code value} to {@code item} under {@code token} (a lock's fencing token).
   *
   * @throws io.github.redlockcore.RedlockArgumentException {@code empty_resource} for an
   *     empty item, {@code invalid_fencing_token} for a token of 0 or above 2^53 - 1
   */
  public FencedSet(String item, byte[] value, long token) {
    super(Native.fencedSetNew(item == null ? null : item.getBytes(StandardCharsets.UTF_8),
        value, token), Native::fencedSetFree, "fenced write");
    this.token = token;
  }

  public long token() {
    return token;
  }

  /** {@code EVALSHA <sha> 2 <item> <guard> <token> <value>}, or with {@code eval} as EVAL. */
  public synchronized byte[][] args(boolean eval) {
    return Native.fencedSetArgs(handle(), eval);
  }

  /** Reads the server's reply. */
  public synchronized Result handleReply(Reply reply) {
    failure = Native.fencedSetReply(handle(), reply.toResp(), out);
    seen = out[1];
    switch ((int) out[0]) {
      case 0:
        return Result.ACCEPTED;
      case 1:
        return Result.STALE;
      case 2:
        return Result.RETRY_AS_EVAL;
      default:
        return Result.FAILED;
    }
  }

  /** After {@link Result#STALE}: the highest token the item had accepted. */
  public synchronized long seen() {
    return seen;
  }

  /** After {@link Result#FAILED}: what went wrong, in the core's words. */
  public synchronized String failure() {
    return failure;
  }
}
