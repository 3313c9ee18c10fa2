package io.github.redlockcore.spi;

/**
 * Where a {@link NoticeSubscriber} reports what happens on its connection, from any thread.
 * The client's loop hands the connection's events to the core's subscriptions and the
 * messages to the acquisitions waiting on their channels.
 */
public interface NoticeListener {
  /**
   * The connection is open (and authenticated, if the node needs it): subscriptions can be
   * asked for now.
   */
  default void opened() {}

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
   * took effect reached nobody; the core decides whether the confirmation counts and
   * whether one may have gone unheard (docs/bindings.md, rule 13).
   */
  default void subscribed(byte[] channel) {}

  /**
   * The node refused a {@code SUBSCRIBE} (an error reply: an ACL without pub/sub, say).
   * The connection counts as lost; the loop closes it.
   */
  default void refused() {}

  /**
   * The connection could not be opened, or it dropped. Nothing more is reported for it;
   * the core says when a new one is opened.
   */
  default void lost() {}
}
