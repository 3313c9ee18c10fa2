package io.github.redlockcore.internal;

import io.github.redlockcore.RedlockArgumentException;
import java.time.Duration;
import java.util.Objects;

/**
 * A built-in driver's bound on one Redis Sentinel's lookup (connecting, {@code AUTH},
 * answering {@code SENTINEL get-master-addr-by-name}): the one the user set with the
 * driver's {@code withSentinelQueryTimeout}, else the core's ({@code
 * SENTINEL_QUERY_TIMEOUT_DEFAULT_MS}, 500 ms); and the connect timeout of a node reached
 * through Sentinels, composed by the core from it.
 */
public final class SentinelQueryTimeout {
  /** Null: the core's. */
  private volatile Duration value;

  /**
   * Sets it.
   *
   * @throws RedlockArgumentException {@code invalid_argument} for a timeout that is not
   *     positive
   */
  public void set(Duration timeout) {
    Objects.requireNonNull(timeout, "timeout");
    if (timeout.isNegative() || timeout.isZero()) {
      throw new RedlockArgumentException("invalid_argument",
          "the Sentinel query timeout must be positive, got " + timeout);
    }
    value = timeout;
  }

  /** The timeout set, else the core's, in whole milliseconds (rounded up, at least 1). */
  public long millis() {
    Duration set = value;
    return set != null ? ceilMillis(set) : Native.sentinelQueryTimeoutDefaultMs();
  }

  /**
   * The connect timeout of a node reached through {@code sentinels} Sentinels that each get
   * {@link #millis()}, whose master's connection gets {@code connect}: the core's
   * composition ({@code sentinel_connect_timeout_ms}), the same in every binding.
   */
  public Duration connectTimeout(int sentinels, Duration connect) {
    return Duration.ofMillis(
        Native.sentinelConnectTimeoutMs(sentinels, millis(), ceilMillis(connect)));
  }

  /** Whole milliseconds, rounded up, at least 1; as many as a long holds at most. */
  static long ceilMillis(Duration d) {
    try {
      long ms = d.toMillis();
      if (d.minusMillis(ms).isZero()) {
        return Math.max(ms, 1);
      }
      return ms == Long.MAX_VALUE ? ms : Math.max(ms + 1, 1);
    } catch (ArithmeticException e) {
      return Long.MAX_VALUE;
    }
  }
}
