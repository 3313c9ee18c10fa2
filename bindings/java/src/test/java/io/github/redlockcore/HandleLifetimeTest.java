package io.github.redlockcore;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.redlockcore.core.Client;
import io.github.redlockcore.core.Config;
import io.github.redlockcore.core.Operation;
import io.github.redlockcore.core.Outcome;
import io.github.redlockcore.core.Output;
import io.github.redlockcore.core.Reply;
import io.github.redlockcore.core.RespDecoder;
import io.github.redlockcore.core.Subscriptions;
import io.github.redlockcore.internal.Native;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.parallel.Isolated;

/** Native objects are freed by close(), and by the Cleaner when a caller forgets. */
@Isolated
class HandleLifetimeTest {
  /**
   * The live count once objects other tests left to the Cleaner are collected, so that
   * what this test makes and frees is all that moves it.
   */
  static long settled() throws InterruptedException {
    long last = Native.liveHandles();
    for (int stable = 0; stable < 5; ) {
      System.gc();
      Thread.sleep(20);
      long now = Native.liveHandles();
      stable = now == last ? stable + 1 : 0;
      last = now;
    }
    return last;
  }

  @Test
  void closeFreesEveryNativeObject() throws InterruptedException {
    long before = settled();
    try (Config config = Config.builder(3, Duration.ofSeconds(10)).build();
        Client client = new Client(config, new byte[32]);
        Subscriptions subscriptions = new Subscriptions(3, Duration.ofSeconds(10))) {
      subscriptions.want(new byte[] {'c'}, 1000);
      assertEquals(Subscriptions.Output.Kind.OPEN, subscriptions.poll().kind());
      for (int i = 0; i < 100; i++) {
        try (Operation op = client.acquire(List.of("r"), 1000)) {
          List<Output> outputs = op.drain(true);
          assertEquals(4, outputs.size());
          op.handleReply(1, Reply.ok(), 1100);
          op.handleReply(2, Reply.ok(), 1200);
          for (Output out : op.drain(true)) {
            if (out instanceof Output.Finished) {
              Outcome outcome = ((Output.Finished) out).outcome();
              outcome.lease().orElseThrow().close();
            }
          }
        }
        try (RespDecoder d = new RespDecoder()) {
          byte[] ok = "+OK\r\n".getBytes(java.nio.charset.StandardCharsets.US_ASCII);
          d.feed(ok, 0, ok.length);
          d.next().close();
        }
      }
      assertEquals(before + 3, Native.liveHandles());
    }
    assertEquals(before, Native.liveHandles());
  }

  @Test
  void theCleanerFreesWhatWasNeverClosed() throws InterruptedException {
    long before = settled();
    for (int i = 0; i < 1000; i++) {
      Config.builder(3, Duration.ofSeconds(10)).build();
    }
    assertTrue(Native.liveHandles() >= before + 1, "the configurations are alive until collected");
    long deadline = System.nanoTime() + 10_000_000_000L;
    while (Native.liveHandles() > before && System.nanoTime() < deadline) {
      System.gc();
      Thread.sleep(20);
    }
    assertEquals(before, Native.liveHandles());
  }
}
