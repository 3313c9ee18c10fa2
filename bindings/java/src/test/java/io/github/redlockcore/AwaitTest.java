package io.github.redlockcore;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/** How a caller's wait for the loop ends when its thread is interrupted. */
class AwaitTest {

  /** A future whose wait is interrupted, as {@code get()} is when the thread was. */
  static final class InterruptedWait<T> extends CompletableFuture<T> {
    @Override
    public T get() throws InterruptedException {
      throw new InterruptedException();
    }
  }

  /**
   * The operation ended before the interrupt could cancel it: its result stands (a lock it
   * acquired is handed to the caller, never dropped) and the thread stays interrupted.
   */
  @Test
  void anInterruptAfterTheOperationEndedKeepsItsResult() {
    InterruptedWait<String> ended = new InterruptedWait<>();
    ended.complete("the lock");
    try {
      assertEquals("the lock", RedlockClient.await(ended));
      assertTrue(Thread.currentThread().isInterrupted());
    } finally {
      Thread.interrupted();
    }
  }

  /** Still running: the interrupt cancels it, and the caller hears so. */
  @Test
  void anInterruptWhileTheOperationRunsCancelsIt() {
    InterruptedWait<String> running = new InterruptedWait<>();
    try {
      assertThrows(LockCancelledException.class, () -> RedlockClient.await(running));
      assertTrue(running.isCancelled());
      assertTrue(Thread.currentThread().isInterrupted());
    } finally {
      Thread.interrupted();
    }
  }
}
