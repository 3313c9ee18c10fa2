package io.github.redlockcore;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.redlockcore.core.NodeResult;
import io.github.redlockcore.internal.Native;
import io.github.redlockcore.jedis.JedisDriver;
import io.github.redlockcore.nio.NioDriver;
import io.github.redlockcore.spi.Driver;
import java.io.BufferedInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.function.BiFunction;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestMethodOrder;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.Jedis;

/**
 * Single-instance mode through Redis Sentinel, on both drivers: a master on 7410 and its
 * replica on 7412 (scripts/redis-nodes.sh), a real Sentinel on 7415 (redis-server
 * --sentinel, started here); nothing listens on 7416; a Redis node on 7417 is stopped
 * (SIGSTOP) while a test stands it in for a Sentinel that hangs; 7418 is a Sentinel of this
 * test, slow to connect and then to answer. The failover runs last.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class SentinelTest {
  private static final int MASTER = 7410;
  private static final int REPLICA = 7412;
  private static final int SENTINEL = 7415;
  private static final int NOBODY = 7416;
  private static final int HANGS = 7417;
  private static final int SLOW = 7418;

  private TestNodes master;
  private TestNodes replica;
  private TestNodes hangs;
  private Process sentinel;

  /** Both drivers, built from the Sentinels' host:port list and the service name. */
  private static final List<BiFunction<List<String>, String, Driver>> DRIVERS =
      List.of(NioDriver::sentinel, JedisDriver::sentinel);

  @BeforeAll
  void start() throws IOException {
    master = new TestNodes(MASTER, 1);
    replica = new TestNodes(REPLICA, 1);
    hangs = new TestNodes(HANGS, 1);
    try (Jedis r = new Jedis("127.0.0.1", REPLICA); Jedis m = new Jedis("127.0.0.1", MASTER)) {
      r.replicaof("127.0.0.1", MASTER);
      eventually(() -> m.info("replication").contains("state=online"), "the replica to sync");
    }
    Path dir = TestNodes.repo().resolve(".runtime/sentinel-" + SENTINEL);
    Files.createDirectories(dir);
    Path conf = dir.resolve("sentinel.conf");
    Files.writeString(conf, "port " + SENTINEL + "\nbind 127.0.0.1\ndir " + dir
        + "\nsentinel monitor mymaster 127.0.0.1 " + MASTER + " 1\n");
    sentinel = new ProcessBuilder("redis-server", conf.toString(), "--sentinel")
        .redirectErrorStream(true).redirectOutput(dir.resolve("sentinel.log").toFile()).start();
    eventually(() -> masterPort() == MASTER && knowsReplica(), "the Sentinel to name the master");
  }

  @AfterAll
  void stop() throws InterruptedException {
    if (sentinel != null) {
      sentinel.destroy();
      if (!sentinel.waitFor(5, TimeUnit.SECONDS)) {
        sentinel.destroyForcibly().waitFor();
      }
    }
    if (hangs != null) {
      // redis-nodes.sh stop resumes a stopped node before stopping it.
      hangs.close();
    }
    if (replica != null) {
      replica.close();
    }
    if (master != null) {
      master.close();
    }
  }

  /** The master's port the Sentinel names now, or -1. */
  private static int masterPort() {
    try (Jedis s = new Jedis("127.0.0.1", SENTINEL)) {
      List<String> addr = s.sentinelGetMasterAddrByName("mymaster");
      return addr == null ? -1 : Integer.parseInt(addr.get(1));
    } catch (RuntimeException e) {
      return -1;
    }
  }

  private static boolean knowsReplica() {
    try (Jedis s = new Jedis("127.0.0.1", SENTINEL)) {
      return !s.sentinelReplicas("mymaster").isEmpty();
    } catch (RuntimeException e) {
      return false;
    }
  }

  private static void eventually(BooleanSupplier done, String what) {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (!done.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("timed out waiting for " + what);
      }
      try {
        Thread.sleep(50);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new AssertionError(e);
      }
    }
  }

  private static String get(int port, String key) {
    try (Jedis j = new Jedis("127.0.0.1", port)) {
      return j.get(key);
    }
  }

  @Test
  @Order(1)
  void locksOnTheMasterTheSentinelNamesAndASecondClientIsRefused() {
    for (BiFunction<List<String>, String, Driver> driver : DRIVERS) {
      List<String> sentinels = List.of("127.0.0.1:" + SENTINEL);
      String resource = "java:sentinel:" + driver.apply(sentinels, "mymaster").name();
      try (RedlockClient one = RedlockClient.builder(driver.apply(sentinels, "mymaster"))
              .attempts(1).build();
          RedlockClient two = RedlockClient.builder(driver.apply(sentinels, "mymaster"))
              .attempts(1).build()) {
        RedLock lock = one.acquire(resource, Duration.ofSeconds(10));
        // Written on the master the Sentinel named.
        assertEquals(lock.token(), get(MASTER, resource));
        assertTrue(two.isLocked(resource));
        LockHeldElsewhereException e = assertThrows(LockHeldElsewhereException.class,
            () -> two.acquire(resource, Duration.ofSeconds(10)));
        assertEquals("held_elsewhere", e.code());
        lock.release();
        assertNull(get(MASTER, resource));
        try (RedLock again = two.acquire(resource, Duration.ofSeconds(10))) {
          assertEquals(again.token(), get(MASTER, resource));
        }
      }
    }
  }

  @Test
  @Order(2)
  @SuppressWarnings("try") // the sample's lock is held by the block, not used in it
  void theReadmeSampleLocksOnTheMaster() {
    try (Jedis m = new Jedis("127.0.0.1", MASTER)) {
      m.configResetStat();
    }
    List<String> sentinels = List.of("redis://127.0.0.1:" + SENTINEL);
    try (RedlockClient redlock = RedlockClient.builder(NioDriver.sentinel(sentinels, "mymaster"))
            .ttl(Duration.ofSeconds(10))
            .build();
        RedLock lock = redlock.acquire("orders:42")) {
      // ... work while lock.isValid()
    }
    // The lock's scripts ran on the master, and the release left nothing there.
    try (Jedis m = new Jedis("127.0.0.1", MASTER)) {
      String stats = m.info("commandstats");
      assertTrue(stats.contains("cmdstat_eval"), stats);
      assertNull(m.get("orders:42"));
    }
  }

  @Test
  @Order(3)
  void anUnknownServiceOrNoReachableSentinelIsANodeFailure() {
    for (BiFunction<List<String>, String, Driver> driver : DRIVERS) {
      String name = driver.apply(List.of("127.0.0.1:1"), "x").name();
      try (RedlockClient unknown = RedlockClient.builder(
              driver.apply(List.of("127.0.0.1:" + SENTINEL), "nosuchmaster"))
              .attempts(1).nodeTimeout(Duration.ofMillis(300)).build()) {
        NodesFailingException e = assertThrows(NodesFailingException.class,
            () -> unknown.acquire("java:sentinel:unknown"));
        NodeResult r = e.nodes().get(0);
        assertEquals(NodeResult.Kind.ERROR, r.kind(), name + ": " + e.nodes());
        assertTrue(r.error().contains(
            "no Sentinel named a master for service \"nosuchmaster\""), name + ": " + r.error());
        assertTrue(r.error().contains("no master for this service"), name + ": " + r.error());
      }
      // No Sentinel listening: refused.
      try (RedlockClient down = RedlockClient.builder(
              driver.apply(List.of("127.0.0.1:" + NOBODY), "mymaster"))
              .attempts(1).nodeTimeout(Duration.ofMillis(300)).build()) {
        NodesFailingException e = assertThrows(NodesFailingException.class,
            () -> down.acquire("java:sentinel:down"));
        NodeResult r = e.nodes().get(0);
        assertEquals(NodeResult.Kind.ERROR, r.kind(), name + ": " + e.nodes());
        assertEquals("refused", r.cause(), name + ": " + r.error());
        assertTrue(r.error().contains("127.0.0.1:" + NOBODY), name + ": " + r.error());
      }
      // A Sentinel that is down is skipped for the next one.
      try (RedlockClient second = RedlockClient.builder(driver.apply(
              List.of("127.0.0.1:" + NOBODY, "127.0.0.1:" + SENTINEL), "mymaster"))
              .attempts(1).build();
          RedLock lock = second.acquire("java:sentinel:second")) {
        assertEquals(lock.token(), get(MASTER, "java:sentinel:second"));
      }
    }
  }

  /**
   * A Sentinel that hangs (a stopped process: TCP connects, nothing answers) gets the core's
   * query timeout (SENTINEL_QUERY_TIMEOUT_DEFAULT_MS, 500 ms) and is skipped for the next
   * one, on every driver (the Jedis one with its default Sentinel client config and with
   * one of the user's, whose 2 s timeouts do not apply to the query). Listed first, it costs
   * the lock one query timeout: acquired in at least 500 ms (the hanging one was asked) and
   * under 1.5 s (one query timeout and a healthy round), where before the lookup waited at
   * it until the link gave the attempt up (2 s) and no lock was ever acquired. Alone, it is
   * a node failure that says it timed out. The node's connect timeout is the core's
   * composition: every Sentinel's query timeout in turn, then the master's connection.
   */
  @Test
  @Order(4)
  void aSentinelThatHangsIsSkippedAfterTheQueryTimeout() {
    long query = Native.sentinelQueryTimeoutDefaultMs();
    assertEquals(500, query);
    long connect = Native.connectTimeoutDefaultMs();
    List<BiFunction<List<String>, String, Driver>> drivers = new ArrayList<>(DRIVERS);
    drivers.add((sentinels, service) -> JedisDriver.sentinel(sentinels, service,
        DefaultJedisClientConfig.builder().build(), DefaultJedisClientConfig.builder().build()));
    hangs.pause(0);
    try {
      for (BiFunction<List<String>, String, Driver> driver : drivers) {
        List<String> sentinels = List.of("127.0.0.1:" + HANGS, "127.0.0.1:" + SENTINEL);
        String name = driver.apply(sentinels, "mymaster").name();
        String resource = "java:sentinel:hangs:" + name;
        try (RedlockClient client = RedlockClient.builder(driver.apply(sentinels, "mymaster"))
            .attempts(1).nodeTimeout(Duration.ofMillis(1500)).build()) {
          assertEquals(Duration.ofMillis(Native.sentinelConnectTimeoutMs(2, query, connect)),
              client.engine().connectTimeout(0), name);
          assertEquals(Duration.ofMillis(2 * query + connect), client.engine().connectTimeout(0));
          long start = System.nanoTime();
          try (RedLock lock = client.acquire(resource, Duration.ofSeconds(10))) {
            long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            assertEquals(lock.token(), get(MASTER, resource), name);
            assertTrue(took >= query, name + ": acquired in " + took + " ms");
            assertTrue(took < query + 1000, name + ": acquired in " + took + " ms");
          }
        }
        try (RedlockClient alone = RedlockClient.builder(
                driver.apply(List.of("127.0.0.1:" + HANGS), "mymaster"))
                .attempts(1).nodeTimeout(Duration.ofMillis(1500)).build()) {
          assertEquals(Duration.ofMillis(query + connect), alone.engine().connectTimeout(0));
          long start = System.nanoTime();
          NodesFailingException e = assertThrows(NodesFailingException.class,
              () -> alone.acquire("java:sentinel:hangs:alone:" + name));
          long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
          NodeResult r = e.nodes().get(0);
          assertEquals(NodeResult.Kind.ERROR, r.kind(), name + ": " + e.nodes());
          assertTrue(r.error().contains("no Sentinel named a master for service \"mymaster\" "
              + "(127.0.0.1:" + HANGS + ": timed out"), name + ": " + r.error());
          assertTrue(took < query + 1000, name + ": failed in " + took + " ms");
        }
      }
      // The nio driver's own bound, when set, and the connect timeout composed from it.
      List<String> sentinels = List.of("127.0.0.1:" + HANGS, "127.0.0.1:" + SENTINEL);
      try (RedlockClient client = RedlockClient.builder(NioDriver.sentinel(sentinels, "mymaster")
              .withSentinelQueryTimeout(Duration.ofMillis(200))
              .withConnectTimeout(Duration.ofMillis(1000)))
          .attempts(1).nodeTimeout(Duration.ofMillis(1500)).build()) {
        assertEquals(Duration.ofMillis(2 * 200 + 1000), client.engine().connectTimeout(0));
        long start = System.nanoTime();
        try (RedLock lock = client.acquire("java:sentinel:hangs:nio-200", Duration.ofSeconds(10))) {
          long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
          assertEquals(lock.token(), get(MASTER, "java:sentinel:hangs:nio-200"));
          assertTrue(took >= 200 && took < 200 + 1000, "acquired in " + took + " ms");
        }
      }
    } finally {
      hangs.resume(0);
    }
  }

  /**
   * A Sentinel slow to connect (about 1 s: its listen backlog is full, so the client's SYN
   * is dropped and sent again after the kernel's initial retransmission timeout) and then
   * slow to answer the handshake Jedis's constructor sends (its first CLIENT SETINFO, 1.9 s
   * later), with a query timeout of 2 s. Each step is within the bound, both are not: the
   * Sentinel is given up at 2 s in all and the working one names the master. Before, the
   * connect and the handshake each had the whole bound, so the lookup spent 2.9 s there
   * before moving on; a Sentinel that then answered would have been believed.
   */
  @Test
  @Order(5)
  void aSentinelSlowToConnectAndThenToAnswerGetsOneQueryTimeoutInAll() throws Exception {
    try (SlowSentinel slow = new SlowSentinel(SLOW, 1900)) {
      List<String> sentinels = List.of("127.0.0.1:" + SLOW, "127.0.0.1:" + SENTINEL);
      Driver driver = JedisDriver.sentinel(sentinels, "mymaster")
          .withSentinelQueryTimeout(Duration.ofMillis(2000));
      String resource = "java:sentinel:slow";
      try (RedlockClient client = RedlockClient.builder(driver)
          .attempts(1).nodeTimeout(Duration.ofSeconds(3)).build()) {
        long start = System.nanoTime();
        try (RedLock lock = client.acquire(resource, Duration.ofSeconds(10))) {
          long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
          assertEquals(lock.token(), get(MASTER, resource));
          // The slow connect happened (else this tests nothing), and the bound held.
          assertTrue(slow.connectTookMs >= 800, "connected after " + slow.connectTookMs + " ms");
          assertTrue(took >= 1950 && took < 2600, "acquired in " + took + " ms");
        }
      }
    }
  }

  /** See {@link #aSentinelSlowToConnectAndThenToAnswerGetsOneQueryTimeoutInAll}. */
  private static final class SlowSentinel implements AutoCloseable {
    private final ServerSocket listener = new ServerSocket();
    private final List<Socket> fillers = new ArrayList<>();
    private final long started;
    private final Thread thread;
    volatile long connectTookMs = -1;

    SlowSentinel(int port, long handshakeDelayMs) throws IOException {
      listener.setReuseAddress(true);
      // A backlog of 1 is full with two connections waiting to be accepted.
      listener.bind(new InetSocketAddress("127.0.0.1", port), 1);
      fillers.add(new Socket("127.0.0.1", port));
      fillers.add(new Socket("127.0.0.1", port));
      started = System.nanoTime();
      thread = new Thread(() -> serve(handshakeDelayMs), "slow-sentinel");
      thread.setDaemon(true);
      thread.start();
    }

    private void serve(long handshakeDelayMs) {
      try {
        Thread.sleep(300);
        listener.accept().close();
        listener.accept().close();
        try (Socket client = listener.accept()) {
          connectTookMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
          InputStream in = new BufferedInputStream(client.getInputStream());
          OutputStream out = client.getOutputStream();
          boolean delayed = false;
          for (List<String> command = readCommand(in); command != null;
              command = readCommand(in)) {
            String name = command.isEmpty() ? "" : command.get(0).toUpperCase(Locale.ROOT);
            if (name.equals("CLIENT") && !delayed) {
              delayed = true;
              Thread.sleep(handshakeDelayMs);
            }
            // A master nobody runs: a client that believed this Sentinel would fail.
            String reply = name.equals("SENTINEL")
                ? "*2\r\n$9\r\n127.0.0.1\r\n$4\r\n" + NOBODY + "\r\n" : "+OK\r\n";
            out.write(reply.getBytes(StandardCharsets.US_ASCII));
            out.flush();
          }
        }
      } catch (IOException | InterruptedException e) {
        // The client gave up, or the test closed the listener: nothing more to serve.
      }
    }

    /** One RESP array of bulk strings, or null at the end of the stream. */
    private static List<String> readCommand(InputStream in) throws IOException {
      String head = readLine(in);
      if (head == null || !head.startsWith("*")) {
        return null;
      }
      List<String> items = new ArrayList<>();
      for (int i = Integer.parseInt(head.substring(1)); i > 0; i--) {
        String length = readLine(in);
        if (length == null) {
          return null;
        }
        byte[] item = in.readNBytes(Integer.parseInt(length.substring(1)) + 2);
        items.add(new String(item, 0, Math.max(0, item.length - 2), StandardCharsets.UTF_8));
      }
      return items;
    }

    private static String readLine(InputStream in) throws IOException {
      StringBuilder line = new StringBuilder();
      for (int b = in.read(); b != -1; b = in.read()) {
        if (b == '\n') {
          return line.toString().strip();
        }
        line.append((char) b);
      }
      return null;
    }

    @Override
    public void close() throws IOException {
      for (Socket filler : fillers) {
        filler.close();
      }
      listener.close();
      try {
        thread.join(5000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  @Test
  @Order(6)
  void invalidArgumentsAreRefused() {
    for (BiFunction<List<String>, String, Driver> driver : DRIVERS) {
      assertEquals("invalid_node", assertThrows(RedlockArgumentException.class,
          () -> driver.apply(List.of(), "mymaster")).code());
      assertEquals("invalid_node", assertThrows(RedlockArgumentException.class,
          () -> driver.apply(List.of("127.0.0.1:" + SENTINEL), "")).code());
    }
    List<String> sentinels = List.of("127.0.0.1:" + SENTINEL);
    for (Duration bad : List.of(Duration.ZERO, Duration.ofMillis(-1))) {
      assertEquals("invalid_argument", assertThrows(RedlockArgumentException.class,
          () -> NioDriver.sentinel(sentinels, "mymaster").withSentinelQueryTimeout(bad)).code());
      assertEquals("invalid_argument", assertThrows(RedlockArgumentException.class,
          () -> JedisDriver.sentinel(sentinels, "mymaster").withSentinelQueryTimeout(bad))
          .code());
    }
    // The core's composition through JNI: saturating, negative arguments refused.
    assertEquals(3500, Native.sentinelConnectTimeoutMs(3, 500, 2000));
    assertEquals(2000, Native.sentinelConnectTimeoutMs(0, 500, 2000));
    assertEquals(Long.MAX_VALUE, Native.sentinelConnectTimeoutMs(2, Long.MAX_VALUE, 2));
    assertEquals("invalid_argument", assertThrows(RedlockArgumentException.class,
        () -> Native.sentinelConnectTimeoutMs(-1, 500, 2000)).code());
    assertEquals("invalid_argument", assertThrows(RedlockArgumentException.class,
        () -> Native.sentinelConnectTimeoutMs(1, -1, 2000)).code());
    assertEquals("invalid_argument", assertThrows(RedlockArgumentException.class,
        () -> Native.sentinelConnectTimeoutMs(1, 500, -1)).code());
    // A plain driver's connect timeout is its own; a query timeout below a millisecond
    // counts as one.
    assertEquals(Duration.ofMillis(Native.connectTimeoutDefaultMs()),
        NioDriver.of(List.of("127.0.0.1:" + MASTER)).connectTimeout());
    assertEquals(Duration.ofMillis(1 + 700), NioDriver.sentinel(sentinels, "mymaster")
        .withSentinelQueryTimeout(Duration.ofNanos(1)).withConnectTimeout(Duration.ofMillis(700))
        .connectTimeout());
    assertEquals(Duration.ofMillis(2 * 250 + 700), JedisDriver.sentinel(
        List.of("127.0.0.1:1", "127.0.0.1:2"), "mymaster")
        .withSentinelQueryTimeout(Duration.ofMillis(250))
        .withConnectTimeout(Duration.ofMillis(700)).connectTimeout());
  }

  @Test
  @Order(7)
  void afterAFailoverTheNextConnectionReachesTheNewMaster() {
    List<String> sentinels = List.of("127.0.0.1:" + SENTINEL);
    try (RedlockClient nio = RedlockClient.builder(NioDriver.sentinel(sentinels, "mymaster"))
            .attempts(5).retryDelay(Duration.ofMillis(300)).build();
        RedlockClient jedis = RedlockClient.builder(JedisDriver.sentinel(sentinels, "mymaster"))
            .attempts(5).retryDelay(Duration.ofMillis(300)).build()) {
      for (RedlockClient c : List.of(nio, jedis)) {
        try (RedLock before = c.acquire("java:sentinel:before:" + c.driverName())) {
          assertEquals(before.token(), get(MASTER, "java:sentinel:before:" + c.driverName()));
        }
      }
      // The Sentinel may not have judged the replica fit to promote yet (it learns about
      // replicas from the master's INFO, every few seconds): ask until it agrees.
      eventually(() -> {
        try (Jedis s = new Jedis("127.0.0.1", SENTINEL)) {
          return "OK".equals(s.sentinelFailover("mymaster"));
        } catch (redis.clients.jedis.exceptions.JedisDataException refused) {
          return false;
        }
      }, "the Sentinel to accept SENTINEL FAILOVER");
      eventually(() -> masterPort() == REPLICA, "the Sentinel to name the replica");
      // The old master goes away: the clients' connections drop, and the next one asks
      // the Sentinel again.
      master.kill(0);
      for (RedlockClient c : List.of(nio, jedis)) {
        String resource = "java:sentinel:after:" + c.driverName();
        try (RedLock after = c.acquire(resource)) {
          assertEquals(after.token(), get(REPLICA, resource), c.driverName());
        }
      }
    }
  }
}
