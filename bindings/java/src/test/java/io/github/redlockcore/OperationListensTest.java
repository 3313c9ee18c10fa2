package io.github.redlockcore;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.redlockcore.core.Client;
import io.github.redlockcore.core.Command;
import io.github.redlockcore.core.Config;
import io.github.redlockcore.core.Lease;
import io.github.redlockcore.core.Operation;
import io.github.redlockcore.core.Outcome;
import io.github.redlockcore.core.Output;
import io.github.redlockcore.core.Reply;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.IntFunction;
import org.junit.jupiter.api.Test;

/**
 * {@link Operation#listens()} is the core's decision of when an acquisition listens for its
 * release notices ({@code Operation::listens}): with a wait limit from its first conflict (from
 * its start after a wait for the resource a moment ago); without
 * one, once an attempt failed and another may follow; until the outcome; never for other
 * operations. No nodes: the operations are driven by hand (times in microseconds).
 */
class OperationListensTest {
  /** What one round of polling gave: the commands, the last wait, the outcome. */
  static final class Polled {
    final List<Command> sends = new ArrayList<>();
    Long wait;
    Outcome outcome;
  }

  static Polled drain(Operation op, Polled into) {
    Output output;
    while ((output = op.poll()) != null) {
      if (output instanceof Output.Send) {
        into.sends.add(((Output.Send) output).command());
      } else if (output instanceof Output.Wait) {
        into.wait = ((Output.Wait) output).until();
      } else {
        into.outcome = ((Output.Finished) output).outcome();
      }
    }
    return into;
  }

  /** Answers every command with {@code reply(node)} at {@code now}; what that caused. */
  static Polled answer(Operation op, List<Command> sends, long now, IntFunction<Reply> reply) {
    Polled caused = new Polled();
    for (Command command : sends) {
      op.handleReply(command.requestId(), reply.apply(command.node()), now);
      drain(op, caused);
    }
    return caused;
  }

  @Test
  void withAWaitLimitItListensFromItsFirstConflictUntilTheOutcome() {
    try (Config config = Config.builder(3, Duration.ofSeconds(10)).build();
         Client client = new Client(config, new byte[32])) {
      // Nobody holds it: taken without listening.
      try (Operation op = client.acquire(List.of("free"), null, Duration.ofSeconds(2), 0)) {
        assertFalse(op.listens(), "nothing refused it yet");
        Polled first = drain(op, new Polled());
        assertEquals(3, first.sends.size());
        assertFalse(op.listens(), "its first attempt is out");
        Polled done = answer(op, first.sends, 100, node -> Reply.integer(1));
        assertNotNull(done.outcome);
        assertEquals(Outcome.Kind.ACQUIRED, done.outcome.kind());
        done.outcome.lease().ifPresent(Lease::close);
        assertFalse(op.listens(), "finished");
      }
      // Held: the first refusal makes it listen.
      try (Operation op = client.acquire(List.of("held"), null, Duration.ofSeconds(2), 1_000)) {
        Polled first = drain(op, new Polled());
        answer(op, first.sends.subList(0, 1), 1_100, node -> Reply.integer(0));
        assertTrue(op.listens(), "refused where the key is held");
      }
      // A wait for the same resource a moment ago: from its start (its channels linger).
      try (Operation op = client.acquire(List.of("held"), null, Duration.ofSeconds(2), 1_200)) {
        assertTrue(op.listens(), "from its start");
      }
    }
  }

  @Test
  void withoutAWaitLimitItListensOnceAnAttemptFailedAndAnotherMayFollow() {
    try (Config config = Config.builder(3, Duration.ofSeconds(10)).attempts(2).build();
         Client client = new Client(config, new byte[32]);
         Operation op = client.acquire(List.of("r"), 0)) {
      assertFalse(op.listens(), "a first attempt may win: it subscribes to nothing");
      Polled first = drain(op, new Polled());
      assertEquals(3, first.sends.size());
      assertFalse(op.listens(), "the first attempt is out");
      // Refused everywhere (held elsewhere): its cleanup goes out, and it listens.
      Polled cleanup = answer(op, first.sends, 100, node -> Reply.nil());
      assertEquals(3, cleanup.sends.size());
      assertTrue(op.listens(), "the failed attempt's cleanup is out");
      Polled delay = answer(op, cleanup.sends, 200, node -> Reply.integer(0));
      assertTrue(delay.sends.isEmpty());
      assertNull(delay.outcome);
      assertNotNull(delay.wait);
      assertTrue(op.listens(), "delaying");
      op.handleTimeout(delay.wait);
      Polled second = drain(op, new Polled());
      assertEquals(3, second.sends.size());
      assertTrue(op.listens(), "the second attempt");
      long later = delay.wait + 100;
      Polled lastCleanup = answer(op, second.sends, later, node -> Reply.nil());
      assertTrue(op.listens(), "the last attempt's cleanup: still until the outcome");
      Polled done = answer(op, lastCleanup.sends, later + 100, node -> Reply.integer(0));
      assertNotNull(done.outcome);
      assertEquals(Outcome.Kind.NOT_ACQUIRED, done.outcome.kind());
      assertFalse(op.listens(), "finished");
    }
  }

  @Test
  void aSingleAttemptNeverListens() {
    try (Config config = Config.builder(3, Duration.ofSeconds(10)).attempts(1).build();
         Client client = new Client(config, new byte[32]);
         Operation op = client.acquire(List.of("r"), 0)) {
      Polled first = drain(op, new Polled());
      Polled cleanup = answer(op, first.sends, 100, node -> Reply.nil());
      assertFalse(op.listens(), "nothing may follow its failure");
      Polled done = answer(op, cleanup.sends, 200, node -> Reply.integer(0));
      assertEquals(Outcome.Kind.NOT_ACQUIRED, done.outcome.kind());
      assertFalse(op.listens());
    }
  }

  @Test
  void extensionsReleasesAndInspectionsNeverListen() {
    try (Config config = Config.builder(3, Duration.ofSeconds(10)).build();
         Client client = new Client(config, new byte[32]);
         Lease lease = client.lease(List.of("r"), "tok", 0);
         Operation extend = client.extend(lease, null, 100);
         Operation release = client.release(lease, 100);
         Operation inspect = client.inspect(List.of("r"), 100)) {
      assertFalse(extend.listens());
      assertFalse(release.listens());
      assertFalse(inspect.listens());
    }
  }
}
