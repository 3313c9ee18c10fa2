package io.github.redlockcore.bench;

import io.github.redlockcore.core.Client;
import io.github.redlockcore.core.Command;
import io.github.redlockcore.core.Config;
import io.github.redlockcore.core.Operation;
import io.github.redlockcore.core.Outcome;
import io.github.redlockcore.core.Output;
import io.github.redlockcore.core.Reply;
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

  @TearDown
  public void teardown() {
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
