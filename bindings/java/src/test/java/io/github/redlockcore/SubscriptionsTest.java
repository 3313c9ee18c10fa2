package io.github.redlockcore;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.redlockcore.core.Subscriptions;
import io.github.redlockcore.core.Subscriptions.Output;
import io.github.redlockcore.core.Subscriptions.Output.Kind;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The core's notice subscriptions through JNI: bad inputs refused with the binding's
 * exceptions, and a short drive on a virtual clock (the scenarios themselves are the
 * core's tests, core/tests/subscriptions.rs).
 */
class SubscriptionsTest {
  private static final byte[] CH = "redlock:notice:a".getBytes(StandardCharsets.US_ASCII);
  private static final byte[] CH2 = "redlock:notice:b".getBytes(StandardCharsets.US_ASCII);
  private static final long MS = 1000;
  private static final long T0 = 1_000_000;

  static List<Output> outputs(Subscriptions s) {
    List<Output> out = new ArrayList<>();
    for (Output o; (o = s.poll()) != null; ) {
      out.add(o);
    }
    return out;
  }

  static String text(List<Output> outputs) {
    return outputs.toString();
  }

  @Test
  void aBadNodeCountIsTheConfigurationError() {
    assertEquals("no_nodes", ErrorPathsTest.code(RedlockArgumentException.class,
        () -> new Subscriptions(0, Duration.ofSeconds(1))));
    assertEquals("no_nodes", ErrorPathsTest.code(RedlockArgumentException.class,
        () -> new Subscriptions(-1, Duration.ofSeconds(1))));
    assertEquals("too_many_nodes", ErrorPathsTest.code(RedlockArgumentException.class,
        () -> new Subscriptions(256, Duration.ofSeconds(1))));
    assertEquals("invalid_argument", ErrorPathsTest.code(RedlockArgumentException.class,
        () -> new Subscriptions(3, Duration.ofMillis(-1))));
    try (Subscriptions s = new Subscriptions(255, Duration.ZERO)) {
      assertEquals(255, s.nodes());
    }
  }

  @Test
  void anUnknownNodeIsTheUsageErrorAndChangesNothing() {
    try (Subscriptions s = new Subscriptions(3, Duration.ofSeconds(1))) {
      s.want(CH, T0);
      assertEquals(3, outputs(s).size());
      for (int node : new int[] {3, -1, Integer.MAX_VALUE}) {
        assertEquals("unknown_node", ErrorPathsTest.code(RedlockArgumentException.class,
            () -> s.handleOpened(node, T0)));
        assertEquals("unknown_node", ErrorPathsTest.code(RedlockArgumentException.class,
            () -> s.handleLost(node, T0)));
        assertEquals("unknown_node", ErrorPathsTest.code(RedlockArgumentException.class,
            () -> s.handleRefused(node, T0)));
        assertEquals("unknown_node", ErrorPathsTest.code(RedlockArgumentException.class,
            () -> s.handleConfirmed(node, CH, T0)));
        assertFalse(s.isOpen(node));
        assertFalse(s.isSubscribed(node, CH));
      }
      assertEquals("invalid_argument", ErrorPathsTest.code(RedlockArgumentException.class,
          () -> s.want(null, T0)));
      assertEquals("invalid_argument", ErrorPathsTest.code(RedlockArgumentException.class,
          () -> s.handleConfirmed(0, null, T0)));
      assertEquals("invalid_time", ErrorPathsTest.code(RedlockArgumentException.class,
          () -> s.handleTimeout(-1)));
      assertEquals(List.of(), outputs(s));
      assertEquals(1, s.channels());
    }
  }

  @Test
  void closingIsIdempotentAndAClosedOneIsRefused() {
    Subscriptions s = new Subscriptions(1, Duration.ofSeconds(1));
    s.close();
    s.close();
    assertTrue(s.isClosed());
    assertEquals("used_after_close", ErrorPathsTest.code(RedlockStateException.class,
        () -> s.want(CH, T0)));
    assertEquals("used_after_close", ErrorPathsTest.code(RedlockStateException.class,
        s::poll));
  }

  /**
   * want opens every node; once open, the channel is subscribed there; its confirmation
   * counts once; after the last listener left the channel lingers, then is unsubscribed
   * and the idle connections close.
   */
  @Test
  void aShortDrive() {
    try (Subscriptions s = new Subscriptions(2, Duration.ofMillis(150))) {
      assertEquals(-1, s.pollTimeout());
      s.want(CH, T0);
      assertEquals(List.of(new Output(Kind.OPEN, 0, null), new Output(Kind.OPEN, 1, null)),
          outputs(s));
      // A second listener while opening: nothing more to do.
      s.want(CH, T0 + MS);
      assertEquals(List.of(), outputs(s));
      s.handleOpened(0, T0 + 2 * MS);
      s.handleOpened(1, T0 + 2 * MS);
      List<Output> subscribes = outputs(s);
      assertEquals(2, subscribes.size());
      for (int node = 0; node < 2; node++) {
        Output o = subscribes.get(node);
        assertEquals(Kind.SUBSCRIBE, o.kind());
        assertEquals(node, o.node());
        assertEquals("redlock:notice:a", new String(o.channel(), StandardCharsets.US_ASCII));
      }
      assertTrue(s.isOpen(0));
      assertTrue(s.handleConfirmed(0, CH, T0 + 3 * MS));
      assertFalse(s.handleConfirmed(0, CH, T0 + 3 * MS), "a confirmation counts once");
      assertFalse(s.handleConfirmed(0, CH2, T0 + 3 * MS), "never asked for");
      assertTrue(s.isSubscribed(0, CH));
      assertTrue(s.handleConfirmed(1, CH, T0 + 3 * MS));

      // Both listeners leave: the channel lingers for the core's NOTICE_CHANNEL_LINGER_MS.
      assertTrue(s.unwant(CH, T0 + 10 * MS));
      assertTrue(s.unwant(CH, T0 + 20 * MS));
      assertFalse(s.unwant(CH, T0 + 20 * MS), "nobody listens any more");
      long end = T0 + 20 * MS + 500 * MS;
      assertEquals(end, s.pollTimeout());
      s.handleTimeout(end - 1);
      assertEquals(List.of(), outputs(s));
      assertTrue(s.isSubscribed(1, CH));
      s.handleTimeout(end);
      assertEquals(List.of(new Output(Kind.UNSUBSCRIBE, 0, CH), new Output(Kind.UNSUBSCRIBE, 1, CH),
          new Output(Kind.CLOSE, 0, null), new Output(Kind.CLOSE, 1, null)), outputs(s));
      assertEquals(0, s.channels());
      assertFalse(s.isOpen(0));
      assertEquals(-1, s.pollTimeout());
    }
  }

  /**
   * A lost or refused connection opens again after the core's pause (100 ms, doubling), a
   * listener arriving meanwhile does not cut it short, and one that neither opens nor
   * confirms in time counts as lost.
   */
  @Test
  void failedConnectionsOpenAgainPaced() {
    try (Subscriptions s = new Subscriptions(1, Duration.ofMillis(150))) {
      s.want(CH, T0);
      assertEquals(List.of(new Output(Kind.OPEN, 0, null)), outputs(s));
      s.handleLost(0, T0 + MS);
      assertEquals(T0 + MS + 100 * MS, s.pollTimeout());
      s.want(CH2, T0 + 2 * MS);
      assertEquals(List.of(), outputs(s), "a new listener does not cut the pause short");
      s.handleTimeout(T0 + 101 * MS);
      assertEquals(List.of(new Output(Kind.OPEN, 0, null)), outputs(s));
      s.handleOpened(0, T0 + 102 * MS);
      assertEquals(2, outputs(s).size());
      // Refused: closed, and the pause doubled.
      s.handleRefused(0, T0 + 103 * MS);
      assertEquals(List.of(new Output(Kind.CLOSE, 0, null)), outputs(s));
      assertEquals(T0 + 103 * MS + 200 * MS, s.pollTimeout());
      s.handleTimeout(T0 + 303 * MS);
      assertEquals(List.of(new Output(Kind.OPEN, 0, null)), outputs(s));
      // Not open within the timeout: closed, counted lost, the pause doubled again.
      s.handleTimeout(T0 + 453 * MS);
      assertEquals(List.of(new Output(Kind.CLOSE, 0, null)), outputs(s));
      assertEquals(T0 + 453 * MS + 400 * MS, s.pollTimeout());
      // A report from the connection given up changes nothing.
      s.handleLost(0, T0 + 460 * MS);
      assertEquals(T0 + 453 * MS + 400 * MS, s.pollTimeout());
      assertNull(s.poll());
    }
  }
}
