package io.github.redlockcore;

/**
 * A call made at the wrong time: on a closed object ({@code used_after_close}), a reply for
 * a request an operation never issued ({@code unknown_request}) or already answered
 * ({@code duplicate_reply}).
 */
public class RedlockStateException extends IllegalStateException {
  private static final long serialVersionUID = 1L;
  private final String code;

  public RedlockStateException(String code, String message) {
    super(code + ": " + message);
    this.code = code;
  }

  /** The stable snake_case code. */
  public String code() {
    return code;
  }
}
