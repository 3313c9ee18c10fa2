package io.github.redlockcore.internal;

import io.github.redlockcore.core.Command;
import io.github.redlockcore.core.Reply;
import io.github.redlockcore.core.RespDecoder;
import io.github.redlockcore.core.Scripts;
import io.github.redlockcore.spi.CloseCause;
import java.util.ArrayDeque;
import java.util.Iterator;

/**
 * One node's link: what to connect, write, deliver and close, in the shape of the core's
 * planned {@code Link} ({@code submit}, {@code handle_connected}, {@code handle_closed},
 * {@code handle_reply}, {@code handle_timeout}, {@code poll_output}, {@code poll_timeout})
 * so that the core's link replaces this class one call for one call.
 *
 * <p>The policy it holds until then, as the core's documentation asks of every driver:
 *
 * <ul>
 *   <li>per-node order: commands are written in the order submitted, on one connection;
 *   <li>the three {@code SCRIPT LOAD}s are the first writes on every new connection;
 *   <li>a node whose oldest write is past its deadline is stalled: it still gets releases
 *       (owed, idempotent), while new acquisitions and extensions are answered at once as
 *       failed rather than queued behind the stuck write; its first reply clears it;
 *   <li>a connection stalled for {@link #STALL_CLOSE_MICROS} or with more than {@link
 *       #MAX_IN_FLIGHT} writes out is closed, and its writes fail;
 *   <li>nothing is resent: a write whose connection closed fails with it.
 * </ul>
 */
public final class InterimLink {
  /** Writes out on one connection before new ones wait in the queue. */
  public static final int MAX_IN_FLIGHT = 256;

  /** How long a stalled connection is kept for late replies before it is closed. */
  public static final long STALL_CLOSE_MICROS = 2_000_000;

  /** Output: open a connection. */
  public static final class Connect {
    static final Connect INSTANCE = new Connect();
  }

  /** Output: write this now, after every earlier write. */
  public static final class Write {
    public final long writeId;
    /** Null for a script load. */
    public final Command command;
    public final String script;

    Write(long writeId, Command command, String script) {
      this.writeId = writeId;
      this.command = command;
      this.script = script;
    }
  }

  /** Output: hand this reply to operation {@code tag} as request {@code requestId}. */
  public static final class Deliver {
    public final long tag;
    public final long requestId;
    public final Object reply;

    Deliver(long tag, long requestId, Object reply) {
      this.tag = tag;
      this.requestId = requestId;
      this.reply = reply;
    }
  }

  /** Output: the connection is stuck, close it. */
  public static final class Close {
    static final Close INSTANCE = new Close();
  }

  private enum State {
    DISCONNECTED,
    CONNECTING,
    OPEN,
    CLOSING
  }

  private static final class Entry {
    final long tag;
    final Command command;
    final String script;
    long writeId;

    Entry(long tag, Command command, String script) {
      this.tag = tag;
      this.command = command;
      this.script = script;
    }
  }

  private final int node;
  private State state = State.DISCONNECTED;
  private final ArrayDeque<Entry> queued = new ArrayDeque<>();
  private final ArrayDeque<Entry> inFlight = new ArrayDeque<>();
  private final ArrayDeque<Object> outputs = new ArrayDeque<>();
  private long nextWriteId = 1;
  private boolean stalled;
  private String lastScriptError;

  public InterimLink(int node) {
    this.node = node;
  }

  public int node() {
    return node;
  }

  /** A command operation {@code tag} emitted for this node. */
  public void submit(long tag, Command command, long now) {
    if (state == State.CLOSING
        || (stalled && command.kind() != Command.Kind.RELEASE)) {
      outputs.add(new Deliver(tag, command.requestId(), Reply.connectionFailed(
          state == State.CLOSING
              ? "connection closing"
              : "node stalled: an earlier command is past its deadline")));
      return;
    }
    queued.add(new Entry(tag, command, null));
    if (state == State.DISCONNECTED) {
      state = State.CONNECTING;
      outputs.add(Connect.INSTANCE);
    } else if (state == State.OPEN) {
      flush();
    }
  }

  /** The connection is open: load the scripts first, then what waited. */
  public void handleConnected(long now) {
    if (state != State.CONNECTING) {
      return;
    }
    state = State.OPEN;
    for (int i = Scripts.ALL.size() - 1; i >= 0; i--) {
      queued.addFirst(new Entry(-1, null, Scripts.ALL.get(i)));
    }
    flush();
  }

  /** The connection failed or closed: every write on it, and every queued one, fails. */
  public void handleClosed(CloseCause cause, String text, long now) {
    String reason = cause.code() + (text == null || text.isEmpty() ? "" : ": " + text);
    failAll(inFlight, reason);
    failAll(queued, reason);
    stalled = false;
    state = State.DISCONNECTED;
  }

  private void failAll(ArrayDeque<Entry> entries, String reason) {
    for (Entry e : entries) {
      if (e.command != null) {
        outputs.add(new Deliver(e.tag, e.command.requestId(), Reply.connectionFailed(reason)));
      }
    }
    entries.clear();
  }

  /** The reply to write {@code writeId}. */
  public void handleReply(long writeId, Object reply, long now) {
    Iterator<Entry> it = inFlight.iterator();
    while (it.hasNext()) {
      Entry e = it.next();
      if (e.writeId == writeId) {
        it.remove();
        stalled = false;
        if (e.command != null) {
          outputs.add(new Deliver(e.tag, e.command.requestId(), reply));
        } else {
          checkScriptLoad(reply);
        }
        flush();
        return;
      }
    }
    // A reply to nothing we wrote (the connection was reset meanwhile): drop it.
    free(reply);
  }

  private void checkScriptLoad(Object reply) {
    if (reply instanceof RespDecoder.Decoded) {
      RespDecoder.Decoded d = (RespDecoder.Decoded) reply;
      if (d.type() == Reply.Type.ERROR) {
        lastScriptError = d.toReply().text();
      }
      d.close();
    } else if (reply instanceof Reply && ((Reply) reply).type() == Reply.Type.ERROR) {
      lastScriptError = ((Reply) reply).text();
    }
  }

  static void free(Object reply) {
    if (reply instanceof RespDecoder.Decoded) {
      ((RespDecoder.Decoded) reply).close();
    }
  }

  /** Time passed: a write past its deadline stalls the node; a long stall closes it. */
  public void handleTimeout(long now) {
    Entry oldest = oldestCommand();
    if (oldest == null) {
      return;
    }
    if (oldest.command.deadline() <= now) {
      stalled = true;
    }
    if (state == State.OPEN
        && (inFlight.size() > MAX_IN_FLIGHT
            || (stalled && oldest.command.deadline() + STALL_CLOSE_MICROS <= now))) {
      state = State.CLOSING;
      outputs.add(Close.INSTANCE);
    }
  }

  private Entry oldestCommand() {
    for (Entry e : inFlight) {
      if (e.command != null) {
        return e;
      }
    }
    return null;
  }

  /** The next output, or null. */
  public Object pollOutput() {
    return outputs.poll();
  }

  /** When {@link #handleTimeout} is next due, or -1. */
  public long pollTimeout() {
    Entry oldest = oldestCommand();
    if (oldest == null) {
      return -1;
    }
    long deadline = oldest.command.deadline();
    return stalled ? deadline + STALL_CLOSE_MICROS : deadline;
  }

  /** True when nothing is queued and every write in flight is past its deadline. */
  public boolean idle(long now) {
    if (!queued.isEmpty()) {
      return false;
    }
    for (Entry e : inFlight) {
      if (e.command != null && e.command.deadline() > now) {
        return false;
      }
    }
    return true;
  }

  public boolean isStalled() {
    return stalled;
  }

  /** The last error a SCRIPT LOAD got on this node, or null. */
  public String lastScriptError() {
    return lastScriptError;
  }

  private void flush() {
    while (state == State.OPEN && !queued.isEmpty() && inFlight.size() < MAX_IN_FLIGHT) {
      Entry e = queued.poll();
      e.writeId = nextWriteId++;
      inFlight.add(e);
      outputs.add(new Write(e.writeId, e.command, e.script));
    }
  }
}
