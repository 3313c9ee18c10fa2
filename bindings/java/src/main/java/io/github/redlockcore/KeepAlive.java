package io.github.redlockcore;

import io.github.redlockcore.core.KeepAliveMachine;
import io.github.redlockcore.core.Lease;
import io.github.redlockcore.core.NodeResult;
import io.github.redlockcore.core.Outcome;
import io.github.redlockcore.internal.Engine;
import java.util.List;

/**
 * Automatic extension of one lock, on the client's loop thread, through the core's {@code
 * KeepAlive}: it says when to extend, when to retry, and when the lock is lost; this class
 * runs the extensions it asks for, sleeps until the instants it gives and tells the
 * listener.
 */
final class KeepAlive {
  private final RedLock lock;
  private final LockListener listener;
  private final Engine engine;
  private final KeepAliveMachine machine;
  private Engine.Timer timer;
  private boolean stopped;
  /** An extension this keep-alive asked for is under way (its outcome steps again). */
  private boolean extending;
  private List<NodeResult> lastNodes = List.of();

  KeepAlive(RedLock lock, LockListener listener) {
    this.lock = lock;
    this.listener = listener;
    this.engine = lock.owner().engine();
    this.machine = new KeepAliveMachine(lock.owner().config(), lock.lease());
  }

  void start() {
    engine.execute(this::step);
  }

  /** The core's keep-alive, told of extensions made by hand too. */
  KeepAliveMachine machine() {
    return machine;
  }

  /**
   * After an extension made by hand (its outcome went to the machine): asks the machine
   * again, as its next extension may be due sooner than the timer set from the old lease
   * (a shorter TTL).
   */
  void kick() {
    engine.execute(() -> {
      if (stopped || extending) {
        return;
      }
      if (timer != null) {
        timer.cancel();
      }
      step();
    });
  }

  void stop() {
    engine.execute(() -> {
      if (timer != null) {
        timer.cancel();
      }
      if (!stopped) {
        stopped = true;
        machine.stop();
      }
      machine.close();
    });
  }

  /** Does what the core's keep-alive says now. */
  private void step() {
    if (stopped) {
      return;
    }
    long now = engine.now();
    switch (machine.poll(now)) {
      case EXTEND:
        extending = true;
        Lease lease = lock.lease();
        engine
            .run(lock.resources(), (links, tag, at) -> lock.owner().core().startExtend(links,
                tag, lease, null, true, at), machine, null)
            .whenComplete((outcome, error) -> engine.execute(() -> extended(outcome, error)));
        break;
      case WAIT:
        timer = engine.schedule(machine.value(), this::step);
        break;
      case LOST:
        lose(machine.lostReason());
        break;
      default:
        break;
    }
  }

  private void extended(Outcome outcome, Throwable error) {
    extending = false;
    if (stopped) {
      if (outcome != null) {
        outcome.lease().ifPresent(Lease::close);
      }
      return;
    }
    if (error != null || outcome == null) {
      // The extension could not run at all; the core plans the retry.
      machine.handleFailure(engine.now());
    } else {
      outcome.lease().ifPresent(lock::replaceLease);
      lastNodes = outcome.nodes();
      if (outcome.kind() == Outcome.Kind.EXTENDED) {
        notify(() -> listener.extended(lock, lock.validUntil()));
      } else if (outcome.retryAt().isPresent()) {
        LockException cause = ErrorClasses.of(lock.resource(), outcome);
        long retryAt = outcome.retryAt().get();
        notify(() -> listener.extensionFailed(lock, cause, retryAt));
      }
    }
    step();
  }

  private void lose(String reason) {
    stopped = true;
    LockLostException cause = new LockLostException(lock.resource(), reason, lastNodes);
    lock.markLost(cause);
    if (engine.listening()) {
      engine.emit(io.github.redlockcore.core.Event.lost(reason, lock.resources(),
          lock.acquiredAt(), engine.now(), engine.epochOffset()));
    }
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
