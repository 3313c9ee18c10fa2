package io.github.redlockcore.nio;

import io.github.redlockcore.core.Reply;
import io.github.redlockcore.core.RespDecoder;
import io.github.redlockcore.internal.Native;
import io.github.redlockcore.spi.LoopContext;
import io.github.redlockcore.spi.LoopContext.Scheduled;
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
 * wanted and subscribes to every wanted channel. A connection that drops, or whose
 * subscription the node refuses, is opened again after a delay while channels are
 * wanted; each confirmed subscription is reported (the core decides whether a release
 * may have been missed meanwhile), so one costs the time to subscribe again rather than
 * a retry delay.
 */
final class NioSubscriber implements NoticeSubscriber, NioSocket.Handler {
  private static final byte[] MESSAGE = "message".getBytes(StandardCharsets.US_ASCII);
  private static final byte[] SUBSCRIBE = "subscribe".getBytes(StandardCharsets.US_ASCII);

  private final NioDriver.Node node;
  private final LoopContext loop;
  private final NoticeListener listener;
  private final NioSocket socket = new NioSocket(16 * 1024);
  /** Wanted channels, by their ISO-8859-1 text. */
  private final Map<String, byte[]> wanted = new LinkedHashMap<>();
  private boolean authenticating;
  private boolean ready;
  private boolean closed;
  /** The pending reopening of a failed connection, or null. */
  private Scheduled reopen;
  /** How long the next failed connection stays closed (us). */
  private long reopenDelay = REOPEN_FIRST_MS * 1000;

  NioSubscriber(NioDriver.Node node, LoopContext loop, NoticeListener listener) {
    this.node = node;
    this.loop = loop;
    this.listener = listener;
  }

  @Override
  public void subscribe(byte[] name) {
    if (closed) {
      return;
    }
    boolean known = wanted.put(new String(name, StandardCharsets.ISO_8859_1), name) != null;
    if (!socket.isOpen()) {
      if (reopen == null) {
        open();
      }
    } else if (ready && !known) {
      // Not again for a channel already subscribed (a lingering one): its confirmation
      // would be a notice, and an attempt, for nothing.
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
    closed = true;
    wanted.clear();
    if (reopen != null) {
      reopen.cancel();
      reopen = null;
    }
    shut();
  }

  private void open() {
    try {
      socket.open(loop, node.address, this);
    } catch (IOException e) {
      lost();
    }
  }

  /**
   * The connection failed, could not be opened, or was refused: closed, and opened again
   * after a delay (doubling up to a limit) if channels are still wanted. Notices only make
   * waiting faster, so a node that refuses them costs a connection now and then.
   */
  private void lost() {
    shut();
    if (closed || wanted.isEmpty() || reopen != null) {
      return;
    }
    reopen = loop.schedule(loop.now() + reopenDelay, () -> {
      reopen = null;
      if (!closed && !wanted.isEmpty() && !socket.isOpen()) {
        open();
      }
    });
    reopenDelay = Math.min(2 * reopenDelay, REOPEN_MAX_MS * 1000);
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
    if (!socket.isOpen()) {
      // Lost by an earlier send: the next connection subscribes to what is wanted then.
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
    while (socket.isOpen() && (reply = decoder.nextReply()) != null) {
      if (authenticating) {
        authenticating = false;
        if (reply.type() == Reply.Type.ERROR) {
          lost();
          return;
        }
        subscribeAll();
      } else if (!heard(reply, listener)) {
        // The node refused to subscribe (a NOPERM, say): try again later.
        lost();
        return;
      } else {
        reopenDelay = REOPEN_FIRST_MS * 1000;
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
    ready = false;
    authenticating = false;
  }
}
