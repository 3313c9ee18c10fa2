import io.github.redlockcore.RedLock;
import io.github.redlockcore.RedlockClient;
import io.github.redlockcore.jedis.JedisDriver;
import io.github.redlockcore.nio.NioDriver;
import io.github.redlockcore.spi.Driver;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.OptionalLong;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import redis.clients.jedis.JedisPool;

/**
 * A Java worker for `make demo`: THREADS threads contend for one lock, and under it each
 * reads the counter file, sleeps ~5 ms and writes it back incremented (a read-modify-write
 * that loses updates whenever two holders overlap).
 *
 *   java -cp <jar and Jedis> DemoWorker.java nio|jedis [THREADS]
 *
 * Reads REDLOCK_NODES, DEMO_RESOURCE, DEMO_COUNTER, DEMO_ROUNDS and DEMO_STATS (one JSON
 * line per acquisition: {"event":"acquired","attempts":N,"acquire_us":MICROSECONDS}, plus
 * "fencing_token":N with fencing). With DEMO_FENCE set, the client takes fencing tokens
 * and the counter checks them: the write happens only if the lock's token is above the
 * one recorded in DEMO_FENCE, which then records it (a stale token fails the worker).
 */
public final class DemoWorker {
  public static void main(String[] args) throws Exception {
    String mode = args.length > 0 ? args[0] : "nio";
    int threads = args.length > 1 ? Integer.parseInt(args[1]) : 1;
    List<String> urls = Arrays.asList(System.getenv("REDLOCK_NODES").split(","));
    String resource = System.getenv("DEMO_RESOURCE");
    Path counter = Path.of(System.getenv("DEMO_COUNTER"));
    int rounds = Integer.parseInt(System.getenv().getOrDefault("DEMO_ROUNDS", "20"));
    String statsFile = System.getenv("DEMO_STATS");
    Path stats = statsFile == null ? null : Path.of(statsFile);
    String fenceFile = System.getenv("DEMO_FENCE");
    Path fence = fenceFile == null || fenceFile.isEmpty() ? null : Path.of(fenceFile);

    List<JedisPool> pools = new ArrayList<>();
    Driver driver;
    if (mode.equals("jedis")) {
      for (String url : urls) {
        URI uri = URI.create(url);
        pools.add(new JedisPool(uri.getHost(), uri.getPort()));
      }
      driver = JedisDriver.ofPools(pools);
    } else {
      driver = NioDriver.of(urls);
    }
    try (RedlockClient redlock = RedlockClient.builder(driver)
        .ttl(Duration.ofSeconds(5))
        .attempts(100_000)
        .retryDelay(Duration.ofMillis(10))
        .retryJitter(Duration.ofMillis(8))
        .fencing(fence != null)
        .build()) {
      ExecutorService pool = Executors.newFixedThreadPool(threads);
      List<Future<?>> done = new ArrayList<>();
      for (int t = 0; t < threads; t++) {
        done.add(pool.submit(() -> {
          for (int r = 0; r < rounds; r++) {
            long started = System.nanoTime();
            try (RedLock lock = redlock.acquire(resource)) {
              long micros = (System.nanoTime() - started) / 1000;
              OptionalLong token = lock.fencingToken();
              if (fence != null) {
                checkFence(fence, token.orElseThrow(
                    () -> new IllegalStateException("fencing is on but the lock has no token")));
              }
              record(stats, lock.attempts(), micros, token);
              String text = Files.readString(counter).trim();
              int value = text.isEmpty() ? 0 : Integer.parseInt(text);
              Thread.sleep(5);
              if (!lock.isValid()) {
                throw new IllegalStateException("the lock expired during the critical section");
              }
              Files.writeString(counter, (value + 1) + "\n");
              if (fence != null) {
                Files.writeString(fence, token.getAsLong() + "\n");
              }
            }
          }
          return null;
        }));
      }
      try {
        for (Future<?> f : done) {
          f.get();
        }
      } finally {
        // A failed worker thread (a stale fencing token) must not keep the others alive.
        pool.shutdownNow();
      }
    } finally {
      pools.forEach(JedisPool::close);
    }
  }

  /**
   * The counter's fencing check: the write may happen only with a token above the last one
   * the counter accepted (recorded in {@code fence} by whoever wrote it last).
   */
  private static void checkFence(Path fence, long token) throws Exception {
    String text = Files.readString(fence).trim();
    long seen = text.isEmpty() ? 0 : Long.parseLong(text);
    if (token <= seen) {
      throw new IllegalStateException(
          "stale fencing token " + token + ": the counter has seen " + seen);
    }
  }

  private static synchronized void record(Path stats, int attempts, long micros,
      OptionalLong token) throws Exception {
    if (stats == null) {
      return;
    }
    String fencing = token.isPresent() ? ",\"fencing_token\":" + token.getAsLong() : "";
    String line = "{\"event\":\"acquired\",\"attempts\":" + attempts + ",\"acquire_us\":"
        + micros + fencing + "}\n";
    Files.write(stats, line.getBytes(StandardCharsets.UTF_8),
        StandardOpenOption.CREATE, StandardOpenOption.APPEND);
  }
}
