package io.github.redlockcore;

/**
 * The native library is missing or failed: {@code library_missing}, {@code panic} (a bug in
 * native code, caught at the boundary: the JVM is unaffected), {@code jni},
 * {@code random_source_failed}.
 */
public class RedlockNativeException extends RuntimeException {
  private static final long serialVersionUID = 1L;
  private final String code;

  public RedlockNativeException(String code, String message) {
    super(code + ": " + message);
    this.code = code;
  }

  /** The stable snake_case code. */
  public String code() {
    return code;
  }
}
