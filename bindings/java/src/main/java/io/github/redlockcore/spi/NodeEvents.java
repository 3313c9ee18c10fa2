package io.github.redlockcore.spi;

/**
 * What a {@link NodeConnection} reports, from any thread (the loop takes it over).
 * Client-library drivers report each reply ({@link #reply}, a {@link
 * io.github.redlockcore.core.Reply}); raw-socket drivers report the bytes they read
 * ({@link #received}) and the core's decoder matches replies to writes.
 */
public interface NodeEvents {
  /** The connection is open and ready for writes. */
  void connected();

  /** The connection failed or closed; every write on it without a reply failed with it. */
  void closed(CloseCause cause, String text);

  /** The reply to write {@code writeId}. */
  void reply(long writeId, Object reply);

  /**
   * Bytes read from the node's open connection, in order (raw-socket drivers: once the
   * connection was reported {@link #connected()}). The bytes are copied before this
   * returns.
   */
  void received(byte[] data, int offset, int length);
}
