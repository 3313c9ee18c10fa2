package io.github.redlockcore.internal;

import java.nio.charset.StandardCharsets;

/** What goes into exception messages. Not API. */
public final class Messages {
  /** The most bytes (UTF-8) of a caller's name or address copied into a message. */
  public static final int NAME_BYTES = 64;

  private Messages() {}

  /**
   * {@code text} as it goes into a message: whole when its UTF-8 form is at most {@link
   * #NAME_BYTES} bytes, otherwise its first characters up to that many bytes and "…" (a
   * megabyte resource name or URL is not copied into every exception). Null stays "null".
   */
  public static String shorten(String text) {
    if (text == null) {
      return "null";
    }
    // At most 3 bytes per UTF-16 unit: short strings need no counting.
    if (text.length() * 3 <= NAME_BYTES) {
      return text;
    }
    int bytes = 0;
    int i = 0;
    while (i < text.length()) {
      int cp = text.codePointAt(i);
      int size = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
      if (bytes + size > NAME_BYTES) {
        break;
      }
      bytes += size;
      i += Character.charCount(cp);
    }
    if (i == text.length()) {
      return text;
    }
    return text.substring(0, i) + "…";
  }

  /** The UTF-8 length of {@code text} (for messages that say how long a name was). */
  public static int utf8Length(String text) {
    return text.getBytes(StandardCharsets.UTF_8).length;
  }
}
