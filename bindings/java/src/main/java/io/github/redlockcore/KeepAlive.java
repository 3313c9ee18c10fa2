package io.github.redlockcore;

import io.github.redlockcore.core.Lease;
import io.github.redlockcore.core.Outcome;
import io.github.redlockcore.internal.Engine;
import java.util.List;
import java.util.Optional;

/**
 * Automatic extension of one lock, on the client's loop thread. Every "when" is the core's:
 * the next extension from {@code Config::next_extension}, the retry of a failed one from
 * {@code NotExtended::retry_at}, the loss from the outcome ({@code is_lost}) or from the
 * lease's {@code valid_until}. The core's planned {@code KeepAlive} state machine replaces
 * this class one call for one call ({@code poll} = {@link #schedule}, {@code
 * handle_outcome} = {@link #handle}, {@code handle_failure} = the exceptional branch).
 */
final class KeepAlive {
  private final RedLock lock;
  private final LockListener listener;
  private final Engine engine;
  private Engine.Timer timer;
  private boolean stopped;

  KeepAlive(RedLock lock, LockListener listener) {
    this.lock = lock;
    this.listener = listener;
    this.engine = lock.owner().engine();
  }

  void start() {
    engine.execute(this::schedule);
  }

  void stop() {
    engine.execute(() -> {
      stopped = true;
      if (timer != null) {
        timer.cancel();
      }
    });
  }

  /** Plans the next extension as the core says, or the loss if there is none. */
  private void schedule() {
    if (stopped) {
      return;
    }
    long now = engine.now();
    Lease lease = lock.lease();
    Optional<Long> at = lock.owner().config().nextExtension(lease, now);
    if (at.isPresent()) {
      timer = engine.schedule(at.get(), this::extendNow);
    } else if (!lease.isValid(now)) {
      lose("expired", List.of());
    } else {
      // The extension bound is reached: held until valid_until, lost from then on.
      timer = engine.schedule(lease.validUntil(), () -> lose("extension_limit", List.of()));
    }
  }

  private void extendNow() {
    if (stopped) {
      return;
    }
    Lease lease = lock.lease();
    if (!lease.isValid(engine.now())) {
      lose("expired", List.of());
      return;
    }
    engine
        .run(now -> lock.owner().core().extend(lease, null, now))
        .whenComplete((outcome, error) -> engine.execute(() -> handle(lease, outcome, error)));
  }

  private void handle(Lease extended, Outcome outcome, Throwable error) {
    if (stopped) {
      if (outcome != null) {
        outcome.lease().ifPresent(Lease::close);
      }
      return;
    }
    if (error != null || outcome == null) {
      // The extension could not run at all: the lease stands until valid_until.
      timer = engine.schedule(extended.validUntil(), () -> lose("expired", List.of()));
      return;
    }
    outcome.lease().ifPresent(lock::replaceLease);
    if (outcome.kind() == Outcome.Kind.EXTENDED) {
      notify(() -> listener.extended(lock, lock.validUntil()));
      schedule();
      return;
    }
    if (outcome.isLost()) {
      lose(outcome.reason().orElse(null) == Outcome.Reason.CONFLICT ? "taken" : "expired",
          outcome.nodes());
      return;
    }
    LockException cause = ErrorClasses.of(lock.resource(), outcome);
    Optional<Long> retryAt = outcome.retryAt();
    if (retryAt.isPresent()) {
      notify(() -> listener.extensionFailed(lock, cause, retryAt.get()));
      timer = engine.schedule(retryAt.get(), this::extendNow);
    } else {
      List<io.github.redlockcore.core.NodeResult> nodes = outcome.nodes();
      timer = engine.schedule(lock.validUntil(), () -> lose("expired", nodes));
    }
  }

  private void lose(String reason, List<io.github.redlockcore.core.NodeResult> nodes) {
    if (stopped) {
      return;
    }
    stopped = true;
    LockLostException cause = new LockLostException(lock.resource(), reason, nodes);
    lock.markLost(cause);
    notify(() -> listener.lost(lock, cause));
  }

  /** A listener's exception must not stop the loop that serves every lock. */
  private static void notify(Runnable call) {
    try {
      call.run();
    } catch (RuntimeException e) {
      Thread t = Thread.currentThread();
      t.getUncaughtExceptionHandler().uncaughtException(t, e);
    }
  }
}
