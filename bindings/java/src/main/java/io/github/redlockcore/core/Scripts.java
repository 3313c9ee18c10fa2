package io.github.redlockcore.core;

import io.github.redlockcore.internal.Native;
import java.util.List;

/** The three Lua scripts the core's commands run, and their SHA-1s. */
public final class Scripts {
  private static final String[] TEXTS = Native.scripts();

  /** The acquire, release and extend scripts' texts, in this order. */
  public static final List<String> ALL = List.of(TEXTS[0], TEXTS[1], TEXTS[2]);

  public static final String ACQUIRE = TEXTS[0];
  public static final String RELEASE = TEXTS[1];
  public static final String EXTEND = TEXTS[2];
  public static final String ACQUIRE_SHA1 = TEXTS[3];
  public static final String RELEASE_SHA1 = TEXTS[4];
  public static final String EXTEND_SHA1 = TEXTS[5];
  /** Fenced acquisitions: set the keys and raise the fence counters ({@code docs/fencing.md}). */
  public static final String FENCED_ACQUIRE = TEXTS[6];
  /** Fenced acquisitions: the holder writes the token back to the counters. */
  public static final String WRITE_BACK = TEXTS[7];
  /** The resource-side check: set an item only under a higher fencing token. */
  public static final String FENCED_SET = TEXTS[8];
  public static final String FENCED_ACQUIRE_SHA1 = TEXTS[9];
  public static final String WRITE_BACK_SHA1 = TEXTS[10];
  public static final String FENCED_SET_SHA1 = TEXTS[11];
  /**
   * Waiting acquisitions: set the keys if free, else register the waiter in the resource's
   * queue on the node ({@code docs/waiting.md}).
   */
  public static final String QUEUED_ACQUIRE = TEXTS[12];
  public static final String QUEUED_ACQUIRE_SHA1 = TEXTS[13];

  private Scripts() {}

  /** {@code SCRIPT LOAD <script>} in RESP. */
  public static byte[] loadCommand(String script) {
    return Native.encodeCommand(
        new byte[][] {Native.utf8("SCRIPT"), Native.utf8("LOAD"), Native.utf8(script)});
  }

  /** The core's version. */
  public static String coreVersion() {
    return Native.version();
  }
}
