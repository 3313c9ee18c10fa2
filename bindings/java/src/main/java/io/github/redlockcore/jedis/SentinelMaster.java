package io.github.redlockcore.jedis;

import io.github.redlockcore.internal.SentinelQueryTimeout;
import io.github.redlockcore.spi.CloseCause;
import java.io.IOException;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import javax.net.ssl.HostnameVerifier;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocketFactory;
import redis.clients.jedis.ClientSetInfoConfig;
import redis.clients.jedis.DefaultJedisSocketFactory;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.HostAndPortMapper;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisClientConfig;
import redis.clients.jedis.JedisSocketFactory;
import redis.clients.jedis.RedisCredentials;
import redis.clients.jedis.RedisProtocol;
import redis.clients.jedis.exceptions.JedisConnectionException;

/**
 * A connection to the master the Sentinels name for a service, asked for again at every
 * call (on the node's thread): each Sentinel in turn until one names a master. Jedis's
 * {@code JedisSentinelPool} is not used: it asks the Sentinels once, when it is built
 * (throwing then if none answers), and afterwards moves to a new master only when its
 * {@code +switch-master} subscriptions tell it, so a reconnection could still reach the
 * old master.
 *
 * <p>Each Sentinel gets the query timeout (the core's {@code
 * SENTINEL_QUERY_TIMEOUT_DEFAULT_MS}, else the driver's {@code withSentinelQueryTimeout}):
 * its {@code Jedis} has it as connection and socket timeout (in place of the Sentinel
 * config's own), and the handshake and then the query wait only for what is left of it.
 * A Sentinel past it (one that hangs) is skipped for the next one, as one that refused the
 * connection is.
 */
final class SentinelMaster implements Supplier<Jedis> {
  private final List<HostAndPort> sentinels;
  private final String service;
  private final JedisClientConfig sentinelConfig;
  private final JedisClientConfig masterConfig;
  private final SentinelQueryTimeout queryTimeout;

  SentinelMaster(List<HostAndPort> sentinels, String service, JedisClientConfig sentinelConfig,
      JedisClientConfig masterConfig, SentinelQueryTimeout queryTimeout) {
    this.sentinels = sentinels;
    this.service = service;
    this.sentinelConfig = sentinelConfig;
    this.masterConfig = masterConfig;
    this.queryTimeout = queryTimeout;
  }

  /** How many Sentinels are asked, in turn. */
  int sentinelCount() {
    return sentinels.size();
  }

  @Override
  public Jedis get() {
    StringBuilder answers = new StringBuilder();
    RuntimeException refused = null;
    boolean allRefused = true;
    long queryMs = queryTimeout.millis();
    JedisClientConfig bounded = new Bounded(sentinelConfig, (int) Math.min(queryMs,
        Integer.MAX_VALUE));
    String timedOut = "timed out: no answer within " + queryMs + " ms";
    for (HostAndPort sentinel : sentinels) {
      String answer;
      HostAndPort named = null;
      DeadlineSockets sockets = new DeadlineSockets(
          new DefaultJedisSocketFactory(sentinel, bounded), System.nanoTime(), queryMs);
      try (Jedis query = new Jedis(sockets, bounded)) {
        // Connecting (and AUTH) took some of the query timeout: the answer gets the rest.
        long left = sockets.leftMs();
        if (left <= 0) {
          answer = timedOut;
        } else {
          query.getConnection().setSoTimeout((int) Math.min(left, Integer.MAX_VALUE));
          List<String> master = query.sentinelGetMasterAddrByName(service);
          if (master != null && master.size() == 2) {
            named = new HostAndPort(master.get(0), Integer.parseInt(master.get(1)));
          }
          answer = "it names no master for this service";
        }
        allRefused = false;
      } catch (NumberFormatException e) {
        answer = "it named a master with an invalid port";
        allRefused = false;
      } catch (RuntimeException e) {
        CloseCause cause = JedisConnection.cause(e);
        if (cause == CloseCause.REFUSED) {
          answer = "connection refused";
          refused = e;
        } else if (cause == CloseCause.TIMEOUT) {
          answer = timedOut;
          allRefused = false;
        } else {
          answer = String.valueOf(e.getMessage());
          allRefused = false;
        }
      }
      if (named != null) {
        // The master's own connection failure is the node's, not the Sentinel's.
        return new Jedis(named, masterConfig);
      }
      if (answers.length() > 0) {
        answers.append("; ");
      }
      answers.append(sentinel).append(": ").append(answer);
    }
    // Refused by every Sentinel: the connection's cause is kept, so the node's failure
    // reads as refused; otherwise it is a plain connection failure.
    throw new JedisConnectionException("no Sentinel named a master for service \"" + service
        + "\" (" + answers + ")", allRefused ? refused : null);
  }

  /**
   * Sockets to a Sentinel that leave the handshake (AUTH, HELLO, CLIENT SETINFO, all inside
   * Jedis's constructor) only what is left of the query timeout after connecting: Jedis
   * reads its socket timeout from the socket it is given. Without it a Sentinel slow to
   * connect and then slow to answer the handshake took up to twice the query timeout.
   */
  private static final class DeadlineSockets implements JedisSocketFactory {
    private final JedisSocketFactory inner;
    private final long startNanos;
    private final long boundMs;

    DeadlineSockets(JedisSocketFactory inner, long startNanos, long boundMs) {
      this.inner = inner;
      this.startNanos = startNanos;
      this.boundMs = boundMs;
    }

    /** What is left of the bound now, in milliseconds (zero or less: it is over). */
    long leftMs() {
      return boundMs - TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - startNanos);
    }

    @Override
    public Socket createSocket() {
      Socket socket = inner.createSocket();
      long left = leftMs();
      try {
        if (left <= 0) {
          throw new SocketTimeoutException("connecting took the whole query timeout");
        }
        socket.setSoTimeout((int) Math.min(left, Integer.MAX_VALUE));
        return socket;
      } catch (IOException e) {
        try {
          socket.close();
        } catch (IOException closing) {
          e.addSuppressed(closing);
        }
        throw new JedisConnectionException(e);
      }
    }
  }

  /** A Sentinel config with the query timeout as its connection and socket timeouts. */
  private static final class Bounded implements JedisClientConfig {
    private final JedisClientConfig inner;
    private final int timeoutMs;

    Bounded(JedisClientConfig inner, int timeoutMs) {
      this.inner = inner;
      this.timeoutMs = timeoutMs;
    }

    @Override
    public int getConnectionTimeoutMillis() {
      return timeoutMs;
    }

    @Override
    public int getSocketTimeoutMillis() {
      return timeoutMs;
    }

    @Override
    public int getBlockingSocketTimeoutMillis() {
      return inner.getBlockingSocketTimeoutMillis();
    }

    @Override
    public RedisProtocol getRedisProtocol() {
      return inner.getRedisProtocol();
    }

    @Override
    public String getUser() {
      return inner.getUser();
    }

    @Override
    public String getPassword() {
      return inner.getPassword();
    }

    @Override
    public Supplier<RedisCredentials> getCredentialsProvider() {
      return inner.getCredentialsProvider();
    }

    @Override
    public int getDatabase() {
      return inner.getDatabase();
    }

    @Override
    public String getClientName() {
      return inner.getClientName();
    }

    @Override
    public boolean isSsl() {
      return inner.isSsl();
    }

    @Override
    public SSLSocketFactory getSslSocketFactory() {
      return inner.getSslSocketFactory();
    }

    @Override
    public SSLParameters getSslParameters() {
      return inner.getSslParameters();
    }

    @Override
    public HostnameVerifier getHostnameVerifier() {
      return inner.getHostnameVerifier();
    }

    @Override
    public HostAndPortMapper getHostAndPortMapper() {
      return inner.getHostAndPortMapper();
    }

    @Override
    public boolean isReadOnlyForRedisClusterReplicas() {
      return inner.isReadOnlyForRedisClusterReplicas();
    }

    @Override
    public ClientSetInfoConfig getClientSetInfoConfig() {
      return inner.getClientSetInfoConfig();
    }
  }
}
