package io.github.redlockcore;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.redlockcore.jedis.JedisDriver;
import io.github.redlockcore.jedis.JedisFencedWrites;
import io.github.redlockcore.nio.NioDriver;
import io.github.redlockcore.otel.RedlockTracing;
import io.github.redlockcore.spi.Driver;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.regex.Matcher;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisPool;
import redis.clients.jedis.JedisPoolConfig;

/**
 * The README's code blocks, each verbatim in a test here (scripts/check-docs.py checks
 * that they are) and run against real nodes: three lock nodes on ports 7460-7462, the
 * fencing sample's protected resource on 7463. The assertions around each sample read
 * the nodes' state and command counts, or what the sample's listener heard.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ReadmeSamplesTest {
  private static final int BASE = 7460;
  private static final int COUNT = 3;
  private static final int RESOURCE_PORT = 7463;
  private TestNodes lockNodes;
  private TestNodes resourceNode;
  private List<String> nodes;

  @BeforeAll
  void startNodes() {
    lockNodes = new TestNodes(BASE, COUNT);
    resourceNode = new TestNodes(RESOURCE_PORT, 1);
    nodes = lockNodes.urls();
  }

  @AfterAll
  void stopNodes() {
    lockNodes.close();
    resourceNode.close();
  }

  @BeforeEach
  void emptyNodes() {
    for (int port = BASE; port <= RESOURCE_PORT; port++) {
      try (Jedis jedis = new Jedis("127.0.0.1", port)) {
        jedis.flushAll();
        jedis.configResetStat();
      }
    }
  }

  /** Calls of one command on one node since the last CONFIG RESETSTAT. */
  private static long calls(int port, String command) {
    try (Jedis jedis = new Jedis("127.0.0.1", port)) {
      String stats = jedis.info("commandstats");
      String prefix = "cmdstat_" + command + ":calls=";
      for (String line : stats.split("\r?\n")) {
        if (line.startsWith(prefix)) {
          return Long.parseLong(line.substring(prefix.length()).split(",")[0]);
        }
      }
      return 0;
    }
  }

  private long callsOnLockNodes(String... commands) {
    long total = 0;
    for (int i = 0; i < COUNT; i++) {
      for (String command : commands) {
        total += calls(lockNodes.port(i), command);
      }
    }
    return total;
  }

  private void assertLockNodesEmpty() {
    for (int i = 0; i < COUNT; i++) {
      try (Jedis jedis = new Jedis("127.0.0.1", lockNodes.port(i))) {
        assertEquals(0, jedis.dbSize(), "keys left on node " + i + ": " + jedis.keys("*"));
      }
    }
  }

  @Test
  @SuppressWarnings("try") // the sample's first lock is held by its block, not used in it
  void use() {
    try (RedlockClient redlock = RedlockClient.builder(NioDriver.of(nodes)).build()) {

      try (RedLock lock = redlock.acquire("orders:42", Duration.ofSeconds(10))) {
        // ... the work; lock.isValid(), lock.remaining(), lock.token()
      } // released on every node here

      Optional<RedLock> maybe = redlock.tryAcquire("orders:42", Duration.ofSeconds(10),
          Duration.ofSeconds(2));          // the core's wait limit: retries for up to 2 s
      maybe.ifPresent(RedLock::close);     // empty if it was still held after 2 s

      try (RedLock lock = redlock.acquire("report")) {
        lock.extend(Duration.ofSeconds(30));                 // manual, on a quorum
        CompletableFuture<LockLostException> lost = lock.keepAlive(new LockListener() {
          public void lost(RedLock l, LockLostException e) { /* stop the work */ }
        });
        // lost completes the moment the lock is lost; it is cancelled on release.
      }
    }
    // Three acquisitions (one SET per node each), each reaching at least a quorum (2 of
    // 3); an extension and three releases (scripts) as well; nothing left behind.
    assertTrue(callsOnLockNodes("set") >= 3 * 2, "SET calls: " + callsOnLockNodes("set"));
    long scripts = callsOnLockNodes("evalsha", "eval");
    assertTrue(scripts >= 4 * 2, "script calls: " + scripts);
    assertLockNodesEmpty();
  }

  /** The fencing sample: one holder writes the protected resource with its token. */
  private void fencedWrite(String resourceHost, int resourcePort, byte[] bytes) {
    try (RedlockClient redlock = RedlockClient.builder(NioDriver.of(nodes)).fencing(true).build();
        RedLock lock = redlock.acquire("orders:42");
        Jedis resource = new Jedis(resourceHost, resourcePort)) {
      long token = lock.fencingToken().orElseThrow();
      FencedWriteResult r = JedisFencedWrites.set(resource, "orders:42:state", bytes, token);
      if (!r.isAccepted()) {
        throw new IllegalStateException("stale: a newer holder wrote with " + r.seen());
      }
    }
  }

  @Test
  void fencing() {
    byte[] first = "packed".getBytes(StandardCharsets.UTF_8);
    byte[] second = "shipped".getBytes(StandardCharsets.UTF_8);
    // Two holders one after the other: both writes accepted (the sample throws on a
    // refused one), the second with the higher token, which the guard key records.
    fencedWrite("127.0.0.1", RESOURCE_PORT, first);
    long guardAfterFirst;
    try (Jedis resource = new Jedis("127.0.0.1", RESOURCE_PORT)) {
      assertArrayEquals(first, resource.get("orders:42:state".getBytes(StandardCharsets.UTF_8)));
      guardAfterFirst = Long.parseLong(resource.get("{orders:42:state}:fence:accepted"));
      assertTrue(guardAfterFirst >= 1, "guard token " + guardAfterFirst);
    }
    fencedWrite("127.0.0.1", RESOURCE_PORT, second);
    try (Jedis resource = new Jedis("127.0.0.1", RESOURCE_PORT)) {
      assertArrayEquals(second, resource.get("orders:42:state".getBytes(StandardCharsets.UTF_8)));
      long guard = Long.parseLong(resource.get("{orders:42:state}:fence:accepted"));
      assertTrue(guard > guardAfterFirst, guard + " after " + guardAfterFirst);
      // A holder whose token is older than the recorded one is refused by the same check
      // the sample runs (its branch that throws).
      resource.set("{orders:42:state}:fence:accepted", Long.toString(guard + 1000));
    }
    IllegalStateException stale = assertThrows(
        IllegalStateException.class, () -> fencedWrite("127.0.0.1", RESOURCE_PORT, first));
    assertTrue(stale.getMessage().startsWith("stale: a newer holder wrote with "),
        stale.getMessage());
    try (Jedis resource = new Jedis("127.0.0.1", RESOURCE_PORT)) {
      assertArrayEquals(second, resource.get("orders:42:state".getBytes(StandardCharsets.UTF_8)));
    }
  }

  @Test
  @SuppressWarnings("try") // the sample's lock is held by the block, not used in it
  void jedisPools() {
    List<HostAndPort> nodeAddresses = new ArrayList<>();
    for (int i = 0; i < COUNT; i++) {
      nodeAddresses.add(new HostAndPort("127.0.0.1", lockNodes.port(i)));
    }
    List<JedisPool> pools = new ArrayList<>();  // your own pools and settings
    for (HostAndPort node : nodeAddresses) {
      pools.add(new JedisPool(new JedisPoolConfig(), node.getHost(), node.getPort()));
    }
    try (RedlockClient redlock = RedlockClient.builder(JedisDriver.ofPools(pools)).build();
        RedLock lock = redlock.acquire("orders:42")) {
      // ... the work, while no other process holds "orders:42"
    }
    try {
      // The lock went through the given pools: a connection made from each of a quorum.
      long used = pools.stream().filter(pool -> pool.getCreatedCount() >= 1).count();
      assertTrue(used >= 2, used + " pools used");
      assertTrue(callsOnLockNodes("set") >= 2, "SET calls: " + callsOnLockNodes("set"));
      assertLockNodesEmpty();
    } finally {
      pools.forEach(JedisPool::close);
    }
  }

  @Test
  void isLockedAndIsOwned() {
    RedlockClient redlock = RedlockClient.builder(NioDriver.of(nodes)).build();
    RedLock lock = redlock.acquire("orders:42");
    boolean someone = redlock.isLocked("orders:42");   // anyone, at a quorum of nodes
    boolean mine = lock.isOwned();                      // this lock, still valid here
    try (redlock) {
      assertTrue(someone);
      assertTrue(mine);
      lock.close();
      assertFalse(redlock.isLocked("orders:42"));
      assertFalse(lock.isOwned());
    }
  }

  /** An SLF4J-like logger that keeps what it was asked to log. */
  static final class RecordingLog {
    final List<String> lines = new CopyOnWriteArrayList<>();

    void info(String format, Object... args) {
      String line = format;
      for (Object arg : args) {
        line = line.replaceFirst("\\{\\}", Matcher.quoteReplacement(String.valueOf(arg)));
      }
      lines.add(line);
    }
  }

  @Test
  void eventsListener() {
    RecordingLog log = new RecordingLog();
    RedlockClient redlock = RedlockClient.builder(NioDriver.of(nodes))
        .listener(event -> log.info("{} {} attempt {} in {}", event.kind(),
            event.resources(), event.attempt(), event.elapsed()))
        .build();
    try (redlock) {
      redlock.acquire("orders:42").close();
    }
    // The outcome's event is heard before the call returns.
    List<String> kinds = log.lines.stream().map(l -> l.split(" ")[0]).collect(Collectors.toList());
    assertEquals(List.of("acquired", "released"), kinds, log.lines.toString());
    assertTrue(log.lines.get(0).startsWith("acquired [orders:42] attempt 1 in PT"), log.lines.get(0));
  }

  @Test
  void openTelemetry() {
    InMemorySpanExporter exporter = InMemorySpanExporter.create();
    OpenTelemetrySdk openTelemetry = OpenTelemetrySdk.builder()
        .setTracerProvider(SdkTracerProvider.builder()
            .addSpanProcessor(SimpleSpanProcessor.create(exporter)).build())
        .build();
    Driver driver = NioDriver.of(nodes);
    RedlockClient redlock = RedlockClient.builder(driver).listener(new RedlockTracing(openTelemetry)).build();
    try (openTelemetry; redlock) {
      redlock.acquire("orders:42").close();
      DriverContract.waitUntil(() -> exporter.getFinishedSpanItems().size() >= 2);
      List<String> names = exporter.getFinishedSpanItems().stream()
          .map(SpanData::getName).collect(Collectors.toList());
      assertEquals(List.of("redlock.acquire", "redlock.release"), names);
    }
  }
}
