package io.github.redlockcore;

import io.github.redlockcore.core.Outcome;

/**
 * Maps a failed outcome to its exception. The one place phase two replaces with the core's
 * {@code outcome.error_class()}: the classes are the core's, the mapping here follows
 * {@code FailureReason}: conflict is held elsewhere; nodes_failed, mixed and
 * validity_too_short are nodes failing (with a mixed split the holder is unknown).
 */
final class ErrorClasses {
  private ErrorClasses() {}

  static LockException notAcquired(String resource, Outcome outcome) {
    Outcome.Reason reason = outcome.reason().orElse(Outcome.Reason.NODES_FAILED);
    if (reason == Outcome.Reason.CONFLICT) {
      return new LockHeldElsewhereException(resource, outcome.attempts(), outcome.nodes());
    }
    return new NodesFailingException(resource, reason.code(), outcome.nodes());
  }

  static LockException notExtended(String resource, Outcome outcome) {
    if (outcome.isLost()) {
      return new LockLostException(resource,
          outcome.reason().orElse(null) == Outcome.Reason.CONFLICT ? "taken" : "expired",
          outcome.nodes());
    }
    return new NodesFailingException(
        resource, outcome.reason().map(Outcome.Reason::code).orElse("nodes_failed"),
        outcome.nodes());
  }
}
