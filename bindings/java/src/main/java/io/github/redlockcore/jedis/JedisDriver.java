package io.github.redlockcore.jedis;

import io.github.redlockcore.RedlockArgumentException;
import io.github.redlockcore.internal.Engine;
import io.github.redlockcore.spi.Driver;
import io.github.redlockcore.spi.LoopContext;
import io.github.redlockcore.spi.NodeConnection;
import io.github.redlockcore.spi.NodeEvents;
import io.github.redlockcore.spi.NoticeListener;
import io.github.redlockcore.spi.NoticeSubscriber;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Supplier;
import redis.clients.jedis.Jedis;
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
 */
public final class JedisDriver implements Driver, Engine.ArgsDriver {
  private final List<Supplier<Jedis>> nodes;
  private final List<JedisConnection> opened = new ArrayList<>();
  private final List<JedisSubscriber> subscribers = new ArrayList<>();

  private JedisDriver(List<Supplier<Jedis>> nodes) {
    if (nodes.isEmpty()) {
      throw new RedlockArgumentException("no_nodes", "a Redlock client needs at least one node");
    }
    this.nodes = List.copyOf(nodes);
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
   * A connection of its own per node (from the node's pool or factory, kept while it
   * works) and a thread blocked in {@code SUBSCRIBE}, for release notices.
   */
  @Override
  public synchronized NoticeSubscriber openSubscriber(int index, LoopContext loop,
      NoticeListener listener) {
    JedisSubscriber s = new JedisSubscriber(index, nodes.get(index), listener);
    subscribers.add(s);
    return s;
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
