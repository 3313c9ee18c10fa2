package io.github.redlockcore;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.redlockcore.nio.NioDriver;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import redis.clients.jedis.Jedis;

/**
 * The five audit fixes of the core (commits e7765d0 and b849529) on five real nodes (base
 * port 7910), through the public API: a shortening extension ends the lease sooner and the
 * keep-alive follows it, reserved auxiliary key names are refused before anything is sent,
 * an interrupted wait leaves the queue of waiters at once, a queue entry lives at most 5 s
 * whatever the retry delay, and the release of a lock on several resources names each
 * resource's own first waiter. Each fails on the core before the fixes.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class AuditFixesTest {
  TestNodes nodes;

  @BeforeAll
  void startNodes() {
    nodes = new TestNodes(7910, 5);
  }

  @AfterAll
  void stopNodes() {
    nodes.close();
  }

  RedlockClient client(Duration retryDelay) {
    return RedlockClient.builder(NioDriver.of(nodes.urls()))
        .ttl(Duration.ofSeconds(10))
        .retryDelay(retryDelay)
        .retryJitter(Duration.ZERO)
        .build();
  }

  Jedis node(int i) {
    return new Jedis("127.0.0.1", nodes.port(i));
  }

  long[] pttls(String key) {
    long[] out = new long[5];
    for (int i = 0; i < 5; i++) {
      try (Jedis j = node(i)) {
        out[i] = j.pttl(key);
      }
    }
    return out;
  }

  boolean existsNowhere(String key) {
    for (int i = 0; i < 5; i++) {
      try (Jedis j = node(i)) {
        if (j.exists(key)) {
          return false;
        }
      }
    }
    return true;
  }

  /** True when every node's sorted set {@code key} has {@code size} members. */
  boolean everyQueueHas(String key, int size) {
    for (int i = 0; i < 5; i++) {
      try (Jedis j = node(i)) {
        if (j.zcard(key) != size) {
          return false;
        }
      }
    }
    return true;
  }

  /**
   * Queued on 3 nodes or more: a node whose SET of the holder's acquisition was still on its
   * way (the acquisition decided at the quorum) may have granted the waiter's first attempt.
   */
  boolean queuedOnAQuorum(String key) {
    int queued = 0;
    for (int i = 0; i < 5; i++) {
      try (Jedis j = node(i)) {
        queued += j.zcard(key) > 0 ? 1 : 0;
      }
    }
    return queued >= 3;
  }

  String queues(String key) {
    StringBuilder out = new StringBuilder();
    for (int i = 0; i < 5; i++) {
      try (Jedis j = node(i)) {
        out.append(j.zrange(key, 0, -1)).append(' ');
      }
    }
    return out.toString();
  }

  static boolean until(long millis, BooleanSupplier condition) {
    long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > end) {
        return false;
      }
      sleep(10);
    }
    return true;
  }

  static void sleep(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      throw new AssertionError(e);
    }
  }

  // ---- 1. A shortening extension ----------------------------------------------------

  @Test
  void extendingA10sLockTo1sLeavesAbout1s() {
    String key = "audit:java:shorten";
    try (RedlockClient redlock = client(Duration.ofMillis(200))) {
      RedLock lock = redlock.acquire(key, Duration.ofSeconds(10));
      assertTrue(lock.remaining().toMillis() > 9000);
      long started = System.nanoTime();
      lock.extend(Duration.ofSeconds(1));
      long remaining = lock.remaining().toMillis();
      assertTrue(remaining <= 1000 && remaining > 500, "remaining " + remaining + " ms");
      assertTrue(lock.isValid());
      // The quorum decided: the last nodes' PEXPIRE may still be on its way.
      assertTrue(until(1000, () -> java.util.Arrays.stream(pttls(key))
          .allMatch(pttl -> pttl == -2 || (pttl > 0 && pttl <= 1000))),
          java.util.Arrays.toString(pttls(key)));
      // Not valid 1.2 s after the extension started (read from the clock).
      sleep(Math.max(0, TimeUnit.NANOSECONDS.toMillis(
          started + TimeUnit.MILLISECONDS.toNanos(1200) - System.nanoTime())));
      assertFalse(lock.isValid(), "still valid 1.2 s after extending to 1 s");
      assertEquals(0, lock.remaining().toMillis());
      lock.release();
    }
  }

  @Test
  void theKeepAliveFollowsAShorteningExtension() {
    String key = "audit:java:shorten:kept";
    try (RedlockClient redlock = client(Duration.ofMillis(200))) {
      RedLock lock = redlock.acquire(key, Duration.ofSeconds(10));
      lock.keepAlive();
      long started = System.nanoTime();
      lock.extend(Duration.ofSeconds(1));
      assertTrue(lock.remaining().toMillis() <= 1000, "remaining " + lock.remaining());
      // For 2.5 s the lock stays held and every key has at most 1 s left: the keep-alive
      // extends by 1 s on the new lease's schedule (before, on the 10 s lease's, and the keys
      // expired).
      while (System.nanoTime() - started < TimeUnit.MILLISECONDS.toNanos(2500)) {
        long at = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
        assertFalse(lock.lost().isDone(), "lost at " + at + " ms");
        assertTrue(lock.isValid(), "not valid at " + at + " ms");
        assertTrue(lock.remaining().toMillis() <= 1000, "remaining " + lock.remaining());
        int held = 0;
        for (long pttl : pttls(key)) {
          assertTrue(pttl <= 1000, "PTTL " + pttl);
          held += pttl > 0 ? 1 : 0;
        }
        assertTrue(held >= 3, held + " nodes hold the key at " + at + " ms");
        sleep(50);
      }
      assertTrue(lock.extensions() >= 2, lock.extensions() + " extensions");
      lock.release();
    }
  }

  // ---- 2. Reserved names ------------------------------------------------------------

  static void assertReserved(Runnable call) {
    RedlockArgumentException e = assertThrows(RedlockArgumentException.class, call::run);
    assertEquals("reserved_resource", e.code(), e.getMessage());
  }

  @Test
  void auxiliaryKeyNamesAreRefusedAndNothingIsSent() {
    try (RedlockClient redlock = client(Duration.ofMillis(100));
        RedlockClient prefixed = RedlockClient.builder(NioDriver.of(nodes.urls()))
            .keyPrefix("app:").build()) {
      for (String resource :
          List.of("{r}:waiters:turn", "{r}:fence", "lock:{order}:fence", "{r}:waiters")) {
        assertReserved(() -> redlock.acquire(resource, Duration.ofSeconds(5)));
        assertReserved(() -> redlock.tryAcquire(resource, Duration.ofSeconds(5),
            Duration.ofSeconds(1)));
        assertTrue(existsNowhere(resource), resource);
      }
      assertReserved(() -> prefixed.acquire("{r}:fence", Duration.ofSeconds(5)));
      assertTrue(existsNowhere("app:{r}:fence"));
      for (String resource : List.of("r:fence", "orders:fence")) {
        redlock.acquire(resource, Duration.ofSeconds(5)).release();
      }
    }
  }

  @Test
  void aLockOnTheTurnKeyOfAWaitedForResourceIsRefused() throws Exception {
    String resource = "audit:java:r";
    try (RedlockClient holder = client(Duration.ofMillis(100));
        RedlockClient waiter = client(Duration.ofSeconds(3))) {
      RedLock held = holder.acquire(resource, Duration.ofSeconds(10));
      AtomicReference<Optional<RedLock>> got = new AtomicReference<>();
      Thread t = new Thread(() -> got.set(waiter.tryAcquire(resource, Duration.ofSeconds(10),
          Duration.ofSeconds(10))));
      t.start();
      assertTrue(until(8000, () -> queuedOnAQuorum("{" + resource + "}:waiters")));
      assertReserved(() -> holder.acquire("{" + resource + "}:waiters:turn",
          Duration.ofSeconds(10)));
      held.release();
      t.join(10_000);
      got.get().orElseThrow().release();
    }
  }

  // ---- 3. An interrupted wait leaves the queue --------------------------------------

  @Test
  void anInterruptedWaitLeavesTheQueue() throws Exception {
    String resource = "audit:java:abandon";
    String order = "{" + resource + "}:waiters";
    String expiry = "{" + resource + "}:waiters:expiry";
    // A 4 s retry delay: the waiter's entry lives about 5 s after its refusal.
    try (RedlockClient holder = client(Duration.ofMillis(100));
        RedlockClient waiter = client(Duration.ofSeconds(4))) {
      RedLock held = holder.acquire(resource, Duration.ofSeconds(30));
      AtomicReference<Object> result = new AtomicReference<>();
      Thread t = new Thread(() -> {
        try {
          result.set(waiter.tryAcquire(resource, Duration.ofSeconds(10), Duration.ofSeconds(20)));
        } catch (RuntimeException e) {
          result.set(e);
        }
      });
      t.start();
      assertTrue(until(8000, () -> queuedOnAQuorum(order)), queues(order));
      long queued = System.nanoTime();
      sleep(300); // between attempts
      t.interrupt();
      t.join(5000);
      assertFalse(t.isAlive());
      assertTrue(result.get() instanceof LockCancelledException, String.valueOf(result.get()));
      // Before its entry's lifetime (5 s from its refusal) could end.
      assertTrue(until(2500, () -> everyQueueHas(order, 0) && everyQueueHas(expiry, 0)),
          "still queued: " + queues(order));
      assertTrue(System.nanoTime() - queued < TimeUnit.MILLISECONDS.toNanos(4500));
      assertTrue(held.isValid());
      held.release();
    }
  }

  // ---- 4. A queue entry lives at most 5 s -------------------------------------------

  @Test
  void aQueueEntryLivesAtMost5sWhateverTheRetryDelay() throws Exception {
    String resource = "audit:java:lifetime";
    String expiry = "{" + resource + "}:waiters:expiry";
    try (RedlockClient holder = client(Duration.ofMillis(100));
        RedlockClient waiter = client(Duration.ofSeconds(60))) {
      RedLock held = holder.acquire(resource, Duration.ofSeconds(30));
      Thread t = new Thread(() -> {
        try {
          waiter.tryAcquire(resource, Duration.ofSeconds(10), Duration.ofSeconds(120));
        } catch (RuntimeException e) {
          // cancelled below
        }
      });
      t.start();
      assertTrue(until(8000, () -> queuedOnAQuorum(expiry)));
      int checked = 0;
      for (int i = 0; i < 5; i++) {
        try (Jedis j = node(i)) {
          List<String> members = j.zrange(expiry, 0, 0);
          if (members.isEmpty()) {
            continue; // a node that granted the attempt, or never had it
          }
          checked++;
          String member = members.get(0);
          double score = j.zscore(expiry, member);
          List<String> time = j.time();
          long now = Long.parseLong(time.get(0)) * 1000 + Long.parseLong(time.get(1)) / 1000;
          long left = (long) score - now;
          assertTrue(left > 0 && left <= 5000,
              "node " + i + ": the entry lives " + left + " ms more (retry delay 60 s)");
        }
      }
      assertTrue(checked >= 3, checked + " nodes queue the waiter");
      t.interrupt();
      t.join(5000);
      held.release();
    }
  }

  // ---- 5. The release of {a, b} names b's own first waiter --------------------------

  @Test
  void releasingAAndBWakesTheWaiterOfB() throws Exception {
    // Both waiters retry every 5 s: only a notice explains a quick acquisition.
    try (RedlockClient holder = client(Duration.ofMillis(100));
        RedlockClient aSide = client(Duration.ofSeconds(5));
        RedlockClient bSide = client(Duration.ofSeconds(5))) {
      RedLock held = holder.acquire(List.of("a", "b"), Duration.ofSeconds(30));
      AtomicLong atA = new AtomicLong();
      AtomicLong atB = new AtomicLong();
      // A waiter of a, first in a's queue: before the fix the release named it for b too.
      Thread a = waiter(aSide, "a", atA);
      assertTrue(until(8000, () -> queuedOnAQuorum("{a}:waiters")), queues("{a}:waiters"));
      Thread b = waiter(bSide, "b", atB);
      assertTrue(until(8000, () -> queuedOnAQuorum("{b}:waiters")), queues("{b}:waiters"));
      sleep(300); // the waiters' subscriptions settle
      long released = System.nanoTime();
      held.release();
      a.join(12_000);
      b.join(12_000);
      assertTrue(atB.get() != 0, "the waiter of b did not acquire");
      assertTrue(atA.get() != 0, "the waiter of a did not acquire");
      long waitedB = TimeUnit.NANOSECONDS.toMillis(atB.get() - released);
      long waitedA = TimeUnit.NANOSECONDS.toMillis(atA.get() - released);
      assertTrue(waitedB < 2500, "the waiter of b acquired " + waitedB + " ms after the release");
      assertTrue(waitedA < 2500, "the waiter of a acquired " + waitedA + " ms after the release");
    }
  }

  static Thread waiter(RedlockClient side, String resource, AtomicLong at) {
    Thread t = new Thread(() -> side.tryAcquire(resource, Duration.ofSeconds(10),
        Duration.ofSeconds(10)).ifPresent(lock -> {
          at.set(System.nanoTime());
          lock.release();
        }));
    t.start();
    return t;
  }
}
