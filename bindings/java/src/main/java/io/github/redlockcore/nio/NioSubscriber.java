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

/**
 * One subscriber connection to one node for release notices, a socket of its own on the
 * loop's selector (every method runs on the loop thread). It connects (and authenticates)
 * when opened, then sends the {@code SUBSCRIBE} and {@code UNSUBSCRIBE} commands the
 * loop gives it and reports what it reads: messages, confirmed subscriptions, a refused
 * {@code SUBSCRIBE}. When the socket fails it reports the connection lost and stops; the
 * core decides when a new one is opened. It has no deadline of its own: one that neither
 * opens nor confirms a subscription within the driver's connect timeout is given up by the
 * core's subscriptions, and the loop closes it (nothing more is reported).
 */
final class NioSubscriber implements NoticeSubscriber, NioSocket.Handler {
  private static final byte[] MESSAGE = "message".getBytes(StandardCharsets.US_ASCII);
  private static final byte[] SUBSCRIBE = "subscribe".getBytes(StandardCharsets.US_ASCII);

  private final NioDriver.Node node;
  private final LoopContext loop;
  private final NoticeListener listener;
  private final NioSocket socket = new NioSocket(16 * 1024);
  private boolean authenticating;
  /** Closed or lost: nothing more is sent or reported. */
  private boolean done;

  NioSubscriber(NioDriver.Node node, LoopContext loop, NoticeListener listener) {
    this.node = node;
    this.loop = loop;
    this.listener = listener;
  }

  /** Starts connecting; the outcome is reported (opened, or lost). */
  void open() {
    try {
      socket.open(loop, node.address, this);
    } catch (IOException e) {
      lost();
    }
  }

  @Override
  public void subscribe(byte[] name) {
    send("SUBSCRIBE", name);
  }

  @Override
  public void unsubscribe(byte[] name) {
    send("UNSUBSCRIBE", name);
  }

  @Override
  public void close() {
    done = true;
    shut();
  }

  /** The connection failed or could not be opened: closed, and reported once. */
  private void lost() {
    shut();
    if (!done) {
      done = true;
      listener.lost();
    }
  }

  @Override
  public void connected() {
    if (node.password != null) {
      authenticating = true;
      send("AUTH", node.password.getBytes(StandardCharsets.UTF_8));
    } else {
      listener.opened();
    }
  }

  private void send(String command, byte[] argument) {
    if (done || !socket.isOpen()) {
      return;
    }
    try {
      socket.send(Native.encodeCommand(
          new byte[][] {command.getBytes(StandardCharsets.US_ASCII), argument}));
    } catch (IOException e) {
      lost();
    }
  }

  @Override
  public void failed(Exception e) {
    lost();
  }

  @Override
  public void ended() {
    lost();
  }

  @Override
  public void received(byte[] data, int length) {
    RespDecoder decoder = socket.decoder();
    decoder.feed(data, 0, length);
    Reply reply;
    while (!done && socket.isOpen() && (reply = decoder.nextReply()) != null) {
      if (authenticating) {
        authenticating = false;
        if (reply.type() == Reply.Type.ERROR) {
          lost();
          return;
        }
        listener.opened();
      } else if (!heard(reply, listener)) {
        // The node refused to subscribe (a NOPERM, say): the loop closes the connection.
        listener.refused();
      }
    }
  }

  /**
   * Reports what one reply read from a subscriber connection means: a message is a notice
   * with its payload as received; a confirmed subscription is reported as such (a
   * release published before it took effect reached nobody: docs/bindings.md, rule 13);
   * the rest (unsubscriptions) is nothing. False for an error reply.
   */
  static boolean heard(Reply reply, NoticeListener listener) {
    if (reply.type() == Reply.Type.ERROR) {
      return false;
    }
    if (reply.type() != Reply.Type.ARRAY || reply.elements().size() != 3) {
      return true;
    }
    byte[] kind = reply.elements().get(0).data();
    byte[] channel = reply.elements().get(1).data();
    if (channel == null) {
      return true;
    }
    if (Arrays.equals(MESSAGE, kind)) {
      byte[] message = reply.elements().get(2).data();
      listener.notice(channel, message == null ? new byte[0] : message);
    } else if (Arrays.equals(SUBSCRIBE, kind)) {
      listener.subscribed(channel);
    }
    return true;
  }

  private void shut() {
    socket.close();
    authenticating = false;
  }
}
