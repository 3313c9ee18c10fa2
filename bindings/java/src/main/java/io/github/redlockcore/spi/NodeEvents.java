package io.github.redlockcore.spi;

/**
 * What a {@link NodeConnection} reports, from any thread (the loop takes it over).
 * Replies are {@link io.github.redlockcore.core.Reply} or, from raw-socket drivers,
 * {@link io.github.redlockcore.core.RespDecoder.Decoded}.
 */
public interface NodeEvents {
  /** The connection is open and ready for writes. */
  void connected();

  /** The connection failed or closed; every write on it without a reply failed with it. */
  void closed(CloseCause cause, String text);

  /** The reply to write {@code writeId}. */
  void reply(long writeId, Object reply);
}
