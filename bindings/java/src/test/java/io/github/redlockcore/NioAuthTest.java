package io.github.redlockcore;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.redlockcore.core.NodeResult;
import io.github.redlockcore.nio.NioDriver;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The nio driver authenticates with the URL's password (nodes on ports 7430-7432). */
class NioAuthTest {
  static List<String> urls(TestNodes nodes, String password) {
    List<String> out = new ArrayList<>();
    for (int i = 0; i < nodes.count; i++) {
      out.add("redis://:" + password + "@127.0.0.1:" + nodes.port(i));
    }
    return out;
  }

  @Test
  void thePasswordOpensTheNodesAndAWrongOneIsAnAuthFailure() {
    try (TestNodes nodes = new TestNodes(7430, 3, "--requirepass", "s3cret")) {
      try (RedlockClient redlock = RedlockClient.builder(NioDriver.of(urls(nodes, "s3cret"))).build();
          RedLock lock = redlock.acquire("java:auth")) {
        assertTrue(lock.isValid());
      }
      try (RedlockClient wrong = RedlockClient.builder(NioDriver.of(urls(nodes, "wrong")))
          .attempts(1).build()) {
        NodesFailingException e = assertThrows(NodesFailingException.class,
            () -> wrong.acquire("java:auth"));
        for (NodeResult r : e.nodes()) {
          if (r.kind() == NodeResult.Kind.ERROR) {
            assertTrue(r.error().startsWith("connection failed: auth: "), r.error());
            assertEquals("auth", r.cause(), r.error());
          }
        }
        // The core decides as soon as 2 of 3 failed; the third may still be pending.
        assertTrue(e.nodes().stream().filter(r -> r.kind() == NodeResult.Kind.ERROR).count() >= 2,
            e.nodes().toString());
      }
    }
  }
}
