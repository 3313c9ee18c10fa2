package io.github.redlockcore.spi;

/**
 * Per-node I/O for a Redlock client: the {@link io.github.redlockcore.nio.NioDriver} over
 * {@code java.nio} channels, the {@link io.github.redlockcore.jedis.JedisDriver} over Jedis,
 * or your own.
 */
public interface Driver extends AutoCloseable {
  /** Number of nodes, N. */
  int nodes();

  /** Node {@code index}'s connection, reporting to {@code events}. Called once per node. */
  NodeConnection open(int index, LoopContext loop, NodeEvents events);

  /**
   * Node {@code index}'s subscriber for release notices (waiting acquisitions), opened
   * when first needed, or null when the driver cannot subscribe (waiters then keep the
   * core's retry schedule).
   */
  default NoticeSubscriber openSubscriber(int index, LoopContext loop, NoticeListener listener) {
    return null;
  }

  /** A short name for messages ("nio", "jedis"). */
  String name();

  /**
   * Each node's address as {@code host:port} (no password), in order, so the client can
   * refuse the same server given twice (the core's {@code duplicate_node}); empty when the
   * driver cannot tell (a user-supplied client factory).
   */
  default java.util.List<String> addresses() {
    return java.util.List.of();
  }

  /** Releases what the driver holds (threads); the loop has closed every connection. */
  @Override
  void close();
}
