package io.github.redlockcore.jedis;

import io.github.redlockcore.spi.NoticeListener;
import io.github.redlockcore.spi.NoticeSubscriber;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.Arrays;
import java.util.function.Supplier;
import redis.clients.jedis.BinaryJedisPubSub;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.exceptions.JedisDataException;

/**
 * One subscriber connection to one node for release notices over Jedis: a connection of
 * its own (taken from the node's pool or factory, never given back for reuse) and a
 * thread blocked in {@code SUBSCRIBE}, as Jedis's pub/sub API requires. It first
 * subscribes to a channel of its own, so that the subscription lives while it listens on
 * nothing else, and reports the connection opened once that is confirmed; the loop's
 * channels are then added and removed on the running subscription. It reports messages
 * and confirmed subscriptions; an error reply (a refused {@code SUBSCRIBE}) ends it as
 * refused, anything else that ends it as lost. It never reconnects: the core decides when
 * a new one is opened.
 */
final class JedisSubscriber implements NoticeSubscriber {
  private static final SecureRandom RANDOM = new SecureRandom();

  private final int index;
  private final Supplier<Jedis> factory;
  private final NoticeListener listener;
  private final byte[] own;
  private final PubSub pubsub = new PubSub();
  /** The connection while the thread holds one. */
  private Jedis jedis;
  /** Closed by the loop, or ended: nothing more is reported. */
  private boolean closed;
  /** Redis confirmed the subscriber's own channel: channels can be added and removed. */
  private boolean ready;

  JedisSubscriber(int index, Supplier<Jedis> factory, NoticeListener listener) {
    this.index = index;
    this.factory = factory;
    this.listener = listener;
    this.own = ("redlock:subscriber:" + Long.toHexString(RANDOM.nextLong()))
        .getBytes(StandardCharsets.US_ASCII);
  }

  private final class PubSub extends BinaryJedisPubSub {
    @Override
    public void onSubscribe(byte[] channel, int count) {
      if (Arrays.equals(channel, own)) {
        boolean gone;
        synchronized (JedisSubscriber.this) {
          ready = true;
          gone = closed;
        }
        if (gone) {
          // Closed while it connected (Jedis reconnects a socket closed before use).
          unsubscribe();
          return;
        }
        listener.opened();
      } else {
        listener.subscribed(channel);
      }
    }

    @Override
    public void onMessage(byte[] channel, byte[] message) {
      listener.notice(channel, message == null ? new byte[0] : message);
    }
  }

  /** Starts the connection's thread; the outcome is reported (opened, or lost). */
  void start() {
    Thread thread = new Thread(this::run, "redlock-jedis-notices-" + index);
    thread.setDaemon(true);
    thread.start();
  }

  @Override
  public void subscribe(byte[] channel) {
    if (isReady()) {
      try {
        pubsub.subscribe(channel);
      } catch (RuntimeException e) {
        broken();
      }
    }
  }

  @Override
  public void unsubscribe(byte[] channel) {
    if (isReady()) {
      try {
        pubsub.unsubscribe(channel);
      } catch (RuntimeException e) {
        broken();
      }
    }
  }

  /** A write failed: the socket is closed, and the thread reports the connection lost. */
  private void broken() {
    Jedis connection;
    synchronized (this) {
      connection = jedis;
    }
    if (connection != null) {
      try {
        connection.disconnect();
      } catch (RuntimeException e) {
        // Ending anyway.
      }
    }
  }

  /** Closed, or ended. */
  synchronized boolean isClosed() {
    return closed;
  }

  private synchronized boolean isReady() {
    return ready && !closed;
  }

  /** The connection's life: opened, subscribed until it ends, then reported. */
  private void run() {
    Jedis connection = null;
    boolean refused = false;
    try {
      connection = factory.get();
      synchronized (this) {
        if (closed) {
          return;
        }
        jedis = connection;
      }
      connection.subscribe(pubsub, own);
    } catch (JedisDataException e) {
      // An error reply once subscribing: the node refused a SUBSCRIBE (an ACL, say).
      refused = connection != null;
    } catch (RuntimeException e) {
      // Could not be opened, or dropped.
    } finally {
      boolean report;
      synchronized (this) {
        report = !closed;
        closed = true;
        jedis = null;
      }
      if (connection != null) {
        try {
          // Never back to a pool: it may still be subscribed.
          connection.getConnection().setBroken();
          connection.close();
        } catch (RuntimeException e) {
          // Closing anyway.
        }
      }
      if (report) {
        if (refused) {
          listener.refused();
        } else {
          listener.lost();
        }
      }
    }
  }

  @Override
  public void close() {
    Jedis connection;
    synchronized (this) {
      if (closed) {
        return;
      }
      closed = true;
      connection = jedis;
    }
    if (connection != null) {
      try {
        // Frees the thread blocked reading; it closes the connection.
        connection.disconnect();
      } catch (RuntimeException e) {
        // Closing anyway.
      }
    }
  }
}
