package io.github.redlockcore.core;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.OptionalLong;

/**
 * One of the core's events ({@code redlock_core::Event}), as a {@code RedlockListener}
 * hears it: the same kinds and fields in every binding (see {@code docs/observability.md}).
 * Immutable. Fields that do not apply to the kind are empty.
 */
public final class Event {
  /** The core's event kinds, in the core's number order (from 1). */
  private static final String[] KINDS = {null, "acquired", "not_acquired", "retry", "extended",
      "not_extended", "lost", "released", "not_released", "inspected", "not_inspected",
      "node_failed"};
  private static final String[] OPERATIONS = {null, "acquire", "extend", "release", "inspect"};
  private static final String[] REASONS = {"conflict", "nodes_failed", "mixed",
      "validity_too_short", "not_held"};
  private static final String[] ERROR_CLASSES = {null, "held_elsewhere", "nodes_failing",
      "lock_lost", "not_held", "invalid_argument", "used_after_close", "cancelled"};
  private static final String[] CAUSES = {null, "refused", "auth", "tls", "timeout", "stalled",
      "connection", "error"};

  private final String kind;
  private final String operation;
  private final long operationId;
  private final List<String> resources;
  private final long at;
  private final long epochMicros;
  private final long elapsedMicros;
  private final int attempt;
  private final String reason;
  private final long retryAt;
  private final int node;
  private final String cause;
  private final String lostReason;
  private final String errorClass;
  private final List<NodeResult> nodes;

  private Event(String kind, String operation, long operationId, List<String> resources,
      long at, long epochMicros, long elapsedMicros, int attempt, String reason, long retryAt,
      int node, String cause, String lostReason, String errorClass, List<NodeResult> nodes) {
    this.kind = kind;
    this.operation = operation;
    this.operationId = operationId;
    this.resources = resources;
    this.at = at;
    this.epochMicros = epochMicros;
    this.elapsedMicros = elapsedMicros;
    this.attempt = attempt;
    this.reason = reason;
    this.retryAt = retryAt;
    this.node = node;
    this.cause = cause;
    this.lostReason = lostReason;
    this.errorClass = errorClass;
    this.nodes = nodes;
  }

  private static String pick(String[] names, long number, String what) {
    if (number < 0 || number >= names.length) {
      throw new io.github.redlockcore.RedlockStateException("unsupported_output",
          "unknown " + what + " " + number);
    }
    return names[(int) number];
  }

  /**
   * The event at {@code records[at]} of a loop call ({@code CoreLinks.EVENT}'s numbers,
   * layout in the native crate's engine.rs), its node texts from {@code bytes[byteAt]}.
   * For the client's loop; {@link #recordBytes} says how many bytes it used.
   */
  public static Event fromRecord(long[] r, byte[] bytes, int at, int byteAt, long operationId,
      List<String> resources, long epochOffset) {
    String kind = pick(KINDS, r[at], "event");
    if (kind == null) {
      throw new io.github.redlockcore.RedlockStateException("unsupported_output",
          "unknown event 0");
    }
    int count = (int) r[at + 10];
    List<NodeResult> nodes = new ArrayList<>(count);
    int offset = byteAt;
    for (int i = 0; i < count; i++) {
      int base = at + 11 + 3 * i;
      int textLength = (int) r[base + 2];
      String text = null;
      if (textLength >= 0) {
        text = new String(bytes, offset, textLength, StandardCharsets.UTF_8);
        offset += textLength;
      }
      long code = r[base];
      if (code < 0 || code >= NodeResult.Kind.values().length) {
        throw new io.github.redlockcore.RedlockStateException("unsupported_output",
            "unknown node result " + code);
      }
      nodes.add(NodeResult.of(NodeResult.Kind.values()[(int) code], text,
          NodeResult.causeOf((int) r[base + 1])));
    }
    return new Event(kind, pick(OPERATIONS, r[at + 1], "operation"), operationId,
        resources, r[at + 2], r[at + 2] + epochOffset, r[at + 3], (int) r[at + 4],
        r[at + 5] < 0 ? null : pick(REASONS, r[at + 5], "reason"), r[at + 6], (int) r[at + 7],
        pick(CAUSES, r[at + 8], "cause"), null, pick(ERROR_CLASSES, r[at + 9], "error class"),
        Collections.unmodifiableList(nodes));
  }

  /** The bytes an event record at {@code records[at]} uses (its node texts). */
  public static int recordBytes(long[] r, int at) {
    int total = 0;
    int count = (int) r[at + 10];
    for (int i = 0; i < count; i++) {
      total += Math.max(0, (int) r[at + 11 + 3 * i + 2]);
    }
    return total;
  }

  /**
   * The event of a lock lost at {@code now} as the core's keep-alive reported it (the
   * core's {@code Event::lost}): {@code heldSince} is when it was acquired, for elapsed.
   */
  public static Event lost(String lostReason, List<String> resources, long heldSince,
      long now, long epochOffset) {
    return new Event("lost", null, 0, resources, now, now + epochOffset,
        Math.max(0, now - heldSince), 1, null,
        -1, -1, null, lostReason, "lock_lost", List.of());
  }

  /**
   * What happened: {@code acquired}, {@code not_acquired}, {@code retry}, {@code extended},
   * {@code not_extended}, {@code lost}, {@code released}, {@code not_released}, {@code
   * inspected}, {@code not_inspected}, {@code node_failed}.
   */
  public String kind() {
    return kind;
  }

  /**
   * The operation: {@code acquire}, {@code extend}, {@code release}, {@code inspect};
   * empty for lost.
   */
  public Optional<String> operation() {
    return Optional.ofNullable(operation);
  }

  /** Which run of an operation it belongs to (unique per client), 0 for lost. */
  public long operationId() {
    return operationId;
  }

  /** The lock's resources. */
  public List<String> resources() {
    return resources;
  }

  /** When it happened, in microseconds on the client's clock ({@code RedlockClient.now()}). */
  public long at() {
    return at;
  }

  /**
   * When it happened on the wall clock (the client's clock mapped to the epoch once, when
   * the client started), for tracing and logs.
   */
  public java.time.Instant time() {
    return java.time.Instant.EPOCH.plusNanos(epochMicros * 1000);
  }

  /** How long after the operation started (for lost: after the lock was acquired). */
  public Duration elapsed() {
    return Duration.ofNanos(elapsedMicros * 1000);
  }

  /** The attempt it concerns, from 1. */
  public int attempt() {
    return attempt;
  }

  /**
   * Why an attempt or operation failed: {@code conflict}, {@code nodes_failed}, {@code
   * mixed}, {@code validity_too_short}, {@code not_held}.
   */
  public Optional<String> reason() {
    return Optional.ofNullable(reason);
  }

  /** retry: when the next attempt starts (client clock, microseconds). */
  public OptionalLong retryAt() {
    return retryAt < 0 ? OptionalLong.empty() : OptionalLong.of(retryAt);
  }

  /** node_failed: the node, by index in the configuration. */
  public OptionalInt node() {
    return node < 0 ? OptionalInt.empty() : OptionalInt.of(node);
  }

  /**
   * node_failed: why ({@code refused}, {@code auth}, {@code tls}, {@code timeout}, {@code
   * stalled}, {@code connection}, {@code error}).
   */
  public Optional<String> cause() {
    return Optional.ofNullable(cause);
  }

  /** lost: how ({@code taken}, {@code not_held}, {@code expired}, {@code extension_limit}). */
  public Optional<String> lostReason() {
    return Optional.ofNullable(lostReason);
  }

  /**
   * A failed outcome's error class, as the core gives it ({@code held_elsewhere}, {@code
   * nodes_failing}, {@code lock_lost}, {@code not_held}); empty otherwise.
   */
  public Optional<String> errorClass() {
    return Optional.ofNullable(errorClass);
  }

  /** Per node: the round the event reports on, or the failed node's result (node_failed). */
  public List<NodeResult> nodes() {
    return nodes;
  }

  @Override
  public String toString() {
    StringBuilder s = new StringBuilder(kind);
    if (operation != null) {
      s.append(' ').append(operation);
    }
    s.append(' ').append(resources).append(" attempt=").append(attempt)
        .append(" elapsed=").append(elapsedMicros).append("us");
    if (reason != null) {
      s.append(" reason=").append(reason);
    }
    if (node >= 0) {
      s.append(" node=").append(node).append(" cause=").append(cause);
    }
    if (lostReason != null) {
      s.append(" lost=").append(lostReason);
    }
    return s.append(" nodes=").append(nodes).toString();
  }
}
