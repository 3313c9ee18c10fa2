package io.github.redlockcore.jedis;

import io.github.redlockcore.RedlockArgumentException;
import io.github.redlockcore.internal.ConnectTimeout;
import io.github.redlockcore.internal.Engine;
import io.github.redlockcore.internal.Messages;
import io.github.redlockcore.internal.SentinelQueryTimeout;
import io.github.redlockcore.spi.Driver;
import io.github.redlockcore.spi.LoopContext;
import io.github.redlockcore.spi.NodeConnection;
import io.github.redlockcore.spi.NodeEvents;
import io.github.redlockcore.spi.NoticeListener;
import io.github.redlockcore.spi.NoticeSubscriber;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.function.Supplier;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisClientConfig;
import redis.clients.jedis.util.Pool;

/**
 * Per-node I/O over Jedis: the user's own {@link redis.clients.jedis.JedisPool}s (or client
 * factories), one per node, each node served by its own thread, because Jedis has no
 * asynchronous API. The client's loop still decides at the quorum; what a frozen node
 * costs here is that node's thread, blocked in a read until the loop closes its socket
 * (once the core's deadline has passed and the link gave up on it) or Jedis's own socket
 * timeout fires, and a new connection after that. Meanwhile new acquisitions are not
 * queued behind it: the link answers them as failed at once.
 *
 * <p>Each node keeps one connection from its pool for as long as it works, so the node's
 * commands stay in order; it goes back to the pool (closed if broken) when the connection
 * fails or the client closes.
 *
 * <p>{@link #sentinel} serves one node, the master Redis Sentinels name for a service.
 */
public final class JedisDriver implements Driver, Engine.ArgsDriver {
  private final List<Supplier<Jedis>> nodes;
  private final List<JedisConnection> opened = new ArrayList<>();
  private final List<JedisSubscriber> subscribers = new ArrayList<>();
  /** False for a Sentinel's master: no subscriber connections for release notices. */
  private boolean notices = true;

  /** Set by withConnectTimeout, else the core's. */
  private final ConnectTimeout connectTimeout = new ConnectTimeout();

  /** Set by withSentinelQueryTimeout, else the core's (a Sentinel's master only). */
  private final SentinelQueryTimeout sentinelQueryTimeout;

  private JedisDriver(List<Supplier<Jedis>> nodes) {
    this(nodes, new SentinelQueryTimeout());
  }

  private JedisDriver(List<Supplier<Jedis>> nodes, SentinelQueryTimeout sentinelQueryTimeout) {
    if (nodes.isEmpty()) {
      throw new RedlockArgumentException("no_nodes", "a Redlock client needs at least one node");
    }
    this.nodes = List.copyOf(nodes);
    this.sentinelQueryTimeout = sentinelQueryTimeout;
  }

  /** A driver over one pool per node, in the order every client must agree on. */
  public static JedisDriver ofPools(List<? extends Pool<Jedis>> pools) {
    List<Supplier<Jedis>> out = new ArrayList<>();
    for (Pool<Jedis> pool : pools) {
      out.add(pool::getResource);
    }
    return new JedisDriver(out);
  }

  /**
   * A driver over client factories, one per node: each call returns a connected Jedis the
   * driver owns until it closes it (for example {@code () -> new Jedis(host, port)}).
   */
  public static JedisDriver ofClients(List<Supplier<Jedis>> factories) {
    return new JedisDriver(factories);
  }

  /**
   * A driver for one node (N = 1): the master that the Sentinels at {@code sentinels}
   * ({@code host:port}, tried in this order) name for {@code service}, with Jedis's default
   * client settings for both (the Sentinels' timeouts are the query timeout). See {@link #sentinel(List, String, JedisClientConfig,
   * JedisClientConfig)}.
   */
  public static JedisDriver sentinel(List<String> sentinels, String service) {
    return sentinel(sentinels, service, DefaultJedisClientConfig.builder().build(),
        DefaultJedisClientConfig.builder().build());
  }

  /**
   * A driver for one node (N = 1): the master that the Sentinels at {@code sentinels}
   * ({@code host:port}, tried in this order, reached with {@code sentinelConfig}) name for
   * {@code service}, reached with {@code masterConfig}. Every connection attempt asks them
   * again ({@code SENTINEL get-master-addr-by-name}), so after a failover the next
   * reconnection reaches the new master. Each Sentinel gets the core's query timeout
   * ({@code SENTINEL_QUERY_TIMEOUT_DEFAULT_MS}, 500 ms; {@link #withSentinelQueryTimeout}
   * sets another) to connect and answer, and one past it (a Sentinel that hangs) is skipped
   * for the next one, as one that refused the connection is: the query timeout is the
   * connection and socket timeout of each Sentinel's {@code Jedis}, in place of {@code
   * sentinelConfig}'s own (everything else of {@code sentinelConfig} applies: password,
   * TLS, client name). The node's connect timeout ({@link #connectTimeout()}) is the core's
   * composition: every Sentinel's query timeout in turn, then the master's connect timeout.
   * When no Sentinel names one, the attempt fails as a node failure whose text says what
   * each Sentinel answered. Release notices are off: waiters keep the core's retry
   * schedule.
   *
   * <p><b>Failover caveat</b> ({@code docs/safety.md}, "single N=1 + replica"):
   * replication is asynchronous, so a failover before the lock's key reached the replica
   * loses the lock, and a second client can acquire it while the first still believes it
   * holds it. Use fencing tokens where that matters, or N independent nodes.
   */
  public static JedisDriver sentinel(List<String> sentinels, String service,
      JedisClientConfig sentinelConfig, JedisClientConfig masterConfig) {
    if (sentinels == null || sentinels.isEmpty()) {
      throw new RedlockArgumentException("invalid_node", "at least one Sentinel is needed");
    }
    if (service == null || service.isEmpty()) {
      throw new RedlockArgumentException("invalid_node", "the Sentinel service name is empty");
    }
    List<HostAndPort> addresses = new ArrayList<>();
    for (String sentinel : sentinels) {
      HostAndPort address;
      try {
        address = HostAndPort.from(sentinel);
      } catch (RuntimeException e) {
        throw new RedlockArgumentException("invalid_node",
            "not a Sentinel address (host:port): " + Messages.shorten(sentinel));
      }
      if (address.getPort() < 1 || address.getPort() > 65535) {
        throw new RedlockArgumentException("invalid_node", "the port must be 1-65535, got "
            + address.getPort() + " in " + Messages.shorten(sentinel));
      }
      addresses.add(address);
    }
    SentinelQueryTimeout queryTimeout = new SentinelQueryTimeout();
    JedisDriver driver = new JedisDriver(List.of(new SentinelMaster(List.copyOf(addresses),
        service, Objects.requireNonNull(sentinelConfig, "sentinelConfig"),
        Objects.requireNonNull(masterConfig, "masterConfig"), queryTimeout)),
        queryTimeout);
    driver.notices = false;
    return driver;
  }

  @Override
  public int nodes() {
    return nodes.size();
  }

  @Override
  public synchronized NodeConnection open(int index, LoopContext loop, NodeEvents events) {
    JedisConnection c = new JedisConnection(index, nodes.get(index), events);
    opened.add(c);
    return c;
  }

  /**
   * A connection of its own (from the node's pool or factory) and a thread blocked in
   * {@code SUBSCRIBE}, for release notices; null for a Sentinel's master (no notices).
   */
  @Override
  public synchronized NoticeSubscriber openSubscriber(int index, LoopContext loop,
      NoticeListener listener) {
    if (!notices) {
      return null;
    }
    JedisSubscriber s = new JedisSubscriber(index, nodes.get(index), listener);
    // The closed ones go: a client opens one now and then for as long as it lives.
    subscribers.removeIf(JedisSubscriber::isClosed);
    subscribers.add(s);
    s.start();
    return s;
  }

  /**
   * Sets how long this driver's connection attempts may take (TCP, TLS, {@code AUTH},
   * {@code SELECT}) before the core gives one up with the cause {@code timeout}, and its
   * subscriber connections the same ({@link Driver#connectTimeout()}); for the master of
   * Sentinels, how long its own connection may take once a Sentinel named it (the lookup's
   * time is added, {@link #connectTimeout()}). By default the core's, 2 s, as is Jedis's
   * own; give the one your pools', factories' or {@code masterConfig}'s clients use (a pool
   * does not expose it). Read when a client is built over this driver.
   * Returns this driver.
   *
   * @throws RedlockArgumentException {@code invalid_argument} for a timeout that is not
   *     positive
   */
  public JedisDriver withConnectTimeout(java.time.Duration timeout) {
    connectTimeout.set(timeout);
    return this;
  }

  /**
   * Sets how long each Sentinel may take to connect and answer {@code SENTINEL
   * get-master-addr-by-name} before it is skipped for the next one (a driver made by
   * {@link #sentinel}; others have no Sentinels): the connection and socket timeout of each
   * Sentinel's {@code Jedis}. By default the core's, 500 ms, the same in every binding.
   * Returns this driver.
   *
   * @throws RedlockArgumentException {@code invalid_argument} for a timeout that is not
   *     positive
   */
  public JedisDriver withSentinelQueryTimeout(java.time.Duration timeout) {
    sentinelQueryTimeout.set(timeout);
    return this;
  }

  /**
   * The connect timeout set with {@link #withConnectTimeout}, else the core's; for the
   * master of Sentinels, the core's composition of it with the Sentinels' query timeout
   * ({@code sentinel_connect_timeout_ms}: each Sentinel's in turn, then the master's
   * connection).
   */
  @Override
  public java.time.Duration connectTimeout() {
    if (nodes.get(0) instanceof SentinelMaster master) {
      return sentinelQueryTimeout.connectTimeout(master.sentinelCount(), connectTimeout.get());
    }
    return connectTimeout.get();
  }

  @Override
  public String name() {
    return "jedis";
  }

  @Override
  public synchronized void close() {
    for (JedisConnection c : opened) {
      c.shutdown();
    }
    opened.clear();
    for (JedisSubscriber s : subscribers) {
      s.close();
    }
    subscribers.clear();
  }
}
