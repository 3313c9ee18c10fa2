package io.github.redlockcore;

import io.github.redlockcore.core.Config;
import io.github.redlockcore.internal.Native;
import java.time.Duration;

/** Run in a child JVM by {@link ErrorPathsTest}: loads the library one way and reports. */
public final class NativeProbe {
  private NativeProbe() {}

  public static void main(String[] args) {
    try {
      if (args.length > 0 && args[0].equals("panic")) {
        try {
          Native.panicForTest();
        } catch (RedlockNativeException e) {
          System.out.println("caught " + e.code());
        }
      }
      try (Config c = Config.builder(3, Duration.ofSeconds(1)).build()) {
        System.out.println("loaded quorum=" + c.quorum());
      }
    } catch (RedlockNativeException e) {
      System.out.println("failed " + e.code() + ": " + e.getMessage());
    } catch (ExceptionInInitializerError e) {
      Throwable cause = e.getCause();
      System.out.println("failed " + (cause instanceof RedlockNativeException
          ? ((RedlockNativeException) cause).code() + ": " + cause.getMessage()
          : String.valueOf(cause)));
    }
  }
}
