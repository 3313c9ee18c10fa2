package io.github.redlockcore;

import io.github.redlockcore.core.NodeResult;
import java.util.List;

/**
 * The lock is not held: an extension found its keys gone with nobody else holding them
 * (released, or expired), or the lock was released here already. Not "held elsewhere".
 */
public final class LockNotHeldException extends LockException {
  private static final long serialVersionUID = 1L;

  public LockNotHeldException(String resource, List<NodeResult> nodes) {
    super("not_held", resource, "the lock is not held", nodes);
  }
}
