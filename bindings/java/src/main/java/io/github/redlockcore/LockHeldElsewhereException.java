package io.github.redlockcore;

import io.github.redlockcore.core.NodeResult;
import java.util.List;

/** Someone else holds the lock: the nodes refused on the key's state. */
public final class LockHeldElsewhereException extends LockException {
  private static final long serialVersionUID = 1L;
  private final int attempts;

  public LockHeldElsewhereException(String resource, int attempts, List<NodeResult> nodes) {
    super("held_elsewhere", resource, "the lock is held by someone else after " + attempts
        + " attempt(s)", nodes);
    this.attempts = attempts;
  }

  public int attempts() {
    return attempts;
  }
}
