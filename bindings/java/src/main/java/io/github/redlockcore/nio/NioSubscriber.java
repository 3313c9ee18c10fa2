package io.github.redlockcore.nio;

import io.github.redlockcore.core.Reply;
import io.github.redlockcore.core.RespDecoder;
import io.github.redlockcore.internal.Native;
import io.github.redlockcore.spi.LoopContext;
import io.github.redlockcore.spi.NoticeListener;
import io.github.redlockcore.spi.NoticeSubscriber;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * One node's subscriber connection for release notices, a socket of its own on the loop's
 * selector (every method runs on the loop thread). It connects when a channel is first
 * wanted and subscribes to every wanted channel; a connection that drops is not reopened
 * until a channel is wanted again, so waiters already waiting keep the retry schedule.
 */
final class NioSubscriber implements NoticeSubscriber, NioSocket.Handler {
  private static final byte[] MESSAGE = "message".getBytes(StandardCharsets.US_ASCII);

  private final NioDriver.Node node;
  private final LoopContext loop;
  private final NoticeListener listener;
  private final NioSocket socket = new NioSocket(16 * 1024);
  /** Wanted channels, by their ISO-8859-1 text. */
  private final Map<String, byte[]> wanted = new LinkedHashMap<>();
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
    if (!socket.isOpen()) {
      try {
        socket.open(loop, node.address, this);
      } catch (IOException e) {
        shut();
      }
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

  @Override
  public void connected() {
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
    try {
      socket.send(Native.encodeCommand(
          new byte[][] {command.getBytes(StandardCharsets.US_ASCII), argument}));
    } catch (IOException e) {
      shut();
    }
  }

  @Override
  public void failed(Exception e) {
    shut();
  }

  @Override
  public void ended() {
    shut();
  }

  @Override
  public void received(byte[] data, int length) {
    RespDecoder decoder = socket.decoder();
    decoder.feed(data, 0, length);
    Reply reply;
    while (socket.isOpen() && (reply = decoder.nextReply()) != null) {
      if (authenticating) {
        authenticating = false;
        if (reply.type() == Reply.Type.ERROR) {
          shut();
          return;
        }
        subscribeAll();
      } else if (reply.type() == Reply.Type.ARRAY && reply.elements().size() == 3
          && Arrays.equals(MESSAGE, reply.elements().get(0).data())) {
        byte[] message = reply.elements().get(2).data();
        listener.notice(reply.elements().get(1).data(), message == null ? new byte[0] : message);
      }
    }
  }

  private void shut() {
    socket.close();
    ready = false;
    authenticating = false;
  }
}
