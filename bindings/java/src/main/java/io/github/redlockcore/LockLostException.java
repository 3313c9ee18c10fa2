package io.github.redlockcore;

import io.github.redlockcore.core.NodeResult;
import java.util.List;

/**
 * The lock is lost: it expired without an extension, or the key is gone or taken on so
 * many nodes that no quorum holds it. Whatever it protected may now run elsewhere.
 */
public final class LockLostException extends LockException {
  private static final long serialVersionUID = 1L;
  private final String reason;

  public LockLostException(String resource, String reason, List<NodeResult> nodes) {
    super("lock_lost", resource, "the lock was lost (" + reason + ")", nodes);
    this.reason = reason;
  }

  /** taken, expired, extension_limit or not_held. */
  public String reason() {
    return reason;
  }
}
