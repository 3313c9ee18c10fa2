package io.github.redlockcore.nio;

import io.github.redlockcore.core.Reply;
import io.github.redlockcore.internal.Native;
import io.github.redlockcore.spi.CloseCause;
import io.github.redlockcore.spi.LoopContext;
import java.io.IOException;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.List;

/**
 * Asks the Sentinels, one after the other, which master they name for a service ({@code
 * SENTINEL get-master-addr-by-name}), on a socket of its own on the loop's selector (every
 * method runs on the loop thread). The first Sentinel that names one wins; one that is
 * unreachable, refuses the password, answers an error, names no master or has not
 * answered within the query timeout (the core's {@code SENTINEL_QUERY_TIMEOUT_DEFAULT_MS},
 * else the driver's {@code withSentinelQueryTimeout}; from the start of its connection) is
 * skipped and its answer kept for the failure's text. So a Sentinel that hangs costs one
 * query timeout and the next one is asked; the link's connect timeout, composed by the
 * core from the query timeout and the number of Sentinels, leaves room for every one.
 */
final class SentinelLookup implements NioSocket.Handler {
  /** Where the lookup ends: exactly one of these is called, unless it is closed first. */
  interface Result {
    void found(InetSocketAddress master);

    void failed(CloseCause cause, String text);
  }

  private final List<NioDriver.Node> sentinels;
  private final String service;
  private final LoopContext loop;
  private final Result result;
  private final long queryMs;
  private final StringBuilder answers = new StringBuilder();
  private final NioSocket socket = new NioSocket(4 * 1024);
  private int next;
  private boolean allRefused = true;
  private NioDriver.Node current;
  private boolean authenticating;
  /** The current Sentinel's query timeout, while it is asked. */
  private LoopContext.Scheduled deadline;

  SentinelLookup(NioDriver.Node node, long queryMs, LoopContext loop, Result result) {
    this.sentinels = node.sentinels;
    this.service = node.service;
    this.queryMs = queryMs;
    this.loop = loop;
    this.result = result;
  }

  void start() {
    tryNext();
  }

  /** Stops the lookup; nothing more is reported. */
  void close() {
    next = sentinels.size();
    shut();
  }

  private void tryNext() {
    shut();
    if (next >= sentinels.size()) {
      result.failed(allRefused ? CloseCause.REFUSED : CloseCause.OTHER,
          "no Sentinel named a master for service \"" + service + "\" (" + answers + ")");
      return;
    }
    current = sentinels.get(next++);
    // A timer cancelled once due may still run (the loop collects the due ones first): it
    // acts only while it is the current Sentinel's.
    long at = loop.now() + Math.min(queryMs, Long.MAX_VALUE / 1000 / 2) * 1000;
    LoopContext.Scheduled[] mine = new LoopContext.Scheduled[1];
    mine[0] = loop.schedule(at, () -> {
      if (deadline == mine[0]) {
        deadline = null;
        skip(false, "timed out: no answer within " + queryMs + " ms");
      }
    });
    deadline = mine[0];
    try {
      socket.open(loop, current.address, this);
    } catch (IOException e) {
      failed(e);
    }
  }

  /** Notes what the current Sentinel answered and moves on to the next one. */
  private void skip(boolean refused, String text) {
    allRefused &= refused;
    if (answers.length() > 0) {
      answers.append("; ");
    }
    answers.append(current.address.getHostString()).append(':')
        .append(current.address.getPort()).append(": ").append(text);
    tryNext();
  }

  @Override
  public void failed(Exception e) {
    skip(e instanceof ConnectException, String.valueOf(e.getMessage()));
  }

  @Override
  public void connected() throws IOException {
    if (current.password != null) {
      authenticating = true;
      socket.send(Native.encodeCommand(
          new byte[][] {Native.utf8("AUTH"), Native.utf8(current.password)}));
    }
    socket.send(Native.encodeCommand(new byte[][] {Native.utf8("SENTINEL"),
        Native.utf8("get-master-addr-by-name"), Native.utf8(service)}));
  }

  @Override
  public void ended() {
    skip(false, "the Sentinel closed the connection");
  }

  @Override
  public void received(byte[] data, int length) {
    socket.decoder().feed(data, 0, length);
    Reply reply;
    while (socket.isOpen() && (reply = socket.decoder().nextReply()) != null) {
      if (authenticating) {
        authenticating = false;
        if (reply.type() == Reply.Type.ERROR) {
          skip(false, "AUTH: " + reply.text());
          return;
        }
        continue;
      }
      answer(reply);
      return;
    }
  }

  private void answer(Reply reply) {
    if (reply.type() == Reply.Type.ERROR) {
      skip(false, reply.text());
      return;
    }
    if (reply.type() != Reply.Type.ARRAY || reply.elements().size() != 2) {
      skip(false, "it names no master for this service");
      return;
    }
    String host = new String(reply.elements().get(0).data(), StandardCharsets.UTF_8);
    String port = new String(reply.elements().get(1).data(), StandardCharsets.UTF_8);
    int number;
    try {
      number = Integer.parseInt(port);
    } catch (NumberFormatException e) {
      number = -1;
    }
    if (number <= 0 || number > 65535) {
      skip(false, "it named a master with an invalid port: " + host + " " + port);
      return;
    }
    shut();
    result.found(InetSocketAddress.createUnresolved(host, number));
  }

  private void shut() {
    if (deadline != null) {
      deadline.cancel();
      deadline = null;
    }
    socket.close();
    authenticating = false;
  }
}
