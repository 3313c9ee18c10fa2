package io.github.redlockcore.spi;

/** Where a {@link NoticeSubscriber} reports each message, from any thread. */
public interface NoticeListener {
  /** A release notice arrived on {@code channel}. */
  void notice(byte[] channel);
}
