package io.github.redlockcore.nio;

import io.github.redlockcore.RedlockArgumentException;
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
 * <p>Nodes are {@code redis://[:password@]host:port} URLs (or {@code host:port}). No TLS.
 */
public final class NioDriver implements Driver, io.github.redlockcore.internal.Engine.RawDriver {
  /** One node's address and password (null for none). */
  static final class Node {
    final InetSocketAddress address;
    final String password;

    Node(InetSocketAddress address, String password) {
      this.address = address;
      this.password = password;
    }
  }

  private final List<Node> nodes;

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

  static Node parse(String url) {
    if (url == null || url.isEmpty()) {
      throw new RedlockArgumentException("invalid_node", "a node URL must not be empty");
    }
    String text = url.contains("://") ? url : "redis://" + url;
    try {
      URI uri = new URI(text);
      if (!"redis".equals(uri.getScheme())) {
        throw new RedlockArgumentException(
            "invalid_node", "only redis:// URLs are supported by the nio driver, got " + url);
      }
      if (uri.getHost() == null) {
        throw new RedlockArgumentException("invalid_node", "no host in " + url);
      }
      int port = uri.getPort() < 0 ? 6379 : uri.getPort();
      String password = null;
      String info = uri.getUserInfo();
      if (info != null && !info.isEmpty()) {
        password = info.contains(":") ? info.substring(info.indexOf(':') + 1) : info;
      }
      return new Node(InetSocketAddress.createUnresolved(uri.getHost(), port), password);
    } catch (URISyntaxException e) {
      throw new RedlockArgumentException("invalid_node", "not a node URL: " + url);
    }
  }

  @Override
  public List<String> addresses() {
    List<String> out = new ArrayList<>();
    for (Node node : nodes) {
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
    return new NioConnection(nodes.get(index), loop, events);
  }

  /** A socket of its own per node on the loop's selector, for release notices. */
  @Override
  public NoticeSubscriber openSubscriber(int index, LoopContext loop, NoticeListener listener) {
    return new NioSubscriber(nodes.get(index), loop, listener);
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
