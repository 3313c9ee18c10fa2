package io.github.redlockcore;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.redlockcore.core.Client;
import io.github.redlockcore.core.Config;
import io.github.redlockcore.core.FencedSet;
import io.github.redlockcore.core.Lease;
import io.github.redlockcore.core.Operation;
import io.github.redlockcore.core.Output;
import io.github.redlockcore.core.Reply;
import io.github.redlockcore.core.RespDecoder;
import io.github.redlockcore.internal.CoreLinks;
import io.github.redlockcore.internal.Native;
import io.github.redlockcore.internal.NativeLibrary;
import io.github.redlockcore.nio.NioDriver;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/** Invalid arguments, closed handles, misuse, panics and a missing library: clear exceptions. */
class ErrorPathsTest {
  static String code(Class<? extends RuntimeException> type, Executable call) {
    RuntimeException e = assertThrows(type, call);
    if (e instanceof RedlockArgumentException) {
      return ((RedlockArgumentException) e).code();
    }
    if (e instanceof RedlockStateException) {
      return ((RedlockStateException) e).code();
    }
    if (e instanceof RedlockNativeException) {
      return ((RedlockNativeException) e).code();
    }
    if (e instanceof RedlockProtocolException) {
      return ((RedlockProtocolException) e).code();
    }
    return e.getClass().getSimpleName();
  }

  static Config config() {
    return Config.builder(3, Duration.ofSeconds(10)).build();
  }

  /** The loop's native half refuses bad inputs with exceptions, never a crash. */
  @Test
  void theLoopsNativeHalfRefusesBadInputs() {
    byte[] ok = "+OK\r\n".getBytes(StandardCharsets.US_ASCII);
    try (CoreLinks links = new CoreLinks(3, true)) {
      assertEquals("unknown_node",
          assertThrows(RedlockArgumentException.class, () -> links.feed(3, ok, 0, 5, 10)).code());
      assertEquals("unknown_node",
          assertThrows(RedlockArgumentException.class, () -> links.feed(-1, ok, 0, 5, 10)).code());
      assertThrows(RedlockArgumentException.class, () -> links.feed(0, ok, 3, 5, 10));
      assertThrows(RedlockArgumentException.class, () -> links.feed(0, null, 0, 0, 10));
      assertEquals("invalid_time",
          assertThrows(RedlockArgumentException.class, () -> links.timeout(-5)).code());
      // A reply to no command, and bytes that are not RESP, are protocol errors.
      assertEquals("unexpected_reply",
          assertThrows(RedlockProtocolException.class, () -> links.feed(0, ok, 0, 5, 10)).code());
      byte[] junk = "?what\r\n".getBytes(StandardCharsets.US_ASCII);
      assertThrows(RedlockProtocolException.class, () -> links.feed(1, junk, 0, junk.length, 10));
      assertEquals("unknown_node", assertThrows(RedlockArgumentException.class,
          () -> links.reply(7, 1, 0, 0, null, 10)).code());
      assertEquals("unknown_node", assertThrows(RedlockArgumentException.class,
          () -> links.connected(3, 10)).code());
      assertThrows(RedlockArgumentException.class, () -> links.reply(0, 1, 99, 0, null, 10));
      assertThrows(RedlockArgumentException.class, () -> links.notice(-1, 0, new byte[0], 10));
      // Unknown operations: nothing to do, no error (they may have ended); a null message
      // counts as an empty one.
      links.notice(42, 0, "waiter".getBytes(StandardCharsets.US_ASCII), 10);
      links.notice(42, 0, null, 10);
      links.abandon(42, 10);
      links.decline(42, 10);
      links.claimed(42);
      assertEquals("invalid_argument",
          assertThrows(RedlockArgumentException.class, () -> links.claimed(-1)).code());
      assertEquals("invalid_argument",
          assertThrows(RedlockArgumentException.class, () -> links.decline(-1, 10)).code());
      assertEquals(0, links.running());
      assertEquals("no_outcome",
          assertThrows(RedlockStateException.class, () -> links.keepAliveOutcome(42, 0, 10))
              .code());
    }
    CoreLinks closed = new CoreLinks(1, false);
    closed.close();
    assertEquals("used_after_close",
        assertThrows(RedlockStateException.class, () -> closed.timeout(10)).code());
    assertThrows(RedlockArgumentException.class, () -> new CoreLinks(0, false));
  }

  /**
   * A link's connect timeout (the low-level setter and getter): the core's by default, set
   * per link, 0 taken as the core's least (1 ms); a negative one, an unknown node, null and
   * a closed handle are refused clearly and change nothing.
   */
  @Test
  void aLinksConnectTimeoutIsSetPerLinkAndBadArgumentsAreRefused() {
    Duration core = Duration.ofMillis(Native.connectTimeoutDefaultMs());
    try (CoreLinks links = new CoreLinks(2, true)) {
      assertEquals(core, links.connectTimeout(0));
      assertEquals(core, links.connectTimeout(1));
      links.connectTimeout(1, Duration.ofMillis(750));
      assertEquals(Duration.ofMillis(750), links.connectTimeout(1));
      assertEquals(core, links.connectTimeout(0));
      links.connectTimeout(0, Duration.ZERO);
      assertEquals(Duration.ofMillis(1), links.connectTimeout(0));
      links.connectTimeout(0, Duration.ofNanos(999_999));
      assertEquals(Duration.ofMillis(1), links.connectTimeout(0));
      // Whole milliseconds, rounded down.
      links.connectTimeout(0, Duration.ofNanos(2_500_000));
      assertEquals(Duration.ofMillis(2), links.connectTimeout(0));
      // Far beyond what a long holds in milliseconds: as long as the core keeps.
      links.connectTimeout(0, Duration.ofSeconds(Long.MAX_VALUE));
      assertTrue(links.connectTimeout(0).compareTo(Duration.ofDays(365L * 100_000)) > 0);

      assertEquals("invalid_argument", code(RedlockArgumentException.class,
          () -> links.connectTimeout(1, Duration.ofMillis(-1))));
      assertEquals("invalid_argument", code(RedlockArgumentException.class,
          () -> links.connectTimeout(1, Duration.ofNanos(-1))));
      assertEquals("invalid_argument", code(RedlockArgumentException.class,
          () -> links.connectTimeout(1, Duration.ofSeconds(Long.MIN_VALUE))));
      assertEquals("NullPointerException", code(NullPointerException.class,
          () -> links.connectTimeout(1, null)));
      assertEquals(Duration.ofMillis(750), links.connectTimeout(1));
      for (int node : new int[] {2, -1}) {
        assertEquals("unknown_node", code(RedlockArgumentException.class,
            () -> links.connectTimeout(node, Duration.ofSeconds(1))));
        assertEquals("unknown_node", code(RedlockArgumentException.class,
            () -> links.connectTimeout(node)));
      }
      // The JNI functions themselves, without the wrapper's checks.
      assertEquals("invalid_argument", code(RedlockArgumentException.class,
          () -> Native.loopSetConnectTimeout(links.raw(), 0, -5)));
      assertEquals("used_after_close", code(RedlockStateException.class,
          () -> Native.loopSetConnectTimeout(0, 0, 5)));
      assertEquals("used_after_close", code(RedlockStateException.class,
          () -> Native.loopConnectTimeoutMs(0, 0)));
    }
    try (CoreLinks every = new CoreLinks(3, false, Duration.ofMillis(1500))) {
      for (int node = 0; node < 3; node++) {
        assertEquals(Duration.ofMillis(1500), every.connectTimeout(node));
      }
    }
    assertEquals("invalid_argument", code(RedlockArgumentException.class,
        () -> new CoreLinks(2, false, Duration.ofMillis(-1))));
    assertEquals("NullPointerException", code(NullPointerException.class,
        () -> new CoreLinks(2, false, null)));
    CoreLinks closed = new CoreLinks(1, false);
    closed.close();
    assertEquals("used_after_close", code(RedlockStateException.class,
        () -> closed.connectTimeout(0)));
    assertEquals("used_after_close", code(RedlockStateException.class,
        () -> closed.connectTimeout(0, Duration.ofSeconds(1))));
  }

  @Test
  void fencedWritesRefuseBadInputs() {
    assertEquals("invalid_fencing_token", assertThrows(RedlockArgumentException.class,
        () -> new FencedSet("item", new byte[0], 0)).code());
    assertEquals("empty_resource", assertThrows(RedlockArgumentException.class,
        () -> new FencedSet("", new byte[0], 1)).code());
    assertThrows(RedlockArgumentException.class, () -> new FencedSet(null, new byte[0], 1));
    try (FencedSet write = new FencedSet("item", new byte[] {1}, 7)) {
      assertEquals("EVALSHA", new String(write.args(false)[0], StandardCharsets.US_ASCII));
      assertEquals("EVAL", new String(write.args(true)[0], StandardCharsets.US_ASCII));
      assertEquals(FencedSet.Result.RETRY_AS_EVAL,
          write.handleReply(Reply.error("NOSCRIPT No matching script.")));
      assertEquals(FencedSet.Result.FAILED, write.handleReply(Reply.integer(1)));
      assertTrue(write.failure().contains("not an array"), write.failure());
      assertEquals(FencedSet.Result.STALE,
          write.handleReply(Reply.array(List.of(Reply.integer(0), Reply.integer(9)))));
      assertEquals(9, write.seen());
      assertEquals(FencedSet.Result.ACCEPTED,
          write.handleReply(Reply.array(List.of(Reply.integer(1), Reply.integer(7)))));
    }
  }

  @Test
  void theSameNodeTwiceIsRefused() {
    // Host and port compared as the core's duplicate_node does: localhost is 127.0.0.1,
    // a password or the scheme do not make another server.
    RedlockArgumentException e = assertThrows(RedlockArgumentException.class,
        () -> RedlockClient.builder(NioDriver.of(List.of("redis://127.0.0.1:7499",
            "redis://127.0.0.1:7498", "redis://:pw@localhost:7499"))).build());
    assertEquals("duplicate_node", e.code());
    assertTrue(e.getMessage().contains("nodes 0 and 2"), e.getMessage());
    assertEquals(null, Native.duplicateNode(new String[] {"127.0.0.1:7499", "127.0.0.1:7498"}));
  }

  @Test
  void invalidConfigurationsNameTheRuleBroken() {
    assertEquals("ttl_zero", code(RedlockArgumentException.class,
        () -> Config.builder(3, Duration.ZERO).build()));
    assertEquals("no_nodes", code(RedlockArgumentException.class,
        () -> Config.builder(0, Duration.ofSeconds(1)).build()));
    assertEquals("drift_factor_invalid", code(RedlockArgumentException.class,
        () -> Config.builder(3, Duration.ofSeconds(1)).driftFactor(Double.NaN).build()));
    assertEquals("attempts_zero", code(RedlockArgumentException.class,
        () -> Config.builder(3, Duration.ofSeconds(1)).attempts(0).build()));
    assertEquals("node_timeout_too_large", code(RedlockArgumentException.class,
        () -> Config.builder(3, Duration.ofSeconds(1)).nodeTimeout(Duration.ofSeconds(2)).build()));
    assertEquals("invalid_argument", code(RedlockArgumentException.class,
        () -> Config.builder(3, Duration.ofSeconds(1)).retryDelay(Duration.ofMillis(-1)).build()));
    assertEquals("ttl_not_whole_milliseconds", code(RedlockArgumentException.class,
        () -> Config.builder(3, Duration.ofNanos(1_500_000)).build()));
    assertEquals("no_nodes", code(RedlockArgumentException.class, () -> NioDriver.of(List.of())));
    assertEquals("invalid_node", code(RedlockArgumentException.class,
        () -> NioDriver.of(List.of("http://127.0.0.1:1"))));
    assertEquals("ttl_zero", code(RedlockArgumentException.class,
        () -> RedlockClient.builder(NioDriver.of(List.of("127.0.0.1:1"))).ttl(Duration.ZERO).build()));
  }

  @Test
  void invalidResourcesTokensAndTtlsAreRefusedBeforeAnythingIsSent() {
    try (Config config = config(); Client client = new Client(config)) {
      assertEquals("empty_resource", code(RedlockArgumentException.class,
          () -> client.acquire(List.of(""), 1)));
      assertEquals("no_resources", code(RedlockArgumentException.class,
          () -> client.acquire(List.of(), 1)));
      assertEquals("duplicate_resource", code(RedlockArgumentException.class,
          () -> client.acquire(List.of("a", "a"), 1)));
      assertEquals("invalid_time", code(RedlockArgumentException.class,
          () -> client.acquire(List.of("a"), -5)));
      assertEquals("invalid_ttl", code(RedlockArgumentException.class,
          () -> client.acquire(List.of("a"), Duration.ofMillis(1), 1)));
      assertEquals("invalid_token", code(RedlockArgumentException.class,
          () -> client.lease(List.of("a"), "has space", 0)));
      assertEquals("not_enough_random_bytes", code(RedlockArgumentException.class,
          () -> client.acquireWithRandom(List.of("a"), new byte[3], 1)));
      List<String> many = new ArrayList<>();
      for (int i = 0; i < 65; i++) {
        many.add("r" + i);
      }
      assertEquals("too_many_resources", code(RedlockArgumentException.class,
          () -> client.acquire(many, 1)));
    }
  }

  @Test
  void misuseOfAnOperationIsAStateErrorAndChangesNothing() {
    try (Config config = config(); Client client = new Client(config, new byte[32]);
        Operation op = client.acquire(List.of("r"), 1000)) {
      Output first = op.poll();
      assertTrue(first instanceof Output.Send);
      assertEquals("unknown_request", code(RedlockStateException.class,
          () -> op.handleReply(99, Reply.ok(), 1100)));
      op.handleReply(1, Reply.ok(), 1100);
      assertEquals("duplicate_reply", code(RedlockStateException.class,
          () -> op.handleReply(1, Reply.ok(), 1200)));
      assertEquals("invalid_argument", code(RedlockArgumentException.class,
          () -> op.handleReply(2, Reply.array(List.of(Reply.timeout())), 1200)));
    }
  }

  @Test
  void aNoticeNeedsAKnownNodeAndAMessage() {
    try (Config config = config(); Client client = new Client(config, new byte[32]);
        Operation op = client.acquire(List.of("r"), null, Duration.ofSeconds(1), 1000)) {
      byte[] someone = "someone".getBytes(StandardCharsets.US_ASCII);
      assertEquals("unknown_node", code(RedlockArgumentException.class,
          () -> op.handleNoticeMessage(3, someone, 1100)));
      assertEquals("unknown_node", code(RedlockArgumentException.class,
          () -> op.handleNoticeMessage(-1, someone, 1100)));
      assertEquals("invalid_argument", code(RedlockArgumentException.class,
          () -> op.handleNoticeMessage(0, null, 1100)));
      // Accepted while the attempt is under way (remembered), empty message included.
      op.handleNoticeMessage(0, someone, 1100);
      op.handleNoticeMessage(1, new byte[0], 1100);
      assertTrue(op.poll() instanceof Output.Send);
    }
  }

  @Test
  void closedHandlesRefuseEveryCall() {
    Config config = config();
    Client client = new Client(config);
    Operation op = client.acquire(List.of("r"), 1);
    Lease lease = client.lease(List.of("r"), "tok", 0);
    op.close();
    op.close();
    assertEquals("used_after_close", code(RedlockStateException.class, op::poll));
    lease.close();
    assertEquals("used_after_close", code(RedlockStateException.class,
        () -> client.extend(lease, null, 1)));
    client.close();
    assertEquals("used_after_close", code(RedlockStateException.class,
        () -> client.acquire(List.of("r"), 1)));
    config.close();
    assertEquals("used_after_close", code(RedlockStateException.class, () -> new Client(config)));
    RespDecoder decoder = new RespDecoder();
    decoder.close();
    assertEquals("used_after_close", code(RedlockStateException.class,
        () -> decoder.feed(new byte[1], 0, 1)));
  }

  @Test
  void aClosedClientRefusesNewLocks() {
    RedlockClient redlock = RedlockClient.builder(NioDriver.of(List.of("127.0.0.1:1"))).build();
    redlock.close();
    assertEquals("used_after_close", code(RedlockStateException.class,
        () -> redlock.acquire("r")));
  }

  /** Five nodes nobody listens on (ports 7495-7499): every connection is refused at once. */
  static List<String> refusedNodes() {
    List<String> urls = new ArrayList<>();
    for (int i = 0; i < 5; i++) {
      urls.add("redis://127.0.0.1:" + (7495 + i));
    }
    return urls;
  }

  /** The exception {@code call} throws, of class {@code type}, with its message checked. */
  static <T extends RuntimeException> T thrown(Class<T> type, String code, String rule,
      Executable call) {
    T e = assertThrows(type, call);
    assertEquals(type, e.getClass(), "exactly " + type.getSimpleName());
    if (e instanceof RedlockArgumentException) {
      assertEquals(code, ((RedlockArgumentException) e).code(), e.getMessage());
    } else if (e instanceof RedlockStateException) {
      assertEquals(code, ((RedlockStateException) e).code(), e.getMessage());
    }
    assertTrue(e.getMessage().contains(rule), "the message names the rule (" + rule + "): "
        + e.getMessage());
    return e;
  }

  /** Audit 13: after close(), every use of the client or of its locks is used_after_close. */
  @Test
  void everyUseAfterCloseIsUsedAfterClose() {
    RedlockClient redlock = RedlockClient.builder(NioDriver.of(refusedNodes())).build();
    RedLock lock = redlock.lock(List.of("r"), "tok");
    redlock.close();
    String rule = "closed";
    // The misuse sequence of the audit, each one the same exception.
    for (int i = 0; i < 2; i++) {
      thrown(RedlockStateException.class, "used_after_close", rule, lock::extend);
      thrown(RedlockStateException.class, "used_after_close", rule, lock::release);
    }
    thrown(RedlockStateException.class, "used_after_close", rule,
        () -> lock.extend(Duration.ofSeconds(1)));
    thrown(RedlockStateException.class, "used_after_close", rule, lock::keepAlive);
    thrown(RedlockStateException.class, "used_after_close", rule, lock::isOwned);
    thrown(RedlockStateException.class, "used_after_close", rule, () -> redlock.acquire("r"));
    thrown(RedlockStateException.class, "used_after_close", rule,
        () -> redlock.tryAcquire("r", Duration.ofSeconds(1), Duration.ZERO));
    thrown(RedlockStateException.class, "used_after_close", rule, () -> redlock.isLocked("r"));
    thrown(RedlockStateException.class, "used_after_close", rule,
        () -> redlock.lock(List.of("r"), "tok"));
    // AutoCloseable: closing the lock after its client stays quiet, and so does a second
    // close of the client.
    lock.close();
    redlock.close();
  }

  /** Audit 13: a TTL past a long's nanoseconds is the argument error, never arithmetic. */
  @Test
  void extremeTtlsAreArgumentErrors() {
    for (Duration huge : List.of(Duration.ofMillis(Long.MAX_VALUE),
        Duration.ofSeconds(Long.MAX_VALUE), Duration.ofSeconds(Long.MAX_VALUE, 999_000_000),
        Duration.ofMillis(9_300_000_000_000L))) {
      thrown(RedlockArgumentException.class, "ttl_too_large", "TTL",
          () -> Config.builder(5, huge).build());
      thrown(RedlockArgumentException.class, "ttl_too_large", "TTL",
          () -> RedlockClient.builder(NioDriver.of(refusedNodes())).ttl(huge).build());
    }
    thrown(RedlockArgumentException.class, "ttl_zero", "TTL",
        () -> Config.builder(5, Duration.ZERO).build());
    thrown(RedlockArgumentException.class, "ttl_zero", "TTL",
        () -> Config.builder(5, Duration.ofMillis(-1)).build());
    thrown(RedlockArgumentException.class, "ttl_zero", "TTL",
        () -> Config.builder(5, Duration.ofSeconds(Long.MIN_VALUE)).build());
    try (RedlockClient redlock = RedlockClient.builder(NioDriver.of(refusedNodes())).build()) {
      RedLock lock = redlock.lock(List.of("r"), "tok");
      for (Duration huge : List.of(Duration.ofMillis(Long.MAX_VALUE),
          Duration.ofSeconds(Long.MAX_VALUE))) {
        RedlockArgumentException e = assertThrows(RedlockArgumentException.class,
            () -> redlock.acquire("r", huge));
        assertTrue(e.getMessage().toLowerCase(java.util.Locale.ROOT).contains("ttl"),
            e.getMessage());
        e = assertThrows(RedlockArgumentException.class, () -> lock.extend(huge));
        assertTrue(e.getMessage().toLowerCase(java.util.Locale.ROOT).contains("ttl"),
            e.getMessage());
        e = assertThrows(RedlockArgumentException.class,
            () -> redlock.tryAcquire("r", huge, Duration.ZERO));
        assertTrue(e.getMessage().toLowerCase(java.util.Locale.ROOT).contains("ttl"),
            e.getMessage());
      }
      for (Duration bad : List.of(Duration.ofMillis(-1), Duration.ofSeconds(Long.MIN_VALUE))) {
        thrown(RedlockArgumentException.class, "invalid_ttl", "positive",
            () -> redlock.acquire("r", bad));
        thrown(RedlockArgumentException.class, "invalid_ttl", "positive",
            () -> lock.extend(bad));
      }
      RedlockArgumentException zero = assertThrows(RedlockArgumentException.class,
          () -> redlock.acquire("r", Duration.ZERO));
      assertTrue(zero.getMessage().toLowerCase(java.util.Locale.ROOT).contains("ttl"),
          zero.getMessage());
    }
    // Timeouts past a long's milliseconds are as long as can be, not arithmetic errors.
    NioDriver.of(refusedNodes()).withConnectTimeout(Duration.ofSeconds(Long.MAX_VALUE));
    try (RedlockClient redlock = RedlockClient.builder(NioDriver.of(refusedNodes())
        .withConnectTimeout(Duration.ofSeconds(Long.MAX_VALUE))).build()) {
      assertTrue(redlock.driverName().equals("nio"));
    }
  }

  /** Audit 14: a port outside 1-65535 is the package's argument error naming the rule. */
  @Test
  void aPortOutsideTheRangeIsAnArgumentErrorNamingTheRule() {
    for (String url : List.of("redis://127.0.0.1:99999", "127.0.0.1:99999",
        "redis://127.0.0.1:0", "127.0.0.1:65536")) {
      thrown(RedlockArgumentException.class, "invalid_node", "port must be 1-65535",
          () -> NioDriver.of(List.of(url)));
    }
    thrown(RedlockArgumentException.class, "invalid_node", "port must be 1-65535",
        () -> NioDriver.sentinel(List.of("127.0.0.1:99999"), "mymaster"));
    thrown(RedlockArgumentException.class, "invalid_node", "port must be 1-65535",
        () -> io.github.redlockcore.jedis.JedisDriver.sentinel(List.of("127.0.0.1:99999"),
            "mymaster"));
  }

  /** Audit 14: names and addresses go into messages shortened to 64 bytes and "…". */
  @Test
  void hugeNamesAreShortenedInMessages() {
    String huge = "x".repeat(1 << 20);
    RedlockArgumentException e = thrown(RedlockArgumentException.class, "invalid_node",
        "only redis:// URLs", () -> NioDriver.of(List.of("http://" + huge)));
    assertTrue(e.getMessage().length() < 300, "message of " + e.getMessage().length());
    assertTrue(e.getMessage().endsWith("…"), e.getMessage());
    e = thrown(RedlockArgumentException.class, "invalid_node", "port must be 1-65535",
        () -> NioDriver.of(List.of("redis://" + "h".repeat(1 << 20) + ":99999")));
    assertTrue(e.getMessage().length() < 300, "message of " + e.getMessage().length());
    try (RedlockClient redlock = RedlockClient.builder(NioDriver.of(refusedNodes()))
        .attempts(1).build()) {
      String name = "é" + huge;
      NodesFailingException failing =
          assertThrows(NodesFailingException.class, () -> redlock.acquire(name));
      String message = failing.getMessage();
      assertTrue(message.length() < 2_000, "message of " + message.length() + " chars");
      assertTrue(message.contains("(resource é" + "x".repeat(62) + "…,"), message);
      assertEquals(name, failing.resource(), "the exception keeps the whole name");
    }
  }

  @Test
  void badRespIsAProtocolErrorThatSticks() {
    try (RespDecoder d = new RespDecoder()) {
      byte[] bad = "?what\r\n".getBytes(StandardCharsets.US_ASCII);
      d.feed(bad, 0, bad.length);
      assertEquals("unknown_type", code(RedlockProtocolException.class, d::next));
      assertEquals("unknown_type", code(RedlockProtocolException.class, d::next));
      assertEquals("invalid_argument", code(RedlockArgumentException.class,
          () -> d.feed(bad, 5, 10)));
    }
  }

  @Test
  void aPanicBecomesAnExceptionAndTheJvmCarriesOn() {
    RedlockNativeException e = assertThrows(RedlockNativeException.class, Native::panicForTest);
    assertEquals("panic", e.code());
    assertTrue(e.getMessage().contains("deliberate panic"), e.getMessage());
    try (Config config = config()) {
      assertEquals(2, config.quorum());
    }
  }

  // ---- in a child JVM: loading ---------------------------------------------------------

  static String probe(String... extra) throws Exception {
    Path testClasses = Paths.get(NativeProbe.class.getProtectionDomain().getCodeSource().getLocation().toURI());
    Path mainClasses = Paths.get(Native.class.getProtectionDomain().getCodeSource().getLocation().toURI());
    List<String> cmd = new ArrayList<>();
    cmd.add(Paths.get(System.getProperty("java.home"), "bin", "java").toString());
    String classPath = null;
    List<String> args = new ArrayList<>();
    for (String e : extra) {
      if (e.startsWith("-cp=")) {
        classPath = e.substring(4);
      } else if (e.startsWith("-D")) {
        cmd.add(e);
      } else {
        args.add(e);
      }
    }
    cmd.add("-cp");
    cmd.add((classPath != null ? classPath : mainClasses.toString()) + java.io.File.pathSeparator + testClasses);
    cmd.add(NativeProbe.class.getName());
    cmd.addAll(args);
    Process p = new ProcessBuilder(cmd).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    String err = new String(p.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(p.waitFor(60, TimeUnit.SECONDS));
    assertEquals(0, p.exitValue(), out + err);
    return out + (err.isEmpty() ? "" : "STDERR:" + err);
  }

  @Test
  void theLibraryLoadsFromTheJarResourcePath() throws Exception {
    assertEquals("redlock/native/linux/amd64/libredlock_jni.so", NativeLibrary.resourcePath());
    assertEquals("loaded quorum=2\n", probe());
  }

  @Test
  void aMissingLibraryGivenByThePropertyIsAClearError() throws Exception {
    String out = probe("-D" + NativeLibrary.PATH_PROPERTY + "=/nonexistent/libredlock_jni.so");
    assertTrue(out.startsWith("failed library_missing"), out);
    assertTrue(out.contains("/nonexistent/libredlock_jni.so"), out);
  }

  @Test
  void theSystemPropertyLoadsTheLibraryFromElsewhere() throws Exception {
    Path mainClasses = Paths.get(Native.class.getProtectionDomain().getCodeSource().getLocation().toURI());
    Path lib = mainClasses.resolve(NativeLibrary.resourcePath());
    Path copy = Files.createTempFile("redlock-probe-", ".so");
    try {
      Files.copy(lib, copy, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
      assertEquals("loaded quorum=2\n", probe("-D" + NativeLibrary.PATH_PROPERTY + "=" + copy));
    } finally {
      Files.deleteIfExists(copy);
    }
  }

  @Test
  void aJarWithoutTheLibraryIsAClearError() throws Exception {
    Path mainClasses = Paths.get(Native.class.getProtectionDomain().getCodeSource().getLocation().toURI());
    Path classesOnly = Files.createTempDirectory("redlock-classes-");
    try {
      copyTree(mainClasses.resolve("io"), classesOnly.resolve("io"));
      String out = probe("-cp=" + classesOnly);
      assertTrue(out.startsWith("failed library_missing"), out);
      assertTrue(out.contains("build.sh"), out);
    } finally {
      deleteTree(classesOnly);
    }
  }

  @Test
  void aPanicPrintsNothingOnStderr() throws Exception {
    String out = probe("panic");
    assertEquals("caught panic\nloaded quorum=2\n", out);
    assertFalse(out.contains("STDERR"), out);
  }

  static void copyTree(Path from, Path to) throws IOException {
    try (Stream<Path> s = Files.walk(from)) {
      for (Path p : (Iterable<Path>) s::iterator) {
        Path target = to.resolve(from.relativize(p).toString());
        if (Files.isDirectory(p)) {
          Files.createDirectories(target);
        } else {
          Files.copy(p, target);
        }
      }
    }
  }

  static void deleteTree(Path root) throws IOException {
    try (Stream<Path> s = Files.walk(root)) {
      s.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    }
    assertNull(null);
  }
}
