package io.github.redlockcore;

import io.github.redlockcore.core.Event;

/**
 * Hears every event of a client's operations (acquired, retry, node_failed, released, ...)
 * and the keep-alive's {@code lost}, as the core reports them ({@code
 * docs/observability.md}); set with {@link RedlockClient.Builder#listener}.
 *
 * <p>Called on the client's loop thread, in order: return quickly, and do not call the
 * client from it (that would wait for the very thread it runs on). An exception it throws
 * changes nothing about the lock: the loop catches it and hands it to the loop thread's
 * uncaught-exception handler ({@link Thread#getUncaughtExceptionHandler()}; by default it
 * is printed to standard error).
 */
@FunctionalInterface
public interface RedlockListener {
  /** One event. */
  void onEvent(Event event);
}
