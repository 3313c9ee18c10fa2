package io.github.redlockcore.internal;

import io.github.redlockcore.RedlockStateException;
import java.lang.ref.Cleaner;
import java.util.function.LongConsumer;

/**
 * Owns one native handle: freed exactly once, by {@link #close()} or, as a safety net, by
 * a {@link Cleaner} once the owner is unreachable. Subclasses call {@link #handle()} inside
 * {@code synchronized (this)} so a concurrent {@code close()} cannot free the handle
 * during a native call.
 */
public abstract class NativeHandle implements AutoCloseable {
  private static final Cleaner CLEANER = Cleaner.create();

  /** What the cleaner runs; it must not refer to the owner. */
  private static final class Freer implements Runnable {
    private long handle;
    private final LongConsumer free;

    Freer(long handle, LongConsumer free) {
      this.handle = handle;
      this.free = free;
    }

    @Override
    public synchronized void run() {
      long h = handle;
      handle = 0;
      if (h != 0) {
        free.accept(h);
      }
    }

    synchronized long get() {
      return handle;
    }
  }

  private final Freer freer;
  private final Cleaner.Cleanable cleanable;
  private final String what;

  protected NativeHandle(long handle, LongConsumer free, String what) {
    if (handle == 0) {
      throw new RedlockStateException("jni", "the native side returned no " + what);
    }
    this.freer = new Freer(handle, free);
    this.cleanable = CLEANER.register(this, freer);
    this.what = what;
  }

  /** The live handle; throws {@code used_after_close} once closed. */
  protected final long handle() {
    long h = freer.get();
    if (h == 0) {
      throw new RedlockStateException("used_after_close", "this " + what + " was closed");
    }
    return h;
  }

  /** True once closed. */
  public final boolean isClosed() {
    return freer.get() == 0;
  }

  /** Frees the native object now. Idempotent. */
  @Override
  public synchronized void close() {
    cleanable.clean();
  }
}
