package io.github.redlockcore.jedis;

import io.github.redlockcore.spi.CloseCause;
import java.util.List;
import java.util.function.Supplier;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisClientConfig;
import redis.clients.jedis.exceptions.JedisConnectionException;

/**
 * A connection to the master the Sentinels name for a service, asked for again at every
 * call (on the node's thread): each Sentinel in turn until one names a master. Jedis's
 * {@code JedisSentinelPool} is not used: it asks the Sentinels once, when it is built
 * (throwing then if none answers), and afterwards moves to a new master only when its
 * {@code +switch-master} subscriptions tell it, so a reconnection could still reach the
 * old master.
 */
final class SentinelMaster implements Supplier<Jedis> {
  private final List<HostAndPort> sentinels;
  private final String service;
  private final JedisClientConfig sentinelConfig;
  private final JedisClientConfig masterConfig;

  SentinelMaster(List<HostAndPort> sentinels, String service, JedisClientConfig sentinelConfig,
      JedisClientConfig masterConfig) {
    this.sentinels = sentinels;
    this.service = service;
    this.sentinelConfig = sentinelConfig;
    this.masterConfig = masterConfig;
  }

  @Override
  public Jedis get() {
    StringBuilder answers = new StringBuilder();
    RuntimeException refused = null;
    boolean allRefused = true;
    for (HostAndPort sentinel : sentinels) {
      String answer;
      HostAndPort named = null;
      try (Jedis query = new Jedis(sentinel, sentinelConfig)) {
        List<String> master = query.sentinelGetMasterAddrByName(service);
        if (master != null && master.size() == 2) {
          named = new HostAndPort(master.get(0), Integer.parseInt(master.get(1)));
        }
        answer = "it names no master for this service";
        allRefused = false;
      } catch (NumberFormatException e) {
        answer = "it named a master with an invalid port";
        allRefused = false;
      } catch (RuntimeException e) {
        if (JedisConnection.cause(e) == CloseCause.REFUSED) {
          answer = "connection refused";
          refused = e;
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
}
