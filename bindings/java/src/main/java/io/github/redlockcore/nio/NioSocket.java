package io.github.redlockcore.nio;

import io.github.redlockcore.RedlockProtocolException;
import io.github.redlockcore.core.RespDecoder;
import io.github.redlockcore.spi.LoopContext;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.net.UnknownHostException;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.SocketChannel;
import java.util.ArrayDeque;
import java.util.Arrays;

/**
 * One non-blocking socket on the loop's selector, with the core's RESP decoder and the
 * bytes still to write: what a node's connection, its notice subscriber and a Sentinel
 * lookup share. Its owner says what to do once connected, when bytes can be read, and on
 * a failure; closing frees the key, the channel and the decoder, and gives up a
 * connection still being established (nothing more is reported for it). It has no
 * deadline of its own: how long a connection may take to open is the core's decision (a
 * node's link, or the core's subscriptions, gives the attempt up and its owner closes the
 * socket). Every method runs on the loop thread.
 */
final class NioSocket {
  /** What the socket's owner does when the selector reports it ready. */
  interface Handler {
    /** The connection is established: the first commands can be sent. */
    void connected() throws IOException;

    /** Bytes read, in {@code data[0, length)} (the socket's buffer, reused after this). */
    void received(byte[] data, int length) throws IOException;

    /** The peer closed the connection; the socket is still open. */
    void ended();

    /** The socket failed (I/O, or bytes that are not RESP); it is still open. */
    void failed(Exception e);
  }

  private final ArrayDeque<ByteBuffer> output = new ArrayDeque<>();
  private final ByteBuffer readBuffer;
  private SocketChannel channel;
  private SelectionKey key;
  private RespDecoder decoder;

  /** A closed socket that reads up to {@code readSize} bytes at a time. */
  NioSocket(int readSize) {
    readBuffer = ByteBuffer.allocate(readSize);
  }

  /**
   * Opens a connection to {@code target} (resolved now); {@code handler} hears the rest.
   * On an exception the socket may be half open: the owner closes it. A connection that is
   * never established (an address that never answers) waits until its owner closes it.
   *
   * @throws UnknownHostException when the host cannot be resolved
   */
  void open(LoopContext loop, InetSocketAddress target, Handler handler) throws IOException {
    channel = SocketChannel.open();
    channel.configureBlocking(false);
    channel.setOption(StandardSocketOptions.TCP_NODELAY, true);
    decoder = new RespDecoder();
    InetSocketAddress address = new InetSocketAddress(target.getHostString(), target.getPort());
    if (address.isUnresolved()) {
      throw new UnknownHostException("cannot resolve " + target.getHostString());
    }
    key = loop.register(channel, SelectionKey.OP_CONNECT, k -> ready(k, handler));
    if (channel.connect(address)) {
      key.interestOps(SelectionKey.OP_READ);
      handler.connected();
    }
  }

  private void ready(SelectionKey k, Handler handler) {
    try {
      if (k.isConnectable()) {
        if (channel.finishConnect()) {
          key.interestOps(SelectionKey.OP_READ);
          handler.connected();
        }
        return;
      }
      if (k.isWritable()) {
        flush();
      }
      if (k.isReadable()) {
        readAll(handler);
      }
    } catch (IOException | RedlockProtocolException e) {
      handler.failed(e);
    }
  }

  /** Whether it is open (connected or connecting). */
  boolean isOpen() {
    return channel != null;
  }

  /** The decoder of this connection's replies. */
  RespDecoder decoder() {
    return decoder;
  }

  /**
   * Hands what is there to {@code handler}, a buffer at a time, until nothing is left or
   * the handler closed (or reopened) the socket.
   */
  private void readAll(Handler handler) throws IOException {
    SocketChannel reading = channel;
    while (reading != null && channel == reading) {
      readBuffer.clear();
      int n = reading.read(readBuffer);
      if (n < 0) {
        handler.ended();
        return;
      }
      if (n == 0) {
        return;
      }
      handler.received(readBuffer.array(), n);
      if (n < readBuffer.capacity()) {
        return;
      }
    }
  }

  /** Sends {@code bytes} after everything sent before (kept, not copied). */
  void send(byte[] bytes) throws IOException {
    output.add(ByteBuffer.wrap(bytes));
    flush();
  }

  /**
   * Sends {@code bytes[offset, offset + length)} after everything sent before, straight
   * from the caller's array when nothing waits; only what does not fit is copied.
   */
  void send(byte[] bytes, int offset, int length) throws IOException {
    if (!output.isEmpty()) {
      output.add(ByteBuffer.wrap(Arrays.copyOfRange(bytes, offset, offset + length)));
      return;
    }
    ByteBuffer buffer = ByteBuffer.wrap(bytes, offset, length);
    channel.write(buffer);
    if (buffer.hasRemaining()) {
      output.add(ByteBuffer.wrap(Arrays.copyOfRange(bytes, buffer.position(), offset + length)));
      key.interestOps(SelectionKey.OP_READ | SelectionKey.OP_WRITE);
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

  /**
   * Cancels the key, closes the channel (connected or still connecting), frees the decoder
   * and drops unsent bytes; the handler hears nothing more.
   */
  void close() {
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
  }
}
