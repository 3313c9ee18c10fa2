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

  /**
   * The node confirmed the subscription to {@code channel} (its {@code subscribe} reply,
   * not an {@code unsubscribe}'s). A release the node published before the subscription
   * took effect reached nobody; the engine hands the confirmation to the core, which
   * decides whether one may have gone unheard (docs/bindings.md, rule 13). Ignored by
   * default.
   */
  default void subscribed(byte[] channel) {}
}
