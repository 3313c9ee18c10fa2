package io.github.redlockcore.spi;

import io.github.redlockcore.core.Command;

/**
 * One node's I/O, as a driver provides it. The client's loop calls these on its own thread,
 * and only in the order the node's link asks for: {@link #connect()} when no connection is
 * open, {@link #write} for each command in order, {@link #close()} when the connection is
 * stuck or the client shuts down. Every call returns at once; results come back through
 * the node's {@link NodeEvents}. A connection never reorders, resends or drops writes on
 * its own, and applies no timeouts of its own that the loop relies on.
 */
public interface NodeConnection {
  /**
   * Opens a connection; report {@link NodeEvents#connected()} or {@link NodeEvents#closed},
   * unless {@link #close()} gives the attempt up first. Needs no deadline of its own: the
   * link gives up an attempt that takes longer than {@link Driver#connectTimeout()}.
   */
  void connect();

  /**
   * Writes one command now, after every earlier write; report its reply under {@code
   * writeId} ({@link NodeEvents#reply}). {@code command} is null for a script load, whose
   * RESP bytes are {@code resp}.
   */
  void write(long writeId, Command command, byte[] resp, byte[][] args);

  /**
   * Writes one command given as the RESP bytes {@code resp[offset, offset + length)}, as
   * {@link #write} does. The array is the loop's and is reused once this returns: keep a
   * copy of whatever is not written yet. By default, a copy goes to {@link #write}.
   */
  default void writeRaw(long writeId, byte[] resp, int offset, int length) {
    write(writeId, null, java.util.Arrays.copyOfRange(resp, offset, offset + length), null);
  }

  /**
   * Closes the connection, or gives up the attempt to open one that is under way (the
   * link's connect timeout passed): writes without a reply are reported failed by the loop.
   * Once this returns, nothing more is reported for that connection or attempt (not {@link
   * NodeEvents#connected()} when it opens later, nor its failure); the loop drops what was
   * reported for it and not taken yet.
   */
  void close();
}
