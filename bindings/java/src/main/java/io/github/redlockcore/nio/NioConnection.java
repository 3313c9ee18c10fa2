package io.github.redlockcore.nio;

import io.github.redlockcore.RedlockProtocolException;
import io.github.redlockcore.core.Command;
import io.github.redlockcore.core.Reply;
import io.github.redlockcore.core.RespDecoder;
import io.github.redlockcore.internal.Native;
import io.github.redlockcore.spi.CloseCause;
import io.github.redlockcore.spi.LoopContext;
import io.github.redlockcore.spi.NodeConnection;
import io.github.redlockcore.spi.NodeEvents;
import java.io.IOException;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.SocketChannel;
import java.util.ArrayDeque;

/**
 * One node's socket on the loop's selector. Writes go out in order (buffered while the
 * socket is full); each decoded reply answers the oldest write still waiting, as Redis
 * answers in order on one connection. Every method runs on the loop thread.
 */
final class NioConnection implements NodeConnection {
  private final NioDriver.Node node;
  private final LoopContext loop;
  private final NodeEvents events;
  private final ByteBuffer readBuffer = ByteBuffer.allocate(64 * 1024);
  private final ArrayDeque<ByteBuffer> output = new ArrayDeque<>();
  private SocketChannel channel;
  private SelectionKey key;
  private RespDecoder decoder;
  private boolean ready;
  /** The Sentinel lookup under way before the connection (a Sentinel's master only). */
  private SentinelLookup lookup;

  NioConnection(NioDriver.Node node, LoopContext loop, NodeEvents events) {
    this.node = node;
    this.loop = loop;
    this.events = events;
  }

  @Override
  public void connect() {
    if (channel != null || lookup != null) {
      return;
    }
    if (node.sentinels == null) {
      connectTo(node.address);
      return;
    }
    // A Sentinel's master: asked for again at every connection attempt.
    lookup = new SentinelLookup(node, loop, new SentinelLookup.Result() {
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
      channel = SocketChannel.open();
      channel.configureBlocking(false);
      channel.setOption(StandardSocketOptions.TCP_NODELAY, true);
      decoder = new RespDecoder();
      InetSocketAddress address =
          new InetSocketAddress(target.getHostString(), target.getPort());
      if (address.isUnresolved()) {
        fail(CloseCause.OTHER, "cannot resolve " + target.getHostString());
        return;
      }
      key = loop.register(channel, SelectionKey.OP_CONNECT, this::onReady);
      if (channel.connect(address)) {
        onConnected();
      }
    } catch (IOException e) {
      fail(cause(e), String.valueOf(e.getMessage()));
    }
  }

  private static CloseCause cause(IOException e) {
    return e instanceof ConnectException ? CloseCause.REFUSED : CloseCause.OTHER;
  }

  private void onConnected() throws IOException {
    key.interestOps(SelectionKey.OP_READ);
    if (node.password != null) {
      // AUTH is answered before the connection counts as open.
      enqueue(Native.encodeCommand(
          new byte[][] {Native.utf8("AUTH"), Native.utf8(node.password)}));
    } else {
      ready = true;
      events.connected();
    }
  }

  private void onReady(SelectionKey k) {
    try {
      if (k.isConnectable()) {
        if (channel.finishConnect()) {
          onConnected();
        }
        return;
      }
      if (k.isWritable()) {
        flush();
      }
      if (k.isReadable()) {
        read();
      }
    } catch (IOException e) {
      fail(cause(e), String.valueOf(e.getMessage()));
    } catch (RedlockProtocolException e) {
      fail(CloseCause.OTHER, e.getMessage());
    }
  }

  private void read() throws IOException {
    while (channel != null) {
      readBuffer.clear();
      int n = channel.read(readBuffer);
      if (n < 0) {
        fail(CloseCause.OTHER, "the node closed the connection");
        return;
      }
      if (n == 0) {
        return;
      }
      if (ready) {
        // The loop's native half decodes them and matches replies to writes.
        events.received(readBuffer.array(), 0, n);
      } else {
        // The AUTH reply: nothing else was written before it.
        decoder.feed(readBuffer.array(), 0, n);
        Reply r = decoder.nextReply();
        if (r != null) {
          if (r.type() == Reply.Type.ERROR) {
            fail(CloseCause.AUTH, r.text());
            return;
          }
          ready = true;
          events.connected();
        }
      }
      if (n < readBuffer.capacity()) {
        return;
      }
    }
  }

  @Override
  public void write(long writeId, Command command, byte[] resp, byte[][] args) {
    if (channel == null || !ready) {
      // The connection failed and its closed event is on its way to the link, which
      // settles this write then.
      return;
    }
    enqueue(resp);
  }

  /** Straight from the loop's array to the socket; only what does not fit is copied. */
  @Override
  public void writeRaw(long writeId, byte[] resp, int offset, int length) {
    if (channel == null || !ready) {
      return;
    }
    if (!output.isEmpty()) {
      enqueue(java.util.Arrays.copyOfRange(resp, offset, offset + length));
      return;
    }
    try {
      ByteBuffer buffer = ByteBuffer.wrap(resp, offset, length);
      channel.write(buffer);
      if (buffer.hasRemaining()) {
        output.add(ByteBuffer.wrap(java.util.Arrays.copyOfRange(resp, buffer.position(),
            offset + length)));
        key.interestOps(SelectionKey.OP_READ | SelectionKey.OP_WRITE);
      }
    } catch (IOException e) {
      fail(cause(e), String.valueOf(e.getMessage()));
    }
  }

  private void enqueue(byte[] bytes) {
    output.add(ByteBuffer.wrap(bytes));
    try {
      flush();
    } catch (IOException e) {
      fail(cause(e), String.valueOf(e.getMessage()));
    }
  }

  private void flush() throws IOException {
    while (channel != null && !output.isEmpty()) {
      ByteBuffer head = output.peek();
      channel.write(head);
      if (head.hasRemaining()) {
        key.interestOps(SelectionKey.OP_READ | SelectionKey.OP_WRITE);
        return;
      }
      output.poll();
    }
    if (key != null && key.isValid()) {
      key.interestOps(SelectionKey.OP_READ);
    }
  }

  private void fail(CloseCause cause, String text) {
    boolean wasOpen = channel != null;
    shut();
    if (wasOpen) {
      events.closed(cause, text);
    }
  }

  private void shut() {
    if (key != null) {
      key.cancel();
      key = null;
    }
    if (channel != null) {
      try {
        channel.close();
      } catch (IOException e) {
        // Closing anyway.
      }
      channel = null;
    }
    if (decoder != null) {
      decoder.close();
      decoder = null;
    }
    output.clear();
    ready = false;
  }

  /** The link asked for it: close, and report nothing more for this connection. */
  @Override
  public void close() {
    if (lookup != null) {
      lookup.close();
      lookup = null;
    }
    shut();
  }
}
