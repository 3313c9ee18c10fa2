package io.github.redlockcore.nio;

import io.github.redlockcore.RedlockProtocolException;
import io.github.redlockcore.core.Reply;
import io.github.redlockcore.core.RespDecoder;
import io.github.redlockcore.internal.Native;
import io.github.redlockcore.spi.LoopContext;
import io.github.redlockcore.spi.NoticeListener;
import io.github.redlockcore.spi.NoticeSubscriber;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * One node's subscriber connection for release notices, a socket of its own on the loop's
 * selector (every method runs on the loop thread). It connects when a channel is first
 * wanted and subscribes to every wanted channel; a connection that drops is not reopened
 * until a channel is wanted again, so waiters already waiting keep the retry schedule.
 */
final class NioSubscriber implements NoticeSubscriber {
  private static final byte[] MESSAGE = "message".getBytes(StandardCharsets.US_ASCII);

  private final NioDriver.Node node;
  private final LoopContext loop;
  private final NoticeListener listener;
  private final ByteBuffer readBuffer = ByteBuffer.allocate(16 * 1024);
  private final ArrayDeque<ByteBuffer> output = new ArrayDeque<>();
  /** Wanted channels, by their ISO-8859-1 text. */
  private final Map<String, byte[]> wanted = new LinkedHashMap<>();
  private SocketChannel channel;
  private SelectionKey key;
  private RespDecoder decoder;
  private boolean authenticating;
  private boolean ready;

  NioSubscriber(NioDriver.Node node, LoopContext loop, NoticeListener listener) {
    this.node = node;
    this.loop = loop;
    this.listener = listener;
  }

  @Override
  public void subscribe(byte[] name) {
    wanted.put(new String(name, StandardCharsets.ISO_8859_1), name);
    if (channel == null) {
      open();
    } else if (ready) {
      send("SUBSCRIBE", name);
    }
  }

  @Override
  public void unsubscribe(byte[] name) {
    if (wanted.remove(new String(name, StandardCharsets.ISO_8859_1)) != null && ready) {
      send("UNSUBSCRIBE", name);
    }
  }

  @Override
  public void close() {
    wanted.clear();
    shut();
  }

  private void open() {
    try {
      channel = SocketChannel.open();
      channel.configureBlocking(false);
      channel.setOption(StandardSocketOptions.TCP_NODELAY, true);
      decoder = new RespDecoder();
      InetSocketAddress address =
          new InetSocketAddress(node.address.getHostString(), node.address.getPort());
      if (address.isUnresolved()) {
        shut();
        return;
      }
      key = loop.register(channel, SelectionKey.OP_CONNECT, this::onReady);
      if (channel.connect(address)) {
        onConnected();
      }
    } catch (IOException e) {
      shut();
    }
  }

  private void onConnected() {
    key.interestOps(SelectionKey.OP_READ);
    if (node.password != null) {
      authenticating = true;
      send("AUTH", node.password.getBytes(StandardCharsets.UTF_8));
    } else {
      subscribeAll();
    }
  }

  private void subscribeAll() {
    ready = true;
    for (byte[] name : wanted.values()) {
      send("SUBSCRIBE", name);
    }
  }

  private void send(String command, byte[] argument) {
    output.add(ByteBuffer.wrap(
        Native.encodeCommand(new byte[][] {command.getBytes(StandardCharsets.US_ASCII), argument})));
    try {
      flush();
    } catch (IOException e) {
      shut();
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
    } catch (IOException | RedlockProtocolException e) {
      shut();
    }
  }

  private void read() throws IOException {
    while (channel != null) {
      readBuffer.clear();
      int n = channel.read(readBuffer);
      if (n < 0) {
        shut();
        return;
      }
      if (n == 0) {
        return;
      }
      decoder.feed(readBuffer.array(), 0, n);
      Reply reply;
      while (decoder != null && (reply = decoder.nextReply()) != null) {
        if (authenticating) {
          authenticating = false;
          if (reply.type() == Reply.Type.ERROR) {
            shut();
            return;
          }
          subscribeAll();
        } else if (reply.type() == Reply.Type.ARRAY && reply.elements().size() == 3
            && Arrays.equals(MESSAGE, reply.elements().get(0).data())) {
          listener.notice(reply.elements().get(1).data());
        }
      }
      if (n < readBuffer.capacity()) {
        return;
      }
    }
  }

  private void flush() throws IOException {
    while (channel != null && channel.isConnected() && !output.isEmpty()) {
      ByteBuffer head = output.peek();
      channel.write(head);
      if (head.hasRemaining()) {
        key.interestOps(SelectionKey.OP_READ | SelectionKey.OP_WRITE);
        return;
      }
      output.poll();
    }
    if (key != null && key.isValid() && channel != null && channel.isConnected()) {
      key.interestOps(SelectionKey.OP_READ);
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
    authenticating = false;
  }
}
