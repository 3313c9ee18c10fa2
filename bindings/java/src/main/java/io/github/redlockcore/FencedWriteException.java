package io.github.redlockcore;

/**
 * A fenced write whose outcome is not known: the resource's server answered an error or
 * something the check's script never answers, or gave no answer. The message is the
 * core's reading of the reply.
 */
public final class FencedWriteException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public FencedWriteException(String message) {
    super(message);
  }

  public FencedWriteException(String message, Throwable cause) {
    super(message, cause);
  }
}
