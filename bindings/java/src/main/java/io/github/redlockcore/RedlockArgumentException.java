package io.github.redlockcore;

/**
 * An invalid argument or configuration, refused before anything was sent: {@link #code()}
 * is the core's stable code for the rule broken (for example {@code ttl_zero},
 * {@code drift_too_large}, {@code empty_resource}, {@code invalid_token}).
 */
public class RedlockArgumentException extends IllegalArgumentException {
  private static final long serialVersionUID = 1L;
  private final String code;

  public RedlockArgumentException(String code, String message) {
    super(code + ": " + message);
    this.code = code;
  }

  /** The stable snake_case code. */
  public String code() {
    return code;
  }
}
