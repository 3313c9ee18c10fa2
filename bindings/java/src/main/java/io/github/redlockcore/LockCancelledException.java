package io.github.redlockcore;

import java.util.List;

/**
 * The acquisition was cancelled (an interrupted caller, a cancelled future): the core
 * abandoned it and its release went to every node, so it leaves no key behind.
 */
public final class LockCancelledException extends LockException {
  private static final long serialVersionUID = 1L;

  public LockCancelledException(String resource) {
    super("cancelled", resource, "the acquisition was cancelled", List.of());
  }
}
