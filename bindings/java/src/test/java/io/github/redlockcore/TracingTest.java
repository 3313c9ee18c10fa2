package io.github.redlockcore;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.redlockcore.nio.NioDriver;
import io.github.redlockcore.otel.RedlockTracing;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.data.EventData;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.TestInstance;
import redis.clients.jedis.Jedis;

/**
 * OpenTelemetry spans from {@link RedlockTracing}, exported to the SDK's in-memory
 * exporter (nodes on ports 7450-7454, the nio driver).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class TracingTest {
  private static final int BASE = 7450;
  private TestNodes nodes;
  private InMemorySpanExporter exporter;
  private OpenTelemetrySdk otel;
  private String resource;

  @BeforeAll
  void startNodes() {
    nodes = new TestNodes(BASE, 5);
  }

  @AfterAll
  void stopNodes() {
    nodes.close();
  }

  @BeforeEach
  void tracing(TestInfo info) {
    exporter = InMemorySpanExporter.create();
    otel = OpenTelemetrySdk.builder()
        .setTracerProvider(SdkTracerProvider.builder()
            .addSpanProcessor(SimpleSpanProcessor.create(exporter)).build())
        .build();
    resource = "java:tracing:" + info.getDisplayName();
  }

  @AfterEach
  void closeTracing() {
    otel.close();
    for (int i = 0; i < 5; i++) {
      try {
        nodes.resume(i);
      } catch (IllegalStateException notRunning) {
        nodes.restart(i);
      }
    }
  }

  private RedlockClient.Builder client() {
    return RedlockClient.builder(NioDriver.of(nodes.urls()))
        .listener(new RedlockTracing(otel));
  }

  private SpanData span(String name) {
    DriverContract.waitUntil(() -> exporter.getFinishedSpanItems().stream()
        .anyMatch(s -> s.getName().equals(name)));
    return exporter.getFinishedSpanItems().stream().filter(s -> s.getName().equals(name))
        .findFirst().orElseThrow();
  }

  @Test
  void acquireInspectExtendAndReleaseEachMakeASpan() {
    try (RedlockClient c = client().build()) {
      long before = System.currentTimeMillis();
      RedLock lock = c.acquire(resource);
      assertTrue(c.isLocked(resource));
      lock.extend();
      lock.release();
      long after = System.currentTimeMillis();
      SpanData acquire = span("redlock.acquire");
      assertEquals(List.of(resource),
          acquire.getAttributes().get(AttributeKey.stringArrayKey("redlock.resources")));
      assertEquals("acquire", acquire.getAttributes().get(RedlockTracing.OPERATION));
      assertEquals("acquired", acquire.getAttributes().get(RedlockTracing.OUTCOME));
      assertEquals(1L, acquire.getAttributes().get(RedlockTracing.ATTEMPTS));
      assertEquals(5, acquire.getAttributes().get(RedlockTracing.NODES).size());
      assertEquals(StatusCode.UNSET, acquire.getStatus().getStatusCode());
      long startMs = TimeUnit.NANOSECONDS.toMillis(acquire.getStartEpochNanos());
      long endMs = TimeUnit.NANOSECONDS.toMillis(acquire.getEndEpochNanos());
      // The client's clock is mapped to the epoch once: allow a little skew.
      assertTrue(startMs >= before - 50 && endMs <= after + 50 && startMs <= endMs,
          startMs + ".." + endMs + " not in " + before + ".." + after);
      assertEquals("inspected", span("redlock.inspect").getAttributes()
          .get(RedlockTracing.OUTCOME));
      assertEquals("extended", span("redlock.extend").getAttributes()
          .get(RedlockTracing.OUTCOME));
      SpanData release = span("redlock.release");
      assertEquals("released", release.getAttributes().get(RedlockTracing.OUTCOME));
      assertTrue(release.getStartEpochNanos() >= acquire.getEndEpochNanos());
    }
  }

  @Test
  void retriesAreSpanEventsAndAFailureSetsTheErrorClass() {
    try (RedlockClient holder = RedlockClient.builder(NioDriver.of(nodes.urls())).build();
        RedLock held = holder.acquire(resource);
        RedlockClient c = client().attempts(3).retryDelay(Duration.ofMillis(20))
            .retryJitter(Duration.ofMillis(5)).build()) {
      assertThrows(LockHeldElsewhereException.class, () -> c.acquire(resource));
      SpanData acquire = span("redlock.acquire");
      List<EventData> retries = acquire.getEvents().stream()
          .filter(e -> e.getName().equals("retry")).collect(Collectors.toList());
      assertEquals(2, retries.size(), acquire.getEvents().toString());
      assertEquals("conflict", retries.get(0).getAttributes().get(RedlockTracing.REASON));
      assertEquals(1L, retries.get(0).getAttributes().get(RedlockTracing.ATTEMPT));
      assertEquals(3L, acquire.getAttributes().get(RedlockTracing.ATTEMPTS));
      assertEquals("not_acquired", acquire.getAttributes().get(RedlockTracing.OUTCOME));
      assertEquals("held_elsewhere", acquire.getAttributes().get(RedlockTracing.ERROR_CLASS));
      assertEquals(StatusCode.ERROR, acquire.getStatus().getStatusCode());
      assertTrue(held.isValid());
    }
  }

  @Test
  void aRefusedNodeIsASpanEvent() {
    nodes.kill(1);
    try (RedlockClient c = client().build()) {
      c.acquire(resource).close();
      SpanData acquire = span("redlock.acquire");
      EventData failed = acquire.getEvents().stream()
          .filter(e -> e.getName().equals("node_failed")).findFirst().orElseThrow();
      assertEquals(1L, failed.getAttributes().get(RedlockTracing.NODE));
      assertEquals("refused", failed.getAttributes().get(RedlockTracing.CAUSE));
      assertEquals("acquired", acquire.getAttributes().get(RedlockTracing.OUTCOME));
    }
  }

  @Test
  void aLostLockIsASpan() throws Exception {
    try (RedlockClient c = client().build()) {
      RedLock lock = c.acquire(resource, Duration.ofMillis(900));
      var lost = lock.keepAlive();
      for (int i = 0; i < 5; i++) {
        try (Jedis j = new Jedis("127.0.0.1", BASE + i)) {
          j.set(resource, "someone-else");
        }
      }
      lost.get(3, TimeUnit.SECONDS);
      SpanData span = span("redlock.lost");
      assertEquals("taken", span.getAttributes().get(RedlockTracing.LOST_REASON));
      assertEquals(StatusCode.ERROR, span.getStatus().getStatusCode());
      lock.close();
    }
  }
}
