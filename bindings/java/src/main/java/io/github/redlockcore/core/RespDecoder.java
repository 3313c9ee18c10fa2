package io.github.redlockcore.core;

import io.github.redlockcore.internal.Native;
import io.github.redlockcore.internal.NativeHandle;

/**
 * The core's incremental RESP2/RESP3 decoder: feed bytes as they arrive, take replies as
 * they complete. A protocol error throws {@link io.github.redlockcore.RedlockProtocolException}
 * and keeps throwing: the connection must be closed.
 */
public final class RespDecoder extends NativeHandle {
  public RespDecoder() {
    super(Native.decoderNew(), Native::decoderFree, "decoder");
  }

  public synchronized void feed(byte[] bytes, int offset, int length) {
    Native.decoderFeed(handle(), bytes, offset, length);
  }

  /** The next complete reply, still native (hand it to an operation or read it), or null. */
  public synchronized Decoded next() {
    long reply = Native.decoderNext(handle());
    return reply == 0 ? null : new Decoded(reply);
  }

  /** The next complete reply as a Java {@link Reply}, or null. */
  public Reply nextReply() {
    try (Decoded d = next()) {
      return d == null ? null : d.toReply();
    }
  }

  /** A decoded reply held natively, so it reaches an operation without a copy. */
  public static final class Decoded extends NativeHandle {
    Decoded(long handle) {
      super(handle, Native::replyFree, "reply");
    }

    public long handle0() {
      return handle();
    }

    public synchronized Reply.Type type() {
      return Reply.Type.values()[Native.replyType(handle())];
    }

    public synchronized Reply toReply() {
      return (Reply) Native.replyToJava(handle());
    }
  }
}
