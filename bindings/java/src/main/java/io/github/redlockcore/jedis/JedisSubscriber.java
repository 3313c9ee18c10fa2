package io.github.redlockcore.jedis;

import io.github.redlockcore.spi.NoticeListener;
import io.github.redlockcore.spi.NoticeSubscriber;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.ArrayList;
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
 * running subscription. A connection that drops ends the thread and is not reopened until
 * a channel is wanted again: waiters already waiting keep the core's retry schedule.
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
      if (java.util.Arrays.equals(channel, own)) {
        List<byte[]> missing;
        synchronized (JedisSubscriber.this) {
          ready = true;
          missing = new ArrayList<>(wanted.values());
        }
        if (!missing.isEmpty()) {
          subscribe(missing.toArray(new byte[0][]));
        }
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
    wanted.put(new String(channel, StandardCharsets.ISO_8859_1), channel);
    if (thread == null) {
      start();
    } else if (pubsub.ready) {
      try {
        pubsub.subscribe(channel);
      } catch (RuntimeException e) {
        // The connection is going: this waiter keeps the retry schedule.
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

  private void run(PubSub mine) {
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
      // Dropped or refused: no notices from this node until a channel is wanted again.
    } finally {
      synchronized (this) {
        if (pubsub == mine) {
          thread = null;
          pubsub = null;
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
