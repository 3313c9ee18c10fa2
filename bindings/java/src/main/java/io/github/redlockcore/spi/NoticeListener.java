package io.github.redlockcore.spi;

/** Where a {@link NoticeSubscriber} reports each message, from any thread. */
public interface NoticeListener {
  /**
   * A release notice arrived on {@code channel} carrying {@code message} (the pub/sub
   * payload exactly as received: the id of the waiter first in the node's queue, or empty).
   */
  void notice(byte[] channel, byte[] message);

  /**
   * A release notice arrived on {@code channel}, its message unknown: it names nobody, so
   * the waiters spread out at random instead of letting the first in the queue go first.
   */
  default void notice(byte[] channel) {
    notice(channel, new byte[0]);
  }
}
