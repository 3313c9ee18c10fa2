package io.github.redlockcore;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.redlockcore.jedis.JedisDriver;
import io.github.redlockcore.nio.NioDriver;
import io.github.redlockcore.spi.Driver;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisPool;
import redis.clients.jedis.commands.ProtocolCommand;

/**
 * Audit item 12: acquire/release cycles with one of five nodes frozen (SIGSTOP), checking
 * after every cycle that no live node keeps a key of it. On a loaded machine a node's
 * log showed one cycle's {@code SET} followed by the next cycle's {@code SET}, the release
 * owed between them never sent, so the key stayed its whole TTL.
 *
 * <p>The cause: a live node that answers late for a while (a Jedis node thread
 * descheduled) lets its link reach its bound of commands in flight, so the link queues the
 * next ones; a release that reached the link while its own {@code SET} was still queued
 * was not owed, and when that {@code SET} was written but the release was not before its
 * deadline, the release was dropped. Here node 1's client pauses 20 to 90 ms before a few
 * percent of its commands (what the loaded machine did to the node thread), node 4 is
 * frozen, and eight threads cycle at once, each on its own resource. Nodes on ports
 * 7470-7474.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class FrozenNodeReleaseTest {
  private static final int BASE = 7470;
  private static final int THREADS = 8;
  private TestNodes nodes;

  @BeforeAll
  void start() {
    nodes = new TestNodes(BASE, 5);
  }

  @AfterAll
  void stop() {
    resumeQuietly();
    nodes.close();
  }

  private void resumeQuietly() {
    try {
      nodes.resume(4);
    } catch (IllegalStateException e) {
      // Not paused.
    }
  }

  /** A node's client that now and then answers late, as on a loaded machine. */
  static final class LateJedis extends Jedis {
    LateJedis(int port) {
      super("127.0.0.1", port);
    }

    @Override
    public Object sendCommand(ProtocolCommand cmd, byte[]... args) {
      ThreadLocalRandom random = ThreadLocalRandom.current();
      if (random.nextInt(100) < 3) {
        LockSupport.parkNanos(random.nextLong(20_000_000L, 90_000_000L));
      }
      return super.sendCommand(cmd, args);
    }
  }

  @Test
  @Timeout(value = 30, unit = TimeUnit.SECONDS)
  void jedisSendsEveryOwedReleaseWithANodeFrozenAndOneLate() throws Exception {
    List<JedisPool> pools = new ArrayList<>();
    List<Supplier<Jedis>> clients = new ArrayList<>();
    for (int i = 0; i < 5; i++) {
      JedisPool pool = new JedisPool("127.0.0.1", BASE + i);
      pools.add(pool);
      clients.add(i == 1 ? () -> new LateJedis(BASE + 1) : pool::getResource);
    }
    try {
      cycle(JedisDriver.ofClients(clients), "jedis", Duration.ofSeconds(8));
    } finally {
      pools.forEach(JedisPool::close);
    }
  }

  @Test
  @Timeout(value = 30, unit = TimeUnit.SECONDS)
  void nioSendsEveryOwedReleaseWithANodeFrozen() throws Exception {
    List<String> urls = new ArrayList<>();
    for (int i = 0; i < 5; i++) {
      urls.add("redis://127.0.0.1:" + (BASE + i));
    }
    cycle(NioDriver.of(urls), "nio", Duration.ofSeconds(3));
  }

  private void cycle(Driver driver, String name, Duration length) throws Exception {
    String prefix = "java:frozen-release:" + name + ":" + System.nanoTime() + ":";
    ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
    AtomicInteger cycles = new AtomicInteger();
    nodes.pause(4);
    try (RedlockClient redlock =
        RedlockClient.builder(driver).ttl(Duration.ofSeconds(10)).build()) {
      long stopAt = System.nanoTime() + length.toNanos();
      List<Thread> threads = new ArrayList<>();
      for (int t = 0; t < THREADS; t++) {
        String resource = prefix + t;
        Thread thread = new Thread(() -> {
          List<Jedis> live = new ArrayList<>();
          try {
            for (int i = 0; i < 4; i++) {
              live.add(new Jedis("127.0.0.1", BASE + i));
            }
            for (int c = 0; failures.isEmpty() && System.nanoTime() < stopAt; c++) {
              String token = null;
              try (RedLock lock = redlock.acquire(resource)) {
                token = lock.token();
              } catch (NodesFailingException e) {
                // Node 1 late and node 4 frozen: the attempts can fail; their cleanup (a
                // release on every node) is checked below all the same.
              }
              cycles.incrementAndGet();
              checkNoKeyLeft(live, resource, c, token);
            }
          } catch (Throwable e) {
            failures.add(e);
          } finally {
            live.forEach(Jedis::close);
          }
        }, "cycler-" + t);
        threads.add(thread);
        thread.start();
      }
      for (Thread thread : threads) {
        thread.join();
      }
      // Before closing: close() lets what the frozen node is still owed finish first.
      nodes.resume(4);
    } finally {
      resumeQuietly();
    }
    if (!failures.isEmpty()) {
      throw new AssertionError(failures.size() + " of " + THREADS + " threads saw a key left"
          + " behind (" + cycles.get() + " cycles); first: " + failures.peek().getMessage(),
          failures.peek());
    }
    assertTrue(cycles.get() >= THREADS, "cycles run: " + cycles.get());
  }

  /**
   * After a cycle's release (or a failed attempt's cleanup), no live node keeps a key of
   * the resource: each has it gone within 3 s (bounded polling; a release never sent
   * leaves the key its whole 10 s TTL).
   */
  private static void checkNoKeyLeft(List<Jedis> live, String resource, int cycle,
      String token) throws InterruptedException {
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(3);
    while (true) {
      List<String> holding = new ArrayList<>();
      for (int i = 0; i < live.size(); i++) {
        String value = live.get(i).get(resource);
        if (value != null) {
          holding.add("node " + i + " holds " + value + " (PTTL " + live.get(i).pttl(resource)
              + " ms)");
        }
      }
      if (holding.isEmpty()) {
        return;
      }
      if (System.nanoTime() > end) {
        throw new AssertionError("cycle " + cycle + " of " + resource + " (token " + token
            + "), 3 s after its release: " + holding);
      }
      Thread.sleep(1);
    }
  }
}
