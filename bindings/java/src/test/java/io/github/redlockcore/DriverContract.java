package io.github.redlockcore;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.redlockcore.core.Client;
import io.github.redlockcore.core.Config;
import io.github.redlockcore.core.NodeResult;
import io.github.redlockcore.core.Outcome;
import io.github.redlockcore.spi.Driver;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLongArray;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.function.Executable;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.args.ClientType;
import redis.clients.jedis.params.ClientKillParams;

/**
 * The same scenarios against five real local nodes for every driver: contention, nodes down,
 * a frozen node, a node restarted empty, extension, the lost-lock signal, release never
 * deleting another token, and interop with the Rust CLI.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
abstract class DriverContract {
  TestNodes nodes;
  RedlockClient redlock;
  String resource;

  abstract int basePort();

  abstract Driver driver(List<String> urls);

  @BeforeAll
  void startNodes() {
    nodes = new TestNodes(basePort(), 5);
  }

  @AfterAll
  void stopNodes() {
    nodes.close();
  }

  @BeforeEach
  void client(TestInfo info) {
    redlock = RedlockClient.builder(driver(nodes.urls())).ttl(Duration.ofSeconds(10)).build();
    resource = "java:" + getClass().getSimpleName() + ":" + info.getDisplayName();
  }

  @AfterEach
  void closeClient() {
    redlock.close();
    // Every node back up and answering, for the next test.
    for (int i = 0; i < 5; i++) {
      try {
        nodes.resume(i);
      } catch (IllegalStateException notRunning) {
        nodes.restart(i);
      }
    }
  }

  Jedis node(int i) {
    return new Jedis("127.0.0.1", nodes.port(i));
  }

  String get(int i, String key) {
    try (Jedis j = node(i)) {
      return j.get(key);
    }
  }

  void set(int i, String key, String value) {
    try (Jedis j = node(i)) {
      j.set(key, value);
    }
  }

  static long count(List<NodeResult> results, NodeResult.Kind kind) {
    return results.stream().filter(r -> r.kind() == kind).count();
  }

  @Test
  void acquireWritesTheTokenOnEveryNodeAndCloseReleasesIt() {
    String token;
    try (RedLock lock = redlock.acquire(resource, Duration.ofSeconds(5))) {
      token = lock.token();
      assertTrue(lock.isValid());
      assertTrue(lock.remaining().toMillis() > 4000 && lock.remaining().toMillis() <= 5000,
          "remaining " + lock.remaining());
      // The quorum decides; the two slowest nodes may still be setting the key.
      long holding = 0;
      int holder = -1;
      for (int i = 0; i < 5; i++) {
        if (token.equals(get(i, resource))) {
          holding++;
          holder = holder < 0 ? i : holder;
        }
      }
      assertTrue(holding >= 3, "token on " + holding + " nodes");
      // The TTL on a node that holds it (node 0 may be one of the two still setting it).
      try (Jedis j = node(holder)) {
        long pttl = j.pttl(resource);
        assertTrue(pttl > 4000 && pttl <= 5000, "PTTL " + pttl);
      }
    }
    // The release decides at a quorum too; give the last nodes their round trip.
    waitUntil(() -> {
      for (int i = 0; i < 5; i++) {
        if (get(i, resource) != null) {
          return false;
        }
      }
      return true;
    });
  }

  static void waitUntil(java.util.function.BooleanSupplier condition) {
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > end) {
        throw new AssertionError("condition not met within 5 s");
      }
      try {
        Thread.sleep(5);
      } catch (InterruptedException e) {
        throw new AssertionError(e);
      }
    }
  }

  @Test
  void threadsContendingNeverOverlap() throws Exception {
    int threads = 6;
    int rounds = 8;
    AtomicInteger inside = new AtomicInteger();
    AtomicInteger overlaps = new AtomicInteger();
    int[] counter = {0};
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    CountDownLatch start = new CountDownLatch(1);
    List<Future<?>> futures = new ArrayList<>();
    for (int t = 0; t < threads; t++) {
      futures.add(pool.submit(() -> {
        start.await();
        for (int r = 0; r < rounds; r++) {
          Optional<RedLock> got =
              redlock.tryAcquire(resource, Duration.ofSeconds(2), Duration.ofSeconds(20));
          try (RedLock lock = got.orElseThrow(() -> new AssertionError("not acquired in 20 s"))) {
            if (inside.incrementAndGet() != 1) {
              overlaps.incrementAndGet();
            }
            int read = counter[0];
            Thread.sleep(2);
            counter[0] = read + 1;
            assertTrue(lock.isValid());
            inside.decrementAndGet();
          }
        }
        return null;
      }));
    }
    start.countDown();
    for (Future<?> f : futures) {
      f.get(60, TimeUnit.SECONDS);
    }
    pool.shutdown();
    assertEquals(0, overlaps.get());
    assertEquals(threads * rounds, counter[0]);
  }

  // ---- inspection: isLocked, isOwned -----------------------------------------------

  @Test
  void isLockedAndIsOwnedAreTheCoresInspection() {
    assertFalse(redlock.isLocked(resource), "free");
    try (RedlockClient other = RedlockClient.builder(driver(nodes.urls())).build()) {
      RedLock mine = redlock.acquire(resource);
      assertTrue(redlock.isLocked(resource), "held by us");
      assertTrue(other.isLocked(resource), "seen held from another client");
      assertTrue(mine.isOwned());
      // Another client's view of our token: its lease has no known validity, so the core
      // does not call it owned even though the token is the holder.
      assertFalse(other.lock(List.of(resource), mine.token()).isOwned());
      mine.release();
      assertFalse(mine.isOwned(), "released");
      assertFalse(redlock.isLocked(resource), "free again");

      RedLock theirs = other.acquire(resource);
      assertTrue(redlock.isLocked(resource), "held by another");
      assertTrue(theirs.isOwned());
      // The keys rewritten to a third token on every node: held, but no longer by them.
      for (int i = 0; i < 5; i++) {
        set(i, resource, "third");
      }
      assertTrue(redlock.isLocked(resource));
      assertFalse(theirs.isOwned());
      theirs.close();
    }
  }

  @Test
  void leftoversOnFewerThanAQuorumAreNotALock() {
    set(0, resource, "left-behind");
    set(1, resource, "left-behind");
    assertFalse(redlock.isLocked(resource), "2 of 5 nodes");
    set(2, resource, "another");
    assertFalse(redlock.isLocked(resource), "2 + 1 of 5 nodes, no token at a quorum");
    set(2, resource, "left-behind");
    assertTrue(redlock.isLocked(resource), "3 of 5 nodes");
    // Several resources: a node votes only when every key holds the token.
    String second = resource + ":b";
    for (int i = 0; i < 5; i++) {
      set(i, second, i < 2 ? "left-behind" : "other");
    }
    assertFalse(redlock.isLocked(List.of(resource, second)));
  }

  @Test
  void oneNodeDownStillDecidesAndTooManyDownThrows() {
    nodes.kill(0);
    try (RedLock lock = redlock.acquire(resource)) {
      assertTrue(redlock.isLocked(resource));
      assertTrue(lock.isOwned());
    }
    assertFalse(redlock.isLocked(resource));
    nodes.kill(1);
    nodes.kill(2);
    NodesFailingException e =
        assertThrows(NodesFailingException.class, () -> redlock.isLocked(resource));
    assertEquals("nodes_failing", e.code());
    assertEquals(5, e.nodes().size());
    assertEquals(NodeResult.Kind.ERROR, e.nodes().get(0).kind(), e.nodes().toString());
  }

  // ---- listeners: the core's events ------------------------------------------------

  /** A client whose events are collected (and whose own nodes are given). */
  RedlockClient listened(java.util.Queue<io.github.redlockcore.core.Event> events,
      RedlockClient.Builder builder) {
    return builder.listener(events::add).build();
  }

  static java.util.Queue<io.github.redlockcore.core.Event> events() {
    return new java.util.concurrent.ConcurrentLinkedQueue<>();
  }

  static List<io.github.redlockcore.core.Event> ofKind(
      java.util.Queue<io.github.redlockcore.core.Event> events, String kind) {
    List<io.github.redlockcore.core.Event> out = new ArrayList<>();
    for (io.github.redlockcore.core.Event e : events) {
      if (e.kind().equals(kind)) {
        out.add(e);
      }
    }
    return out;
  }

  @Test
  void acquireInspectAndReleaseReportTheirEventsWithTimings() {
    var events = events();
    try (RedlockClient c = listened(events, RedlockClient.builder(driver(nodes.urls())))) {
      long before = c.now();
      RedLock lock = c.acquire(resource);
      long after = c.now();
      // The outcome's event is heard before the call returns.
      List<io.github.redlockcore.core.Event> acquired = ofKind(events, "acquired");
      assertEquals(1, acquired.size(), events.toString());
      io.github.redlockcore.core.Event a = acquired.get(0);
      assertEquals(Optional.of("acquire"), a.operation());
      assertEquals(List.of(resource), a.resources());
      assertEquals(1, a.attempt());
      assertTrue(a.at() >= before && a.at() <= after, a.at() + " not in " + before + ".." + after);
      assertTrue(a.elapsed().toNanos() > 0 && a.elapsed().toNanos() / 1000 <= after - before,
          a.elapsed().toString());
      assertEquals(5, a.nodes().size());
      assertTrue(count(a.nodes(), NodeResult.Kind.SUCCESS) >= 3, a.nodes().toString());
      assertTrue(a.reason().isEmpty() && a.errorClass().isEmpty());
      assertTrue(Math.abs(a.time().toEpochMilli() - System.currentTimeMillis()) < 5000);
      assertTrue(c.isLocked(resource));
      io.github.redlockcore.core.Event inspected = ofKind(events, "inspected").get(0);
      assertEquals(Optional.of("inspect"), inspected.operation());
      assertTrue(inspected.operationId() != a.operationId());
      lock.extend();
      assertEquals(1, ofKind(events, "extended").size(), events.toString());
      lock.release();
      List<io.github.redlockcore.core.Event> released = ofKind(events, "released");
      assertEquals(1, released.size(), events.toString());
      assertEquals(Optional.of("release"), released.get(0).operation());
      assertTrue(released.get(0).at() >= a.at());
      assertTrue(ofKind(events, "node_failed").isEmpty(), events.toString());
    }
  }

  @Test
  void retriesAreReportedWithTheirReasonAndNextStart() {
    var events = events();
    try (RedLock held = redlock.acquire(resource);
        RedlockClient c = listened(events, RedlockClient.builder(driver(nodes.urls()))
            .attempts(3).retryDelay(Duration.ofMillis(30)).retryJitter(Duration.ofMillis(5)))) {
      assertThrows(LockHeldElsewhereException.class, () -> c.acquire(resource));
      List<io.github.redlockcore.core.Event> retries = ofKind(events, "retry");
      assertEquals(2, retries.size(), events.toString());
      for (int i = 0; i < 2; i++) {
        io.github.redlockcore.core.Event r = retries.get(i);
        assertEquals(i + 1, r.attempt());
        assertEquals(Optional.of("conflict"), r.reason());
        long wait = r.retryAt().orElseThrow() - r.at();
        assertTrue(wait >= 25_000 && wait <= 36_000, "retry in " + wait + " us");
      }
      io.github.redlockcore.core.Event failed = ofKind(events, "not_acquired").get(0);
      assertEquals(3, failed.attempt());
      assertEquals(Optional.of("held_elsewhere"), failed.errorClass());
      assertTrue(held.isValid());
    }
  }

  @Test
  void aRefusedNodeIsReportedAsNodeFailed() {
    nodes.kill(3);
    var events = events();
    try (RedlockClient c = listened(events, RedlockClient.builder(driver(nodes.urls())))) {
      c.acquire(resource).close();
      // Node 3's failure, refused. (A client's first connections may also miss the
      // first round's deadline on a cold start: those nodes, node 3 included, are then
      // reported timed out first.)
      io.github.redlockcore.core.Event f =
          ofKind(events, "node_failed").stream()
              .filter(e -> e.node().equals(java.util.OptionalInt.of(3)))
              .filter(e -> e.cause().equals(Optional.of("refused")))
              .findFirst()
              .orElseThrow(() -> new AssertionError("node 3 never refused: " + events));
      assertTrue(ofKind(events, "node_failed").stream()
          .allMatch(e -> e.node().equals(java.util.OptionalInt.of(3))
              || e.cause().equals(Optional.of("timeout"))), events.toString());
      // The acquisition may decide on the four live nodes before the refusal arrives;
      // then the release is the first operation to hear it.
      String operation = f.operation().orElse("");
      assertTrue(operation.equals("acquire") || operation.equals("release"), events.toString());
      assertEquals(1, f.nodes().size());
      assertEquals(NodeResult.Kind.ERROR, f.nodes().get(0).kind());
    }
  }

  @Test
  void keepAliveReportsTheLockLost() throws Exception {
    var events = events();
    try (RedlockClient c = listened(events, RedlockClient.builder(driver(nodes.urls())))) {
      RedLock lock = c.acquire(resource, Duration.ofMillis(900));
      var lost = lock.keepAlive();
      for (int i = 0; i < 5; i++) {
        set(i, resource, "someone-else");
      }
      lost.get(3, TimeUnit.SECONDS);
      waitUntil(() -> !ofKind(events, "lost").isEmpty());
      io.github.redlockcore.core.Event l = ofKind(events, "lost").get(0);
      assertEquals(Optional.of("taken"), l.lostReason());
      assertTrue(l.operation().isEmpty());
      assertEquals(List.of(resource), l.resources());
      assertTrue(l.elapsed().toMillis() < 3000, l.elapsed().toString());
      // Counted from the acquisition, the instant of the acquired event (not from when
      // the lock object was made on this thread, later).
      io.github.redlockcore.core.Event acquired = ofKind(events, "acquired").get(0);
      assertEquals(l.at() - acquired.at(), l.elapsed().toNanos() / 1000, events.toString());
      // The failed extension that found it taken came first.
      assertFalse(ofKind(events, "not_extended").isEmpty(), events.toString());
      lock.close();
    }
  }

  @Test
  void aThrowingListenerBreaksNothing() throws Exception {
    var events = events();
    List<Throwable> reported = new java.util.concurrent.CopyOnWriteArrayList<>();
    Thread.UncaughtExceptionHandler previous = Thread.getDefaultUncaughtExceptionHandler();
    Thread.setDefaultUncaughtExceptionHandler((t, e) -> reported.add(e));
    try (RedlockClient c = RedlockClient.builder(driver(nodes.urls()))
        .listener(e -> {
          throw new IllegalStateException("listener bug on " + e.kind());
        })
        .listener(events::add)
        .build()) {
      try (RedLock lock = c.acquire(resource)) {
        assertTrue(lock.isValid());
        assertTrue(lock.isOwned());
      }
      waitUntil(() -> !ofKind(events, "released").isEmpty());
      assertEquals(1, ofKind(events, "acquired").size());
      assertTrue(reported.size() >= 3, reported.toString());
      assertEquals("listener bug on acquired", reported.get(0).getMessage());
    } finally {
      Thread.setDefaultUncaughtExceptionHandler(previous);
    }
  }

  @Test
  void aListenerCallingTheClientIsRefusedNotDeadlocked() throws Exception {
    List<Throwable> reported = new java.util.concurrent.CopyOnWriteArrayList<>();
    Thread.UncaughtExceptionHandler previous = Thread.getDefaultUncaughtExceptionHandler();
    Thread.setDefaultUncaughtExceptionHandler((t, e) -> reported.add(e));
    var client = new java.util.concurrent.atomic.AtomicReference<RedlockClient>();
    try (RedlockClient c = RedlockClient.builder(driver(nodes.urls()))
        .listener(e -> {
          if (e.kind().equals("acquired")) {
            client.get().isLocked(resource);
          }
        })
        .build()) {
      client.set(c);
      c.acquire(resource).close();
      waitUntil(() -> !reported.isEmpty());
      RedlockStateException e = (RedlockStateException) reported.get(0);
      assertEquals("invalid_call", e.code());
      assertFalse(c.isLocked(resource));
    } finally {
      Thread.setDefaultUncaughtExceptionHandler(previous);
    }
  }

  @Test
  void heldElsewhereIsItsOwnException() {
    try (RedlockClient other = RedlockClient.builder(driver(nodes.urls())).attempts(2)
            .retryDelay(Duration.ofMillis(20)).retryJitter(Duration.ofMillis(5)).build();
        RedLock held = redlock.acquire(resource)) {
      LockHeldElsewhereException e =
          assertThrows(LockHeldElsewhereException.class, () -> other.acquire(resource));
      assertEquals("held_elsewhere", e.code());
      assertEquals(2, e.attempts());
      assertEquals(5, e.nodes().size());
      assertTrue(count(e.nodes(), NodeResult.Kind.CONFLICT) >= 3, e.nodes().toString());
      assertTrue(other.tryAcquire(resource, null, Duration.ZERO).isEmpty());
      assertTrue(held.isValid());
    }
    // The failed attempts left nothing behind: the next acquisition succeeds at once.
    try (RedLock again = redlock.acquire(resource)) {
      assertTrue(again.isValid());
    }
  }

  @Test
  void twoNodesDownStillLocksAndThreeDownIsNodesFailing() throws InterruptedException {
    nodes.kill(0);
    nodes.kill(1);
    try (RedLock lock = redlock.acquire(resource)) {
      assertTrue(lock.isValid());
    }
    nodes.kill(2);
    NodesFailingException e =
        assertThrows(NodesFailingException.class, () -> redlock.acquire(resource));
    assertEquals("nodes_failing", e.code());
    for (int i = 0; i < 3; i++) {
      NodeResult r = e.nodes().get(i);
      assertEquals(NodeResult.Kind.ERROR, r.kind(), e.nodes().toString());
      assertTrue(r.error().contains("refused"), r.error());
      assertEquals("refused", r.cause(), r.error());
    }
    for (int i = 0; i < 3; i++) {
      nodes.restart(i);
    }
    // Back within the links' pause after their failed connections (at most
    // RECONNECT_MAX, 2 s): meanwhile an acquisition fails at once with the last cause.
    long deadline = System.nanoTime() + 3_000_000_000L;
    while (true) {
      try (RedLock lock = redlock.acquire(resource)) {
        assertTrue(lock.isValid());
        break;
      } catch (NodesFailingException again) {
        assertTrue(System.nanoTime() < deadline, "not back within 3 s: " + again.nodes());
        Thread.sleep(50);
      }
    }
  }

  @Test
  void aFrozenNodeIsNeverAwaited() {
    long healthy = medianCycleMicros(resource + "-healthy-", 15);
    nodes.pause(4);
    long frozenMedian = medianCycleMicros(resource + "-frozen-", 15);
    // Hundreds of cycles later nothing has piled up for the frozen node: the core's link
    // bounds what it has in flight and refuses new work for a stalled node.
    for (int i = 0; i < 300; i++) {
      try (RedLock lock = redlock.acquire(resource + "-many-" + i)) {
        assertTrue(lock.isValid());
      }
    }
    io.github.redlockcore.internal.CoreLinks.Info frozen = redlock.engine().linkInfo(4);
    assertTrue(frozen.inFlight <= 64 && frozen.queued <= 1024, frozen.toString());
    // Every round decides at the quorum of the four live nodes: a driver that waited for
    // the frozen node would take at least the node timeout (50 ms) per round. The frozen
    // p50 stays near the healthy one (slack for a shared machine).
    assertTrue(frozenMedian < 40_000, "median acquire + release " + frozenMedian + " us");
    assertTrue(frozenMedian <= 2 * healthy + 5_000,
        "frozen p50 " + frozenMedian + " us against healthy p50 " + healthy + " us");
    nodes.resume(4);
  }

  private long medianCycleMicros(String prefix, int cycles) {
    long[] micros = new long[cycles];
    for (int i = 0; i < micros.length; i++) {
      long start = System.nanoTime();
      try (RedLock lock = redlock.acquire(prefix + i)) {
        assertTrue(lock.isValid());
      }
      micros[i] = (System.nanoTime() - start) / 1000;
    }
    java.util.Arrays.sort(micros);
    return micros[micros.length / 2];
  }


  @Test
  void aNodeRestartedEmptyKeepsTheQuorumAndExtensionDoesNotRecreate() {
    try (RedLock lock = redlock.acquire(resource, Duration.ofSeconds(5))) {
      waitUntil(() -> lock.token().equals(get(0, resource)));
      nodes.restart(0);
      assertNull(get(0, resource));
      try (RedlockClient other = RedlockClient.builder(driver(nodes.urls())).attempts(1).build()) {
        LockHeldElsewhereException e =
            assertThrows(LockHeldElsewhereException.class, () -> other.acquire(resource));
        assertTrue(count(e.nodes(), NodeResult.Kind.CONFLICT) >= 3);
      }
      lock.extend(Duration.ofSeconds(5));
      assertTrue(lock.isValid());
      // Extension never re-creates a key that is gone.
      assertNull(get(0, resource));
    }
  }

  @Test
  void extensionMovesValidUntil() throws InterruptedException {
    try (RedLock lock = redlock.acquire(resource, Duration.ofMillis(1000))) {
      long before = lock.validUntil();
      Thread.sleep(50);
      lock.extend(Duration.ofMillis(3000));
      assertTrue(lock.validUntil() > before + 1_900_000, lock.validUntil() - before + " us");
      assertEquals(1, lock.extensions());
      try (Jedis j = node(1)) {
        // The extension decides at a quorum: this node's PEXPIRE may land just after it
        // (its key, 1 s at first, would be gone long before the deadline if it never did).
        long deadline = System.nanoTime() + 500_000_000L;
        long pttl = j.pttl(resource);
        while (pttl <= 2000 && System.nanoTime() < deadline) {
          Thread.sleep(5);
          pttl = j.pttl(resource);
        }
        assertTrue(pttl > 2000, "PTTL " + pttl);
      }
    }
  }

  @Test
  void keepAliveExtendsOnTheCoreSchedule() throws Exception {
    try (RedLock lock = redlock.acquire(resource, Duration.ofMillis(600))) {
      AtomicInteger extended = new AtomicInteger();
      var lost = lock.keepAlive(new LockListener() {
        @Override
        public void extended(RedLock l, long validUntil) {
          extended.incrementAndGet();
        }
      });
      Thread.sleep(1500);
      assertTrue(lock.isValid());
      assertTrue(extended.get() >= 2, "extensions " + extended.get());
      assertEquals(extended.get(), lock.extensions());
      assertFalse(lost.isDone());
      assertTrue(lock.token().equals(get(2, resource)));
    }
  }

  @Test
  void theLostSignalFiresWhenTheKeyIsTaken() throws Exception {
    RedLock lock = redlock.acquire(resource, Duration.ofMillis(900));
    var lost = lock.keepAlive();
    for (int i = 0; i < 5; i++) {
      set(i, resource, "someone-else");
    }
    LockLostException cause = lost.get(3, TimeUnit.SECONDS);
    assertEquals("lock_lost", cause.code());
    assertEquals("taken", cause.reason());
    assertFalse(lock.isValid());
    assertThrows(LockLostException.class, () -> lock.extend());
    Outcome released = lock.release();
    // Release never deletes a key that holds another token.
    assertEquals(0, released.released());
    for (int i = 0; i < 5; i++) {
      assertEquals("someone-else", get(i, resource));
    }
  }

  @Test
  void releaseNeverDeletesAnotherToken() {
    RedLock lock = redlock.acquire(resource, Duration.ofSeconds(5));
    waitUntil(() -> {
      for (int i = 0; i < 5; i++) {
        if (!lock.token().equals(get(i, resource))) {
          return false;
        }
      }
      return true;
    });
    set(0, resource, "other-token");
    set(1, resource, "other-token");
    Outcome outcome = lock.release();
    assertEquals(Outcome.Kind.RELEASED, outcome.kind());
    assertNull(lock.release(), "a second release does nothing");
    waitUntil(() -> get(4, resource) == null && get(3, resource) == null && get(2, resource) == null);
    assertEquals("other-token", get(0, resource));
    assertEquals("other-token", get(1, resource));
  }

  @Test
  void interopWithTheRustCli() throws Exception {
    String cli = System.getProperty("redlock.cli");
    assertTrue(cli != null && new java.io.File(cli).canExecute(),
        "the Rust CLI (-Dredlock.cli) is needed: " + cli);
    String urls = String.join(",", nodes.urls());
    // The CLI holds it: Java is refused.
    Process acquire = new ProcessBuilder(cli, "--nodes", urls, "--quiet", "acquire", resource,
        "--ttl", "10000")
        .redirectError(ProcessBuilder.Redirect.INHERIT).start();
    String token = new String(acquire.getInputStream().readAllBytes()).trim();
    assertEquals(0, acquire.waitFor());
    assertFalse(token.isEmpty());
    try (RedlockClient once = RedlockClient.builder(driver(nodes.urls())).attempts(1).build()) {
      assertThrows(LockHeldElsewhereException.class, () -> once.acquire(resource));
    }
    Process release = new ProcessBuilder(cli, "--nodes", urls, "release", resource, token)
        .redirectErrorStream(true).start();
    release.getInputStream().readAllBytes();
    assertEquals(0, release.waitFor());
    // Java holds it: the CLI is refused (exit 75).
    try (RedLock lock = redlock.acquire(resource)) {
      Process refused = new ProcessBuilder(cli, "--nodes", urls, "--quiet", "acquire", resource,
          "--ttl", "10000", "--retry", "0").redirectErrorStream(true).start();
      String out = new String(refused.getInputStream().readAllBytes());
      assertEquals(75, refused.waitFor(), out);
      assertNotEquals(token, lock.token());
    }
  }

  @Test
  void extendAfterReleaseIsNotHeld() {
    RedLock lock = redlock.acquire(resource);
    lock.release();
    LockNotHeldException e = assertThrows(LockNotHeldException.class, lock::extend);
    assertEquals("not_held", e.code());
    // The same through the core: a lease rebuilt from the token finds the keys gone.
    try (RedLock again = redlock.acquire(resource)) {
      String token = again.token();
      again.release();
      RedLock rebuilt = redlock.lock(List.of(resource), token);
      LockNotHeldException core = assertThrows(LockNotHeldException.class, rebuilt::extend);
      assertEquals("not_held", core.code());
    }
  }

  @Test
  void aNodeRestartedEmptyIsUsedAgainAndItsKeyReleased() throws InterruptedException {
    try (RedLock first = redlock.acquire(resource)) {
      waitUntil(() -> first.token().equals(get(0, resource)));
    }
    nodes.restart(0);
    // The link loads the scripts again on the new connection: node 0 is not lost for a
    // TTL. (A client library that learns of the restart only from its next write, as
    // Jedis does, loses that one write: the link never writes a SET twice.)
    for (int i = 0; ; i++) {
      RedLock next = redlock.acquire(resource);
      // The acquisition decides at the quorum: node 0's reply may come a little later.
      boolean onNode0 = false;
      for (int w = 0; w < 50 && !onNode0; w++) {
        onNode0 = next.token().equals(get(0, resource));
        if (!onNode0) {
          Thread.sleep(10);
        }
      }
      next.release();
      if (onNode0) {
        // Its release deleted the key there too.
        waitUntil(() -> get(0, resource) == null);
        break;
      }
      assertTrue(i < 2, "node 0 still not used after " + (i + 1) + " acquisitions");
    }
  }

  @Test
  void useAfterCloseIsTheUsedAfterCloseError() {
    RedLock lock = redlock.acquire(resource);
    redlock.close();
    RedlockStateException e =
        assertThrows(RedlockStateException.class, () -> redlock.acquire(resource));
    assertEquals("used_after_close", e.code());
    e = assertThrows(RedlockStateException.class, lock::extend);
    assertEquals("used_after_close", e.code());
  }

  /**
   * Audit 13: close() releases every lock of the client still held (acquired, or rebuilt
   * from a token) on all five nodes before it returns, and after it every use of the
   * client or its locks is used_after_close (extend, release, extend, release).
   */
  @Test
  void closeReleasesTheLocksStillHeldThenEveryUseIsUsedAfterClose() {
    RedLock lock = redlock.acquire(resource);
    RedLock other = redlock.acquire(List.of(resource + "-a", resource + "-b"),
        Duration.ofSeconds(30));
    // A lock held by its token (set by another process, handed over): rebuilt here.
    String token = "handed0ver" + Long.toHexString(System.nanoTime());
    for (int i = 0; i < 5; i++) {
      try (Jedis j = node(i)) {
        j.set(resource + "-rebuilt", token,
            redis.clients.jedis.params.SetParams.setParams().px(30_000));
      }
    }
    RedLock rebuilt = redlock.lock(List.of(resource + "-rebuilt"), token);
    waitUntil(() -> {
      for (int i = 0; i < 5; i++) {
        if (get(i, resource) == null || get(i, resource + "-a") == null
            || get(i, resource + "-b") == null) {
          return false;
        }
      }
      return true;
    });
    redlock.close();
    // Released before close() returned (not left to the TTL): on all five nodes.
    for (int i = 0; i < 5; i++) {
      assertNull(get(i, resource), "node " + i + " still holds " + resource);
      assertNull(get(i, resource + "-a"), "node " + i);
      assertNull(get(i, resource + "-b"), "node " + i);
      assertNull(get(i, resource + "-rebuilt"), "node " + i);
    }
    assertFalse(lock.isValid());
    for (RedLock l : List.of(lock, other, rebuilt, lock)) {
      for (Executable call : List.<Executable>of(l::extend, l::release, l::extend, l::release,
          l::keepAlive, l::isOwned)) {
        RedlockStateException e = assertThrows(RedlockStateException.class, call);
        assertEquals("used_after_close", e.code(), e.getMessage());
        assertTrue(e.getMessage().contains("closed"), e.getMessage());
      }
      l.close(); // AutoCloseable stays quiet
    }
    RedlockStateException e =
        assertThrows(RedlockStateException.class, () -> redlock.acquire(resource));
    assertEquals("used_after_close", e.code());
    e = assertThrows(RedlockStateException.class, () -> redlock.isLocked(resource));
    assertEquals("used_after_close", e.code());
    for (int i = 0; i < 5; i++) {
      assertNull(get(i, resource));
    }
  }

  /**
   * Locks whose release failed stay the client's (its close() tries them again), but not
   * for ever: once it keeps 64, those whose keys have expired everywhere are forgotten.
   */
  @Test
  void locksWhoseReleaseFailedAreForgottenOnceTheirKeysExpired() {
    List<RedLock> locks = new ArrayList<>();
    for (int i = 0; i < 64; i++) {
      locks.add(redlock.acquire(resource + ":" + i, Duration.ofMillis(300)));
    }
    nodes.pause(2);
    nodes.pause(3);
    nodes.pause(4);
    try {
      for (RedLock lock : locks) {
        assertThrows(NodesFailingException.class, lock::release);
      }
      assertEquals(64, redlock.heldCount());
    } finally {
      nodes.resume(2);
      nodes.resume(3);
      nodes.resume(4);
    }
    // Once each one's validity (300 ms) and its TTL again have passed, their keys are gone
    // everywhere: the next lock the client keeps makes it forget them.
    waitUntil(() -> locks.stream().allMatch(l -> l.expiredEverywhere(redlock.now())));
    assertEquals(64, redlock.heldCount());
    RedLock next = redlock.acquire(resource + ":next", Duration.ofSeconds(10));
    assertEquals(1, redlock.heldCount());
    next.release();
    assertEquals(0, redlock.heldCount());
  }

  /**
   * Audit 14: a resource name of 1 MB held elsewhere is the held-elsewhere exception, whose
   * message names the rule and carries the name shortened to 64 bytes and "…".
   */
  @Test
  void aHugeResourceNameIsShortenedInTheMessage() {
    String huge = resource + ":" + "x".repeat(1 << 20);
    for (int i = 0; i < 5; i++) {
      try (Jedis j = node(i)) {
        j.set(huge, "someone-else", redis.clients.jedis.params.SetParams.setParams().px(10_000));
      }
    }
    // A megabyte on the wire takes longer than the default node timeout (50 ms).
    try (RedlockClient once = RedlockClient.builder(driver(nodes.urls())).attempts(1)
        .nodeTimeout(Duration.ofSeconds(1)).build()) {
      LockHeldElsewhereException e =
          assertThrows(LockHeldElsewhereException.class, () -> once.acquire(huge));
      assertEquals("held_elsewhere", e.code());
      assertTrue(e.getMessage().contains("held by someone else"), e.getMessage());
      assertTrue(e.getMessage().length() < 2_000, "a message of " + e.getMessage().length());
      assertTrue(e.getMessage().contains(huge.substring(0, 64) + "…"), e.getMessage());
      assertEquals(huge, e.resource());
    } finally {
      for (int i = 0; i < 5; i++) {
        try (Jedis j = node(i)) {
          j.del(huge);
        }
      }
    }
  }

  /**
   * Audit 13: a release that fails (too few nodes confirm it) does not mark the lock
   * released: the next release() tries again instead of returning quietly, and the
   * client's close() releases it once the nodes answer.
   */
  @Test
  void aFailedReleaseLeavesTheLockToReleaseAgain() {
    RedLock lock = redlock.acquire(resource);
    waitUntil(() -> {
      for (int i = 0; i < 5; i++) {
        if (get(i, resource) == null) {
          return false;
        }
      }
      return true;
    });
    nodes.pause(2);
    nodes.pause(3);
    nodes.pause(4);
    assertThrows(NodesFailingException.class, lock::release);
    // Still not released: it is tried again (and fails again, the nodes being frozen).
    NodesFailingException again = assertThrows(NodesFailingException.class, lock::release);
    assertEquals("nodes_failing", again.code());
    nodes.resume(2);
    nodes.resume(3);
    nodes.resume(4);
    redlock.close();
    for (int i = 0; i < 5; i++) {
      assertNull(get(i, resource), "node " + i + " still holds the key after close()");
    }
  }

  @Test
  void anInterruptedAcquisitionLeavesNoKey() throws Exception {
    nodes.pause(2);
    nodes.pause(3);
    nodes.pause(4);
    try (RedlockClient slow = RedlockClient.builder(driver(nodes.urls()))
        .ttl(Duration.ofSeconds(30)).nodeTimeout(Duration.ofSeconds(5)).attempts(1).build()) {
      CompletableFutureHolder result = new CompletableFutureHolder();
      Thread t = new Thread(() -> {
        try {
          slow.acquire(resource).release();
          result.error = new AssertionError("acquired with three nodes frozen");
        } catch (LockCancelledException e) {
          result.cancelled = true;
        } catch (RuntimeException | AssertionError e) {
          result.error = e;
        }
      });
      t.start();
      // The SET reached the two live nodes; the operation waits for the frozen three.
      waitUntil(() -> get(0, resource) != null && get(1, resource) != null);
      t.interrupt();
      t.join(5000);
      assertFalse(t.isAlive());
      assertTrue(result.cancelled, String.valueOf(result.error));
      // The core's abandon released it on the live nodes at once...
      waitUntil(() -> get(0, resource) == null && get(1, resource) == null);
      nodes.resume(2);
      nodes.resume(3);
      nodes.resume(4);
      // ...and on the frozen ones once they answer again (the SET they run first included).
      waitUntil(() -> {
        for (int i = 0; i < 5; i++) {
          if (get(i, resource) != null) {
            return false;
          }
        }
        return true;
      });
    }
  }

  /**
   * An interrupt that cancels an acquisition just as the loop decided it "acquired": the
   * caller stops waiting before its future completes, so nobody gets the lock. It is
   * released at once, not left on the nodes until its TTL. The listener hears the
   * acquisition's event before the loop completes its future, interrupts the caller and
   * holds the loop until the caller has given up.
   */
  @Test
  void aLockDecidedAsItsCallerIsInterruptedIsReleased() throws Exception {
    java.util.concurrent.atomic.AtomicReference<Thread> caller =
        new java.util.concurrent.atomic.AtomicReference<>();
    try (RedlockClient client = RedlockClient.builder(driver(nodes.urls()))
        .ttl(Duration.ofSeconds(30))
        .listener(event -> {
          Thread t = caller.get();
          if (t != null && event.kind().equals("acquired")) {
            t.interrupt();
            try {
              t.join(5000);
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
          }
        })
        .build()) {
      CompletableFutureHolder result = new CompletableFutureHolder();
      Thread t = new Thread(() -> {
        try {
          client.acquire(resource);
          result.error = new AssertionError("the lock was handed to an interrupted caller");
        } catch (LockCancelledException e) {
          result.cancelled = true;
        } catch (RuntimeException | AssertionError e) {
          result.error = e;
        }
      });
      caller.set(t);
      t.start();
      t.join(10_000);
      assertFalse(t.isAlive());
      assertTrue(result.cancelled, String.valueOf(result.error));
      waitUntil(() -> {
        for (int i = 0; i < 5; i++) {
          if (get(i, resource) != null) {
            return false;
          }
        }
        return true;
      });
      caller.set(null);
      client.acquire(resource).release();
    }
  }

  static final class CompletableFutureHolder {
    volatile boolean cancelled;
    volatile Throwable error;
  }

  /**
   * The core starts the last attempt at the latest one node timeout before the limit, so
   * that it ends by then: the limit is kept to within a node timeout on either side. A
   * node timeout of 30 ms here (the default, 50 ms, can give up 51 ms early, as it did once
   * in CI against the 50 ms bound).
   */
  @Test
  void tryAcquireGivesUpAtTheWaitLimit() {
    try (RedLock held = redlock.acquire(resource);
        RedlockClient other = RedlockClient.builder(driver(nodes.urls()))
            .nodeTimeout(Duration.ofMillis(30))
            .retryDelay(Duration.ofMillis(20)).retryJitter(Duration.ofMillis(5)).build()) {
      for (long limitMs : new long[] {150, 400}) {
        long start = System.nanoTime();
        Optional<RedLock> got = other.tryAcquire(resource, null, Duration.ofMillis(limitMs));
        long tookMs = (System.nanoTime() - start) / 1_000_000;
        assertTrue(got.isEmpty());
        assertTrue(Math.abs(tookMs - limitMs) <= 50, "gave up after " + tookMs + " ms");
      }
      assertTrue(held.isValid());
    }
  }

  /**
   * A waiter woken by the release's notice takes the lock within a few round trips (a few
   * ms here); the bound is generous for loaded machines and still far below the waiters'
   * retry delays (1 s and 3 s), which are what a missed notice costs.
   */
  static final long HANDOFF_BOUND_MS = 100;

  /** Starts {@code tryAcquire(resource, wait)} on its own thread. */
  CompletableFuture<Optional<RedLock>> waitFor(RedlockClient client, Duration wait) {
    CompletableFuture<Optional<RedLock>> f = new CompletableFuture<>();
    Thread t = new Thread(() -> {
      try {
        f.complete(client.tryAcquire(resource, null, wait));
      } catch (RuntimeException e) {
        f.completeExceptionally(e);
      }
    }, "waiter");
    t.setDaemon(true);
    t.start();
    return f;
  }

  /** Releases {@code held} once the waiter waits; the milliseconds until it has the lock. */
  long handOff(RedLock held, CompletableFuture<Optional<RedLock>> waiting, long afterMs)
      throws Exception {
    Thread.sleep(afterMs);
    assertFalse(waiting.isDone(), "the waiter must still be waiting");
    long released = System.nanoTime();
    held.release();
    Optional<RedLock> got = waiting.get(10, TimeUnit.SECONDS);
    long ms = (System.nanoTime() - released) / 1_000_000;
    System.out.println(getClass().getSimpleName() + ": release to next holder " + ms + " ms");
    assertTrue(got.isPresent(), "the waiter got the lock");
    got.get().close();
    return ms;
  }

  /**
   * The waiter's retry delay is 3 s, so only the release notice explains a hand-off within
   * a few round trips.
   */
  @Test
  void aWaiterTakesTheLockAsSoonAsItIsReleased() throws Exception {
    try (RedlockClient waiter = RedlockClient.builder(driver(nodes.urls()))
            .retryDelay(Duration.ofSeconds(3)).retryJitter(Duration.ZERO).build()) {
      for (int round = 0; round < 3; round++) {
        RedLock held = redlock.acquire(resource);
        long ms = handOff(held, waitFor(waiter, Duration.ofSeconds(10)), 300);
        assertTrue(ms < HANDOFF_BOUND_MS,
            "round " + round + ": the waiter took " + ms + " ms after the release");
      }
    }
    // With a key prefix, the channel is the prefixed key's (the core names it).
    try (RedlockClient holder = RedlockClient.builder(driver(nodes.urls()))
            .keyPrefix("app:").build();
         RedlockClient waiter = RedlockClient.builder(driver(nodes.urls()))
            .keyPrefix("app:").retryDelay(Duration.ofSeconds(3)).retryJitter(Duration.ZERO)
            .build()) {
      RedLock held = holder.acquire(resource);
      int holding = 0;
      for (int i = 0; i < 5; i++) {
        holding += held.token().equals(get(i, "app:" + resource)) ? 1 : 0;
      }
      assertTrue(holding >= 3, "the prefixed key is held on " + holding + " nodes");
      long ms = handOff(held, waitFor(waiter, Duration.ofSeconds(10)), 300);
      assertTrue(ms < HANDOFF_BOUND_MS, "with a key prefix the waiter took " + ms + " ms");
    }
  }

  /**
   * A plain acquisition with retries and no wait limit (20 attempts, retry delay 3 s): when
   * it listens is the core's decision ({@code Operation::listens}). A first attempt that
   * wins subscribes to nothing; one that fails on the held lock listens from its cleanup
   * on, so the holder's release hands it the lock within a few round trips, not at its
   * retry 3 s after the failure.
   */
  @Test
  void aRetryingAcquisitionListensOnceItsFirstAttemptFailed() throws Exception {
    try (RedlockClient retrying = RedlockClient.builder(driver(nodes.urls()))
            .attempts(20).retryDelay(Duration.ofSeconds(3)).retryJitter(Duration.ZERO)
            .build()) {
      String channel = noticeChannel();
      // The client's connections first: a cold one's first attempt may miss the 50 ms node
      // timeout (Jedis), and a failed attempt listens.
      retrying.acquire(resource + ":warm-up").release();
      // Won at once: nothing subscribed (a subscription would linger 500 ms).
      RedLock free = retrying.acquire(resource);
      int freeAttempts = free.attempts();
      free.release();
      Thread.sleep(100);
      for (int n = 0; n < 5 && freeAttempts == 1; n++) {
        try (Jedis j = node(n)) {
          assertEquals(0L, j.pubsubNumSub(channel).get(channel),
              "node " + n + ": an acquisition that won at once subscribed");
        }
      }

      RedLock held = redlock.acquire(resource);
      // The holder's key on every node, so that the first attempt fails everywhere.
      waitUntil(() -> heldEverywhere(held));
      long started = System.nanoTime();
      CompletableFuture<RedLock> acquiring = new CompletableFuture<>();
      Thread t = new Thread(() -> {
        try {
          acquiring.complete(retrying.acquire(resource));
        } catch (RuntimeException e) {
          acquiring.completeExceptionally(e);
        }
      }, "retrying");
      t.setDaemon(true);
      t.start();
      // Its first attempt fails at once and its cleanup goes out: it listens on every node.
      // Not asserted here, so that an acquisition that does not listen fails on the
      // hand-off below (released by about 1.7 s, its retry comes at about 3 s).
      long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(1500);
      boolean subscribed = false;
      while (!(subscribed = subscribedEverywhere()) && System.nanoTime() < end) {
        Thread.sleep(5);
      }
      // Its cleanup is over: it sleeps until its retry.
      Thread.sleep(200);
      assertFalse(acquiring.isDone(), "the acquisition must still be retrying");
      long released = System.nanoTime();
      held.release();
      RedLock got = acquiring.get(10, TimeUnit.SECONDS);
      long ms = (System.nanoTime() - released) / 1_000_000;
      long sinceStart = (System.nanoTime() - started) / 1_000_000;
      System.out.println(getClass().getSimpleName() + ": release to the retrying acquisition "
          + ms + " ms (" + sinceStart + " ms after it started, attempt " + got.attempts()
          + ", subscribed everywhere before the release: " + subscribed + ")");
      try {
        assertTrue(got.attempts() >= 2, "its first attempt failed: " + got.attempts());
        assertTrue(ms < 500, "the retrying acquisition took " + ms + " ms after the release ("
            + sinceStart + " ms after it started; subscribed everywhere: " + subscribed + ")");
      } finally {
        got.close();
      }
    }
  }

  /**
   * Three waiters (clients of their own, retry delay 3 s +- 0.5 s) queue up behind a
   * holder, each once the previous one is in the queue on every node and 150 ms later;
   * each holds the lock 400 ms, then releases it. Each release's notices name the first
   * waiter in the nodes' queues (the core reads the message), so the lock goes to the
   * waiters in the order they started waiting, each soon after the previous release: the
   * named one tries at once, the others a node timeout (100 ms) later, and their attempt
   * fails well before the holder releases (so the next release finds them waiting
   * afresh). Notices naming nobody let them race after a random delay of about a round
   * trip (any order; this test fails then), and without notices the next holder would
   * come with a retry, seconds later. The latency bound is loose; the order is the point.
   */
  @Test
  void releasesHandTheLockToTheWaitersInTheOrderTheyStartedWaiting() throws Exception {
    int count = 3;
    List<RedlockClient> clients = new ArrayList<>();
    try {
      for (int i = 0; i < count; i++) {
        clients.add(RedlockClient.builder(driver(nodes.urls()))
            .nodeTimeout(Duration.ofMillis(100)).retryDelay(Duration.ofSeconds(3))
            .retryJitter(Duration.ofMillis(500)).build());
      }
      RedLock held = redlock.acquire(resource);
      // The holder's key on every node (those it did not wait for too), so that every
      // waiter is refused, and queued, everywhere.
      waitUntil(() -> heldEverywhere(held));
      List<Integer> order = Collections.synchronizedList(new ArrayList<>());
      AtomicLongArray acquiredAt = new AtomicLongArray(count);
      AtomicLongArray releasedAt = new AtomicLongArray(count);
      List<CompletableFuture<Boolean>> done = new ArrayList<>();
      for (int i = 0; i < count; i++) {
        int me = i;
        CompletableFuture<Boolean> f = new CompletableFuture<>();
        Thread t = new Thread(() -> {
          try {
            Optional<RedLock> got =
                clients.get(me).tryAcquire(resource, null, Duration.ofSeconds(10));
            if (got.isPresent()) {
              acquiredAt.set(me, System.nanoTime());
              order.add(me);
              Thread.sleep(400);
              releasedAt.set(me, System.nanoTime());
              got.get().release();
            }
            f.complete(got.isPresent());
          } catch (Exception e) {
            f.completeExceptionally(e);
          }
        }, "waiter-" + i);
        t.setDaemon(true);
        t.start();
        done.add(f);
        // Its first attempt, refused, put it in the queue on every node (the queued
        // acquire script): the next one comes after it.
        int queued = i + 1;
        waitUntil(() -> {
          for (int n = 0; n < 5; n++) {
            try (Jedis j = node(n)) {
              if (j.zcard("{" + resource + "}:waiters") != queued) {
                return false;
              }
            }
          }
          return true;
        });
        Thread.sleep(150);
      }
      assertTrue(order.isEmpty(), "nobody may take the held lock: " + order);
      long released = System.nanoTime();
      held.release();
      for (CompletableFuture<Boolean> f : done) {
        assertTrue(f.get(10, TimeUnit.SECONDS), "every waiter got the lock");
      }
      List<Long> latencies = new ArrayList<>();
      long previous = released;
      for (int waiter : order) {
        latencies.add((acquiredAt.get(waiter) - previous) / 1_000_000);
        previous = releasedAt.get(waiter);
      }
      System.out.println(getClass().getSimpleName() + ": hand-offs to waiters " + order + " "
          + latencies + " ms");
      assertEquals(List.of(0, 1, 2), order, "the lock goes to the waiters first come first");
      for (long ms : latencies) {
        assertTrue(ms >= 0 && ms < 500, "a hand-off took " + ms + " ms: " + latencies);
      }
    } finally {
      clients.forEach(RedlockClient::close);
    }
  }

  /**
   * Eight waiters (clients of their own, default settings, a 10 s wait limit each) against
   * a holder that releases and takes the lock again in a loop, each holding it 10 ms: the
   * turn a release gives the waiter it names keeps the holder from winning against the
   * waiters it woke, so every waiter gets the lock, each within 3 s of starting to wait
   * (the bound stated in docs/waiting.md for the Rust driver).
   */
  @Test
  void eightWaitersAllGetTheLockFromAHolderThatTakesItAgainInALoop() throws Exception {
    int count = 8;
    long boundMs = 3_000;
    List<RedlockClient> clients = new ArrayList<>();
    AtomicInteger turns = new AtomicInteger();
    java.util.concurrent.atomic.AtomicBoolean done =
        new java.util.concurrent.atomic.AtomicBoolean();
    CompletableFuture<Void> looping = new CompletableFuture<>();
    try {
      RedlockClient holder = RedlockClient.builder(driver(nodes.urls())).build();
      clients.add(holder);
      Thread loop = new Thread(() -> {
        try {
          while (!done.get()) {
            Optional<RedLock> got = holder.tryAcquire(resource, null, Duration.ofSeconds(10));
            if (got.isPresent()) {
              turns.incrementAndGet();
              Thread.sleep(10);
              got.get().release();
            }
          }
          looping.complete(null);
        } catch (Exception e) {
          looping.completeExceptionally(e);
        }
      }, "looping-holder");
      loop.setDaemon(true);
      loop.start();
      Thread.sleep(50);
      List<CompletableFuture<Long>> waits = new ArrayList<>();
      for (int i = 0; i < count; i++) {
        RedlockClient client = RedlockClient.builder(driver(nodes.urls())).build();
        clients.add(client);
        CompletableFuture<Long> waited = new CompletableFuture<>();
        Thread t = new Thread(() -> {
          try {
            long started = System.nanoTime();
            Optional<RedLock> got = client.tryAcquire(resource, null, Duration.ofSeconds(10));
            long ms = (System.nanoTime() - started) / 1_000_000;
            if (got.isEmpty()) {
              waited.completeExceptionally(new AssertionError("gave up after " + ms + " ms"));
              return;
            }
            Thread.sleep(10);
            got.get().release();
            waited.complete(ms);
          } catch (Exception e) {
            waited.completeExceptionally(e);
          }
        }, "waiter-" + i);
        t.setDaemon(true);
        t.start();
        waits.add(waited);
      }
      List<Long> ms = new ArrayList<>();
      for (CompletableFuture<Long> waited : waits) {
        ms.add(waited.get(15, TimeUnit.SECONDS));
      }
      done.set(true);
      looping.get(15, TimeUnit.SECONDS);
      long max = Collections.max(ms);
      System.out.println(getClass().getSimpleName() + ": 8 waiters against a looping holder ("
          + turns.get() + " turns): waits " + ms + " ms");
      assertTrue(turns.get() > 0, "the holder took the lock too");
      assertTrue(max < boundMs, "a waiter waited " + max + " ms: " + ms);
    } finally {
      done.set(true);
      clients.forEach(RedlockClient::close);
    }
  }

  /** Whether every node holds {@code lock}'s token. */
  boolean heldEverywhere(RedLock lock) {
    for (int n = 0; n < 5; n++) {
      if (!lock.token().equals(get(n, resource))) {
        return false;
      }
    }
    return true;
  }

  /** The resource's notice channel (the core names it). */
  String noticeChannel() {
    try (Config config = Config.builder(5, Duration.ofSeconds(10)).build();
         Client client = new Client(config)) {
      return new String(client.noticeChannels(List.of(resource)).get(0),
          StandardCharsets.UTF_8);
    }
  }

  /** Whether one client listens on the resource's notice channel on every node. */
  boolean subscribedEverywhere() {
    String channel = noticeChannel();
    for (int n = 0; n < 5; n++) {
      try (Jedis j = node(n)) {
        if (j.pubsubNumSub(channel).get(channel) != 1) {
          return false;
        }
      }
    }
    return true;
  }

  /**
   * Waits until the waiter listens on every node and is queued on a quorum of them (its
   * first attempt was refused; a node whose answer missed the node timeout on a loaded
   * machine queues it at its next attempt), then 200 ms more: the attempt its confirmed
   * subscriptions may have started at once is over too, and it sleeps until its retry.
   */
  void waitUntilWaiting() throws InterruptedException {
    waitUntil(this::subscribedEverywhere);
    waitUntil(() -> {
      int queued = 0;
      for (int n = 0; n < 5; n++) {
        try (Jedis j = node(n)) {
          queued += j.zcard("{" + resource + "}:waiters") == 1 ? 1 : 0;
        }
      }
      return queued >= 3;
    });
    Thread.sleep(200);
  }

  /**
   * Kills the subscriber connections on every node (the waiter's at least) through
   * connections opened beforehand, so that the release right after reaches the nodes
   * before the subscriber can be back (its first delay is 100 ms): nobody listens then.
   */
  void killSubscribers(List<Jedis> connections) {
    ClientKillParams pubsub = ClientKillParams.clientKillParams().type(ClientType.PUBSUB);
    String channel = noticeChannel();
    for (Jedis j : connections) {
      assertTrue(j.clientKill(pubsub) >= 1, "no subscriber connection to kill");
    }
    for (Jedis j : connections) {
      assertEquals(0L, j.pubsubNumSub(channel).get(channel), "still subscribed");
    }
  }

  /** A connection to every node, for {@link #killSubscribers}. */
  List<Jedis> everyNode() {
    List<Jedis> connections = new ArrayList<>();
    for (int i = 0; i < 5; i++) {
      connections.add(node(i));
      connections.get(i).ping();
    }
    return connections;
  }

  /** Changes the default user's permission to SUBSCRIBE on every node. */
  void subscribePermission(String rule) {
    for (int i = 0; i < 5; i++) {
      try (Jedis j = node(i)) {
        j.aclSetUser("default", rule);
      }
    }
  }

  /**
   * Subscriber connections killed (CLIENT KILL TYPE pubsub) while a waiter waits, and the
   * lock released at once: the release's notices reach nobody. The subscriber opens its
   * connections again (100 ms later) and the confirmed subscriptions stand for it (the
   * waiter is first in the queue: rule 13 of docs/bindings.md), so the waiter tries
   * then, not at its 3 s retry.
   */
  @Test
  void lostNoticesAreCaughtWhenTheSubscriberIsBack() throws Exception {
    try (RedlockClient waiter = RedlockClient.builder(driver(nodes.urls()))
            .retryDelay(Duration.ofSeconds(3)).retryJitter(Duration.ZERO).build()) {
      List<Jedis> connections = everyNode();
      try {
        RedLock held = redlock.acquire(resource);
        CompletableFuture<Optional<RedLock>> waiting =
            waitFor(waiter, Duration.ofSeconds(10));
        waitUntilWaiting();
        killSubscribers(connections);
        long ms = handOff(held, waiting, 0);
        assertTrue(ms < 1500,
            "with notices lost the waiter took " + ms + " ms after the release");
      } finally {
        connections.forEach(Jedis::close);
      }
    }
  }

  /**
   * As above, but the nodes refuse SUBSCRIBE (ACL) before the subscriber connections are
   * killed, so no subscription is confirmed again: the waiter gets the lock at its next
   * retry. Once SUBSCRIBE is allowed again the subscriber is back, and the next hand-off
   * is fast again.
   */
  @Test
  void noticesThatNeverComeFallBackToTheRetrySchedule() throws Exception {
    try (RedlockClient waiter = RedlockClient.builder(driver(nodes.urls()))
            .retryDelay(Duration.ofSeconds(1)).retryJitter(Duration.ZERO).build()) {
      RedLock held = redlock.acquire(resource);
      long started = System.nanoTime();
      CompletableFuture<Optional<RedLock>> waiting = waitFor(waiter, Duration.ofSeconds(10));
      waitUntilWaiting();
      List<Jedis> connections = everyNode();
      try {
        subscribePermission("-subscribe");
        killSubscribers(connections);
        long ms = handOff(held, waiting, 0);
        long sinceStart = (System.nanoTime() - started) / 1_000_000;
        // Its first attempt failed at about 0 ms and the release came at about 300 ms;
        // its retry is due at about 1000 ms: the lock comes with the retry, not the
        // release.
        assertTrue(ms > 200 && sinceStart < 1200, "without notices the waiter took " + ms
            + " ms after the release, " + sinceStart + " ms after it started");
      } finally {
        connections.forEach(Jedis::close);
        subscribePermission("+subscribe");
      }

      held = redlock.acquire(resource);
      waiting = waitFor(waiter, Duration.ofSeconds(10));
      waitUntil(this::subscribedEverywhere);
      long ms = handOff(held, waiting, 0);
      assertTrue(ms < HANDOFF_BOUND_MS, "subscribed again, the waiter took " + ms + " ms");
    }
  }

  /** Connections node {@code i} accepted so far (INFO stats), through {@code j}. */
  static long connectionsReceived(Jedis j) {
    for (String line : j.info("stats").split("\r?\n")) {
      if (line.startsWith("total_connections_received:")) {
        return Long.parseLong(line.substring(line.indexOf(':') + 1).trim());
      }
    }
    throw new AssertionError("no total_connections_received in INFO stats");
  }

  /** Subscriber connections open on the node ({@code CLIENT LIST TYPE pubsub}). */
  static long pubsubClients(Jedis j) {
    return j.clientList(ClientType.PUBSUB).lines().filter(l -> !l.isBlank()).count();
  }

  /**
   * The nodes refuse SUBSCRIBE (ACL) from before a waiter starts: each refusal closes its
   * subscriber connection, and the core opens it again after a pause (100 ms, doubling
   * while it keeps failing; a waiter arriving meanwhile does not cut it short), never in a
   * loop. Over the waiter's first second that is about 4 connection attempts per node
   * (at 0, 100, 300 and 700 ms), plus its command connection; a reopening loop would be
   * hundreds.
   */
  @Test
  void aRefusedSubscribeIsOpenedAgainPacedNotInALoop() throws Exception {
    try (RedlockClient waiter = RedlockClient.builder(driver(nodes.urls()))
            .retryDelay(Duration.ofMillis(300)).retryJitter(Duration.ZERO).build()) {
      RedLock held = redlock.acquire(resource);
      String other = resource + ":other";
      RedLock heldOther = redlock.acquire(other);
      List<Jedis> connections = everyNode();
      try {
        subscribePermission("-subscribe");
        long[] before = new long[5];
        for (int i = 0; i < 5; i++) {
          before[i] = connectionsReceived(connections.get(i));
        }
        CompletableFuture<Optional<RedLock>> waiting = waitFor(waiter, Duration.ofSeconds(10));
        Thread.sleep(500);
        // Another acquisition of the client starts waiting during a pause: still paced.
        CompletableFuture<Optional<RedLock>> waitingOther = CompletableFuture.supplyAsync(
            () -> waiter.tryAcquire(other, null, Duration.ofMillis(400)));
        Thread.sleep(500);
        long[] attempts = new long[5];
        for (int i = 0; i < 5; i++) {
          attempts[i] = connectionsReceived(connections.get(i)) - before[i];
        }
        System.out.println(getClass().getSimpleName() + ": connections in 1 s with SUBSCRIBE"
            + " refused " + java.util.Arrays.toString(attempts));
        for (int i = 0; i < 5; i++) {
          // At least the first attempt and one reopening; at most the paced ones (4), the
          // command connection and some slack for a loaded machine.
          assertTrue(attempts[i] >= 2 && attempts[i] <= 8,
              "node " + i + " received " + attempts[i] + " connections in 1 s");
          assertEquals(0, pubsubClients(connections.get(i)), "nothing stays subscribed");
        }
        assertFalse(waiting.isDone(), "the waiter waits");
        assertTrue(waitingOther.get(10, TimeUnit.SECONDS).isEmpty(), "the other was held");
        heldOther.release();
        held.release();
        // No notices: the lock comes with a retry (every 300 ms).
        Optional<RedLock> got = waiting.get(10, TimeUnit.SECONDS);
        assertTrue(got.isPresent(), "the waiter got the lock at a retry");
        got.get().close();
      } finally {
        subscribePermission("+subscribe");
        connections.forEach(Jedis::close);
      }
    }
  }

  /**
   * Once nobody waits, the subscriber connections stay for the core's linger (500 ms
   * after the last waiter ended: a client that waits again at once still listens), then
   * close on every node.
   */
  @Test
  void theSubscriberConnectionsCloseAfterTheLingerOnceNobodyWaits() throws Exception {
    try (RedlockClient waiter = RedlockClient.builder(driver(nodes.urls()))
            .retryDelay(Duration.ofSeconds(3)).retryJitter(Duration.ZERO).build()) {
      List<Jedis> connections = everyNode();
      try {
        RedLock held = redlock.acquire(resource);
        CompletableFuture<Optional<RedLock>> waiting = waitFor(waiter, Duration.ofSeconds(10));
        waitUntil(this::subscribedEverywhere);
        for (Jedis j : connections) {
          assertEquals(1, pubsubClients(j), "one subscriber connection per node");
        }
        handOff(held, waiting, 0);
        long ended = System.nanoTime();
        // Lingering: still subscribed right after the wait ended.
        boolean early = true;
        for (Jedis j : connections) {
          early &= pubsubClients(j) == 1;
        }
        long checkedMs = (System.nanoTime() - ended) / 1_000_000;
        if (checkedMs < 300) {
          assertTrue(early, "the subscriber connections linger after the wait");
        }
        waitUntil(() -> {
          for (Jedis j : connections) {
            if (pubsubClients(j) != 0) {
              return false;
            }
          }
          return true;
        });
        long closedMs = (System.nanoTime() - ended) / 1_000_000;
        System.out.println(getClass().getSimpleName() + ": subscriber connections closed "
            + closedMs + " ms after the wait ended");
        assertTrue(closedMs >= 400, "closed after " + closedMs + " ms, before the linger ended");
        assertEquals(0L, connections.get(0).pubsubNumSub(noticeChannel()).get(noticeChannel()));
      } finally {
        connections.forEach(Jedis::close);
      }
    }
  }
}
