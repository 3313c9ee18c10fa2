package io.github.redlockcore;

import io.github.redlockcore.core.NodeResult;
import java.util.List;

/**
 * The lock could not be had or kept. The subclasses say why, in the core's error classes:
 * {@link LockHeldElsewhereException} ({@code held_elsewhere}), {@link NodesFailingException}
 * ({@code nodes_failing}), {@link LockLostException} ({@code lock_lost}). {@link #nodes()}
 * says how each node answered.
 */
public abstract class LockException extends RuntimeException {
  private static final long serialVersionUID = 1L;
  private final String code;
  private final String resource;
  private final transient List<NodeResult> nodes;

  LockException(String code, String resource, String message, List<NodeResult> nodes) {
    super(message + " (resource " + io.github.redlockcore.internal.Messages.shorten(resource)
        + ", nodes " + nodes + ")");
    this.code = code;
    this.resource = resource;
    this.nodes = List.copyOf(nodes);
  }

  /** The stable snake_case code of the error class. */
  public String code() {
    return code;
  }

  public String resource() {
    return resource;
  }

  /** Per node, in the order the nodes were given: how the deciding round went. */
  public List<NodeResult> nodes() {
    return nodes;
  }
}
