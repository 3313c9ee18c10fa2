package io.github.redlockcore.jedis;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.redlockcore.spi.CloseCause;
import io.github.redlockcore.spi.NodeEvents;
import io.github.redlockcore.spi.NoticeListener;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketException;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.exceptions.JedisConnectionException;

/**
 * A Jedis connection the loop gives up while it is being opened (a node's link, or the
 * core's subscriptions, at the connect timeout): Jedis cannot be interrupted in its
 * connect, so what the attempt comes to later is dropped: the connection it opened is
 * closed, its failure unreported.
 */
class JedisConnectionTest {
  /** What a node's connection reports, in order. */
  static final class Reports implements NodeEvents {
    final BlockingQueue<String> events = new LinkedBlockingQueue<>();

    @Override
    public void connected() {
      events.add("connected");
    }

    @Override
    public void closed(CloseCause cause, String text) {
      events.add("closed " + cause.code());
    }

    @Override
    public void reply(long writeId, Object reply) {
      events.add("reply " + writeId);
    }

    @Override
    public void received(byte[] data, int offset, int length) {
      events.add("received");
    }
  }

  /** A factory whose connections open only once {@code go} is counted down. */
  static Supplier<Jedis> held(CountDownLatch entered, CountDownLatch go, int port,
      boolean fails) {
    return () -> {
      entered.countDown();
      try {
        go.await(10, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      if (fails) {
        throw new JedisConnectionException("connect timed out");
      }
      Jedis jedis = new Jedis("127.0.0.1", port);
      jedis.connect();
      return jedis;
    };
  }

  /** The peer's end of a connection sees it closed (Jedis closes with a reset: no linger). */
  static void assertClosed(Socket peer, String message) throws IOException {
    peer.setSoTimeout(5000);
    try {
      assertEquals(-1, peer.getInputStream().read(), message);
    } catch (SocketException reset) {
      assertTrue(String.valueOf(reset.getMessage()).contains("reset"), reset.toString());
    }
  }

  @Test
  void aConnectionOpenedAfterTheLoopGaveItUpIsClosedAndNotReported() throws Exception {
    try (ServerSocket server = new ServerSocket(0, 8, InetAddress.getLoopbackAddress())) {
      server.setSoTimeout(5000);
      CountDownLatch entered = new CountDownLatch(1);
      CountDownLatch go = new CountDownLatch(1);
      Reports reports = new Reports();
      JedisConnection connection =
          new JedisConnection(0, held(entered, go, server.getLocalPort(), false), reports);
      try {
        connection.connect();
        assertTrue(entered.await(5, TimeUnit.SECONDS), "the connect never started");
        // The link's Close while Jedis connects (as at the link's connect timeout).
        connection.close();
        go.countDown();
        try (Socket peer = server.accept()) {
          assertClosed(peer, "the late connection was not closed");
        }
        assertNull(reports.events.poll(300, TimeUnit.MILLISECONDS), "reported for it");

        // The next attempt is the link's own: reported as ever.
        CountDownLatch nextEntered = new CountDownLatch(1);
        JedisConnection next = new JedisConnection(0,
            held(nextEntered, new CountDownLatch(0), server.getLocalPort(), false), reports);
        try {
          next.connect();
          try (Socket peer = server.accept()) {
            assertEquals("connected", reports.events.poll(5, TimeUnit.SECONDS));
            next.close();
            assertClosed(peer, "a closed connection stayed open");
          }
        } finally {
          next.shutdown();
        }
      } finally {
        connection.shutdown();
      }
    }
  }

  /**
   * A subscriber connection the loop closes while Jedis opens it (the core's subscriptions
   * gave it up at the driver's connect timeout): closed once open, nothing reported.
   */
  @Test
  void aSubscriberClosedWhileItOpensIsClosedAndNotReported() throws Exception {
    try (ServerSocket server = new ServerSocket(0, 8, InetAddress.getLoopbackAddress())) {
      server.setSoTimeout(5000);
      CountDownLatch entered = new CountDownLatch(1);
      CountDownLatch go = new CountDownLatch(1);
      BlockingQueue<String> heard = new LinkedBlockingQueue<>();
      NoticeListener listener = new NoticeListener() {
        @Override
        public void opened() {
          heard.add("opened");
        }

        @Override
        public void notice(byte[] channel, byte[] message) {
          heard.add("notice");
        }

        @Override
        public void refused() {
          heard.add("refused");
        }

        @Override
        public void lost() {
          heard.add("lost");
        }
      };
      JedisSubscriber subscriber = new JedisSubscriber(0,
          held(entered, go, server.getLocalPort(), false), listener);
      subscriber.start();
      assertTrue(entered.await(5, TimeUnit.SECONDS), "the connect never started");
      subscriber.close();
      go.countDown();
      try (Socket peer = server.accept()) {
        assertClosed(peer, "the subscriber's late connection was not closed");
      }
      assertNull(heard.poll(300, TimeUnit.MILLISECONDS), "reported for it");
      assertTrue(subscriber.isClosed());
    }
  }

  @Test
  void aConnectionThatFailsAfterTheLoopGaveItUpIsNotReported() throws Exception {
    CountDownLatch entered = new CountDownLatch(1);
    CountDownLatch go = new CountDownLatch(1);
    Reports reports = new Reports();
    JedisConnection connection = new JedisConnection(0, held(entered, go, 1, true), reports);
    try {
      connection.connect();
      assertTrue(entered.await(5, TimeUnit.SECONDS), "the connect never started");
      connection.close();
      go.countDown();
      assertNull(reports.events.poll(300, TimeUnit.MILLISECONDS), "reported for it");

      // Not given up: its failure is reported, with its cause.
      JedisConnection failing = new JedisConnection(0,
          held(new CountDownLatch(1), new CountDownLatch(0), 1, true), reports);
      try {
        failing.connect();
        assertEquals("closed other", reports.events.poll(5, TimeUnit.SECONDS));
      } finally {
        failing.shutdown();
      }
    } finally {
      connection.shutdown();
    }
  }
}
