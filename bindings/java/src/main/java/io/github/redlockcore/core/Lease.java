package io.github.redlockcore.core;

import io.github.redlockcore.internal.Native;
import io.github.redlockcore.internal.NativeHandle;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/** A held lock as the core knows it: keys, token, {@code validUntil}, extensions, TTL. */
public final class Lease extends NativeHandle {
  private final String token;
  private final long validUntil;
  private final int extensions;
  private final long ttlMillis;
  private final List<String> keys;

  Lease(long handle) {
    super(handle, Native::leaseFree, "lease");
    Object[] info = Native.leaseInfo(handle);
    this.token = (String) info[0];
    long[] numbers = (long[]) info[1];
    this.validUntil = numbers[0];
    this.extensions = (int) numbers[1];
    this.ttlMillis = numbers[2];
    List<String> k = new ArrayList<>();
    for (byte[] key : (byte[][]) info[2]) {
      k.add(new String(key, StandardCharsets.UTF_8));
    }
    this.keys = Collections.unmodifiableList(k);
  }

  long handle0() {
    return handle();
  }

  /** The token stored under every key. */
  public String token() {
    return token;
  }

  /** Until when (monotonic microseconds) the lock is held; never rely on it at or after. */
  public long validUntil() {
    return validUntil;
  }

  /** Validity left at {@code now}, in microseconds (0 once expired). */
  public long validityMicros(long now) {
    return Math.max(0, validUntil - now);
  }

  public boolean isValid(long now) {
    return now < validUntil;
  }

  public int extensions() {
    return extensions;
  }

  public long ttlMillis() {
    return ttlMillis;
  }

  /** The locked keys (key prefix included). */
  public List<String> keys() {
    return keys;
  }

  @Override
  public String toString() {
    return "Lease{keys=" + keys + ", validUntil=" + validUntil + "us, extensions=" + extensions
        + "}";
  }
}
