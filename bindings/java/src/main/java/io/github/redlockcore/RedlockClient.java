package io.github.redlockcore;

import io.github.redlockcore.core.Client;
import io.github.redlockcore.core.Config;
import io.github.redlockcore.core.Outcome;
import io.github.redlockcore.internal.Engine;
import io.github.redlockcore.spi.Driver;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/**
 * A Redlock client over N independent Redis nodes. Thread-safe; one per application and
 * set of nodes. Every decision (quorum, validity, retries, release, extension) comes from
 * the core; the client's loop thread moves bytes between it and the nodes.
 *
 * <pre>{@code
 * try (RedlockClient redlock = RedlockClient.builder(NioDriver.of(urls)).build();
 *      RedLock lock = redlock.acquire("orders:42", Duration.ofSeconds(10))) {
 *   // ... work while lock.isValid()
 * }
 * }</pre>
 */
public final class RedlockClient implements AutoCloseable {

  private final Config config;
  private final Client client;
  private final Engine engine;
  private final Driver driver;
  /** Guards {@link #closed}, {@link #acquiring} and {@link #held}. */
  private final Object state = new Object();
  /** {@link #close()} began: every call on the client or its locks is refused. */
  private boolean closed;
  /** Acquisitions under way (their callers have not registered their lock yet). */
  private int acquiring;
  /** The locks of this client not yet released: {@link #close()} releases them. */
  private final java.util.Set<RedLock> held = new java.util.LinkedHashSet<>();
  /** How long {@link #close()} waits for the releases of the locks still held. */
  private static final long CLOSE_RELEASE_BOUND_MS = 5_000;

  private RedlockClient(Driver driver, Config config, List<RedlockListener> listeners) {
    this.driver = driver;
    this.config = config;
    this.client = new Client(config);
    List<String> addresses = driver.addresses();
    if (!addresses.isEmpty()) {
      int[] twice = io.github.redlockcore.internal.Native.duplicateNode(
          addresses.toArray(new String[0]));
      if (twice != null) {
        throw new RedlockArgumentException("duplicate_node", "nodes " + twice[0] + " and "
            + twice[1] + " are the same server (" + addresses.get(twice[1])
            + "): each node must be an independent server");
      }
    }
    this.engine = new Engine(driver);
    if (!listeners.isEmpty()) {
      RedlockListener[] all = listeners.toArray(new RedlockListener[0]);
      engine.listener(event -> {
        // Each listener on its own: one that throws does not keep the event from the rest.
        for (RedlockListener listener : all) {
          engine.emitTo(listener::onEvent, event);
        }
      });
    }
  }

  /** A builder for a client over {@code driver}'s nodes. */
  public static Builder builder(Driver driver) {
    return new Builder(driver);
  }

  public Config config() {
    return config;
  }

  /** The driver's name ("nio", "jedis"). */
  public String driverName() {
    return driver.name();
  }

  /** Now on the client's monotonic clock, in microseconds (what validUntil is measured on). */
  public long now() {
    return engine.now();
  }

  Engine engine() {
    return engine;
  }

  Client core() {
    return client;
  }

  /** Acquires {@code resource} with the configured TTL; see {@link #acquire(List, Duration)}. */
  public RedLock acquire(String resource) {
    return acquire(List.of(resource), null);
  }

  /** Acquires {@code resource} for {@code ttl}; see {@link #acquire(List, Duration)}. */
  public RedLock acquire(String resource, Duration ttl) {
    return acquire(List.of(resource), ttl);
  }

  /**
   * Acquires every resource in {@code resources} as one lock, for {@code ttl} (null: the
   * configured TTL), with the configured attempts and retry delays. Once an attempt failed
   * and another may follow, it listens for the holder's release notice on every node (the
   * driver's subscriber connections), so it tries again as soon as the lock is released
   * instead of sleeping out the retry delay; a first attempt that wins, or a last one,
   * subscribes to nothing (the core's {@code Operation::listens}).
   *
   * @throws LockHeldElsewhereException when someone else holds it
   * @throws NodesFailingException when too many nodes fail
   * @throws RedlockArgumentException for an invalid resource or TTL
   */
  public RedLock acquire(List<String> resources, Duration ttl) {
    Objects.requireNonNull(resources, "resources");
    notInLoop();
    List<String> names = List.copyOf(resources);
    startAcquiring();
    try {
      // Its release notices' channels: the core says when it listens on them.
      Outcome outcome = await(engine.run(names,
          (links, tag, now) -> client.startAcquire(links, tag, names, ttl, null, now), null,
          client.noticeChannels(names)));
      String name = String.join(",", resources);
      if (outcome == null) {
        throw closedError();
      }
      if (outcome.kind() == Outcome.Kind.ACQUIRED) {
        return register(new RedLock(this, names, outcome));
      }
      throw ErrorClasses.of(name, outcome);
    } finally {
      doneAcquiring();
    }
  }

  static RedlockStateException closedError() {
    return new RedlockStateException("used_after_close", "the Redlock client was closed");
  }

  /** Refuses every call once {@link #close()} began ({@code used_after_close}). */
  void ensureOpen() {
    synchronized (state) {
      if (closed) {
        throw closedError();
      }
    }
  }

  private void startAcquiring() {
    synchronized (state) {
      if (closed) {
        throw closedError();
      }
      acquiring++;
    }
  }

  private void doneAcquiring() {
    synchronized (state) {
      acquiring--;
      state.notifyAll();
    }
  }

  /**
   * A lock of this client, held until released: {@link #close()} releases it. Registered
   * by the acquiring thread before it counts as done, so close() sees it.
   */
  private RedLock register(RedLock lock) {
    synchronized (state) {
      if (held.size() >= PRUNE_AT) {
        // Locks whose release failed and whose keys have expired since: nothing is left
        // for close() to release, so they are not kept for ever.
        long now = now();
        held.removeIf(l -> l.expiredEverywhere(now));
      }
      held.add(lock);
    }
    return lock;
  }

  /** How many locks the client keeps before it forgets those whose keys expired. */
  private static final int PRUNE_AT = 64;

  /** How many locks close() would release now (tests). */
  int heldCount() {
    synchronized (state) {
      return held.size();
    }
  }

  /** The lock was released: close() has nothing more to do for it. */
  void forget(RedLock lock) {
    synchronized (state) {
      held.remove(lock);
    }
  }

  /**
   * A lock rebuilt from its resources and token (another process's, kept elsewhere), to
   * extend or release it. Its validity is unknown until an extension succeeds.
   */
  public RedLock lock(List<String> resources, String token) {
    Objects.requireNonNull(resources, "resources");
    Objects.requireNonNull(token, "token");
    synchronized (state) {
      if (closed) {
        throw closedError();
      }
      // A lock of this client like any other: close() releases it if still held.
      RedLock lock =
          new RedLock(this, List.copyOf(resources), client.lease(resources, token, 0));
      held.add(lock);
      return lock;
    }
  }

  /** Whether anyone holds {@code resource}; see {@link #isLocked(List)}. */
  public boolean isLocked(String resource) {
    return isLocked(List.of(resource));
  }

  /**
   * Whether anyone holds the lock on {@code resources}: one token held by a quorum of nodes
   * on every key, as the core decides it from one read of every node ({@code
   * docs/inspection.md}). Keys left on fewer than a quorum (a failed attempt, a lost
   * holder) do not count. It changes no key; the answer describes the moment the nodes
   * answered, so use it for monitoring, never instead of acquiring.
   *
   * @throws NodesFailingException when too many nodes failed for the core to say
   */
  public boolean isLocked(List<String> resources) {
    return inspect(resources, null).isLocked();
  }

  /** The core's inspection of {@code resources}; with {@code lease}, whether it holds them. */
  Outcome inspect(List<String> resources, io.github.redlockcore.core.Lease lease) {
    Objects.requireNonNull(resources, "resources");
    notInLoop();
    ensureOpen();
    List<String> names = List.copyOf(resources);
    Outcome outcome = await(engine.run(names,
        (links, tag, now) -> client.startInspect(links, tag, names, lease, now), null, null));
    if (outcome == null) {
      throw new RedlockStateException("used_after_close", "the Redlock client was closed");
    }
    if (outcome.kind() != Outcome.Kind.INSPECTED) {
      throw ErrorClasses.of(String.join(",", names), outcome);
    }
    return outcome;
  }

  /**
   * Tries to acquire {@code resource} for {@code ttl}, retrying (with the core's delays)
   * until it is acquired or {@code wait} has passed (the core's wait limit: it never starts
   * an attempt that cannot end by then); empty if someone else still held it. From its
   * start (the core's {@code Operation::listens}) it listens for the holder's release
   * notice on every node (the driver's subscriber connections), so it tries again as soon
   * as the lock is released; a missed notice costs at most one retry delay.
   */
  public Optional<RedLock> tryAcquire(String resource, Duration ttl, Duration wait) {
    Objects.requireNonNull(resource, "resource");
    Objects.requireNonNull(wait, "wait");
    if (wait.isNegative()) {
      throw new RedlockArgumentException("invalid_argument", "the wait must not be negative");
    }
    notInLoop();
    List<String> resources = List.of(resource);
    startAcquiring();
    try {
      // Its release notices' channels (a subscriber connection per node): the core says
      // when it listens on them, and a notice makes it try again at once instead of
      // sleeping out its retry delay.
      Outcome outcome = await(engine.run(resources,
          (links, tag, now) -> client.startAcquire(links, tag, resources, ttl, wait, now), null,
          client.noticeChannels(resources)));
      if (outcome == null) {
        throw closedError();
      }
      if (outcome.kind() == Outcome.Kind.ACQUIRED) {
        return Optional.of(register(new RedLock(this, resources, outcome)));
      }
      if (outcome.reason().orElse(null) == Outcome.Reason.CONFLICT) {
        return Optional.empty();
      }
      throw ErrorClasses.of(resource, outcome);
    } finally {
      doneAcquiring();
    }
  }

  /**
   * A call that waits for the loop cannot be made on the loop thread (from a listener):
   * it would wait for itself.
   */
  void notInLoop() {
    if (engine.inLoop()) {
      throw new RedlockStateException("invalid_call",
          "this call waits for the client's loop: it cannot be made from a listener");
    }
  }

  static <T> T await(CompletableFuture<T> future) {
    try {
      return future.get();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      // Cancelling abandons the operation (the core releases what it may have set).
      if (future.cancel(true)) {
        throw new LockCancelledException("");
      }
      // It ended first: its result stands (a lock it acquired is handed out, not lost),
      // and the thread stays interrupted.
      try {
        return future.join();
      } catch (java.util.concurrent.CompletionException c) {
        throw unwrap(c.getCause());
      }
    } catch (java.util.concurrent.ExecutionException e) {
      throw unwrap(e.getCause());
    }
  }

  private static RuntimeException unwrap(Throwable cause) {
    if (cause instanceof RuntimeException) {
      return (RuntimeException) cause;
    }
    return new RedlockStateException("jni", String.valueOf(cause));
  }

  /**
   * Closes the client: from now on every call on it or on its locks throws {@link
   * RedlockStateException} {@code used_after_close}. Acquisitions under way are abandoned
   * (their callers get {@code used_after_close}; the core releases what they may have
   * set). Then every lock of this client still held (acquired or rebuilt with {@link
   * #lock}, not released) is released on every node, all at once, waiting at most 5 s for
   * their outcomes; a release the nodes cannot confirm leaves those keys to their TTL and
   * is not an error here. Last, commands still out finish up to their deadlines (so the
   * last releases reach slow nodes, for at most 30 s), and the connections, the driver and
   * the native objects are closed. Idempotent; not from a listener (the client's loop).
   */
  @Override
  public void close() {
    if (engine.inLoop()) {
      throw new RedlockStateException("invalid_call", "close the client from outside its loop");
    }
    synchronized (state) {
      if (closed) {
        return;
      }
      closed = true;
    }
    long end = System.nanoTime() + java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(
        CLOSE_RELEASE_BOUND_MS);
    try {
      engine.beginClose();
      List<RedLock> locks;
      synchronized (state) {
        // The abandoned acquisitions return at once; one that won just before registers
        // its lock first.
        while (acquiring > 0 && System.nanoTime() < end) {
          try {
            state.wait(Math.max(1, (end - System.nanoTime()) / 1_000_000));
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            break;
          }
        }
        locks = new java.util.ArrayList<>(held);
      }
      List<CompletableFuture<Outcome>> releases = new java.util.ArrayList<>();
      for (RedLock lock : locks) {
        releases.add(lock.releaseOnClose());
      }
      for (CompletableFuture<Outcome> release : releases) {
        try {
          release.get(Math.max(0, end - System.nanoTime()),
              java.util.concurrent.TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          break;
        } catch (java.util.concurrent.ExecutionException
            | java.util.concurrent.TimeoutException e) {
          // Not confirmed in time: those keys expire with their TTL.
        }
      }
    } finally {
      engine.close();
      client.close();
      config.close();
    }
  }

  /** Settings; defaults are the core's (TTL 10 s unless set). */
  public static final class Builder {
    private final Driver driver;
    private Config.Builder config;
    private final List<RedlockListener> listeners = new java.util.ArrayList<>();

    private Builder(Driver driver) {
      this.driver = Objects.requireNonNull(driver, "driver");
      this.config = Config.builder(driver.nodes(), Duration.ofSeconds(10));
    }

    public Builder ttl(Duration ttl) {
      config.ttl(ttl);
      return this;
    }

    public Builder nodeTimeout(Duration timeout) {
      config.nodeTimeout(timeout);
      return this;
    }

    public Builder attempts(int attempts) {
      config.attempts(attempts);
      return this;
    }

    public Builder retryDelay(Duration delay) {
      config.retryDelay(delay);
      return this;
    }

    public Builder retryJitter(Duration jitter) {
      config.retryJitter(jitter);
      return this;
    }

    public Builder driftFactor(double factor) {
      config.driftFactor(factor);
      return this;
    }

    public Builder driftFixed(Duration drift) {
      config.driftFixed(drift);
      return this;
    }

    public Builder minValidity(Duration floor) {
      config.minValidity(floor);
      return this;
    }

    public Builder keyPrefix(String prefix) {
      config.keyPrefix(prefix);
      return this;
    }

    /**
     * Fencing tokens ({@link RedLock#fencingToken()}): one extra round trip per acquisition
     * (see {@code docs/fencing.md}). Off by default.
     */
    public Builder fencing(boolean on) {
      config.fencing(on);
      return this;
    }

    public Builder maxExtensions(Integer max) {
      config.maxExtensions(max);
      return this;
    }

    /**
     * Adds a listener of every event of this client's operations and of its locks'
     * keep-alive (see {@link RedlockListener}); listeners hear them in the order added.
     * Without any, the loop does not read the core's events at all.
     */
    public Builder listener(RedlockListener listener) {
      listeners.add(Objects.requireNonNull(listener, "listener"));
      return this;
    }

    /** Checks the settings (the core's rules) and starts the client's loop. */
    public RedlockClient build() {
      Config checked = config.build();
      try {
        return new RedlockClient(driver, checked, List.copyOf(listeners));
      } catch (RuntimeException e) {
        checked.close();
        throw e;
      }
    }
  }
}
