package io.github.redlockcore.spi;

/**
 * One subscriber connection to one node, for release notices (a connection of its own:
 * {@code SUBSCRIBE} takes a connection over), as {@link Driver#openSubscriber} opened it.
 * It decides nothing: the core's subscriptions ({@link
 * io.github.redlockcore.core.Subscriptions}, one per client) decide when a node's
 * subscriber connection opens and closes, which channels it subscribes and unsubscribes,
 * and how long one that failed stays closed, and the client's loop carries that out
 * through these methods, on its own thread, once the connection reported {@link
 * NoticeListener#opened()}. Every call returns at once.
 *
 * <p>What happens on the connection goes to the {@link NoticeListener} it was opened
 * with, from any thread: opened, each message, each confirmed subscription, a refused
 * {@code SUBSCRIBE}, the connection lost. It never reconnects or subscribes again on its
 * own: once lost (or closed) it reports nothing more, and the loop opens a new one when
 * the core says so. A notice only ever makes a waiting acquisition try sooner, so a
 * subscriber that cannot connect or drops costs speed, never safety: the waiters keep the
 * core's retry schedule.
 */
public interface NoticeSubscriber {
  /**
   * Subscribes to {@code channel}; the node's confirmation goes to {@link
   * NoticeListener#subscribed}, a refusal (an error reply) to {@link
   * NoticeListener#refused()}.
   */
  void subscribe(byte[] channel);

  /** Unsubscribes from {@code channel}; its confirmation is reported as nothing. */
  void unsubscribe(byte[] channel);

  /** Closes the connection (whatever its state; again is harmless); nothing more is reported. */
  void close();
}
