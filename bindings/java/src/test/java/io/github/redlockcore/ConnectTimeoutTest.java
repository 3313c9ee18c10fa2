package io.github.redlockcore;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.redlockcore.core.Client;
import io.github.redlockcore.core.Command;
import io.github.redlockcore.core.Config;
import io.github.redlockcore.core.NodeResult;
import io.github.redlockcore.core.Outcome;
import io.github.redlockcore.internal.CoreLinks;
import io.github.redlockcore.internal.Engine;
import io.github.redlockcore.internal.Native;
import io.github.redlockcore.nio.NioDriver;
import io.github.redlockcore.spi.CloseCause;
import io.github.redlockcore.spi.Driver;
import io.github.redlockcore.spi.LoopContext;
import io.github.redlockcore.spi.NodeConnection;
import io.github.redlockcore.spi.NodeEvents;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The connect timeout is the core's (docs/bindings.md, rule 4): every node's link gets the
 * driver's {@link Driver#connectTimeout()} (the user's client's, else the core's 2 s) and
 * gives up a connection attempt that is not open by then; the driver closes it and nothing
 * more is reported for it. No Redis: an address that never answers is a listener whose
 * accept queue is full ({@link Unanswered}).
 */
class ConnectTimeoutTest {
  /** A driver as the user's own: another driver's I/O, with a connect timeout of its own. */
  static final class Timed implements Driver, Engine.RawDriver {
    final Driver inner;
    final Duration connectTimeout;

    Timed(Driver inner, Duration connectTimeout) {
      this.inner = inner;
      this.connectTimeout = connectTimeout;
    }

    @Override
    public int nodes() {
      return inner.nodes();
    }

    @Override
    public NodeConnection open(int index, LoopContext loop, NodeEvents events) {
      return inner.open(index, loop, events);
    }

    @Override
    public Duration connectTimeout() {
      return connectTimeout;
    }

    @Override
    public String name() {
      return "timed " + inner.name();
    }

    @Override
    public void close() {
      inner.close();
    }
  }

  /** What the loop's native half asked for in its last call, one line per event. */
  static List<String> events(CoreLinks links, List<Outcome> outcomes) {
    long[] r = links.records();
    List<String> out = new ArrayList<>();
    int at = 4;
    int byteAt = 0;
    for (int i = 0; i < links.count(); i++) {
      int code = (int) r[at];
      switch (code) {
        case CoreLinks.CONNECT:
          out.add("connect " + r[at + 1]);
          at += 2;
          break;
        case CoreLinks.CLOSE:
          out.add("close " + r[at + 1]);
          at += 2;
          break;
        case CoreLinks.WRITE:
          out.add("write " + r[at + 1]);
          byteAt += (int) r[at + 3];
          at += 4;
          break;
        case CoreLinks.OUTCOME: {
          Outcome outcome = Outcome.fromEvent(links, at + 3, byteAt);
          outcomes.add(outcome);
          out.add("outcome " + outcome.kind().code());
          byteAt += Outcome.eventBytes(r, at + 3);
          at += 3 + (int) r[at + 2];
          break;
        }
        default:
          out.add("event " + code + " " + r[at + 1]);
          at += 2;
          break;
      }
    }
    return out;
  }

  /**
   * Through the loop's native half on a clock of its own: an attempt not reported open
   * within the link's connect timeout is given up at that instant (a close event), and what
   * waited for it fails with the cause timeout.
   */
  @Test
  void aLinkGivesUpAnAttemptNotOpenWithinItsConnectTimeout() {
    try (Config config = Config.builder(1, Duration.ofSeconds(30))
            .nodeTimeout(Duration.ofSeconds(5)).attempts(1).build();
        Client client = new Client(config, new byte[32]);
        CoreLinks links = new CoreLinks(1, true, Duration.ofMillis(300))) {
      List<Outcome> outcomes = new ArrayList<>();
      long t = 1_000_000;
      client.startAcquire(links, 1, List.of("r"), null, null, t);
      assertEquals(List.of("connect 0"), events(links, outcomes));
      assertEquals(t + 300_000, links.nextWake());
      links.timeout(t + 299_999);
      assertEquals(List.of(), events(links, outcomes));
      links.timeout(t + 300_000);
      List<String> given = events(links, outcomes);
      assertEquals("close 0", given.get(0), given.toString());
      assertTrue(given.contains("outcome not_acquired"), given.toString());
      NodeResult node = outcomes.get(0).nodes().get(0);
      assertEquals(NodeResult.Kind.ERROR, node.kind());
      assertEquals("timeout", node.cause());
      assertEquals("connection failed: timeout: no connection within 300 ms; given up", node.error());
      assertFalse(links.info(0, t + 300_000).open);
    }
  }

  /** Every link gets the driver's connect timeout: the user's when set, else the core's. */
  @Test
  void everyLinkGetsTheDriversConnectTimeout() {
    List<String> urls = List.of("127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3");
    try (RedlockClient plain = RedlockClient.builder(NioDriver.of(urls)).build()) {
      for (int node = 0; node < 3; node++) {
        assertEquals(Duration.ofMillis(Native.connectTimeoutDefaultMs()),
            plain.engine().connectTimeout(node));
      }
    }
    Driver timed = new Timed(NioDriver.of(urls), Duration.ofMillis(750));
    try (RedlockClient user = RedlockClient.builder(timed).build()) {
      for (int node = 0; node < 3; node++) {
        assertEquals(Duration.ofMillis(750), user.engine().connectTimeout(node));
      }
      assertEquals("unknown_node", assertThrows(RedlockArgumentException.class,
          () -> user.engine().connectTimeout(3)).code());
    }
    // The drivers' own setting, for clients whose connect timeout the driver cannot read
    // (nio sockets, Jedis pools).
    try (RedlockClient nio = RedlockClient.builder(
        NioDriver.of(urls).withConnectTimeout(Duration.ofMillis(1250))).build()) {
      assertEquals(Duration.ofMillis(1250), nio.engine().connectTimeout(2));
    }
    List<java.util.function.Supplier<redis.clients.jedis.Jedis>> factories =
        List.of(() -> new redis.clients.jedis.Jedis("127.0.0.1", 1));
    try (RedlockClient jedis = RedlockClient.builder(
        io.github.redlockcore.jedis.JedisDriver.ofClients(factories)
            .withConnectTimeout(Duration.ofSeconds(5))).build()) {
      assertEquals(Duration.ofSeconds(5), jedis.engine().connectTimeout(0));
    }
    for (Duration bad : List.of(Duration.ZERO, Duration.ofMillis(-1))) {
      assertEquals("invalid_argument", assertThrows(RedlockArgumentException.class,
          () -> NioDriver.of(urls).withConnectTimeout(bad)).code());
      assertEquals("invalid_argument", assertThrows(RedlockArgumentException.class,
          () -> io.github.redlockcore.jedis.JedisDriver.ofClients(factories)
              .withConnectTimeout(bad)).code());
    }
    assertThrows(NullPointerException.class, () -> NioDriver.of(urls).withConnectTimeout(null));
    // A driver's timeout the core refuses fails the client's construction, clearly.
    assertEquals("invalid_argument", assertThrows(RedlockArgumentException.class,
        () -> RedlockClient.builder(new Timed(NioDriver.of(urls), Duration.ofMillis(-1)))
            .build()).code());
  }

  /**
   * An acquisition on a node that never answers, through the whole client: how long it
   * took, the node's failure, and the first connection attempt's socket once it failed.
   */
  private static void givenUpAt(Driver driver, Unanswered node, long timeoutMs, long atMostMs)
      throws Exception {
    try (RedlockClient redlock = RedlockClient.builder(driver)
        .ttl(Duration.ofSeconds(30)).nodeTimeout(Duration.ofSeconds(10)).attempts(1).build()) {
      long started = System.nanoTime();
      CompletableFuture<RedLock> acquired = CompletableFuture.supplyAsync(
          () -> redlock.acquire("java:connect-timeout"));
      // The attempt under way: its socket still sends its SYN.
      Set<Integer> attempt = Set.of();
      for (int i = 0; i < 100 && attempt.isEmpty(); i++) {
        Thread.sleep(10);
        attempt = node.connecting();
      }
      assertEquals(1, attempt.size(), "one connection attempt: " + attempt);
      Throwable failure = assertThrows(java.util.concurrent.ExecutionException.class,
          () -> acquired.get(atMostMs + 5000, TimeUnit.MILLISECONDS)).getCause();
      long tookMs = (System.nanoTime() - started) / 1_000_000;
      assertTrue(failure instanceof NodesFailingException, String.valueOf(failure));
      NodeResult result = ((NodesFailingException) failure).nodes().get(0);
      assertEquals(NodeResult.Kind.ERROR, result.kind(), result.toString());
      assertEquals("timeout", result.cause(), result.error());
      assertEquals("connection failed: timeout: no connection within " + timeoutMs + " ms; given up",
          result.error());
      assertTrue(tookMs >= timeoutMs - 50 && tookMs < atMostMs, "failed after " + tookMs + " ms");
      // The link gave the attempt up and the driver closed its socket (a later attempt,
      // for the release the link still owes, has a socket of its own).
      Set<Integer> left = node.sockets();
      left.retainAll(attempt);
      assertEquals(Set.of(), left, "the given-up attempt's socket is still open");
      assertFalse(redlock.engine().linkInfo(0).open);
    }
  }

  /**
   * A nio connection that is never established is given up with the cause timeout after
   * the core's connect timeout (2 s), as in every binding, instead of after the system's SYN
   * retries (minutes); its socket is closed.
   */
  @Test
  void aNioConnectionNeverEstablishedIsGivenUpAfterTheCoresConnectTimeout() throws Exception {
    // Never skipped: a test without its prerequisite fails.
    assertTrue(Unanswered.tableReadable(), "needs Linux's /proc/net/tcp");
    assertEquals(2000, Native.connectTimeoutDefaultMs());
    try (Unanswered node = new Unanswered()) {
      givenUpAt(NioDriver.of(List.of(node.url())), node, 2000, 4000);
    }
  }

  /** With the user's connect timeout, the link gives the attempt up after that one. */
  @Test
  void theUsersConnectTimeoutIsTheOneTheLinkKeeps() throws Exception {
    // Never skipped: a test without its prerequisite fails.
    assertTrue(Unanswered.tableReadable(), "needs Linux's /proc/net/tcp");
    try (Unanswered node = new Unanswered()) {
      givenUpAt(NioDriver.of(List.of(node.url())).withConnectTimeout(Duration.ofMillis(500)),
          node, 500, 1900);
    }
  }

  /**
   * What a driver reported for an attempt and the loop had not taken yet when the link gave
   * that attempt up (here: reported from inside its close, as from a thread of its own that
   * connected just then) is dropped: never taken as the next connection's.
   */
  @Test
  void whatAGivenUpAttemptReportedIsDropped() {
    ConcurrentLinkedQueue<String> calls = new ConcurrentLinkedQueue<>();
    Driver late = new Driver() {
      @Override
      public int nodes() {
        return 1;
      }

      @Override
      public NodeConnection open(int index, LoopContext loop, NodeEvents events) {
        return new NodeConnection() {
          @Override
          public void connect() {
            calls.add("connect");
          }

          @Override
          public void write(long writeId, Command command, byte[] resp, byte[][] args) {
            calls.add("write");
          }

          @Override
          public void close() {
            calls.add("close");
            // Opened, then lost, just as the link gave the attempt up.
            events.connected();
            events.closed(CloseCause.OTHER, "late");
          }
        };
      }

      @Override
      public Duration connectTimeout() {
        return Duration.ofMillis(200);
      }

      @Override
      public String name() {
        return "late";
      }

      @Override
      public void close() {}
    };
    try (RedlockClient redlock = RedlockClient.builder(late)
        .ttl(Duration.ofSeconds(30)).nodeTimeout(Duration.ofSeconds(10)).attempts(1).build()) {
      NodesFailingException e = assertThrows(NodesFailingException.class,
          () -> redlock.acquire("java:connect-timeout:late"));
      NodeResult result = e.nodes().get(0);
      assertEquals("timeout", result.cause(), result.toString());
      assertEquals("connection failed: timeout: no connection within 200 ms; given up", result.error());
      assertFalse(redlock.engine().linkInfo(0).open, "the late report opened the link");
      assertEquals("connect", calls.peek());
      assertTrue(calls.contains("close"), calls.toString());
      assertFalse(calls.contains("write"), "the link wrote on a given-up attempt: " + calls);
    }
  }
}
