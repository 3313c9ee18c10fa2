package io.github.redlockcore.internal;

import io.github.redlockcore.RedlockArgumentException;
import java.time.Duration;
import java.util.Objects;

/**
 * A built-in driver's connect timeout ({@link io.github.redlockcore.spi.Driver#connectTimeout()}):
 * the one the user set with the driver's {@code withConnectTimeout}, else the core's.
 */
public final class ConnectTimeout {
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
          "the connect timeout must be positive, got " + timeout);
    }
    value = timeout;
  }

  /** The timeout set, else the core's ({@code CONNECT_TIMEOUT_DEFAULT_MS}). */
  public Duration get() {
    Duration set = value;
    return set != null ? set : Duration.ofMillis(Native.connectTimeoutDefaultMs());
  }
}
