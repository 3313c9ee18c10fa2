package io.github.redlockcore.nio;

import io.github.redlockcore.RedlockProtocolException;
import io.github.redlockcore.core.Command;
import io.github.redlockcore.core.Reply;
import io.github.redlockcore.internal.Native;
import io.github.redlockcore.spi.CloseCause;
import io.github.redlockcore.spi.LoopContext;
import io.github.redlockcore.spi.NodeConnection;
import io.github.redlockcore.spi.NodeEvents;
import java.io.IOException;
import java.net.ConnectException;
import java.net.InetSocketAddress;

/**
 * One node's socket on the loop's selector. Writes go out in order (buffered while the
 * socket is full); each decoded reply answers the oldest write still waiting, as Redis
 * answers in order on one connection. How long a connection may take to open is the
 * link's decision: it closes one that takes longer than its connect timeout. Every method
 * runs on the loop thread.
 */
final class NioConnection implements NodeConnection, NioSocket.Handler {
  private final NioDriver.Node node;
  private final LoopContext loop;
  private final NodeEvents events;
  /** How long each Sentinel may take to answer (a Sentinel's master only). */
  private final long queryMs;
  private final NioSocket socket = new NioSocket(64 * 1024);
  private boolean ready;
  /** The Sentinel lookup under way before the connection (a Sentinel's master only). */
  private SentinelLookup lookup;

  NioConnection(NioDriver.Node node, long queryMs, LoopContext loop, NodeEvents events) {
    this.node = node;
    this.queryMs = queryMs;
    this.loop = loop;
    this.events = events;
  }

  @Override
  public void connect() {
    if (socket.isOpen() || lookup != null) {
      return;
    }
    if (node.sentinels == null) {
      connectTo(node.address);
      return;
    }
    // A Sentinel's master: asked for again at every connection attempt.
    lookup = new SentinelLookup(node, queryMs, loop, new SentinelLookup.Result() {
      @Override
      public void found(InetSocketAddress master) {
        lookup = null;
        connectTo(master);
      }

      @Override
      public void failed(CloseCause cause, String text) {
        lookup = null;
        events.closed(cause, text);
      }
    });
    lookup.start();
  }

  private void connectTo(InetSocketAddress target) {
    try {
      socket.open(loop, target, this);
    } catch (IOException e) {
      failed(e);
    }
  }

  /** A failure's cause (a connection that takes too long is the link's to give up). */
  private static CloseCause cause(Exception e) {
    return e instanceof ConnectException ? CloseCause.REFUSED : CloseCause.OTHER;
  }

  @Override
  public void connected() throws IOException {
    if (node.password != null) {
      // AUTH is answered before the connection counts as open.
      socket.send(Native.encodeCommand(
          new byte[][] {Native.utf8("AUTH"), Native.utf8(node.password)}));
    } else {
      ready = true;
      events.connected();
    }
  }

  @Override
  public void failed(Exception e) {
    fail(e instanceof RedlockProtocolException ? CloseCause.OTHER : cause(e),
        String.valueOf(e.getMessage()));
  }

  @Override
  public void ended() {
    fail(CloseCause.OTHER, "the node closed the connection");
  }

  @Override
  public void received(byte[] data, int length) {
    if (ready) {
      // The loop's native half decodes them and matches replies to writes.
      events.received(data, 0, length);
      return;
    }
    // The AUTH reply: nothing else was written before it.
    socket.decoder().feed(data, 0, length);
    Reply r = socket.decoder().nextReply();
    if (r == null) {
      return;
    }
    if (r.type() == Reply.Type.ERROR) {
      fail(CloseCause.AUTH, r.text());
      return;
    }
    ready = true;
    events.connected();
  }

  @Override
  public void write(long writeId, Command command, byte[] resp, byte[][] args) {
    if (!socket.isOpen() || !ready) {
      // The connection failed and its closed event is on its way to the link, which
      // settles this write then.
      return;
    }
    try {
      socket.send(resp);
    } catch (IOException e) {
      failed(e);
    }
  }

  /** Straight from the loop's array to the socket; only what does not fit is copied. */
  @Override
  public void writeRaw(long writeId, byte[] resp, int offset, int length) {
    if (!socket.isOpen() || !ready) {
      return;
    }
    try {
      socket.send(resp, offset, length);
    } catch (IOException e) {
      failed(e);
    }
  }

  private void fail(CloseCause cause, String text) {
    boolean wasOpen = socket.isOpen();
    shut();
    if (wasOpen) {
      events.closed(cause, text);
    }
  }

  private void shut() {
    socket.close();
    ready = false;
  }

  /**
   * The link asked for it: close the connection, or give up the attempt under way (the
   * link's connect timeout passed: the socket still connecting, or the Sentinel lookup, or
   * the {@code AUTH} unanswered), and report nothing more for it.
   */
  @Override
  public void close() {
    if (lookup != null) {
      lookup.close();
      lookup = null;
    }
    shut();
  }
}
