package io.github.redlockcore;

import io.github.redlockcore.core.Outcome;

/**
 * The core's error class of a failed outcome ({@code Outcome::error_class}) to its one
 * exception type. Nothing here decides a class: the core does.
 */
final class ErrorClasses {
  private ErrorClasses() {}

  static LockException of(String resource, Outcome outcome) {
    String reason = outcome.reason().map(Outcome.Reason::code).orElse(outcome.kind().code());
    switch (outcome.errorClass().orElse("nodes_failing")) {
      case "held_elsewhere":
        return new LockHeldElsewhereException(resource, outcome.attempts(), outcome.nodes());
      case "lock_lost":
        return new LockLostException(resource,
            outcome.reason().orElse(null) == Outcome.Reason.CONFLICT ? "taken" : "expired",
            outcome.nodes());
      case "not_held":
        return new LockNotHeldException(resource, outcome.nodes());
      default:
        return new NodesFailingException(resource, reason, outcome.nodes());
    }
  }
}
