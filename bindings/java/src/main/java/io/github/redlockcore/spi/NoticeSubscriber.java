package io.github.redlockcore.spi;

/**
 * One node's subscriber connection for release notices (a connection of its own: {@code
 * SUBSCRIBE} takes a connection over). The loop calls these on its own thread while
 * acquisitions wait: {@link #subscribe} when the first waiter of a channel starts, {@link
 * #unsubscribe} when the last one ends. Messages go to the {@link NoticeListener}. A
 * notice only ever makes a waiting acquisition try sooner, so a subscriber that cannot
 * connect or drops costs speed, never safety: the waiters keep the core's retry schedule.
 * A connection that drops, or whose subscription the node refuses, is opened again while
 * channels are wanted, after {@link #REOPEN_FIRST_MS} at first, doubling up to {@link
 * #REOPEN_MAX_MS}. Each confirmed subscription goes to {@link
 * NoticeListener#subscribed}: a release the node published before it reached nobody.
 */
public interface NoticeSubscriber {
  /**
   * How long a failed subscriber connection stays closed at first (ms): the core's
   * SUBSCRIBER_REOPEN_FIRST_MS.
   */
  long REOPEN_FIRST_MS = io.github.redlockcore.internal.Native.subscriberReopenFirstMs();

  /** How long a failed subscriber connection stays closed at most (ms): the core's. */
  long REOPEN_MAX_MS = io.github.redlockcore.internal.Native.subscriberReopenMaxMs();

  /** Starts listening on {@code channel} (opening the connection if needed). */
  void subscribe(byte[] channel);

  /** Stops listening on {@code channel}. */
  void unsubscribe(byte[] channel);

  /** Closes the connection; nothing more is reported. */
  void close();
}
