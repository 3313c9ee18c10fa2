package io.github.redlockcore.core;

import io.github.redlockcore.internal.CoreLinks;
import io.github.redlockcore.internal.Native;
import io.github.redlockcore.internal.NativeHandle;
import java.time.Duration;
import java.util.List;

/**
 * The core's Redlock client: starts acquisitions, extensions and releases as {@link
 * Operation}s. Thread-safe (calls are serialised); operations are independent of it.
 */
public final class Client extends NativeHandle {
  private final Config config;

  /** A client whose tokens come from the operating system's CSPRNG. */
  public Client(Config config) {
    this(config, null);
  }

  /**
   * A client whose tokens come from a ChaCha20 stream seeded with {@code seed} (32 bytes),
   * for tests and simulations; null means the OS source.
   */
  public Client(Config config, byte[] seed) {
    super(create(config, seed), Native::clientFree, "client");
    this.config = config;
  }

  private static long create(Config config, byte[] seed) {
    synchronized (config) {
      return Native.clientNew(config.handle0(), seed);
    }
  }

  public Config config() {
    return config;
  }

  static byte[][] names(List<String> resources) {
    if (resources == null) {
      throw new io.github.redlockcore.RedlockArgumentException(
          "no_resources", "a lock needs at least one resource");
    }
    byte[][] out = new byte[resources.size()][];
    for (int i = 0; i < out.length; i++) {
      String r = resources.get(i);
      if (r == null) {
        throw new io.github.redlockcore.RedlockArgumentException(
            "empty_resource", "a resource name must not be null");
      }
      out[i] = Native.utf8(r);
    }
    return out;
  }

  /** Starts acquiring {@code resources} with the configured TTL. */
  public Operation acquire(List<String> resources, long now) {
    return acquire(resources, null, now);
  }

  /** Starts acquiring with a TTL for this lock only (null: the configured one). */
  public synchronized Operation acquire(List<String> resources, Duration ttl, long now) {
    return acquire(resources, ttl, null, now);
  }

  /**
   * Starts acquiring; with {@code wait} not null, the core keeps trying until that much
   * time has passed (never starting an attempt that cannot end by then) instead of the
   * configured number of attempts.
   */
  public synchronized Operation acquire(List<String> resources, Duration ttl, Duration wait,
      long now) {
    byte[][] names = names(resources);
    return new Operation(Native.clientAcquire(handle(), names,
        ttl == null ? -1 : ttlMillis(ttl), waitMicros(wait), null, now));
  }

  /**
   * Starts an acquisition inside the client loop's links under {@code tag} (as {@link
   * #acquire(List, Duration, Duration, long)}).
   */
  public synchronized void startAcquire(CoreLinks links, long tag, List<String> resources,
      Duration ttl, Duration wait, long now) {
    byte[][] names = names(resources);
    links.acquire(handle(), tag, names, ttl == null ? -1 : ttlMillis(ttl), waitMicros(wait),
        now);
  }

  /** Starts an extension inside the loop's links; with {@code keep}, for keep-alive. */
  public synchronized void startExtend(CoreLinks links, long tag, Lease lease, Duration ttl,
      boolean keep, long now) {
    synchronized (lease) {
      links.extend(handle(), lease.handle0(), ttl == null ? -1 : ttlMillis(ttl), tag, keep, now);
    }
  }

  /** Starts a release inside the loop's links. */
  public synchronized void startRelease(CoreLinks links, long tag, Lease lease, long now) {
    synchronized (lease) {
      links.release(handle(), lease.handle0(), tag, now);
    }
  }

  private static long waitMicros(Duration wait) {
    if (wait == null) {
      return -1;
    }
    if (wait.isNegative()) {
      throw new io.github.redlockcore.RedlockArgumentException(
          "invalid_argument", "the wait must not be negative");
    }
    return wait.compareTo(Duration.ofDays(365)) > 0
        ? Duration.ofDays(365).toNanos() / 1000 : wait.toNanos() / 1000;
  }

  /**
   * Starts acquiring with tokens and jitter drawn from {@code random}, with a wait limit
   * (tests, vectors).
   */
  public synchronized Operation acquireWithRandom(List<String> resources, byte[] random,
      Duration wait, long now) {
    byte[][] names = names(resources);
    if (random == null) {
      throw new io.github.redlockcore.RedlockArgumentException(
          "not_enough_random_bytes", "random bytes must not be null");
    }
    return new Operation(Native.clientAcquire(handle(), names, -1, waitMicros(wait), random,
        now));
  }

  /**
   * The channels the nodes announce releases of {@code resources} to this client's
   * acquisitions on (the core's {@code Redlock::notice_channels}: each key's notice
   * channel, for releases that name no waiter, then this client's waiter channel of each
   * key, for releases that name one of its waiters), for a waiting acquisition's
   * subscribers.
   */
  public synchronized List<byte[]> noticeChannels(List<String> resources) {
    return List.of(Native.noticeChannels(handle(), names(resources)));
  }

  /** Starts acquiring with tokens and jitter drawn from {@code random} (tests, vectors). */
  public synchronized Operation acquireWithRandom(List<String> resources, byte[] random, long now) {
    byte[][] names = names(resources);
    if (random == null) {
      throw new io.github.redlockcore.RedlockArgumentException(
          "not_enough_random_bytes", "random bytes must not be null");
    }
    return new Operation(Native.clientAcquire(handle(), names, -1, -1, random, now));
  }

  /** Starts extending {@code lease} by its own TTL (or {@code ttl}, when not null). */
  public synchronized Operation extend(Lease lease, Duration ttl, long now) {
    synchronized (lease) {
      return new Operation(
          Native.clientExtend(handle(), lease.handle0(), ttl == null ? -1 : ttlMillis(ttl), now));
    }
  }

  /** Starts releasing {@code lease} on every node. */
  public synchronized Operation release(Lease lease, long now) {
    synchronized (lease) {
      return new Operation(Native.clientRelease(handle(), lease.handle0(), now));
    }
  }

  /** Starts an inspection of {@code resources}: who holds the lock (tests, vectors). */
  public synchronized Operation inspect(List<String> resources, long now) {
    byte[][] names = names(resources);
    return new Operation(Native.clientInspect(handle(), names, now));
  }

  /**
   * Starts an inspection inside the loop's links; with {@code lease} not null, the outcome
   * also says whether it holds the lock ({@link Outcome#isHeldByLease()}).
   */
  public synchronized void startInspect(CoreLinks links, long tag, List<String> resources,
      Lease lease, long now) {
    byte[][] names = names(resources);
    if (lease == null) {
      links.inspect(handle(), tag, names, 0, now);
      return;
    }
    synchronized (lease) {
      links.inspect(handle(), tag, names, lease.handle0(), now);
    }
  }

  /** A lease rebuilt from its parts (a token kept elsewhere); validUntil 0 if unknown. */
  public synchronized Lease lease(List<String> resources, String token, long validUntil) {
    byte[][] names = names(resources);
    return new Lease(Native.clientLease(handle(), names, token, validUntil));
  }

  private static long ttlMillis(Duration ttl) {
    if (ttl.isNegative() || !Durations.wholeMillis(ttl)) {
      throw new io.github.redlockcore.RedlockArgumentException(
          "invalid_ttl", "a TTL must be a positive whole number of milliseconds");
    }
    // Beyond a long's milliseconds: Long.MAX_VALUE, which the core refuses (ttl_too_large).
    return Durations.millis(ttl);
  }
}
