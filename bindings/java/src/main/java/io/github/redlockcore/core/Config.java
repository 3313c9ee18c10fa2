package io.github.redlockcore.core;

import io.github.redlockcore.internal.Native;
import io.github.redlockcore.internal.NativeHandle;
import java.time.Duration;
import java.util.Optional;
import java.util.OptionalInt;

/**
 * A configuration checked by the core: the number of nodes, the TTL, drift, node timeout,
 * retries. Build one with {@link #builder(int, Duration)}; invalid settings throw {@link
 * io.github.redlockcore.RedlockArgumentException} with the core's code.
 */
public final class Config extends NativeHandle {
  private final long[] info;
  private final Builder settings;

  private Config(Builder b) {
    super(create(b), Native::configFree, "configuration");
    this.settings = b.copy();
    synchronized (this) {
      this.info = Native.configInfo(handle());
    }
  }

  private static long create(Builder b) {
    if (b.ttl.isNegative()) {
      throw new io.github.redlockcore.RedlockArgumentException(
          "ttl_zero", "the TTL must be positive");
    }
    if (!Durations.wholeMillis(b.ttl)) {
      throw new io.github.redlockcore.RedlockArgumentException(
          "ttl_not_whole_milliseconds", "the TTL must be a whole number of milliseconds");
    }
    return Native.configNew(
        b.nodes,
        Durations.millis(b.ttl),
        b.driftFactor,
        micros(b.driftFixed),
        b.nodeTimeout == null ? -1 : micros(b.nodeTimeout),
        micros(b.minValidity),
        b.attempts,
        micros(b.retryDelay),
        micros(b.retryJitter),
        b.keyPrefix == null ? null : Native.utf8(b.keyPrefix),
        b.tokenBytes,
        b.maxExtensions == null ? -1 : b.maxExtensions,
        b.fencing);
  }

  private static long micros(Duration d) {
    if (d.isNegative()) {
      throw new io.github.redlockcore.RedlockArgumentException(
          "invalid_argument", "durations must not be negative");
    }
    try {
      return Math.addExact(Math.multiplyExact(d.getSeconds(), 1_000_000L), d.getNano() / 1000);
    } catch (ArithmeticException e) {
      return Long.MAX_VALUE;
    }
  }

  /** A builder for {@code nodes} independent Redis nodes and a lock TTL (whole ms). */
  public static Builder builder(int nodes, Duration ttl) {
    return new Builder(nodes, ttl);
  }

  /** A builder holding these settings, to change some and build again. */
  public Builder toBuilder() {
    return settings.copy();
  }

  public int nodes() {
    return (int) info[0];
  }

  public int quorum() {
    return (int) info[1];
  }

  public Duration ttl() {
    return Duration.ofMillis(info[2]);
  }

  public Duration drift() {
    return Duration.ofNanos(info[3] * 1000);
  }

  public Duration nodeTimeout() {
    return Duration.ofNanos(info[4] * 1000);
  }

  public Duration minValidity() {
    return Duration.ofNanos(info[5] * 1000);
  }

  public int attempts() {
    return (int) info[6];
  }

  public Duration retryDelay() {
    return Duration.ofNanos(info[7] * 1000);
  }

  public Duration retryJitter() {
    return Duration.ofNanos(info[8] * 1000);
  }

  public int tokenBytes() {
    return (int) info[9];
  }

  /** Whether acquisitions issue fencing tokens ({@code docs/fencing.md}). */
  public boolean fencing() {
    return info.length > 12 && info[12] != 0;
  }

  public OptionalInt maxExtensions() {
    return info[10] < 0 ? OptionalInt.empty() : OptionalInt.of((int) info[10]);
  }

  /**
   * When a holder that keeps {@code lease} alive should start its next extension (the
   * core's {@code Config::next_extension}), or empty if it should not (expired, or the
   * extension bound reached).
   */
  public synchronized Optional<Long> nextExtension(Lease lease, long now) {
    long at;
    synchronized (lease) {
      at = Native.configNextExtension(handle(), lease.handle0(), now);
    }
    return at < 0 ? Optional.empty() : Optional.of(at);
  }

  long handle0() {
    return handle();
  }

  @Override
  public String toString() {
    return "Config{nodes=" + nodes() + ", quorum=" + quorum() + ", ttl=" + ttl()
        + ", nodeTimeout=" + nodeTimeout() + ", attempts=" + attempts() + "}";
  }

  /** Settings; defaults are the core's. */
  public static final class Builder {
    private final int nodes;
    private Duration ttl;
    private double driftFactor = 0.01;
    private Duration driftFixed = Duration.ofMillis(2);
    private Duration nodeTimeout;
    private Duration minValidity = Duration.ZERO;
    private int attempts = 3;
    private Duration retryDelay = Duration.ofMillis(200);
    private Duration retryJitter = Duration.ofMillis(100);
    private String keyPrefix;
    private int tokenBytes = 20;
    private Integer maxExtensions;
    private boolean fencing;

    private Builder(int nodes, Duration ttl) {
      this.nodes = nodes;
      this.ttl = java.util.Objects.requireNonNull(ttl, "ttl");
    }

    private Builder copy() {
      Builder b = new Builder(nodes, ttl);
      b.driftFactor = driftFactor;
      b.driftFixed = driftFixed;
      b.nodeTimeout = nodeTimeout;
      b.minValidity = minValidity;
      b.attempts = attempts;
      b.retryDelay = retryDelay;
      b.retryJitter = retryJitter;
      b.keyPrefix = keyPrefix;
      b.tokenBytes = tokenBytes;
      b.maxExtensions = maxExtensions;
      b.fencing = fencing;
      return b;
    }

    /**
     * Fencing tokens (off by default): each acquisition raises a per-resource counter on
     * the nodes and writes the quorum's largest back before the lock is handed out, with
     * a token that strictly increases per resource ({@code docs/fencing.md}). One extra
     * round trip per acquisition.
     */
    public Builder fencing(boolean on) {
      this.fencing = on;
      return this;
    }

    public Builder ttl(Duration ttl) {
      this.ttl = java.util.Objects.requireNonNull(ttl, "ttl");
      return this;
    }

    public Builder driftFactor(double factor) {
      this.driftFactor = factor;
      return this;
    }

    public Builder driftFixed(Duration drift) {
      this.driftFixed = java.util.Objects.requireNonNull(drift);
      return this;
    }

    /** Default: a tenth of the TTL, at most 50 ms. */
    public Builder nodeTimeout(Duration timeout) {
      this.nodeTimeout = java.util.Objects.requireNonNull(timeout);
      return this;
    }

    public Builder minValidity(Duration floor) {
      this.minValidity = java.util.Objects.requireNonNull(floor);
      return this;
    }

    public Builder attempts(int attempts) {
      this.attempts = attempts;
      return this;
    }

    public Builder retryDelay(Duration delay) {
      this.retryDelay = java.util.Objects.requireNonNull(delay);
      return this;
    }

    public Builder retryJitter(Duration jitter) {
      this.retryJitter = java.util.Objects.requireNonNull(jitter);
      return this;
    }

    public Builder keyPrefix(String prefix) {
      this.keyPrefix = prefix;
      return this;
    }

    public Builder tokenBytes(int bytes) {
      this.tokenBytes = bytes;
      return this;
    }

    /** The most automatic extensions of one lock; none by default (unbounded). */
    public Builder maxExtensions(Integer max) {
      this.maxExtensions = max;
      return this;
    }

    public Config build() {
      return new Config(this);
    }
  }
}
