package io.github.redlockcore;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** Real local Redis nodes, started and broken with scripts/redis-nodes.sh. */
final class TestNodes implements AutoCloseable {
  final int basePort;
  final int count;

  static Path repo() {
    String p = System.getProperty("redlock.repo");
    if (p == null) {
      throw new IllegalStateException("the tests need -Dredlock.repo (Surefire sets it)");
    }
    return Paths.get(p).toAbsolutePath().normalize();
  }

  static String script(String... args) {
    List<String> cmd = new ArrayList<>();
    cmd.add(repo().resolve("scripts/redis-nodes.sh").toString());
    cmd.addAll(List.of(args));
    try {
      Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
      String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
        throw new IllegalStateException("redis-nodes.sh " + String.join(" ", args) + " failed: " + out);
      }
      return out;
    } catch (IOException e) {
      throw new IllegalStateException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  TestNodes(int basePort, int count, String... options) {
    this.basePort = basePort;
    this.count = count;
    List<String> args = new ArrayList<>(List.of(
        "start", "--base-port", Integer.toString(basePort), "--nodes", Integer.toString(count)));
    args.addAll(List.of(options));
    script(args.toArray(new String[0]));
  }

  List<String> urls() {
    List<String> out = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      out.add("redis://127.0.0.1:" + (basePort + i));
    }
    return out;
  }

  int port(int i) {
    return basePort + i;
  }

  void pause(int i) {
    script("pause", Integer.toString(i), "--base-port", Integer.toString(basePort));
  }

  void resume(int i) {
    script("resume", Integer.toString(i), "--base-port", Integer.toString(basePort));
  }

  void kill(int i) {
    script("kill", Integer.toString(i), "--base-port", Integer.toString(basePort));
  }

  void restart(int i) {
    script("restart", Integer.toString(i), "--base-port", Integer.toString(basePort));
  }

  @Override
  public void close() {
    script("stop", "--base-port", Integer.toString(basePort));
  }
}
