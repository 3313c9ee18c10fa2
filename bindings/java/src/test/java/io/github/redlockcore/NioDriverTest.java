package io.github.redlockcore;

import io.github.redlockcore.nio.NioDriver;
import io.github.redlockcore.spi.Driver;
import java.util.List;

/** The scenarios over the java.nio selector driver (nodes on ports 7400-7404). */
class NioDriverTest extends DriverContract {
  @Override
  int basePort() {
    return 7400;
  }

  @Override
  Driver driver(List<String> urls) {
    return NioDriver.of(urls);
  }
}
