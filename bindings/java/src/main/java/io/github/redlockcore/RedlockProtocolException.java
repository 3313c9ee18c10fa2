package io.github.redlockcore;

/**
 * A node sent bytes that are not RESP ({@link #code()} is the decoder's code, for example
 * {@code unknown_type}); the connection is out of step and is closed.
 */
public class RedlockProtocolException extends RuntimeException {
  private static final long serialVersionUID = 1L;
  private final String code;

  public RedlockProtocolException(String code, String message) {
    super(code + ": " + message);
    this.code = code;
  }

  /** The stable snake_case code. */
  public String code() {
    return code;
  }
}
