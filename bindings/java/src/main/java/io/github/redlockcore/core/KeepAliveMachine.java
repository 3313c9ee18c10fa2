package io.github.redlockcore.core;

import io.github.redlockcore.internal.Native;
import io.github.redlockcore.internal.NativeHandle;

/**
 * The core's keep-alive ({@code redlock_core::KeepAlive}): when to extend, when to retry a
 * failed extension, and when the lock is lost. Not thread-safe: one loop thread.
 */
public final class KeepAliveMachine extends NativeHandle {
  /** What to do now, as {@link #poll} says. */
  public enum Action {
    EXTEND,
    WAIT,
    LOST,
    STOPPED
  }

  /** The core's lost reasons, by their codes. */
  private static final String[] REASONS = {"taken", "not_held", "expired", "extension_limit"};

  private final long[] out = new long[1];

  public KeepAliveMachine(Config config, Lease lease) {
    super(Native.keepAliveNew(config.handle0(), lease.handle0()), Native::keepAliveFree,
        "keep-alive");
  }

  /** The action now; {@link #value()} is the instant for WAIT. */
  public Action poll(long now) {
    int code = Native.keepAlivePoll(handle(), now, out);
    switch (code) {
      case 1:
        return Action.EXTEND;
      case 2:
        return Action.WAIT;
      case 3:
        return Action.LOST;
      default:
        return Action.STOPPED;
    }
  }

  /** The instant of the last WAIT. */
  public long value() {
    return out[0];
  }

  /** The reason of the last LOST: taken, not_held, expired, extension_limit. */
  public String lostReason() {
    int i = (int) out[0];
    return i >= 0 && i < REASONS.length ? REASONS[i] : "expired";
  }

  /**
   * The outcome a standalone operation handed out last (an extension of this lock, asked
   * for or made by hand), also once {@link Operation#poll} returned it.
   */
  public void handleOutcome(Operation operation, long now) {
    Native.keepAliveHandleOutcome(handle(), operation.handle0(), now);
  }

  /** The lease as it stands (the latest extension's); the caller closes it. */
  public Lease lease() {
    return new Lease(Native.keepAliveLease(handle()));
  }

  /** The outcome of the extension the loop ran under {@code tag} (kept natively for this). */
  public void handleOutcome(io.github.redlockcore.internal.CoreLinks links, long tag, long now) {
    links.keepAliveOutcome(tag, handle(), now);
  }

  /** The extension could not run at all. */
  public void handleFailure(long now) {
    Native.keepAliveHandleFailure(handle(), now);
  }

  public void stop() {
    Native.keepAliveStop(handle());
  }
}
