package io.github.redlockcore.spi;

import java.io.IOException;
import java.nio.channels.SelectableChannel;
import java.nio.channels.SelectionKey;
import java.util.function.Consumer;

/** What the client's loop offers a driver: its selector, its thread, its clock. */
public interface LoopContext {
  /**
   * Registers {@code channel} with the loop's selector; {@code ready} runs on the loop
   * thread with the key whenever it is selected.
   */
  SelectionKey register(SelectableChannel channel, int ops, Consumer<SelectionKey> ready)
      throws IOException;

  /** Runs {@code task} on the loop thread (at once if already there). */
  void execute(Runnable task);

  /** Now, in microseconds on the loop's monotonic clock (the core's {@code Time}). */
  long now();

  /**
   * Runs {@code task} on the loop thread once {@link #now} reaches {@code at}, unless
   * cancelled first. Loop thread only.
   */
  Scheduled schedule(long at, Runnable task);

  /** A task {@link #schedule}d on the loop. */
  interface Scheduled {
    /** It will not run (loop thread only). */
    void cancel();
  }
}
