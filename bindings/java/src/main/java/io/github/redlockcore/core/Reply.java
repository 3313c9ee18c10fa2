package io.github.redlockcore.core;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;

/** A node's reply as the core takes it, or the driver's report that none came. */
public final class Reply {
  /** Reply types, in the order the native side numbers them. */
  public enum Type {
    OK,
    STATUS,
    NIL,
    INTEGER,
    BULK,
    ARRAY,
    ERROR,
    TIMEOUT,
    CONNECTION_FAILED
  }

  private static final byte[] EMPTY = new byte[0];
  private static final Reply OK = new Reply(Type.OK, 0, EMPTY, null);
  private static final Reply NIL = new Reply(Type.NIL, 0, EMPTY, null);
  private static final Reply TIMEOUT = new Reply(Type.TIMEOUT, 0, EMPTY, null);

  private final Type type;
  private final long integer;
  private final byte[] data;
  private final List<Reply> elements;

  private Reply(Type type, long integer, byte[] data, List<Reply> elements) {
    this.type = type;
    this.integer = integer;
    this.data = data;
    this.elements = elements;
  }

  public static Reply ok() {
    return OK;
  }

  /** A status line: {@code OK} is {@link #ok()}. */
  public static Reply status(String text) {
    return "OK".equals(text) ? OK : new Reply(Type.STATUS, 0, utf8(text), null);
  }

  public static Reply nil() {
    return NIL;
  }

  public static Reply integer(long value) {
    return new Reply(Type.INTEGER, value, EMPTY, null);
  }

  public static Reply bulk(byte[] bytes) {
    return new Reply(Type.BULK, 0, bytes.clone(), null);
  }

  public static Reply array(List<Reply> elements) {
    return new Reply(Type.ARRAY, 0, EMPTY, List.copyOf(elements));
  }

  /** An error reply with the node's full text (for example {@code NOSCRIPT ...}). */
  public static Reply error(String text) {
    return new Reply(Type.ERROR, 0, utf8(text), null);
  }

  public static Reply timeout() {
    return TIMEOUT;
  }

  /** The driver could not reach the node or lost the connection; the text says why. */
  public static Reply connectionFailed(String text) {
    return new Reply(Type.CONNECTION_FAILED, 0, utf8(text), null);
  }

  static Reply fromNative(int type, long integer, byte[] data, Reply[] elements) {
    Type t = Type.values()[type];
    return new Reply(t, integer, data, elements == null ? null : Arrays.asList(elements));
  }

  private static byte[] utf8(String text) {
    return text == null ? EMPTY : text.getBytes(StandardCharsets.UTF_8);
  }

  public Type type() {
    return type;
  }

  public long integer() {
    return integer;
  }

  public byte[] data() {
    return data;
  }

  public byte[] bytes() {
    return data.clone();
  }

  /** The text of a status, error or connection failure (bulk strings as UTF-8). */
  public String text() {
    return new String(data, StandardCharsets.UTF_8);
  }

  public List<Reply> elements() {
    return elements == null ? Collections.emptyList() : elements;
  }

  /** This reply in RESP2 (timeouts and connection failures have no RESP form). */
  public byte[] toResp() {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    writeResp(out);
    return out.toByteArray();
  }

  private void writeResp(ByteArrayOutputStream out) {
    switch (type) {
      case OK:
        line(out, "+OK");
        break;
      case STATUS:
        line(out, "+" + text());
        break;
      case NIL:
        line(out, "$-1");
        break;
      case INTEGER:
        line(out, ":" + integer);
        break;
      case BULK:
        line(out, "$" + data.length);
        out.write(data, 0, data.length);
        line(out, "");
        break;
      case ARRAY:
        line(out, "*" + elements.size());
        for (Reply e : elements) {
          e.writeResp(out);
        }
        break;
      case ERROR:
        line(out, "-" + text());
        break;
      default:
        throw new io.github.redlockcore.RedlockArgumentException(
            "invalid_argument", type + " has no RESP form");
    }
  }

  private static void line(ByteArrayOutputStream out, String s) {
    byte[] b = s.getBytes(StandardCharsets.UTF_8);
    out.write(b, 0, b.length);
    out.write('\r');
    out.write('\n');
  }

  @Override
  public boolean equals(Object o) {
    if (!(o instanceof Reply)) {
      return false;
    }
    Reply r = (Reply) o;
    return r.type == type && r.integer == integer && Arrays.equals(r.data, data)
        && elements().equals(r.elements());
  }

  @Override
  public int hashCode() {
    return type.hashCode() * 31 + Long.hashCode(integer) + Arrays.hashCode(data);
  }

  @Override
  public String toString() {
    switch (type) {
      case INTEGER:
        return "integer(" + integer + ")";
      case ARRAY:
        return "array" + elements;
      case OK:
      case NIL:
      case TIMEOUT:
        return type.name().toLowerCase(java.util.Locale.ROOT);
      default:
        return type.name().toLowerCase(java.util.Locale.ROOT) + "(" + text() + ")";
    }
  }
}
