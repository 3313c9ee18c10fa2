package io.github.redlockcore.bench;

import io.github.redlockcore.core.Client;
import io.github.redlockcore.core.Command;
import io.github.redlockcore.core.Config;
import io.github.redlockcore.core.Lease;
import io.github.redlockcore.core.Operation;
import io.github.redlockcore.core.Outcome;
import io.github.redlockcore.core.Output;
import io.github.redlockcore.core.Reply;
import io.github.redlockcore.internal.CoreLinks;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The N = 5 decision cycle through JNI, the same cycle as the core's Criterion bench
 * ({@code cargo bench -p redlock-core --bench cycle}): acquire (5 commands, 5 OK replies)
 * then release (5 commands, 5 replies), seeded tokens.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 2, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(1)
public class CycleBench {
  private Config config;
  private Client client;
  private final List<Command> sends = new ArrayList<>(8);

  @Setup
  public void setup() {
    config = Config.builder(5, Duration.ofSeconds(10)).build();
    client = new Client(config, new byte[32]);
    if (cycle(true) != 3) {
      throw new IllegalStateException("the release should decide at a quorum of 3");
    }
  }

  private CoreLinks links;
  private long tag;
  private final int[] writeNodes = new int[64];
  private int writes;
  private Outcome outcome;
  private static final List<String> RESOURCE = List.of("orders:42");
  private static final byte[] OK = "+OK\r\n".getBytes(StandardCharsets.US_ASCII);
  /** The release script's reply: one key deleted, nobody listening. */
  private static final byte[] RELEASED = "*2\r\n:1\r\n:0\r\n".getBytes(StandardCharsets.US_ASCII);

  /**
   * What the loop does with one native call's events (as {@code Engine.process}): each
   * write's RESP bytes handed to its connection (the nio driver writes them from the
   * array), each outcome decoded.
   */
  private void process() {
    long[] r = links.records();
    int at = 4;
    int byteAt = 0;
    for (int i = 0, n = links.count(); i < n; i++) {
      switch ((int) r[at]) {
        case CoreLinks.WRITE: {
          // The nio driver writes these bytes straight from the array to the socket.
          int length = (int) r[at + 3];
          if (length == 0 || links.bytes()[byteAt] != '*') {
            throw new IllegalStateException("not a RESP command");
          }
          byteAt += length;
          writeNodes[writes++] = (int) r[at + 1];
          at += 4;
          break;
        }
        case CoreLinks.OUTCOME:
          outcome = Outcome.fromEvent(links, at + 3, byteAt);
          byteAt += Outcome.eventBytes(r, at + 3);
          at += 3 + (int) r[at + 2];
          break;
        default:
          at += 2;
          break;
      }
    }
  }

  /** The links of five nodes, connected, their script loads answered. */
  private void connectLinks() {
    links = new CoreLinks(5, true);
    writes = 0;
    client.startAcquire(links, ++tag, List.of("warm-up"), null, null, 500);
    process();
    for (int node = 0; node < 5; node++) {
      links.connected(node, 600);
      process();
    }
    int[] nodes = Arrays.copyOf(writeNodes, writes);
    writes = 0;
    for (int node : nodes) {
      links.feed(node, OK, 0, OK.length, 700);
      process();
    }
    writes = 0;
    if (outcome == null) {
      throw new IllegalStateException("the warm-up acquisition did not decide");
    }
    links.claimed(tag);
    outcome.lease().ifPresent(Lease::close);
  }

  /** One round: the start's writes, each answered with {@code reply} through the decoder. */
  private void round(byte[] reply, long now) {
    process();
    int sent = writes;
    writes = 0;
    for (int i = 0; i < sent; i++) {
      links.feed(writeNodes[i], reply, 0, reply.length, now + 100);
      process();
    }
  }

  private int linkedCycle() {
    outcome = null;
    client.startAcquire(links, ++tag, RESOURCE, null, null, 1_000);
    round(OK, 1_000);
    Outcome acquired = outcome;
    if (acquired == null || acquired.kind() != Outcome.Kind.ACQUIRED) {
      throw new IllegalStateException("the acquisition did not succeed: " + acquired);
    }
    // As the client's loop does once the acquisition's future took the outcome.
    links.claimed(tag);
    outcome = null;
    try (Lease lease = acquired.lease().orElseThrow()) {
      client.startRelease(links, ++tag, lease, 2_000);
      round(RELEASED, 2_000);
    }
    if (outcome == null || outcome.kind() != Outcome.Kind.RELEASED) {
      throw new IllegalStateException("the release did not succeed: " + outcome);
    }
    return outcome.released();
  }

  /**
   * The whole cycle as the client's loop drives it with the nio driver (no sockets): the
   * start, then each node's reply bytes, one native call each, through the core's links,
   * decoder and operation; the writes' bytes and the outcomes come back in reused arrays.
   */
  @Benchmark
  public int acquireReleaseN5ThroughLinks() {
    if (links == null) {
      connectLinks();
    }
    return linkedCycle();
  }

  @TearDown
  public void teardown() {
    if (links != null) {
      links.close();
    }
    client.close();
    config.close();
  }

  private Outcome drain(Operation op, boolean resp) {
    Outcome outcome = null;
    for (Output out : op.drain(resp)) {
      if (out instanceof Output.Send) {
        sends.add(((Output.Send) out).command());
      } else if (out instanceof Output.Finished) {
        outcome = ((Output.Finished) out).outcome();
      }
    }
    return outcome;
  }

  private int cycle(boolean resp) {
    sends.clear();
    Outcome acquired = null;
    try (Operation op = client.acquire(List.of("orders:42"), 1_000)) {
      drain(op, resp);
      List<Command> round = new ArrayList<>(sends);
      sends.clear();
      for (Command c : round) {
        op.handleReply(c.requestId(), Reply.ok(), 1_200);
        Outcome o = drain(op, resp);
        if (o != null) {
          acquired = o;
        }
      }
    }
    int released = 0;
    try (var lease = acquired.lease().orElseThrow(); Operation op = client.release(lease, 2_000)) {
      sends.clear();
      drain(op, resp);
      List<Command> round = new ArrayList<>(sends);
      for (Command c : round) {
        op.handleReply(c.requestId(), Reply.integer(1), 2_200);
        Outcome o = drain(op, resp);
        if (o != null) {
          released = o.released();
        }
      }
    }
    return released;
  }

  /** What the nio driver does: each input's outputs in one call, commands as RESP bytes. */
  @Benchmark
  public int acquireReleaseN5WithResp() {
    return cycle(true);
  }

  /** The decisions alone: no command bytes copied into Java. */
  @Benchmark
  public int acquireReleaseN5DecisionsOnly() {
    return cycle(false);
  }
}
