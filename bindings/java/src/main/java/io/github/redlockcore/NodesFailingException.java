package io.github.redlockcore;

import io.github.redlockcore.core.NodeResult;
import java.util.List;

/**
 * Too many nodes failed (errors, timeouts, connections refused or stalled) for a quorum,
 * or the quorum came too late to leave any validity; see {@link #nodes()} for each node.
 */
public final class NodesFailingException extends LockException {
  private static final long serialVersionUID = 1L;
  private final String reason;

  public NodesFailingException(String resource, String reason, List<NodeResult> nodes) {
    super("nodes_failing", resource, "the nodes are failing (" + reason + ")", nodes);
    this.reason = reason;
  }

  /** The core's failure reason: nodes_failed, mixed, validity_too_short. */
  public String reason() {
    return reason;
  }
}
