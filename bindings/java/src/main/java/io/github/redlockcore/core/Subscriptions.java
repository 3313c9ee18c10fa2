package io.github.redlockcore.core;

import io.github.redlockcore.RedlockStateException;
import io.github.redlockcore.internal.Native;
import io.github.redlockcore.internal.NativeHandle;
import java.time.Duration;
import java.util.Arrays;
import java.util.Objects;

/**
 * The core's notice subscriptions ({@code redlock_core::Subscriptions}): for one client,
 * when each node's subscriber connection for release notices opens, which channels it
 * subscribes, when it unsubscribes them and closes, and how long a failed one stays
 * closed. The policy is the core's, the same in every binding:
 *
 * <ul>
 *   <li>one subscriber connection per node, opened when a channel is first wanted and
 *       closed once no channel is wanted or lingering;
 *   <li>a channel its last listener left stays subscribed for the core's
 *       NOTICE_CHANNEL_LINGER_MS;
 *   <li>a connection that dropped, could not be opened, was refused {@code SUBSCRIBE}, or
 *       neither opened nor confirmed a subscription within the timeout counts as lost, and
 *       while a channel is wanted opens again after a pause (SUBSCRIBER_REOPEN_FIRST_MS,
 *       doubling up to SUBSCRIBER_REOPEN_MAX_MS, back to the first once a subscription is
 *       confirmed); a listener that arrives during the pause does not cut it short;
 *   <li>every channel still wanted is subscribed again on each new connection.
 * </ul>
 *
 * <p>Driving it: tell it when a waiting acquisition starts and stops listening on a
 * channel ({@link #want}, {@link #unwant}) and what happens to each node's connection
 * ({@link #handleOpened}, {@link #handleLost}, {@link #handleRefused}, {@link
 * #handleConfirmed}); after every input, {@link #poll()} until null and do what each
 * {@link Output} says; call {@link #handleTimeout} at {@link #pollTimeout()}. Handing
 * notices and counted confirmations to the waiting operations stays with the caller.
 * Times are microseconds on the caller's monotonic clock. Calls are serialised on this
 * object.
 */
public final class Subscriptions extends NativeHandle {
  /** What to do for the subscriber connections ({@link #poll()}). */
  public static final class Output {
    /** The kinds of output, as the core names them. */
    public enum Kind {
      /**
       * Open the node's subscriber connection, then {@link #handleOpened} (or {@link
       * #handleLost} if it fails).
       */
      OPEN,
      /**
       * Subscribe the channel on the node's connection; its confirmation goes to {@link
       * #handleConfirmed}, a refusal to {@link #handleRefused}.
       */
      SUBSCRIBE,
      /** Unsubscribe the channel there; its confirmation needs no input. */
      UNSUBSCRIBE,
      /** Close the node's connection; report nothing more for it. */
      CLOSE
    }

    private final Kind kind;
    private final int node;
    private final byte[] channel;

    /** An output (as {@link #poll()} makes them; for comparisons). */
    public Output(Kind kind, int node, byte[] channel) {
      this.kind = kind;
      this.node = node;
      this.channel = channel;
    }

    public Kind kind() {
      return kind;
    }

    /** The node's index. */
    public int node() {
      return node;
    }

    /** The channel of a {@code SUBSCRIBE} or {@code UNSUBSCRIBE}, else null (not a copy). */
    public byte[] channel() {
      return channel;
    }

    @Override
    public String toString() {
      return kind + "(" + node + (channel == null ? ""
          : ", " + new String(channel, java.nio.charset.StandardCharsets.ISO_8859_1)) + ")";
    }

    @Override
    public boolean equals(Object o) {
      if (!(o instanceof Output)) {
        return false;
      }
      Output other = (Output) o;
      return kind == other.kind && node == other.node && Arrays.equals(channel, other.channel);
    }

    @Override
    public int hashCode() {
      return Objects.hash(kind, node) * 31 + Arrays.hashCode(channel);
    }
  }

  private static final Output.Kind[] KINDS = Output.Kind.values();

  private final int nodes;
  private final long[] out = new long[2];

  /**
   * Subscriptions over {@code nodes} nodes. A connection that neither opens nor confirms a
   * subscription within {@code timeout} (the driver's connect timeout; at least 1 ms)
   * counts as lost. Throws {@code RedlockArgumentException} {@code no_nodes} or {@code
   * too_many_nodes} for a bad node count.
   */
  public Subscriptions(int nodes, Duration timeout) {
    super(Native.subscriptionsNew(nodes, timeoutMillis(timeout)),
        Native::subscriptionsFree, "subscriptions");
    this.nodes = nodes;
  }

  /** Negative stays negative (refused natively); beyond a long's ms, Long.MAX_VALUE. */
  private static long timeoutMillis(Duration timeout) {
    Objects.requireNonNull(timeout, "timeout");
    return timeout.isNegative() ? -1 : Durations.millis(timeout);
  }

  /** The number of nodes. */
  public int nodes() {
    return nodes;
  }

  /** One more listener on {@code channel} (an acquisition started listening). */
  public synchronized void want(byte[] channel, long now) {
    Native.subscriptionsWant(handle(), channel, now);
  }

  /**
   * One listener fewer on {@code channel}: once none is left it lingers, then is
   * unsubscribed. False (and nothing changes) for a channel nobody listens on.
   */
  public synchronized boolean unwant(byte[] channel, long now) {
    return Native.subscriptionsUnwant(handle(), channel, now);
  }

  /**
   * Node {@code node}'s subscriber connection opened. Throws {@code
   * RedlockArgumentException} {@code unknown_node} for a node outside the count (as do
   * {@link #handleLost}, {@link #handleRefused} and {@link #handleConfirmed}).
   */
  public synchronized void handleOpened(int node, long now) {
    Native.subscriptionsHandleOpened(handle(), node, now);
  }

  /** Node {@code node}'s subscriber connection could not be opened, or dropped. */
  public synchronized void handleLost(int node, long now) {
    Native.subscriptionsHandleLost(handle(), node, now);
  }

  /** Node {@code node} refused a {@code SUBSCRIBE}: the connection counts as lost. */
  public synchronized void handleRefused(int node, long now) {
    Native.subscriptionsHandleRefused(handle(), node, now);
  }

  /**
   * Node {@code node} confirmed the subscription to {@code channel}. True when it counts
   * (one asked for on the current connection): hand it to the channel's waiting
   * operations then; false for a stale or unknown one.
   */
  public synchronized boolean handleConfirmed(int node, byte[] channel, long now) {
    return Native.subscriptionsHandleConfirmed(handle(), node, channel, now);
  }

  /** Time has reached {@code now}; calling it early is harmless. */
  public synchronized void handleTimeout(long now) {
    Native.subscriptionsHandleTimeout(handle(), now);
  }

  /** The next output, or null when there is nothing to do until the next input. */
  public synchronized Output poll() {
    byte[] channel = Native.subscriptionsPollOutput(handle(), out);
    int kind = (int) out[0];
    if (kind == 0) {
      return null;
    }
    if (kind < 1 || kind > KINDS.length) {
      throw new RedlockStateException("unsupported_output", "unknown subscriber output " + kind);
    }
    return new Output(KINDS[kind - 1], (int) out[1], channel);
  }

  /** When {@link #handleTimeout} is next due, or -1 when nothing waits on time. */
  public synchronized long pollTimeout() {
    return Native.subscriptionsPollTimeout(handle());
  }

  /** Whether node {@code node}'s subscriber connection is open (false for no such node). */
  public synchronized boolean isOpen(int node) {
    return Native.subscriptionsIsOpen(handle(), node);
  }

  /** Whether {@code channel} is confirmed on node {@code node}'s current connection. */
  public synchronized boolean isSubscribed(int node, byte[] channel) {
    return Native.subscriptionsIsSubscribed(handle(), node, channel);
  }

  /** The number of channels wanted or lingering. */
  public synchronized int channels() {
    return Native.subscriptionsChannelCount(handle());
  }
}
