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
   * Opens a subscriber connection to node {@code index} for release notices (waiting
   * acquisitions), reporting to {@code listener}: {@link NoticeListener#opened()} once it
   * can subscribe, or {@link NoticeListener#lost()} if it cannot be opened. Called on the
   * loop thread whenever the core's subscriptions ask for one (a connection per node at a
   * time); returns at once. Null when the driver cannot subscribe to that node: the core
   * counts it lost, and the waiters keep the core's retry schedule.
   */
  default NoticeSubscriber openSubscriber(int index, LoopContext loop, NoticeListener listener) {
    return null;
  }

  /**
   * The connect timeout: how long a node's connection attempt may take (TCP, TLS, {@code
   * AUTH}, {@code SELECT}, a Sentinel lookup: until {@link NodeEvents#connected()}) before
   * the node's link gives it up ({@link NodeConnection#close()} while it connects, counted
   * failed with the cause {@code timeout}, opened again after the link's pause), and how
   * long a subscriber connection may take to open, or to confirm a subscription, before the
   * core counts it lost (and closes it, to open it again after its pause). The core enforces
   * both: a driver needs no timer of its own. By default the core's connect timeout, 2 s,
   * the same in every binding; a driver over a client whose connect timeout the user set
   * returns that one. Read once, when the client is built.
   */
  default java.time.Duration connectTimeout() {
    return java.time.Duration.ofMillis(io.github.redlockcore.internal.Native.connectTimeoutDefaultMs());
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
