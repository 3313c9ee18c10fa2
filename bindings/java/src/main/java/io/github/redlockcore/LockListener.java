package io.github.redlockcore;

/** Hears what keep-alive does. Called on the client's loop thread: return quickly. */
public interface LockListener {
  /** The lock was extended; it is now valid until {@code validUntil} (loop clock, us). */
  default void extended(RedLock lock, long validUntil) {}

  /** An extension failed but the lock is still held; another is due at {@code retryAt}. */
  default void extensionFailed(RedLock lock, LockException cause, long retryAt) {}

  /** The lock is lost. */
  default void lost(RedLock lock, LockLostException cause) {}
}
