package io.github.redlockcore.nio;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.redlockcore.Unanswered;
import io.github.redlockcore.internal.Native;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * A nio socket has no connect deadline of its own: how long a connection may take to open is
 * the core's decision (a node's link, the core's subscriptions), and the socket's owner
 * closes it then. See {@code ConnectTimeoutTest} for the deadline itself.
 */
class NioSocketTest {
  /**
   * A connection that is never established (a node whose accept queue is full drops new
   * connection requests, as an address that never answers does) reports nothing, even past
   * the core's connect timeout; closing it gives the attempt up: its socket is gone, and
   * nothing is reported after.
   */
  @Test
  void aConnectionNeverEstablishedWaitsForItsOwnerWhoGivesItUp() throws Exception {
    // Never skipped: a test without its prerequisite fails.
    assertTrue(Unanswered.tableReadable(), "needs Linux's /proc/net/tcp");
    try (NioSubscriberTest.TestLoop loop = new NioSubscriberTest.TestLoop();
        Unanswered node = new Unanswered()) {
      BlockingQueue<String> heard = new LinkedBlockingQueue<>();
      NioSocket socket = new NioSocket(1024);
      loop.run(() -> {
        try {
          socket.open(loop, node.address(), new NioSocket.Handler() {
            @Override
            public void connected() {
              heard.add("connected");
            }

            @Override
            public void received(byte[] data, int length) {
              heard.add("received");
            }

            @Override
            public void ended() {
              heard.add("ended");
            }

            @Override
            public void failed(Exception e) {
              heard.add("failed: " + e);
            }
          });
        } catch (java.io.IOException e) {
          heard.add("open failed: " + e);
        }
      });
      // Past the core's connect timeout: still connecting, nothing reported, no timer.
      assertEquals(null, heard.poll(Native.connectTimeoutDefaultMs() + 300, TimeUnit.MILLISECONDS));
      Set<Integer> attempt = node.connecting();
      assertEquals(1, attempt.size(), "one connection attempt under way: " + attempt);
      int[] timers = new int[1];
      boolean[] open = new boolean[2];
      loop.run(() -> {
        timers[0] = loop.timers.size();
        open[0] = socket.isOpen();
        socket.close();
        open[1] = socket.isOpen();
      });
      assertEquals(0, timers[0], "the socket scheduled a timer of its own");
      assertTrue(open[0], "it gave up by itself");
      assertFalse(open[1]);
      Set<Integer> left = node.sockets();
      left.retainAll(attempt);
      assertEquals(Set.of(), left, "the given-up attempt's socket is still there");
      assertEquals(null, heard.poll(200, TimeUnit.MILLISECONDS), "reported after its close");
    }
  }
}
