package io.github.redlockcore;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.redlockcore.core.Scripts;
import io.github.redlockcore.jedis.JedisFencedWrites;
import io.github.redlockcore.nio.NioDriver;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import redis.clients.jedis.Jedis;

/**
 * Fencing through the binding: tokens from the nodes, the resource-side check over Jedis,
 * and a holder frozen past its lease whose late write the check refuses. Lock nodes on
 * ports 7440-7444, the protected resource's server on 7445.
 */
class FencingTest {
  private static final int BASE = 7440;
  private static final int RESOURCE_PORT = BASE + 5;
  private static TestNodes nodes;

  @BeforeAll
  static void start() {
    nodes = new TestNodes(BASE, 6);
  }

  @AfterAll
  static void stop() {
    nodes.close();
  }

  private static List<String> lockNodes() {
    return nodes.urls().subList(0, 5);
  }

  private static String item(String name) {
    return "fencing-test:" + name + ":" + System.nanoTime();
  }

  private static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  @Test
  void theCheckAcceptsOnlyHigherTokens() {
    try (Jedis resource = new Jedis("127.0.0.1", RESOURCE_PORT)) {
      String item = item("order");
      FencedWriteResult first = JedisFencedWrites.set(resource, item, utf8("five"), 5);
      assertTrue(first.isAccepted(), first.toString());
      assertEquals("five", resource.get(item));

      FencedWriteResult stale = JedisFencedWrites.set(resource, item, utf8("three"), 3);
      assertFalse(stale.isAccepted());
      assertEquals(5, stale.seen());
      FencedWriteResult equal = JedisFencedWrites.set(resource, item, utf8("five again"), 5);
      assertFalse(equal.isAccepted(), "a token is accepted once: an equal one is stale");
      assertEquals(5, equal.seen());
      assertEquals("five", resource.get(item), "refused writes change nothing");

      assertTrue(JedisFencedWrites.set(resource, item, utf8("six"), 6).isAccepted());
      assertEquals("six", resource.get(item));
      assertEquals("6", resource.get("{" + item + "}:fence:accepted"));
    }
  }

  @Test
  void aFlushedScriptCacheFallsBackToEval() {
    try (Jedis resource = new Jedis("127.0.0.1", RESOURCE_PORT)) {
      String item = item("flushed");
      assertTrue(JedisFencedWrites.set(resource, item, utf8("one"), 1).isAccepted());
      resource.scriptFlush();
      assertFalse(resource.scriptExists(Scripts.FENCED_SET_SHA1), "the cache is empty");
      // EVALSHA answers NOSCRIPT; the helper sends EVAL once, as the core says.
      assertTrue(JedisFencedWrites.set(resource, item, utf8("two"), 2).isAccepted());
      assertEquals("two", resource.get(item));
      assertTrue(resource.scriptExists(Scripts.FENCED_SET_SHA1), "EVAL cached it again");
    }
  }

  @Test
  void badTokensAndItemsAreRefusedBeforeAnythingIsSent() {
    try (Jedis resource = new Jedis("127.0.0.1", RESOURCE_PORT)) {
      String item = item("bad");
      for (long token : new long[] {0, -1, 1L << 53, Long.MAX_VALUE}) {
        RedlockArgumentException e = assertThrows(RedlockArgumentException.class,
            () -> JedisFencedWrites.set(resource, item, utf8("x"), token));
        assertEquals("invalid_fencing_token", e.code(), "token " + token);
      }
      assertEquals("empty_resource", assertThrows(RedlockArgumentException.class,
          () -> JedisFencedWrites.set(resource, "", utf8("x"), 1)).code());
      assertThrows(RedlockArgumentException.class,
          () -> JedisFencedWrites.set(resource, item, null, 1));
      assertFalse(resource.exists(item), "nothing was written");
      // The largest token the scripts handle exactly is accepted.
      assertTrue(JedisFencedWrites.set(resource, item, utf8("max"), (1L << 53) - 1).isAccepted());
    }
  }

  @Test
  void aServerErrorIsAFencedWriteException() {
    try (Jedis resource = new Jedis("127.0.0.1", RESOURCE_PORT)) {
      String item = item("wrongtype");
      // The guard key of another type: the script's GET fails with WRONGTYPE.
      resource.lpush("{" + item + "}:fence:accepted", "x");
      FencedWriteException e = assertThrows(FencedWriteException.class,
          () -> JedisFencedWrites.set(resource, item, utf8("v"), 1));
      assertTrue(e.getMessage().contains("WRONGTYPE"), e.getMessage());
      assertFalse(resource.exists(item));
    }
  }

  @Test
  void fencedLocksCarryStrictlyIncreasingTokens() {
    String resource = item("tokens");
    try (RedlockClient fenced = RedlockClient.builder(NioDriver.of(lockNodes()))
            .fencing(true).build();
         RedlockClient plain = RedlockClient.builder(NioDriver.of(lockNodes())).build()) {
      assertTrue(fenced.config().fencing());
      long last = 0;
      for (int i = 0; i < 5; i++) {
        try (RedLock lock = fenced.acquire(resource)) {
          long token = lock.fencingToken().orElseThrow();
          assertTrue(token > last, token + " after " + last);
          last = token;
        }
      }
      try (RedLock lock = plain.acquire(item("plain"))) {
        assertTrue(lock.fencingToken().isEmpty(), "no fencing, no token");
      }
    }
  }

  /**
   * The scenario fencing exists for: a holder in another JVM is frozen (SIGSTOP) past its
   * lease; a second holder acquires and writes; the first resumes and writes late; the
   * resource refuses the late write.
   */
  @Test
  void aHolderPausedPastItsLeaseHasItsLateWriteRejected() throws Exception {
    String resource = item("paused");
    String item = item("paused-item");
    List<String> cmd = new ArrayList<>();
    cmd.add(Paths.get(System.getProperty("java.home"), "bin", "java").toString());
    cmd.add("-cp");
    cmd.add(System.getProperty("surefire.test.class.path", System.getProperty("java.class.path")));
    cmd.add(FencingChild.class.getName());
    cmd.add(String.join(",", lockNodes()));
    cmd.add(resource);
    cmd.add(Integer.toString(RESOURCE_PORT));
    cmd.add(item);
    Process child = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
    try (BufferedReader out = new BufferedReader(
            new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
         OutputStream in = child.getOutputStream()) {
      String line = out.readLine();
      assertTrue(line != null && line.startsWith("TOKEN "), "child said: " + line);
      long childToken = Long.parseLong(line.substring(6));

      signal("STOP", child.pid());
      try {
        // The child's lease (1 s) runs out while it is frozen.
        Thread.sleep(1500);
        try (RedlockClient redlock = RedlockClient.builder(NioDriver.of(lockNodes()))
                .fencing(true).build();
             RedLock lock = redlock.acquire(resource);
             Jedis server = new Jedis("127.0.0.1", RESOURCE_PORT)) {
          long token = lock.fencingToken().orElseThrow();
          assertTrue(token > childToken, token + " after the paused holder's " + childToken);
          assertTrue(JedisFencedWrites.set(server, item, utf8("written by the new holder"),
              token).isAccepted());

          signal("CONT", child.pid());
          in.write("write\n".getBytes(StandardCharsets.UTF_8));
          in.flush();
          String verdict = out.readLine();
          assertEquals("STALE " + token, verdict, "the late write must be refused");
          assertEquals("written by the new holder", server.get(item));
        }
      } finally {
        signal("CONT", child.pid());
      }
      assertTrue(child.waitFor(30, TimeUnit.SECONDS));
      assertEquals(0, child.exitValue());
    } finally {
      child.destroyForcibly();
    }
  }

  private static void signal(String name, long pid) throws Exception {
    Process kill = new ProcessBuilder("kill", "-" + name, Long.toString(pid)).start();
    assertTrue(kill.waitFor(10, TimeUnit.SECONDS));
    assertEquals(0, kill.exitValue());
  }
}
