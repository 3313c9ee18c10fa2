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
  private final long fencingToken;
  private List<String> keys;

  Lease(long handle) {
    super(handle, Native::leaseFree, "lease");
    Object[] info = Native.leaseInfo(handle);
    this.token = (String) info[0];
    long[] numbers = (long[]) info[1];
    this.validUntil = numbers[0];
    this.extensions = (int) numbers[1];
    this.ttlMillis = numbers[2];
    this.fencingToken = numbers.length > 3 ? numbers[3] : -1;
    this.keys = decodeKeys((byte[][]) info[2]);
  }

  /** A lease whose numbers came with its outcome (keys are read when first asked for). */
  Lease(long handle, String token, long validUntil, int extensions, long ttlMillis,
      long fencingToken) {
    super(handle, Native::leaseFree, "lease");
    this.fencingToken = fencingToken;
    this.token = token;
    this.validUntil = validUntil;
    this.extensions = extensions;
    this.ttlMillis = ttlMillis;
  }

  private static List<String> decodeKeys(byte[][] raw) {
    List<String> k = new ArrayList<>();
    for (byte[] key : raw) {
      k.add(new String(key, StandardCharsets.UTF_8));
    }
    return Collections.unmodifiableList(k);
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

  /**
   * The fencing token (configurations with fencing): strictly greater than that of every
   * earlier acquisition of the resource whose token was handed out; send it with every
   * write to the protected resource, which must check it ({@code FencedWrites}).
   */
  public java.util.OptionalLong fencingToken() {
    return fencingToken < 0 ? java.util.OptionalLong.empty()
        : java.util.OptionalLong.of(fencingToken);
  }

  public int extensions() {
    return extensions;
  }

  public long ttlMillis() {
    return ttlMillis;
  }

  /** The locked keys (key prefix included). */
  public synchronized List<String> keys() {
    if (keys == null) {
      keys = decodeKeys((byte[][]) Native.leaseInfo(handle())[2]);
    }
    return keys;
  }

  @Override
  public String toString() {
    return "Lease{keys=" + keys() + ", validUntil=" + validUntil + "us, extensions=" + extensions
        + "}";
  }
}
