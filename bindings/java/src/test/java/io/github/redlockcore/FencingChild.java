package io.github.redlockcore;

import io.github.redlockcore.jedis.JedisFencedWrites;
import io.github.redlockcore.nio.NioDriver;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import redis.clients.jedis.Jedis;

/**
 * A lock holder in its own JVM, for {@link FencingTest}: acquires {@code resource} with
 * fencing on the nodes, prints {@code TOKEN <n>}, waits for a line on stdin (it is frozen
 * with SIGSTOP meanwhile), then writes {@code item} through the fencing check on the
 * resource's server and prints {@code ACCEPTED} or {@code STALE <seen>}.
 *
 * <p>Arguments: node URLs (comma-separated), resource, resource server port, item.
 */
public final class FencingChild {
  private FencingChild() {}

  public static void main(String[] args) throws Exception {
    String[] urls = args[0].split(",");
    try (RedlockClient redlock = RedlockClient.builder(NioDriver.of(Arrays.asList(urls)))
            .ttl(Duration.ofSeconds(1)).fencing(true).build()) {
      RedLock lock = redlock.acquire(args[1]);
      long token = lock.fencingToken().orElseThrow();
      System.out.println("TOKEN " + token);
      System.out.flush();
      BufferedReader in =
          new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
      in.readLine();
      try (Jedis resource = new Jedis("127.0.0.1", Integer.parseInt(args[2]))) {
        FencedWriteResult result = JedisFencedWrites.set(resource, args[3],
            "written by the paused holder".getBytes(StandardCharsets.UTF_8), token);
        System.out.println(result.isAccepted() ? "ACCEPTED" : "STALE " + result.seen());
      }
      System.out.flush();
      // The lock expired long ago: releasing finds nothing of ours (not an error here).
      lock.close();
    }
  }
}
