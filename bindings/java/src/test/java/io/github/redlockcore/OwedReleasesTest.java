package io.github.redlockcore;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.github.redlockcore.jedis.JedisDriver;
import io.github.redlockcore.nio.NioDriver;
import io.github.redlockcore.spi.Driver;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisPool;

/**
 * Releases a link owes a frozen node go out in the background once the node thaws, with
 * no further call on the client (docs/bindings.md, rules 2 and 10; the link's owed
 * releases in core/src/link.rs).
 *
 * <p>Three of five nodes frozen (SIGSTOP) while an acquisition's {@code SET} is on its way
 * to them: the acquisition fails ({@code nodes_failing}). Once they thaw they answer that
 * {@code SET}, so they hold the key with its full TTL (30 s here) until the link writes
 * the release it owes them; this must happen while the caller makes no call and keeps
 * the client open. The same for the one frozen node of a successful acquire and release.
 * Thawed and closed at once instead, nothing is left either. Both drivers: java.nio
 * (nodes on 7980-7984) and Jedis (7985-7989).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class OwedReleasesTest {
  private static final Duration TTL = Duration.ofSeconds(30);
  /** Far below the TTL, far above what a loaded machine needs to write a release. */
  private static final long BOUND_MS = 5_000;
  private static final long POLL_MS = 50;
  private static final int NIO_BASE = 7980;
  private static final int JEDIS_BASE = 7985;

  private TestNodes nio;
  private TestNodes jedis;

  @BeforeAll
  void start() {
    nio = new TestNodes(NIO_BASE, 5);
    jedis = new TestNodes(JEDIS_BASE, 5);
  }

  @AfterAll
  void stop() {
    // stop resumes a stopped node before terminating it.
    if (nio != null) {
      nio.close();
    }
    if (jedis != null) {
      jedis.close();
    }
  }

  private static Driver nioDriver(TestNodes nodes) {
    return NioDriver.of(nodes.urls());
  }

  private final List<JedisPool> pools = new ArrayList<>();

  private Driver jedisDriver(TestNodes nodes) {
    List<JedisPool> mine = new ArrayList<>();
    for (int i = 0; i < nodes.count; i++) {
      mine.add(new JedisPool("127.0.0.1", nodes.port(i)));
    }
    pools.addAll(mine);
    return JedisDriver.ofPools(mine);
  }

  @AfterAll
  void closePools() {
    pools.forEach(JedisPool::close);
  }

  @Test
  @Timeout(value = 60, unit = TimeUnit.SECONDS)
  void nioSendsOwedReleasesAfterTheThawWithoutACall() {
    withoutACall(nio, OwedReleasesTest::nioDriver, "nio");
  }

  @Test
  @Timeout(value = 60, unit = TimeUnit.SECONDS)
  void jedisSendsOwedReleasesAfterTheThawWithoutACall() {
    withoutACall(jedis, this::jedisDriver, "jedis");
  }

  @Test
  @Timeout(value = 60, unit = TimeUnit.SECONDS)
  void nioClosedAtOnceAfterTheThawLeavesNothing() {
    closedAfterTheThaw(nio, OwedReleasesTest::nioDriver, "nio");
  }

  @Test
  @Timeout(value = 60, unit = TimeUnit.SECONDS)
  void jedisClosedAtOnceAfterTheThawLeavesNothing() {
    closedAfterTheThaw(jedis, this::jedisDriver, "jedis");
  }

  // ---- the scenarios ----------------------------------------------------------------

  private void withoutACall(TestNodes nodes, Function<TestNodes, Driver> driver, String name) {
    String three = key(name, "three");
    String one = key(name, "one");
    RedlockClient client = RedlockClient.builder(driver.apply(nodes)).build();
    try {
      warm(client, nodes, name);
      // Three frozen: a failed acquisition, then the thaw, then no call at all.
      Map<Integer, Long> sets = setCalls(nodes, 2, 3, 4);
      freeze(nodes, 2, 3, 4);
      try {
        assertThrows(NodesFailingException.class, () -> client.acquire(three, TTL));
      } finally {
        thaw(nodes, 2, 3, 4);
      }
      waitSetRan(nodes, sets, name);
      long took = waitGone(nodes, three, name + ", three frozen, no call");
      System.out.printf("%s, three frozen: keys gone %d ms after the SET ran%n", name, took);

      // One frozen: a successful acquire and release, then the thaw, then no call.
      sets = setCalls(nodes, 4);
      freeze(nodes, 4);
      try {
        RedLock lock = client.acquire(one, TTL);
        lock.release();
      } finally {
        thaw(nodes, 4);
      }
      waitSetRan(nodes, sets, name);
      took = waitGone(nodes, one, name + ", one frozen, no call");
      System.out.printf("%s, one frozen: key gone %d ms after the SET ran%n", name, took);
    } finally {
      thaw(nodes, 2, 3, 4);
      client.close();
    }
    // Closed later: still nothing.
    assertTrue(present(nodes, three).isEmpty() && present(nodes, one).isEmpty(),
        name + ": keys left after close");
  }

  private void closedAfterTheThaw(TestNodes nodes, Function<TestNodes, Driver> driver,
      String name) {
    String resource = key(name, "close");
    RedlockClient client = RedlockClient.builder(driver.apply(nodes)).build();
    try {
      warm(client, nodes, name);
      Map<Integer, Long> sets = setCalls(nodes, 2, 3, 4);
      freeze(nodes, 2, 3, 4);
      try {
        assertThrows(NodesFailingException.class, () -> client.acquire(resource, TTL));
      } finally {
        thaw(nodes, 2, 3, 4);
      }
      // Closed at once instead of waiting: the close lets what is owed go out.
      client.close();
      waitSetRan(nodes, sets, name);
      long took = waitGone(nodes, resource, name + ", thawed then closed");
      System.out.printf("%s, thawed then closed: keys gone %d ms after the close%n", name, took);
    } finally {
      thaw(nodes, 2, 3, 4);
      client.close();
    }
  }

  // ---- helpers ----------------------------------------------------------------------

  private static String key(String name, String scenario) {
    return "java:owed:" + name + ":" + scenario + ":" + UUID.randomUUID().toString().substring(0, 8);
  }

  /**
   * Connections open first, so that the SET is written to the nodes frozen next; and the
   * warm-up's release done on every node (it decides at a quorum), or a node frozen with
   * it unanswered would be stalled already and never get the SET.
   */
  private static void warm(RedlockClient client, TestNodes nodes, String name) {
    String warm = key(name, "warm");
    try (RedLock lock = client.acquire(warm, TTL)) {
      assertTrue(lock.isValid());
    }
    waitGone(nodes, warm, name + ", warm-up");
  }

  private static void freeze(TestNodes nodes, int... indices) {
    for (int i : indices) {
      nodes.pause(i);
    }
  }

  /** Resumes every node given; a node not stopped is harmless to resume. */
  private static void thaw(TestNodes nodes, int... indices) {
    for (int i : indices) {
      nodes.resume(i);
    }
  }

  private static List<Integer> present(TestNodes nodes, String key) {
    List<Integer> out = new ArrayList<>();
    for (int i = 0; i < nodes.count; i++) {
      try (Jedis jedis = new Jedis("127.0.0.1", nodes.port(i), 2000)) {
        if (jedis.exists(key)) {
          out.add(i);
        }
      }
    }
    return out;
  }

  /** Polls every 50 ms, at most 5 s, until the key exists on no node; how long it took. */
  private static long waitGone(TestNodes nodes, String key, String what) {
    long started = System.nanoTime();
    while (true) {
      List<Integer> left = present(nodes, key);
      long elapsed = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
      if (left.isEmpty()) {
        return elapsed;
      }
      if (elapsed >= BOUND_MS) {
        Map<Integer, Long> ttls = new TreeMap<>();
        for (int i : left) {
          try (Jedis jedis = new Jedis("127.0.0.1", nodes.port(i), 2000)) {
            ttls.put(i, jedis.pttl(key));
          }
        }
        fail(what + ": " + key + " still on nodes " + left + " " + BOUND_MS
            + " ms after the thaw (remaining TTL, ms: " + ttls + ")");
      }
      try {
        Thread.sleep(POLL_MS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new AssertionError(e);
      }
    }
  }

  private static final Pattern SET_CALLS = Pattern.compile("(?m)^cmdstat_set:calls=(\\d+)");

  /** Each node's count of SET commands run (INFO commandstats). */
  private static Map<Integer, Long> setCalls(TestNodes nodes, int... indices) {
    Map<Integer, Long> out = new TreeMap<>();
    for (int i : indices) {
      try (Jedis jedis = new Jedis("127.0.0.1", nodes.port(i), 2000)) {
        Matcher m = SET_CALLS.matcher(jedis.info("commandstats"));
        out.put(i, m.find() ? Long.parseLong(m.group(1)) : 0L);
      }
    }
    return out;
  }

  /**
   * Waits (at most 5 s) until the thawed nodes ran the acquisition's SET: from then on
   * they hold the key until a release removes it, so a key found gone afterwards was
   * released (not merely not set yet).
   */
  private static void waitSetRan(TestNodes nodes, Map<Integer, Long> before, String name) {
    int[] indices = before.keySet().stream().mapToInt(Integer::intValue).toArray();
    long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(BOUND_MS);
    while (true) {
      Map<Integer, Long> after = setCalls(nodes, indices);
      boolean ran = true;
      for (int i : indices) {
        ran &= after.get(i) > before.get(i);
      }
      if (ran) {
        return;
      }
      if (System.nanoTime() > end) {
        fail(name + ": the thawed nodes never ran the SET (before " + before + ", now " + after + ")");
      }
      try {
        Thread.sleep(10);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new AssertionError(e);
      }
    }
  }
}
