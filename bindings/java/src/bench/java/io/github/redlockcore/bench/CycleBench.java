package io.github.redlockcore.bench;

import io.github.redlockcore.core.Client;
import io.github.redlockcore.core.Command;
import io.github.redlockcore.core.Config;
import io.github.redlockcore.core.Operation;
import io.github.redlockcore.core.Outcome;
import io.github.redlockcore.core.Output;
import io.github.redlockcore.core.Reply;
import io.github.redlockcore.internal.CoreLinks;
import io.github.redlockcore.internal.Native;
import java.time.Duration;
import java.util.ArrayList;
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
  private final long[] pumpOut = new long[1];
  private final long[] linkOut = new long[4];
  private final long[] writes = new long[64];
  private final int[] writeNodes = new int[64];

  /** The links of five nodes, each connected and its script loads answered. */
  private void connectLinks() {
    links = new CoreLinks(5);
    long h = links.raw();
    // One command per node opens its connection; a throwaway acquisition supplies them.
    try (Operation op = client.acquire(List.of("warm-up"), 500)) {
      op.pump(h, 1, 500, pumpOut);
      for (int round = 0; round < 4; round++) {
        int n = 0;
        while (true) {
          Object data = Native.linksPoll(h, linkOut, false);
          if (linkOut[0] == 0) {
            break;
          }
          int node = (int) linkOut[1];
          if (linkOut[0] == 1) {
            Native.linksConnected(h, node, 600);
          } else if (linkOut[0] == 2) {
            writeNodes[n] = node;
            writes[n++] = linkOut[2];
          } else if (linkOut[0] == 4) {
            Native.linksDropDelivery(h);
          }
        }
        for (int i = 0; i < n; i++) {
          Native.linksReply(h, writeNodes[i], writes[i], 4, 0, new byte[] {'x'}, 700);
        }
      }
    }
  }

  /**
   * What the loop does now: the operation's commands go to the core's links in the poll
   * that emits them, the links' writes come out as RESP bytes, the replies go to the
   * links and reach the operation as deliveries.
   */
  private int linkedRound(Operation op, long now, Reply reply) {
    long h = links.raw();
    int code = op.pump(h, 7, now, pumpOut);
    int n = 0;
    while (true) {
      Native.linksPoll(h, linkOut, false);
      if (linkOut[0] == 0) {
        break;
      }
      if (linkOut[0] == 2) {
        writeNodes[n] = (int) linkOut[1];
        writes[n++] = linkOut[2];
      }
    }
    for (int i = 0; i < n; i++) {
      Native.linksReply(h, writeNodes[i], writes[i], reply.type().ordinal(), reply.integer(),
          null, now + 100);
      while (true) {
        Native.linksPoll(h, linkOut, false);
        if (linkOut[0] == 0) {
          break;
        }
        if (linkOut[0] == 4) {
          if (code == 3) {
            Native.linksDropDelivery(h);
          } else {
            op.deliver(h, now + 100);
            code = op.pump(h, 7, now + 100, pumpOut);
          }
        }
      }
    }
    return code;
  }

  private int linkedCycle() {
    Outcome acquired;
    try (Operation op = client.acquire(List.of("orders:42"), 1_000)) {
      if (linkedRound(op, 1_000, Reply.ok()) != 3) {
        throw new IllegalStateException("the acquisition did not decide");
      }
      acquired = op.outcome();
    }
    try (var lease = acquired.lease().orElseThrow(); Operation op = client.release(lease, 2_000)) {
      if (linkedRound(op, 2_000, Reply.integer(1)) != 3) {
        throw new IllegalStateException("the release did not decide");
      }
      return op.outcome().released();
    }
  }

  /** The whole cycle as the loop drives it over the core's links (no sockets). */
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
