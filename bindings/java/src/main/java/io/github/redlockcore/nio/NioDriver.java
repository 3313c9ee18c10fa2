package io.github.redlockcore.nio;

import io.github.redlockcore.RedlockArgumentException;
import io.github.redlockcore.internal.ConnectTimeout;
import io.github.redlockcore.internal.Messages;
import io.github.redlockcore.internal.SentinelQueryTimeout;
import io.github.redlockcore.spi.Driver;
import io.github.redlockcore.spi.LoopContext;
import io.github.redlockcore.spi.NodeConnection;
import io.github.redlockcore.spi.NodeEvents;
import io.github.redlockcore.spi.NoticeListener;
import io.github.redlockcore.spi.NoticeSubscriber;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.URISyntaxException;
import java.util.ArrayList;
import java.util.List;

/**
 * Per-node I/O over plain {@code java.nio} socket channels, served by the client's loop
 * thread through its {@link java.nio.channels.Selector}: the core's RESP bytes are written
 * as they are, and replies go through the core's RESP decoder. One thread fans out to
 * every node and the core decides at the quorum; a frozen node costs nothing but its own
 * timeout (its writes wait in its socket, nobody waits for them).
 *
 * <p>Nodes are {@code redis://[:password@]host:port} URLs (or {@code host:port}), or one
 * node that is the master Redis Sentinels name ({@link #sentinel}). No TLS.
 */
public final class NioDriver implements Driver, io.github.redlockcore.internal.Engine.RawDriver {
  /**
   * One node's address and password (null for none); or, for the master of a Sentinel
   * service, the Sentinels and the service name (the address is then asked for at every
   * connection attempt, and is null here).
   */
  static final class Node {
    final InetSocketAddress address;
    final String password;
    final List<Node> sentinels;
    final String service;

    Node(InetSocketAddress address, String password) {
      this(address, password, null, null);
    }

    Node(InetSocketAddress address, String password, List<Node> sentinels, String service) {
      this.address = address;
      this.password = password;
      this.sentinels = sentinels;
      this.service = service;
    }
  }

  private final List<Node> nodes;

  /** Set by withConnectTimeout, else the core's. */
  private final ConnectTimeout connectTimeout = new ConnectTimeout();

  /** Set by withSentinelQueryTimeout, else the core's (a Sentinel's master only). */
  private final SentinelQueryTimeout sentinelQueryTimeout = new SentinelQueryTimeout();

  private NioDriver(List<Node> nodes) {
    if (nodes.isEmpty()) {
      throw new RedlockArgumentException("no_nodes", "a Redlock client needs at least one node");
    }
    this.nodes = nodes;
  }

  /** A driver for these nodes, in this order (the order every client must agree on). */
  public static NioDriver of(List<String> urls) {
    List<Node> out = new ArrayList<>();
    for (String url : urls) {
      out.add(parse(url));
    }
    return new NioDriver(out);
  }

  /**
   * A driver for one node (N = 1): the master that the Sentinels at {@code sentinels}
   * ({@code redis://[:password@]host:port} URLs or {@code host:port}, tried in this order)
   * name for {@code service}. Every connection attempt asks them again ({@code SENTINEL
   * get-master-addr-by-name}, on a socket of its own on the loop's selector), so after a
   * failover the next reconnection reaches the new master. Each Sentinel gets the core's
   * query timeout ({@code SENTINEL_QUERY_TIMEOUT_DEFAULT_MS}, 500 ms; {@link
   * #withSentinelQueryTimeout} sets another) to connect and answer, and one past it (a
   * Sentinel that hangs) is skipped for the next one, as one that refused the connection
   * is. The node's connect timeout ({@link #connectTimeout()}) is the core's composition:
   * every Sentinel's query timeout in turn, then the master's connect timeout. When no
   * Sentinel names one, the attempt fails as a node failure whose text says what each
   * Sentinel answered. Release notices are off: waiters keep the core's retry schedule.
   *
   * <p><b>Failover caveat</b> ({@code docs/safety.md}, "single N=1 + replica"):
   * replication is asynchronous, so a failover before the lock's key reached the replica
   * loses the lock, and a second client can acquire it while the first still believes it
   * holds it. Use fencing tokens where that matters, or N independent nodes.
   */
  public static NioDriver sentinel(List<String> sentinels, String service) {
    return sentinel(sentinels, service, null);
  }

  /** As {@link #sentinel(List, String)}, for a master that needs {@code masterPassword}. */
  public static NioDriver sentinel(List<String> sentinels, String service,
      String masterPassword) {
    if (sentinels == null || sentinels.isEmpty()) {
      throw new RedlockArgumentException("invalid_node", "at least one Sentinel is needed");
    }
    if (service == null || service.isEmpty()) {
      throw new RedlockArgumentException("invalid_node", "the Sentinel service name is empty");
    }
    List<Node> parsed = new ArrayList<>();
    for (String url : sentinels) {
      parsed.add(parse(url));
    }
    return new NioDriver(List.of(new Node(null, masterPassword, List.copyOf(parsed), service)));
  }

  static Node parse(String url) {
    if (url == null || url.isEmpty()) {
      throw new RedlockArgumentException("invalid_node", "a node URL must not be empty");
    }
    String shown = Messages.shorten(url);
    String text = url.contains("://") ? url : "redis://" + url;
    try {
      URI uri = new URI(text);
      if (!"redis".equals(uri.getScheme())) {
        throw new RedlockArgumentException(
            "invalid_node", "only redis:// URLs are supported by the nio driver, got " + shown);
      }
      if (uri.getHost() == null) {
        throw new RedlockArgumentException("invalid_node", "no host in " + shown);
      }
      int port = uri.getPort() < 0 ? 6379 : uri.getPort();
      if (port < 1 || port > 65535) {
        throw new RedlockArgumentException("invalid_node",
            "the port must be 1-65535, got " + port + " in " + shown);
      }
      String password = null;
      String info = uri.getUserInfo();
      if (info != null && !info.isEmpty()) {
        password = info.contains(":") ? info.substring(info.indexOf(':') + 1) : info;
      }
      return new Node(InetSocketAddress.createUnresolved(uri.getHost(), port), password);
    } catch (URISyntaxException e) {
      throw new RedlockArgumentException("invalid_node", "not a node URL: " + shown);
    }
  }

  @Override
  public List<String> addresses() {
    List<String> out = new ArrayList<>();
    for (Node node : nodes) {
      if (node.address == null) {
        // A Sentinel's master: one node, and its address is known only when connecting.
        return List.of();
      }
      out.add(node.address.getHostString() + ":" + node.address.getPort());
    }
    return out;
  }

  @Override
  public int nodes() {
    return nodes.size();
  }

  @Override
  public NodeConnection open(int index, LoopContext loop, NodeEvents events) {
    return new NioConnection(nodes.get(index), sentinelQueryTimeout.millis(), loop, events);
  }

  /**
   * A socket of its own on the loop's selector, for release notices; null for a
   * Sentinel's master (no notices).
   */
  @Override
  public NoticeSubscriber openSubscriber(int index, LoopContext loop, NoticeListener listener) {
    if (nodes.get(index).address == null) {
      return null;
    }
    NioSubscriber subscriber = new NioSubscriber(nodes.get(index), loop, listener);
    subscriber.open();
    return subscriber;
  }

  /**
   * Sets how long this driver's connection attempts may take (TCP, TLS, {@code AUTH},
   * {@code SELECT}) before the core gives one up with the cause {@code timeout}, and its
   * subscriber connections the same ({@link Driver#connectTimeout()}); for the master of
   * Sentinels, how long its own connection may take once a Sentinel named it (the lookup's
   * time is added, {@link #connectTimeout()}). By default the core's, 2 s, the same in every
   * binding. Read when a client is built over this driver. Returns this driver.
   *
   * @throws RedlockArgumentException {@code invalid_argument} for a timeout that is not
   *     positive
   */
  public NioDriver withConnectTimeout(java.time.Duration timeout) {
    connectTimeout.set(timeout);
    return this;
  }

  /**
   * Sets how long each Sentinel may take to connect and answer {@code SENTINEL
   * get-master-addr-by-name} before it is skipped for the next one (a driver made by
   * {@link #sentinel}; others have no Sentinels). By default the core's, 500 ms, the same in
   * every binding. Read when a client is built over this driver. Returns this driver.
   *
   * @throws RedlockArgumentException {@code invalid_argument} for a timeout that is not
   *     positive
   */
  public NioDriver withSentinelQueryTimeout(java.time.Duration timeout) {
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
    List<Node> sentinels = nodes.get(0).sentinels;
    if (sentinels != null) {
      return sentinelQueryTimeout.connectTimeout(sentinels.size(), connectTimeout.get());
    }
    return connectTimeout.get();
  }

  @Override
  public String name() {
    return "nio";
  }

  @Override
  public void close() {
    // Nothing of its own: the connections live on the loop's selector.
  }
}
