package io.github.redlockcore.bench;

import io.github.redlockcore.RedLock;
import io.github.redlockcore.RedlockClient;
import io.github.redlockcore.jedis.JedisDriver;
import io.github.redlockcore.nio.NioDriver;
import java.net.URI;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;
import org.redisson.Redisson;
import org.redisson.RedissonRedLock;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import redis.clients.jedis.JedisPool;

/**
 * Acquire + release latency (p50/p99 from JMH's sample mode) against five local nodes
 * ({@code -Dredlock.bench.nodes}, comma-separated URLs; {@code -Dredlock.bench.base-port}
 * for freezing one): this binding's nio and Jedis drivers next to Redisson's
 * {@code RedissonRedLock} over the same five nodes and an {@code RLock} on one node, each
 * at default settings. With {@code frozen=true} node 4 is stopped (SIGSTOP) after the
 * clients connected and resumed at the end.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 1, time = 2)
@Measurement(iterations = 1, time = 4)
@Fork(1)
public class LockBench {
  @Param({"nio", "jedis", "redisson-redlock", "redisson-rlock-one-node"})
  public String client;

  @Param({"false", "true"})
  public boolean frozen;

  private RedlockClient redlock;
  private final List<JedisPool> pools = new ArrayList<>();
  private final List<RedissonClient> redissons = new ArrayList<>();
  private RLock redissonLock;
  private long counter;

  static List<String> urls() {
    return Arrays.asList(System.getProperty("redlock.bench.nodes").split(","));
  }

  static void nodes(String command) throws Exception {
    Path script = Path.of(System.getProperty("redlock.repo"), "scripts", "redis-nodes.sh");
    Process p = new ProcessBuilder(script.toString(), command, "4", "--base-port",
        System.getProperty("redlock.bench.base-port")).inheritIO().start();
    if (p.waitFor() != 0) {
      throw new IllegalStateException("redis-nodes.sh " + command + " failed");
    }
  }

  // RedissonRedLock is deprecated upstream; it is what Redisson users run Redlock with.
  @SuppressWarnings("deprecation")
  @Setup(Level.Trial)
  public void setup() throws Exception {
    List<String> urls = urls();
    switch (client) {
      case "nio":
        redlock = RedlockClient.builder(NioDriver.of(urls)).build();
        break;
      case "jedis":
        for (String url : urls) {
          URI uri = URI.create(url);
          pools.add(new JedisPool(uri.getHost(), uri.getPort()));
        }
        redlock = RedlockClient.builder(JedisDriver.ofPools(pools)).build();
        break;
      case "redisson-redlock":
      case "redisson-rlock-one-node":
        List<RLock> locks = new ArrayList<>();
        for (String url : urls) {
          org.redisson.config.Config config = new org.redisson.config.Config();
          config.useSingleServer().setAddress(url);
          RedissonClient r = Redisson.create(config);
          redissons.add(r);
          locks.add(r.getLock("bench:redisson"));
        }
        redissonLock = client.equals("redisson-redlock")
            ? new RedissonRedLock(locks.toArray(new RLock[0]))
            : locks.get(0);
        break;
      default:
        throw new IllegalArgumentException(client);
    }
    // Connections are open before a node freezes, as in a running service.
    for (int i = 0; i < 20; i++) {
      acquireRelease();
    }
    if (frozen) {
      nodes("pause");
    }
  }

  @TearDown(Level.Trial)
  public void teardown() throws Exception {
    if (frozen) {
      nodes("resume");
    }
    if (redlock != null) {
      redlock.close();
    }
    pools.forEach(JedisPool::close);
    redissons.forEach(RedissonClient::shutdown);
  }

  @Benchmark
  public long acquireRelease() {
    if (redissonLock != null) {
      redissonLock.lock(10, TimeUnit.SECONDS);
      redissonLock.unlock();
      return ++counter;
    }
    try (RedLock lock = redlock.acquire("bench:" + client, Duration.ofSeconds(10))) {
      return lock.validUntil();
    }
  }
}
