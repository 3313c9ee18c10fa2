package io.github.redlockcore;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.databind.node.TextNode;
import io.github.redlockcore.core.Client;
import io.github.redlockcore.core.Command;
import io.github.redlockcore.core.Config;
import io.github.redlockcore.core.KeepAliveMachine;
import io.github.redlockcore.core.Lease;
import io.github.redlockcore.core.NodeResult;
import io.github.redlockcore.core.Operation;
import io.github.redlockcore.core.Outcome;
import io.github.redlockcore.core.Output;
import io.github.redlockcore.core.Reply;
import io.github.redlockcore.core.RespDecoder;
import io.github.redlockcore.core.Scripts;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/** Every conformance vector of tests/vectors, replayed through JNI (rules in its README). */
class VectorsTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final JsonNodeFactory F = JsonNodeFactory.instance;

  static Path vectorsDir() {
    return TestNodes.repo().resolve("tests/vectors");
  }

  static List<Path> files(Path dir) throws IOException {
    try (Stream<Path> s = Files.list(dir)) {
      return s.filter(p -> p.toString().endsWith(".json")).sorted().collect(Collectors.toList());
    }
  }

  @TestFactory
  Stream<DynamicTest> everyConformanceVector() throws IOException {
    List<Path> files = files(vectorsDir());
    assertTrue(files.size() >= 90, "expected the whole set of vectors, found " + files.size());
    return files.stream()
        .map(p -> DynamicTest.dynamicTest(p.getFileName().toString(), () -> runVector(p, false)));
  }

  /** The same vectors through {@code Operation.drain} (what the nio driver uses). */
  @TestFactory
  Stream<DynamicTest> everyConformanceVectorDrained() throws IOException {
    return files(vectorsDir()).stream()
        .map(p -> DynamicTest.dynamicTest(p.getFileName().toString(), () -> runVector(p, true)));
  }

  /** The fencing and waiting vectors (fenced acquisitions, wait limits, release notices). */
  @TestFactory
  Stream<DynamicTest> everyFencingAndWaitingVector() throws IOException {
    List<Path> files = new ArrayList<>(files(vectorsDir().resolve("fencing")));
    files.addAll(files(vectorsDir().resolve("waiting")));
    assertTrue(files.size() >= 10, "expected the fencing and waiting vectors, found " + files.size());
    for (String named : List.of("notice_naming_this_waiter_goes_at_once.json",
        "notice_naming_another_waiter_keeps_the_schedule.json", "wait_limit_gives_up.json")) {
      assertTrue(files.stream().anyMatch(p -> p.getFileName().toString().equals(named)),
          "expected the waiting vector " + named);
    }
    return files.stream().flatMap(p -> Stream.of(
        DynamicTest.dynamicTest(p.getFileName().toString(), () -> runVector(p, false)),
        DynamicTest.dynamicTest(p.getFileName() + " (drained)", () -> runVector(p, true))));
  }

  /** The inspection vectors (who holds a lock: isLocked, isOwned). */
  @TestFactory
  Stream<DynamicTest> everyInspectionVector() throws IOException {
    List<Path> files = files(vectorsDir().resolve("inspect"));
    assertTrue(files.size() >= 2, "expected the inspection vectors, found " + files.size());
    return files.stream().flatMap(p -> Stream.of(
        DynamicTest.dynamicTest(p.getFileName().toString(), () -> runVector(p, false)),
        DynamicTest.dynamicTest(p.getFileName() + " (drained)", () -> runVector(p, true))));
  }

  /**
   * The keep-alive vectors: the core's keep-alive ({@link KeepAliveMachine}) driven by the
   * outcomes of the same file's operations.
   */
  @TestFactory
  Stream<DynamicTest> everyKeepAliveVector() throws IOException {
    List<Path> files = files(vectorsDir().resolve("keepalive"));
    // A moved folder must not pass as "nothing failed".
    assertTrue(files.size() >= 4, "expected the keep-alive vectors, found " + files.size());
    return files.stream().flatMap(p -> Stream.of(
        DynamicTest.dynamicTest(p.getFileName().toString(), () -> runVector(p, false)),
        DynamicTest.dynamicTest(p.getFileName() + " (drained)", () -> runVector(p, true))));
  }

  @TestFactory
  Stream<DynamicTest> everyRespVector() throws IOException {
    List<Path> files = files(vectorsDir().resolve("resp"));
    assertTrue(files.size() >= 25, "expected the RESP vectors, found " + files.size());
    return files.stream()
        .map(p -> DynamicTest.dynamicTest(p.getFileName().toString(), () -> runRespVector(p)));
  }

  @Test
  void scriptsComeFromTheCore() {
    assertEquals("9a4c12ce2a7ef3e2864bdbe648b6d0f0ee05029b", Scripts.RELEASE_SHA1);
    assertTrue(Scripts.RELEASE.contains("redis.call('DEL', key)"));
    assertEquals("c100eb0d669b2c24bf768a7f667d1ad4e93ed9ae", Scripts.QUEUED_ACQUIRE_SHA1);
    assertEquals(500, io.github.redlockcore.internal.Native.noticeChannelLingerMs());
    assertEquals(100, io.github.redlockcore.internal.Native.subscriberReopenFirstMs());
    assertEquals(5000, io.github.redlockcore.internal.Native.subscriberReopenMaxMs());
    assertTrue(Scripts.QUEUED_ACQUIRE.contains("'ZADD', order, 'NX'"));
    assertEquals(3, Scripts.ALL.size());
  }

  // ---- conformance vectors ---------------------------------------------------------

  static Config config(JsonNode c) {
    Config.Builder b = Config.builder(c.get("nodes").asInt(), Duration.ofMillis(c.get("ttl_ms").asLong()));
    if (c.has("drift_factor")) {
      b.driftFactor(c.get("drift_factor").asDouble());
    }
    if (c.has("drift_fixed_us")) {
      b.driftFixed(Duration.ofNanos(c.get("drift_fixed_us").asLong() * 1000));
    }
    if (c.has("node_timeout_us")) {
      b.nodeTimeout(Duration.ofNanos(c.get("node_timeout_us").asLong() * 1000));
    }
    if (c.has("min_validity_us")) {
      b.minValidity(Duration.ofNanos(c.get("min_validity_us").asLong() * 1000));
    }
    if (c.has("attempts")) {
      b.attempts(c.get("attempts").asInt());
    }
    if (c.has("retry_delay_us")) {
      b.retryDelay(Duration.ofNanos(c.get("retry_delay_us").asLong() * 1000));
    }
    if (c.has("retry_jitter_us")) {
      b.retryJitter(Duration.ofNanos(c.get("retry_jitter_us").asLong() * 1000));
    }
    if (c.has("key_prefix")) {
      b.keyPrefix(c.get("key_prefix").asText());
    }
    if (c.has("token_bytes")) {
      b.tokenBytes(c.get("token_bytes").asInt());
    }
    if (c.has("fencing")) {
      b.fencing(c.get("fencing").asBoolean());
    }
    return b.build();
  }

  static Reply reply(JsonNode v) {
    switch (v.get("type").asText()) {
      case "ok":
        return Reply.ok();
      case "status":
        return Reply.status(v.get("value").asText());
      case "nil":
        return Reply.nil();
      case "integer":
        return Reply.integer(v.get("value").asLong());
      case "bulk":
        return Reply.bulk(v.get("value").asText().getBytes(StandardCharsets.UTF_8));
      case "array":
        List<Reply> items = new ArrayList<>();
        v.get("value").forEach(e -> items.add(reply(e)));
        return Reply.array(items);
      case "error":
        return Reply.error(v.get("value").asText());
      case "timeout":
        return Reply.timeout();
      case "connection_failed":
        return Reply.connectionFailed(v.get("value").asText());
      default:
        throw new AssertionError("unknown reply type " + v);
    }
  }

  static JsonNode replyToJson(Reply r) {
    ObjectNode o = F.objectNode();
    o.put("type", r.type() == Reply.Type.CONNECTION_FAILED ? "connection_failed"
        : r.type().name().toLowerCase(java.util.Locale.ROOT));
    switch (r.type()) {
      case STATUS:
      case ERROR:
      case BULK:
      case CONNECTION_FAILED:
        o.put("value", r.text());
        break;
      case INTEGER:
        o.put("value", r.integer());
        break;
      case ARRAY:
        ArrayNode a = o.putArray("value");
        r.elements().forEach(e -> a.add(replyToJson(e)));
        break;
      default:
        break;
    }
    return o;
  }

  static JsonNode nodes(List<NodeResult> nodes) {
    ArrayNode a = F.arrayNode();
    for (NodeResult n : nodes) {
      if (n.kind() == NodeResult.Kind.ERROR) {
        a.add(F.objectNode().put("error", n.error()));
      } else {
        a.add(n.kind().code());
      }
    }
    return a;
  }

  static JsonNode outcome(Outcome o) {
    ObjectNode j = F.objectNode();
    j.put("kind", o.kind().code());
    Lease lease = o.lease().orElse(null);
    switch (o.kind()) {
      case ACQUIRED:
        j.put("token", lease.token());
        j.put("valid_until", lease.validUntil());
        j.put("validity", o.validityMicros());
        j.put("attempts", o.attempts());
        lease.fencingToken().ifPresent(t -> j.put("fencing_token", t));
        break;
      case NOT_ACQUIRED:
        j.put("reason", o.reason().orElseThrow().code());
        j.put("attempts", o.attempts());
        j.put("token", o.token());
        break;
      case EXTENDED:
        j.put("token", lease.token());
        j.put("valid_until", lease.validUntil());
        j.put("validity", o.validityMicros());
        j.put("extensions", lease.extensions());
        break;
      case NOT_EXTENDED:
        j.put("reason", o.reason().orElseThrow().code());
        j.put("valid_until", lease.validUntil());
        j.put("validity", o.validityMicros());
        if (o.retryAt().isPresent()) {
          j.put("retry_at", o.retryAt().get());
        } else {
          j.putNull("retry_at");
        }
        break;
      case RELEASED:
      case NOT_RELEASED:
        j.put("released", o.released());
        break;
      case INSPECTED:
        if (o.holder().isPresent()) {
          j.put("holder", o.holder().get());
        } else {
          j.putNull("holder");
        }
        break;
      case NOT_INSPECTED:
        break;
      default:
        throw new AssertionError(o.kind());
    }
    j.set("nodes", nodes(o.nodes()));
    return j;
  }

  static JsonNode expand(JsonNode v) {
    if (v.isTextual()) {
      switch (v.asText()) {
        case "{{ACQUIRE_SCRIPT}}":
          return TextNode.valueOf(Scripts.ACQUIRE);
        case "{{RELEASE_SCRIPT}}":
          return TextNode.valueOf(Scripts.RELEASE);
        case "{{EXTEND_SCRIPT}}":
          return TextNode.valueOf(Scripts.EXTEND);
        case "{{FENCED_ACQUIRE_SCRIPT}}":
          return TextNode.valueOf(Scripts.FENCED_ACQUIRE);
        case "{{WRITE_BACK_SCRIPT}}":
          return TextNode.valueOf(Scripts.WRITE_BACK);
        default:
          return v;
      }
    }
    if (v.isArray()) {
      ArrayNode a = F.arrayNode();
      v.forEach(e -> a.add(expand(e)));
      return a;
    }
    if (v.isObject()) {
      ObjectNode o = F.objectNode();
      v.fields().forEachRemaining(e -> o.set(e.getKey(), expand(e.getValue())));
      return o;
    }
    return v;
  }

  static byte[] hex(String s) {
    byte[] out = new byte[s.length() / 2];
    for (int i = 0; i < out.length; i++) {
      out[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
    }
    return out;
  }

  static List<String> strings(JsonNode a) {
    List<String> out = new ArrayList<>();
    a.forEach(e -> out.add(e.asText()));
    return out;
  }

  /** One vector's state: operations, leases and keep-alives by name. */
  static final class Replay implements AutoCloseable {
    final Client client;
    final Config config;
    final Map<String, Operation> ops = new HashMap<>();
    final Map<String, Lease> leases = new HashMap<>();
    /**
     * The operation that handed out the last outcome under each name (for {@code
     * keepalive_outcome}: the keep-alive reads an operation's last outcome).
     */
    final Map<String, Operation> outcomes = new HashMap<>();
    final Map<String, KeepAliveMachine> keepAlives = new HashMap<>();
    String last;
    final boolean drained;

    Replay(Config config, boolean drained) {
      this.drained = drained;
      this.config = config;
      client = new Client(config, new byte[32]);
    }

    ArrayNode drain(String name) {
      ArrayNode outputs = F.arrayNode();
      Operation op = ops.get(name);
      List<Output> all = new ArrayList<>();
      if (drained) {
        all.addAll(op.drain(true));
      } else {
        Output next;
        while ((next = op.poll()) != null) {
          all.add(next);
        }
      }
      for (Output out : all) {
        if (out instanceof Output.Send) {
          Command c = ((Output.Send) out).command();
          ObjectNode s = F.objectNode();
          s.put("node", c.node());
          s.put("request", c.requestId());
          s.put("deadline", c.deadline());
          ArrayNode argv = s.putArray("argv");
          if (drained) {
            // Drained commands carry only RESP: decode it with the core's decoder.
            try (RespDecoder d = new RespDecoder()) {
              d.feed(c.resp(), 0, c.resp().length);
              for (Reply a : d.nextReply().elements()) {
                argv.add(a.text());
              }
            }
          } else {
            for (byte[] a : c.args()) {
              argv.add(new String(a, StandardCharsets.UTF_8));
            }
            // The RESP form the raw-socket driver writes is the argv, encoded by the core.
            assertEquals(
                new String(io.github.redlockcore.internal.Native.encodeCommand(c.args()),
                    StandardCharsets.UTF_8),
                new String(c.resp(), StandardCharsets.UTF_8));
          }
          outputs.add(F.objectNode().set("send", s));
        } else if (out instanceof Output.Wait) {
          outputs.add(F.objectNode().put("wait", ((Output.Wait) out).until()));
        } else {
          Outcome o = ((Output.Finished) out).outcome();
          outputs.add(F.objectNode().set("outcome", outcome(o)));
          outcomes.put(name, op);
          o.lease().ifPresent(l -> keepLease(name, l));
        }
        assertTrue(outputs.size() < 10_000, "outputs never end");
      }
      return outputs;
    }

    void keepLease(String name, Lease lease) {
      Lease old = leases.put(name, lease);
      if (old != null && old != lease) {
        old.close();
      }
    }

    KeepAliveMachine keepAlive(String name) {
      KeepAliveMachine keepAlive = keepAlives.get(name);
      assertNotNull(keepAlive, "no keep-alive named " + name);
      return keepAlive;
    }

    /**
     * A keep-alive step ({@code keepalive}, {@code keepalive_outcome}, {@code
     * keepalive_failure}, {@code keepalive_stop}, {@code keepalive_poll}): its input, then
     * one poll at {@code now}; the outputs {@code [<action>, {"valid_until": <us>}]}, or
     * null for a step of another kind. The keep-alive's lease afterwards is kept under its
     * name, for extensions of it (core/tests/vectors.rs keepalive_step).
     */
    ArrayNode keepAliveStep(JsonNode step, long now) {
      if (!step.has("name")) {
        return null;
      }
      String name = step.get("name").asText();
      if (step.has("keepalive")) {
        String leaseName = step.get("keepalive").get("lease").asText();
        Lease lease = leases.get(leaseName);
        assertNotNull(lease, "no lease named " + leaseName);
        KeepAliveMachine old = keepAlives.put(name, new KeepAliveMachine(config, lease));
        if (old != null) {
          old.close();
        }
      } else if (step.has("keepalive_outcome")) {
        String op = step.get("keepalive_outcome").get("op").asText();
        Operation operation = outcomes.get(op);
        assertNotNull(operation, "no outcome of " + op);
        keepAlive(name).handleOutcome(operation, now);
      } else if (step.has("keepalive_failure")) {
        keepAlive(name).handleFailure(now);
      } else if (step.has("keepalive_stop")) {
        keepAlive(name).stop();
      } else if (!step.has("keepalive_poll")) {
        return null;
      }
      KeepAliveMachine keepAlive = keepAlive(name);
      ArrayNode outputs = F.arrayNode();
      switch (keepAlive.poll(now)) {
        case EXTEND:
          outputs.add(F.objectNode().set("extend", F.objectNode()));
          break;
        case WAIT:
          outputs.add(F.objectNode().put("wait", keepAlive.value()));
          break;
        case LOST:
          outputs.add(F.objectNode().put("lost", keepAlive.lostReason()));
          break;
        default:
          outputs.add(F.objectNode().set("stopped", F.objectNode()));
          break;
      }
      Lease lease = keepAlive.lease();
      outputs.add(F.objectNode().put("valid_until", lease.validUntil()));
      keepLease(name, lease);
      return outputs;
    }

    /** Runs a step; returns the usage error code (or null) and the outputs. */
    Object[] step(JsonNode step) {
      long now = step.has("now") ? step.get("now").asLong() : 0;
      String opName = step.has("op") ? step.get("op").asText() : null;
      String target;
      ArrayNode keepAliveOutputs = keepAliveStep(step, now);
      if (keepAliveOutputs != null) {
        return new Object[] {null, keepAliveOutputs};
      }
      try {
        if (step.has("acquire")) {
          JsonNode a = step.get("acquire");
          target = opName;
          Operation op = a.has("wait_ms")
              ? client.acquireWithRandom(strings(a.get("resources")),
                  hex(a.get("random").asText()), Duration.ofMillis(a.get("wait_ms").asLong()), now)
              : client.acquireWithRandom(strings(a.get("resources")),
                  hex(a.get("random").asText()), now);
          ops.put(target, op);
          last = target;
        } else if (step.has("inspect")) {
          target = opName;
          ops.put(target, client.inspect(strings(step.get("inspect").get("resources")), now));
          last = target;
        } else if (step.has("extend") || step.has("release")) {
          target = opName;
          boolean extend = step.has("extend");
          String leaseName = step.get(extend ? "extend" : "release").get("lease").asText();
          Lease lease = leases.get(leaseName);
          assertNotNull(lease, "no lease named " + leaseName);
          JsonNode e = step.get("extend");
          Duration ttl = extend && e.has("ttl_ms") ? Duration.ofMillis(e.get("ttl_ms").asLong())
              : null;
          ops.put(target, extend ? client.extend(lease, ttl, now) : client.release(lease, now));
          last = target;
        } else if (step.has("lease")) {
          JsonNode a = step.get("lease");
          Lease l = client.lease(strings(a.get("resources")), a.get("token").asText(),
              a.has("valid_until") ? a.get("valid_until").asLong() : 0);
          leases.put(step.get("name").asText(), l);
          return new Object[] {null, F.arrayNode()};
        } else if (step.has("reply")) {
          target = opName != null ? opName : last;
          JsonNode a = step.get("reply");
          ops.get(target).handleReply(a.get("request").asLong(), reply(a.get("value")), now);
        } else if (step.has("timeout")) {
          target = opName != null ? opName : last;
          ops.get(target).handleTimeout(now);
        } else if (step.has("notice")) {
          target = opName != null ? opName : last;
          JsonNode n = step.get("notice");
          // `message`: the text the notice carried (its UTF-8 bytes); without it, the bare
          // notice that names nobody.
          if (n.has("message")) {
            ops.get(target).handleNoticeMessage(n.get("node").asInt(),
                n.get("message").asText().getBytes(StandardCharsets.UTF_8), now);
          } else {
            ops.get(target).handleNotice(n.get("node").asInt(), now);
          }
        } else if (step.has("subscribed")) {
          target = opName != null ? opName : last;
          ops.get(target).handleSubscribed(step.get("subscribed").get("node").asInt(), now);
        } else if (step.has("abandon")) {
          target = opName != null ? opName : last;
          ops.get(target).abandon(now);
        } else {
          throw new AssertionError("unknown step " + step);
        }
      } catch (RedlockArgumentException e) {
        return new Object[] {e.code(), F.arrayNode()};
      } catch (RedlockStateException e) {
        if (step.has("reply")) {
          String t = opName != null ? opName : last;
          return new Object[] {e.code(), drain(t)};
        }
        return new Object[] {e.code(), F.arrayNode()};
      }
      return new Object[] {null, drain(target)};
    }

    @Override
    public void close() {
      ops.values().forEach(Operation::close);
      outcomes.values().forEach(Operation::close);
      keepAlives.values().forEach(KeepAliveMachine::close);
      leases.values().forEach(Lease::close);
      client.close();
    }
  }

  /** The same tree with numbers typed as the parser types them (Jackson's equality is typed). */
  static JsonNode normal(JsonNode node) throws IOException {
    return JSON.readTree(JSON.writeValueAsString(node));
  }

  static void runVector(Path path, boolean drained) throws IOException {
    JsonNode v = JSON.readTree(path.toFile());
    String stem = path.getFileName().toString().replaceAll("\\.json$", "");
    assertEquals(stem, v.get("name").asText());
    if (v.has("config_error")) {
      try (Config c = config(v.get("config"))) {
        fail("config accepted, expected " + v.get("config_error").asText() + ": " + c);
      } catch (RedlockArgumentException e) {
        assertEquals(v.get("config_error").asText(), e.code());
      }
      return;
    }
    try (Config config = config(v.get("config")); Replay replay = new Replay(config, drained)) {
      int i = 0;
      for (JsonNode step : v.get("steps")) {
        Object[] r = replay.step(step);
        String expectedError = step.has("error") ? step.get("error").asText() : null;
        assertEquals(expectedError, r[0], "step " + i + ": usage error");
        if (!step.has("lease")) {
          assertEquals(expand(step.get("expect")), normal((JsonNode) r[1]), "step " + i + ": outputs");
        }
        // Whether the operation listens for release notices now (the core says).
        if (step.has("listens")) {
          String name = step.has("op") ? step.get("op").asText() : replay.last;
          assertEquals(step.get("listens").asBoolean(), replay.ops.get(name).listens(),
              "step " + i + ": listens");
        }
        i++;
      }
    }
  }

  static void runRespVector(Path path) throws IOException {
    JsonNode v = JSON.readTree(path.toFile());
    ArrayNode replies = F.arrayNode();
    String error = null;
    try (RespDecoder decoder = new RespDecoder()) {
      outer:
      for (JsonNode chunk : v.get("chunks")) {
        byte[] bytes = hex(chunk.asText());
        decoder.feed(bytes, 0, bytes.length);
        while (true) {
          try {
            Reply r = decoder.nextReply();
            if (r == null) {
              break;
            }
            replies.add(replyToJson(r));
          } catch (RedlockProtocolException e) {
            error = e.code();
            break outer;
          }
        }
      }
    }
    assertEquals(v.get("replies"), normal(replies));
    JsonNode expected = v.get("error");
    assertEquals(expected == null || expected.isNull() ? null : expected.asText(), error);
  }
}
