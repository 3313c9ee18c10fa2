package io.github.redlockcore.core;

import java.time.Duration;

/**
 * Durations to the whole units the core takes, without the overflow of {@link
 * Duration#toMillis()} and {@link Duration#toNanos()} (a {@code java.lang.ArithmeticException}
 * past about 292 years of nanoseconds): a duration beyond what a {@code long} holds becomes
 * {@link Long#MAX_VALUE}, which the core then refuses with its own rule ({@code
 * ttl_too_large} for a TTL), so the caller gets {@code RedlockArgumentException}.
 */
final class Durations {
  private Durations() {}

  /** Whole milliseconds of a duration that is not negative, at most {@link Long#MAX_VALUE}. */
  static long millis(Duration d) {
    try {
      return d.toMillis();
    } catch (ArithmeticException e) {
      return Long.MAX_VALUE;
    }
  }

  /** True when {@code d} is a whole number of milliseconds (any size). */
  static boolean wholeMillis(Duration d) {
    return d.getNano() % 1_000_000 == 0;
  }
}
