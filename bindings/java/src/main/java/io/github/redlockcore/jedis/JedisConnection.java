package io.github.redlockcore.jedis;

import io.github.redlockcore.core.Command;
import io.github.redlockcore.core.Reply;
import io.github.redlockcore.spi.CloseCause;
import io.github.redlockcore.spi.NodeConnection;
import io.github.redlockcore.spi.NodeEvents;
import java.net.ConnectException;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.commands.ProtocolCommand;
import redis.clients.jedis.exceptions.JedisDataException;

/**
 * One node over Jedis: a single thread runs the node's commands in order on one
 * connection. {@link #close()} (from the loop) closes the socket under a blocked read, so
 * the thread is freed and the node's later commands fail instead of waiting. A connection
 * being opened when the loop closes it (the link gave the attempt up at its connect
 * timeout) cannot be interrupted: Jedis's own connection timeout ends it, and what it
 * comes to is dropped (a connection closed, a failure unreported).
 */
final class JedisConnection implements NodeConnection {
  private static final byte[] OK = "OK".getBytes(StandardCharsets.US_ASCII);

  private final Supplier<Jedis> factory;
  private final NodeEvents events;
  private final ExecutorService thread;
  /** The connection in use; written by the node's thread, read by the loop to close it. */
  private volatile Jedis jedis;
  /**
   * Bumped on every close, so queued work of an old connection is dropped and what it comes
   * to is not reported; reports are checked against it under this object's lock, which
   * {@link #close()} takes to bump it.
   */
  private volatile int generation;

  JedisConnection(int index, Supplier<Jedis> factory, NodeEvents events) {
    this.factory = factory;
    this.events = events;
    this.thread = Executors.newSingleThreadExecutor(r -> {
      Thread t = new Thread(r, "redlock-jedis-node-" + index);
      t.setDaemon(true);
      return t;
    });
  }

  @Override
  public void connect() {
    int gen = generation;
    submit(() -> {
      if (gen != generation) {
        return;
      }
      Jedis j = null;
      try {
        j = factory.get();
        if (!j.isConnected()) {
          j.connect();
        }
      } catch (RuntimeException e) {
        if (j != null) {
          discard(j);
        }
        report(gen, () -> events.closed(cause(e), String.valueOf(e.getMessage())));
        return;
      }
      Jedis opened = j;
      if (!report(gen, () -> {
        jedis = opened;
        events.connected();
      })) {
        // Given up while it was being opened (the link's connect timeout): closed unused
        // (never back to a pool), and nothing is reported for it.
        discard(opened);
      }
    });
  }

  /**
   * Runs {@code report} (an event for the connection of generation {@code gen}) unless the
   * loop closed that connection since; false if it did. Under the lock {@link #close()}
   * takes, so nothing is reported for a connection once its close returned.
   */
  private synchronized boolean report(int gen, Runnable report) {
    if (gen != generation) {
      return false;
    }
    report.run();
    return true;
  }

  /** Closes a connection that is never used, or no longer (a pool discards it). */
  private static void discard(Jedis j) {
    try {
      j.getConnection().setBroken();
      j.close();
    } catch (RuntimeException e) {
      // Broken anyway.
    }
  }

  @Override
  public void write(long writeId, Command command, byte[] resp, byte[][] args) {
    int gen = generation;
    submit(() -> {
      Jedis j = jedis;
      if (gen != generation || j == null) {
        // The connection this write was meant for is gone; the loop failed it already.
        return;
      }
      Object reply;
      try {
        reply = toReply(j.sendCommand(name(args[0]), Arrays.copyOfRange(args, 1, args.length)));
      } catch (JedisDataException e) {
        reply = Reply.error(e.getMessage());
      } catch (RuntimeException e) {
        if (gen == generation) {
          drop(j);
          report(gen, () -> events.closed(cause(e), String.valueOf(e.getMessage())));
        }
        return;
      }
      Object answer = reply;
      report(gen, () -> events.reply(writeId, answer));
    });
  }

  private void submit(Runnable task) {
    try {
      thread.execute(task);
    } catch (java.util.concurrent.RejectedExecutionException e) {
      events.closed(CloseCause.OTHER, "the driver was closed");
    }
  }

  /** Maps what Jedis returns to the core's reply (status and bulk both come as bytes). */
  static Reply toReply(Object value) {
    if (value == null) {
      return Reply.nil();
    }
    if (value instanceof Long) {
      return Reply.integer((Long) value);
    }
    if (value instanceof byte[]) {
      byte[] bytes = (byte[]) value;
      return Arrays.equals(bytes, OK) ? Reply.ok() : Reply.bulk(bytes);
    }
    if (value instanceof List) {
      List<?> items = (List<?>) value;
      Reply[] out = new Reply[items.size()];
      for (int i = 0; i < out.length; i++) {
        out[i] = toReply(items.get(i));
      }
      return Reply.array(Arrays.asList(out));
    }
    if (value instanceof JedisDataException) {
      return Reply.error(((JedisDataException) value).getMessage());
    }
    return Reply.error("unexpected reply from Jedis: " + value.getClass().getName());
  }

  private static ProtocolCommand name(byte[] raw) {
    return () -> raw;
  }

  static CloseCause cause(Throwable e) {
    // Jedis keeps the socket's exception as the cause or, per address tried, suppressed.
    for (Throwable t = e; t != null; t = t.getCause()) {
      CloseCause c = causeOf(t);
      if (c != CloseCause.OTHER) {
        return c;
      }
      for (Throwable s : t.getSuppressed()) {
        for (Throwable u = s; u != null; u = u.getCause()) {
          c = causeOf(u);
          if (c != CloseCause.OTHER) {
            return c;
          }
        }
      }
    }
    return CloseCause.OTHER;
  }

  private static CloseCause causeOf(Throwable t) {
    if (t instanceof ConnectException) {
      return CloseCause.REFUSED;
    }
    if (t instanceof SocketTimeoutException) {
      return CloseCause.TIMEOUT;
    }
    String m = String.valueOf(t.getMessage());
    if (m.startsWith("NOAUTH") || m.startsWith("WRONGPASS")) {
      return CloseCause.AUTH;
    }
    return CloseCause.OTHER;
  }

  private void drop(Jedis j) {
    synchronized (this) {
      if (jedis == j) {
        jedis = null;
      }
    }
    discard(j);
  }

  /**
   * From the loop: close the connection now, even under a blocked read, or give up the
   * attempt to open one (its result is dropped when it comes). Nothing more is reported
   * for it once this returns.
   */
  @Override
  public void close() {
    Jedis j;
    synchronized (this) {
      generation++;
      j = jedis;
      jedis = null;
    }
    if (j != null) {
      try {
        // Closes the socket: a read blocked on a frozen node fails at once.
        j.getConnection().disconnect();
      } catch (RuntimeException e) {
        // Already closed.
      }
      submit(() -> {
        try {
          j.close();
        } catch (RuntimeException e) {
          // Broken: the pool discards it.
        }
      });
    }
    // The link asked for it: nothing more is reported for this connection.
  }

  void shutdown() {
    thread.shutdown();
    try {
      thread.awaitTermination(2, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    thread.shutdownNow();
  }
}
