package io.github.redlockcore.internal;

import io.github.redlockcore.RedlockStateException;
import java.time.Duration;
import java.util.Objects;

/**
 * The loop's native half ({@code native/src/engine.rs}): the core's node links
 * ({@code redlock_core::Link}, one per node) and the operations they serve, behind one
 * handle. Loop thread only.
 *
 * <p>Each input (an operation started, a node's bytes or reply, a connection event, the
 * passing of time) is one native call that takes it through everything that follows
 * (operations polled, commands handed to links, replies delivered to operations, due
 * timeouts) and writes what the Java side must do into this object's reused arrays:
 * {@link #count()} events from {@link #records()} index 4, each command's RESP bytes in
 * {@link #bytes()}, and {@link #nextWake()}. The per-node policy (order, the bound in
 * flight, stalled nodes, owed releases, scripts first on every connection, resends,
 * reconnect backoff) is the core's; {@link Engine} only does what the events say.
 */
public final class CoreLinks extends NativeHandle {
  /** Open the node's connection: {@code node}. */
  public static final int CONNECT = 1;
  /** Write to the node: {@code node, write id, length} (the RESP bytes, in order). */
  public static final int WRITE = 2;
  /**
   * Close the node's connection, or give up the attempt to open one (its link's connect
   * timeout passed): {@code node}. Nothing more is reported for that connection.
   */
  public static final int CLOSE = 3;
  /** An operation's outcome: {@code tag, count, ...count numbers} (see {@code Outcome}). */
  public static final int OUTCOME = 5;
  /** An operation ended without an outcome (abandoned): {@code tag}. */
  public static final int ENDED = 6;
  /** One of the core's events (while {@link #listen} is on): {@code tag, count, ...}. */
  public static final int EVENT = 7;
  /**
   * The acquisition listens for its release notices from now on, until it ends: {@code tag}
   * (the core's {@code Operation::listens} turned true, checked natively after every input
   * before the operation's outputs; once per operation).
   */
  public static final int LISTEN = 8;

  private final int nodes;
  private long[] records = new long[256];
  private byte[] bytes = new byte[4096];

  /**
   * Links for {@code nodes} nodes; with {@code raw}, the driver hands in the bytes it
   * reads ({@link #feed}) and the core's decoder matches replies to writes.
   */
  public CoreLinks(int nodes, boolean raw) {
    super(Native.loopNew(nodes, raw), Native::loopFree, "links");
    this.nodes = nodes;
  }

  /**
   * As {@link #CoreLinks(int, boolean)}, every link giving a connection attempt up after
   * {@code connectTimeout} (see {@link #connectTimeout(int, Duration)}).
   */
  public CoreLinks(int nodes, boolean raw, Duration connectTimeout) {
    this(nodes, raw);
    try {
      for (int node = 0; node < nodes; node++) {
        connectTimeout(node, connectTimeout);
      }
    } catch (RuntimeException e) {
      close();
      throw e;
    }
  }

  /**
   * Node {@code node}'s link gives a connection attempt (TCP, TLS, {@code AUTH}, {@code
   * SELECT}) up when it is not open within {@code timeout}: a {@link #CLOSE} event, after
   * which the driver reports nothing more for that attempt, and the attempt counts as
   * failed with the cause {@code timeout} (the link's pause, queued commands failed, owed
   * releases kept). The user's client's connect timeout when it has one; a new link has the
   * core's ({@link Native#connectTimeoutDefaultMs()}, 2 s). Whole milliseconds, at least 1
   * (less counts as 1 ms); an attempt already under way keeps its limit. Throws {@code
   * RedlockArgumentException} {@code invalid_argument} for a negative timeout and {@code
   * unknown_node} for a node outside the count.
   */
  public void connectTimeout(int node, Duration timeout) {
    Objects.requireNonNull(timeout, "timeout");
    long millis;
    if (timeout.isNegative()) {
      // Refused natively (toMillis would round one above -1 ms to 0).
      millis = -1;
    } else {
      try {
        millis = timeout.toMillis();
      } catch (ArithmeticException e) {
        // Beyond a long's milliseconds: as long as can be said.
        millis = Long.MAX_VALUE;
      }
    }
    Native.loopSetConnectTimeout(handle(), node, millis);
  }

  /** Node {@code node}'s link's connect timeout ({@link #connectTimeout(int, Duration)}). */
  public Duration connectTimeout(int node) {
    return Duration.ofMillis(Native.loopConnectTimeoutMs(handle(), node));
  }

  public long raw() {
    return handle();
  }

  public int nodes() {
    return nodes;
  }

  /** The events of the last call, from index 4 (the header is counts and the wake). */
  public long[] records() {
    return records;
  }

  public byte[] bytes() {
    return bytes;
  }

  /** Events the last call wrote. */
  public int count() {
    return (int) records[0];
  }

  /** When to call {@link #timeout} next if nothing else happens (-1: nothing waits). */
  public long nextWake() {
    return records[3];
  }

  /** Checks a call's result; fetches the events into larger arrays when they did not fit. */
  int events(int result) {
    while (result == -1) {
      long needRecords = records[1];
      long needBytes = records[2];
      if (needRecords > Integer.MAX_VALUE - 8 || needBytes > Integer.MAX_VALUE - 8) {
        throw new RedlockStateException("unsupported_output", "too many events at once");
      }
      if (needRecords > records.length) {
        records = new long[(int) Math.max(needRecords, records.length * 2L)];
      }
      if (needBytes > bytes.length) {
        bytes = new byte[(int) Math.max(needBytes, bytes.length * 2L)];
      }
      result = Native.loopEvents(handle(), records, bytes);
    }
    return result;
  }

  /** Starts an acquisition ({@code client} is the core client's raw handle). */
  public int acquire(long client, long tag, byte[][] resources, long ttlMs, long waitMicros,
      long now) {
    return events(Native.loopAcquire(handle(), client, tag, resources, ttlMs, waitMicros, now,
        records, bytes, records.length, bytes.length));
  }

  /** Starts an extension; with {@code keep}, its outcome is kept for keep-alive. */
  public int extend(long client, long lease, long ttlMs, long tag, boolean keep, long now) {
    return events(Native.loopExtend(handle(), client, lease, ttlMs, tag, keep, now, records,
        bytes, records.length, bytes.length));
  }

  public int release(long client, long lease, long tag, long now) {
    return events(Native.loopRelease(handle(), client, lease, tag, now,
        records, bytes, records.length, bytes.length));
  }

  /**
   * Starts an inspection; with a lease handle (not 0) its outcome also says whether that
   * lease holds the lock.
   */
  public int inspect(long client, long tag, byte[][] resources, long lease, long now) {
    return events(Native.loopInspect(handle(), client, tag, resources, lease, now,
        records, bytes, records.length, bytes.length));
  }

  /** The operations' events come with the others ({@link #EVENT}) while on. */
  public void listen(boolean on) {
    Native.loopListen(handle(), on);
  }

  public int abandon(long tag, long now) {
    return events(Native.loopAbandon(handle(), tag, now,
        records, bytes, records.length, bytes.length));
  }

  /**
   * The acquisition {@code tag}'s "acquired" outcome reached no caller: the core's {@code
   * decline} releases its lock, then the operation ends ({@link #ENDED}). Nothing for a tag
   * with no acquired lock waiting.
   */
  public int decline(long tag, long now) {
    return events(Native.loopDecline(handle(), tag, now,
        records, bytes, records.length, bytes.length));
  }

  /** The acquisition {@code tag} handed its "acquired" outcome to a caller. */
  public void claimed(long tag) {
    Native.loopClaimed(handle(), tag);
  }

  /** A release notice from {@code node} with its message (the pub/sub payload). */
  public int notice(long tag, int node, byte[] message, long now) {
    return events(Native.loopNotice(handle(), tag, node, message, now,
        records, bytes, records.length, bytes.length));
  }

  /** Node {@code node} confirmed the subscription to one of the operation's channels. */
  public int subscribed(long tag, int node, long now) {
    return events(Native.loopSubscribed(handle(), tag, node, now,
        records, bytes, records.length, bytes.length));
  }

  public int timeout(long now) {
    return events(Native.loopTimeout(handle(), now, records, bytes, records.length, bytes.length));
  }

  public int connected(int node, long now) {
    return events(Native.loopConnected(handle(), node, now,
        records, bytes, records.length, bytes.length));
  }

  public int closed(int node, int cause, String text, long now) {
    return events(Native.loopClosed(handle(), node, cause, text, now,
        records, bytes, records.length, bytes.length));
  }

  public int reply(int node, long write, int kind, long integer, byte[] data, long now) {
    return events(Native.loopReply(handle(), node, write, kind, integer, data, now, records,
        bytes, records.length, bytes.length));
  }

  public int replyResp(int node, long write, byte[] resp, long now) {
    return events(Native.loopReplyResp(handle(), node, write, resp, now,
        records, bytes, records.length, bytes.length));
  }

  /** Bytes read from a raw connection (links made with {@code raw}). */
  public int feed(int node, byte[] data, int offset, int length, long now) {
    if (data == null || offset < 0 || length < 0 || offset > data.length - length) {
      throw new io.github.redlockcore.RedlockArgumentException("invalid_argument",
          "offset " + offset + " and length " + length + " do not fit the bytes");
    }
    return events(Native.loopFeed(handle(), node, data, offset, length, now,
        records, bytes, records.length, bytes.length));
  }

  /** Hands the outcome kept for {@code tag} to a keep-alive ({@code keepAlive}'s handle). */
  public void keepAliveOutcome(long tag, long keepAlive, long now) {
    Native.loopKeepAliveOutcome(handle(), tag, keepAlive, now);
  }

  public void forget(long tag) {
    Native.loopForget(handle(), tag);
  }

  /** Operations still running. */
  public int running() {
    return Native.loopRunning(handle());
  }

  /** One node's link at {@code now}. */
  public Info info(int node, long now) {
    long[] v = Native.loopLinkInfo(handle(), node, now);
    return new Info((int) v[0], (int) v[1], (int) v[2], v[3] != 0, v[4] != 0, v[5] != 0);
  }

  /** A snapshot of one link's state. */
  public static final class Info {
    public final int inFlight;
    public final int queued;
    public final int owed;
    public final boolean idle;
    public final boolean stalled;
    public final boolean open;

    Info(int inFlight, int queued, int owed, boolean idle, boolean stalled, boolean open) {
      this.inFlight = inFlight;
      this.queued = queued;
      this.owed = owed;
      this.idle = idle;
      this.stalled = stalled;
      this.open = open;
    }

    @Override
    public String toString() {
      return "in flight " + inFlight + ", queued " + queued + ", owed " + owed
          + (stalled ? ", stalled" : "") + (open ? ", open" : "");
    }
  }
}
