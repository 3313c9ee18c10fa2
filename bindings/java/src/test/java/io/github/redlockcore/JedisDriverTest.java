package io.github.redlockcore;

import io.github.redlockcore.jedis.JedisDriver;
import io.github.redlockcore.spi.Driver;
import java.net.URI;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import redis.clients.jedis.JedisPool;

/** The scenarios over Jedis pools, one per node (nodes on ports 7420-7424). */
class JedisDriverTest extends DriverContract {
  private final List<JedisPool> pools = new ArrayList<>();

  @Override
  int basePort() {
    return 7420;
  }

  @Override
  Driver driver(List<String> urls) {
    List<JedisPool> mine = new ArrayList<>();
    for (String url : urls) {
      URI uri = URI.create(url);
      JedisPool pool = new JedisPool(uri.getHost(), uri.getPort());
      mine.add(pool);
      pools.add(pool);
    }
    return JedisDriver.ofPools(mine);
  }

  @AfterEach
  void closePools() {
    // The client first (JUnit runs this before the contract's own @AfterEach): closing it
    // lets the releases its links still owe reach the nodes through these pools.
    redlock.close();
    pools.forEach(JedisPool::close);
    pools.clear();
  }
}
