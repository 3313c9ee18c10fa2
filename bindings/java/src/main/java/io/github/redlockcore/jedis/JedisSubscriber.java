package io.github.redlockcore.jedis;

import io.github.redlockcore.spi.NoticeListener;
import io.github.redlockcore.spi.NoticeSubscriber;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;
import redis.clients.jedis.BinaryJedisPubSub;
import redis.clients.jedis.Jedis;

/**
 * One node's subscriber for release notices over Jedis: a connection of its own (taken
 * from the node's pool or factory and kept while it works) and a thread blocked in {@code
 * SUBSCRIBE}, as Jedis's pub/sub API requires. It also listens on a channel of its own, so
 * the subscription lives while no waiter waits; channels are added and removed on the
 * running subscription. A connection that drops, or whose subscription the node refuses,
 * is opened again after a delay while channels are wanted (otherwise the thread ends until
 * one is); each confirmed subscription is reported (the core decides whether a release
 * may have been missed meanwhile), so one costs the time to subscribe again rather than
 * a retry delay.
 */
final class JedisSubscriber implements NoticeSubscriber {
  private static final SecureRandom RANDOM = new SecureRandom();

  private final int index;
  private final Supplier<Jedis> factory;
  private final NoticeListener listener;
  private final byte[] own;
  /** Wanted channels, by their ISO-8859-1 text. */
  private final Map<String, byte[]> wanted = new HashMap<>();
  private Thread thread;
  private PubSub pubsub;
  private Jedis jedis;
  private boolean closed;

  JedisSubscriber(int index, Supplier<Jedis> factory, NoticeListener listener) {
    this.index = index;
    this.factory = factory;
    this.listener = listener;
    this.own = ("redlock:subscriber:" + Long.toHexString(RANDOM.nextLong()))
        .getBytes(StandardCharsets.US_ASCII);
  }

  private final class PubSub extends BinaryJedisPubSub {
    /** Set once Redis confirmed the subscriber's own channel: more can be added then. */
    boolean ready;

    @Override
    public void onSubscribe(byte[] channel, int count) {
      if (Arrays.equals(channel, own)) {
        List<byte[]> missing;
        synchronized (JedisSubscriber.this) {
          ready = true;
          missing = new ArrayList<>(wanted.values());
        }
        if (!missing.isEmpty()) {
          subscribe(missing.toArray(new byte[0][]));
        }
      } else {
        // A release published before this took effect reached nobody (rule 13 of
        // docs/bindings.md): the core decides whether one may have been missed.
        listener.subscribed(channel);
      }
    }

    @Override
    public void onMessage(byte[] channel, byte[] message) {
      listener.notice(channel, message == null ? new byte[0] : message);
    }
  }

  @Override
  public synchronized void subscribe(byte[] channel) {
    if (closed) {
      return;
    }
    boolean known = wanted.put(new String(channel, StandardCharsets.ISO_8859_1), channel) != null;
    if (thread == null) {
      start();
    } else if (pubsub.ready && !known) {
      // Not again for a channel already subscribed (a lingering one): its confirmation
      // would be a notice, and an attempt, for nothing.
      try {
        pubsub.subscribe(channel);
      } catch (RuntimeException e) {
        // The connection is going: the next one subscribes to every channel wanted.
      }
    }
  }

  @Override
  public synchronized void unsubscribe(byte[] channel) {
    if (wanted.remove(new String(channel, StandardCharsets.ISO_8859_1)) != null
        && thread != null && pubsub.ready) {
      try {
        pubsub.unsubscribe(channel);
      } catch (RuntimeException e) {
        // The connection is going; nothing to undo.
      }
    }
  }

  private void start() {
    PubSub mine = new PubSub();
    pubsub = mine;
    thread = new Thread(() -> run(mine), "redlock-jedis-notices-" + index);
    thread.setDaemon(true);
    thread.start();
  }

  private void run(PubSub first) {
    PubSub mine = first;
    long delay = REOPEN_FIRST_MS;
    try {
      while (true) {
        listen(mine);
        synchronized (this) {
          if (closed || wanted.isEmpty()) {
            return;
          }
          // Dropped or refused with channels wanted: opened again after a delay (doubling
          // while the node refuses), so notices come back to the waiters still waiting.
          delay = mine.ready ? REOPEN_FIRST_MS : delay;
          mine = new PubSub();
          pubsub = mine;
          long end = System.nanoTime() + delay * 1_000_000;
          long left;
          while (!closed && (left = end - System.nanoTime()) > 0) {
            wait(Math.max(1, left / 1_000_000));
          }
          if (closed || wanted.isEmpty()) {
            return;
          }
          delay = Math.min(2 * delay, REOPEN_MAX_MS);
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } finally {
      synchronized (this) {
        if (pubsub == mine) {
          thread = null;
          pubsub = null;
          jedis = null;
        }
      }
    }
  }

  /** One connection's subscription, until it drops, is refused or is closed. */
  private void listen(PubSub mine) {
    Jedis connection = null;
    try {
      connection = factory.get();
      synchronized (this) {
        if (closed) {
          return;
        }
        jedis = connection;
      }
      connection.subscribe(mine, own);
    } catch (RuntimeException e) {
      // Dropped or refused: no notices from this node until it is opened again.
    } finally {
      synchronized (this) {
        if (jedis == connection) {
          jedis = null;
        }
      }
      if (connection != null) {
        try {
          connection.close();
        } catch (RuntimeException e) {
          // Closing anyway.
        }
      }
    }
  }

  @Override
  public void close() {
    Jedis connection;
    PubSub running;
    synchronized (this) {
      closed = true;
      wanted.clear();
      connection = jedis;
      running = pubsub;
      // Wakes a thread waiting to open a connection again.
      notifyAll();
    }
    if (running != null && running.ready) {
      try {
        running.unsubscribe();
      } catch (RuntimeException e) {
        // Closing the socket below ends it anyway.
      }
    }
    if (connection != null) {
      try {
        // Frees the thread if it is still blocked reading.
        connection.disconnect();
      } catch (RuntimeException e) {
        // Closing anyway.
      }
    }
  }
}
