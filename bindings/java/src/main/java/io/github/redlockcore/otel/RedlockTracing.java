package io.github.redlockcore.otel;

import io.github.redlockcore.RedlockListener;
import io.github.redlockcore.core.Event;
import io.github.redlockcore.core.NodeResult;
import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.common.AttributesBuilder;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Context;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * OpenTelemetry spans from a client's events: one span per acquisition, extension, release
 * and inspection ({@code redlock.acquire}, ...), from its start to its outcome, with span
 * events for each {@code retry} and {@code node_failed} on the way, and a short {@code
 * redlock.lost} span when keep-alive reports a lock lost. Register it as a listener:
 *
 * <pre>{@code
 * RedlockClient.builder(driver).listener(new RedlockTracing(openTelemetry)).build();
 * }</pre>
 *
 * <p>Attributes: {@code redlock.resources}, {@code redlock.operation}, {@code
 * redlock.attempts}, {@code redlock.outcome} (the event kind), {@code redlock.reason} and
 * {@code redlock.error_class} for failures (the span's status is then ERROR), {@code
 * redlock.nodes} (each node's result). Spans are made when the outcome is known, with the
 * operation's own start and end times; they are roots (the loop thread has no caller
 * context). Needs {@code io.opentelemetry:opentelemetry-api} on the class path (an
 * optional dependency of this package).
 */
public final class RedlockTracing implements RedlockListener {
  /** The span attributes and span-event attributes this adapter sets. */
  public static final AttributeKey<List<String>> RESOURCES = AttributeKey.stringArrayKey(
      "redlock.resources");
  public static final AttributeKey<String> OPERATION = AttributeKey.stringKey("redlock.operation");
  public static final AttributeKey<Long> ATTEMPTS = AttributeKey.longKey("redlock.attempts");
  public static final AttributeKey<String> OUTCOME = AttributeKey.stringKey("redlock.outcome");
  public static final AttributeKey<String> REASON = AttributeKey.stringKey("redlock.reason");
  public static final AttributeKey<String> ERROR_CLASS =
      AttributeKey.stringKey("redlock.error_class");
  public static final AttributeKey<List<String>> NODES =
      AttributeKey.stringArrayKey("redlock.nodes");
  public static final AttributeKey<Long> ATTEMPT = AttributeKey.longKey("redlock.attempt");
  public static final AttributeKey<Long> NODE = AttributeKey.longKey("redlock.node");
  public static final AttributeKey<String> CAUSE = AttributeKey.stringKey("redlock.cause");
  public static final AttributeKey<String> ERROR = AttributeKey.stringKey("redlock.error");
  public static final AttributeKey<Long> RETRY_IN_US = AttributeKey.longKey("redlock.retry_in_us");
  public static final AttributeKey<String> LOST_REASON =
      AttributeKey.stringKey("redlock.lost_reason");

  /** At most this many operations' span events wait for their outcome (cancelled ones get none). */
  private static final int MAX_OPEN = 1024;

  private final Tracer tracer;
  /** Retry and node_failed events by operation, until its outcome (loop thread only). */
  private final Map<Long, List<Event>> open = new LinkedHashMap<>(16, 0.75f, false) {
    private static final long serialVersionUID = 1L;

    @Override
    protected boolean removeEldestEntry(Map.Entry<Long, List<Event>> eldest) {
      return size() > MAX_OPEN;
    }
  };

  /** Spans from {@code openTelemetry}'s tracer {@code io.github.redlockcore}. */
  public RedlockTracing(OpenTelemetry openTelemetry) {
    this(openTelemetry.getTracer("io.github.redlockcore"));
  }

  public RedlockTracing(Tracer tracer) {
    this.tracer = java.util.Objects.requireNonNull(tracer, "tracer");
  }

  @Override
  public void onEvent(Event event) {
    switch (event.kind()) {
      case "retry":
      case "node_failed":
        open.computeIfAbsent(event.operationId(), id -> new ArrayList<>(2)).add(event);
        return;
      case "lost":
        lost(event);
        return;
      default:
        finish(event, open.remove(event.operationId()));
    }
  }

  private static long micros(Event event) {
    java.time.Instant t = event.time();
    return t.getEpochSecond() * 1_000_000 + t.getNano() / 1000;
  }

  private void finish(Event outcome, List<Event> steps) {
    long end = micros(outcome);
    long start = end - outcome.elapsed().toNanos() / 1000;
    String operation = outcome.operation().orElse("operation");
    Span span = tracer.spanBuilder("redlock." + operation)
        .setParent(Context.root())
        .setSpanKind(SpanKind.CLIENT)
        .setStartTimestamp(start, TimeUnit.MICROSECONDS)
        .setAttribute(RESOURCES, outcome.resources())
        .setAttribute(OPERATION, operation)
        .startSpan();
    if (steps != null) {
      for (Event step : steps) {
        AttributesBuilder attributes = Attributes.builder().put(ATTEMPT, step.attempt());
        if (step.kind().equals("retry")) {
          step.reason().ifPresent(r -> attributes.put(REASON, r));
          step.retryAt().ifPresent(at -> attributes.put(RETRY_IN_US, at - step.at()));
        } else {
          step.node().ifPresent(n -> attributes.put(NODE, n));
          step.cause().ifPresent(c -> attributes.put(CAUSE, c));
          step.nodes().stream().map(NodeResult::error).filter(e -> e != null).findFirst()
              .ifPresent(e -> attributes.put(ERROR, e));
        }
        span.addEvent(step.kind(), attributes.build(), micros(step), TimeUnit.MICROSECONDS);
      }
    }
    span.setAttribute(ATTEMPTS, outcome.attempt());
    span.setAttribute(OUTCOME, outcome.kind());
    List<String> nodes = new ArrayList<>(outcome.nodes().size());
    for (NodeResult node : outcome.nodes()) {
      nodes.add(node.kind().code());
    }
    span.setAttribute(NODES, nodes);
    outcome.reason().ifPresent(r -> span.setAttribute(REASON, r));
    outcome.errorClass().ifPresent(c -> {
      span.setAttribute(ERROR_CLASS, c);
      span.setStatus(StatusCode.ERROR, c);
    });
    span.end(end, TimeUnit.MICROSECONDS);
  }

  private void lost(Event event) {
    long at = micros(event);
    Span span = tracer.spanBuilder("redlock.lost")
        .setParent(Context.root())
        .setStartTimestamp(at, TimeUnit.MICROSECONDS)
        .setAttribute(RESOURCES, event.resources())
        .startSpan();
    event.lostReason().ifPresent(r -> span.setAttribute(LOST_REASON, r));
    event.errorClass().ifPresent(c -> {
      span.setAttribute(ERROR_CLASS, c);
      span.setStatus(StatusCode.ERROR, c);
    });
    span.end(at, TimeUnit.MICROSECONDS);
  }
}
