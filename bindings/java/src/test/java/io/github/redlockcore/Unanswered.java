package io.github.redlockcore;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.TreeSet;

/**
 * A loopback listener nobody accepts from, its accept queue full: the kernel drops new
 * connection requests to it, so a connection is never established, as with an address that
 * never answers. Also reads this machine's TCP table (Linux {@code /proc/net/tcp} and
 * {@code tcp6}), to tell which sockets are still trying to reach it.
 */
public final class Unanswered implements AutoCloseable {
  private static final Path[] TABLES = {Paths.get("/proc/net/tcp"), Paths.get("/proc/net/tcp6")};
  /** The kernel's state number of a socket whose SYN went out unanswered. */
  private static final String SYN_SENT = "02";

  private final ServerSocket server;
  private final List<Socket> queued = new ArrayList<>();

  public Unanswered() throws IOException {
    server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
    boolean hangs = false;
    try {
      // Nobody accepts: once the queue is full, the next connection requests are dropped.
      for (int i = 0; i < 16 && !hangs; i++) {
        Socket socket = new Socket();
        try {
          socket.connect(address(), 300);
          queued.add(socket);
        } catch (SocketTimeoutException e) {
          socket.close();
          hangs = true;
        }
      }
    } catch (IOException e) {
      close();
      throw e;
    }
    if (!hangs) {
      close();
      throw new IllegalStateException("the accept queue never filled");
    }
  }

  /** Whether the TCP table can be read here (Linux). */
  public static boolean tableReadable() {
    return Files.isReadable(TABLES[0]);
  }

  public InetSocketAddress address() {
    return new InetSocketAddress(InetAddress.getLoopbackAddress(), server.getLocalPort());
  }

  public int port() {
    return server.getLocalPort();
  }

  /** As a node URL. */
  public String url() {
    return "redis://127.0.0.1:" + port();
  }

  /** The local ports of this machine's sockets still trying to connect to it (SYN sent). */
  public Set<Integer> connecting() throws IOException {
    return sockets(true);
  }

  /** The local ports of this machine's sockets to it, in any state. */
  public Set<Integer> sockets() throws IOException {
    return sockets(false);
  }

  private Set<Integer> sockets(boolean connectingOnly) throws IOException {
    String remote = String.format(Locale.ROOT, ":%04X", port());
    Set<Integer> ports = new TreeSet<>();
    for (Path table : TABLES) {
      if (!Files.isReadable(table)) {
        continue;
      }
      for (String line : Files.readAllLines(table, StandardCharsets.US_ASCII)) {
        // "sl local_address rem_address st ...": addresses as HEXIP:HEXPORT.
        String[] fields = line.trim().split("\\s+");
        if (fields.length < 4 || !fields[2].endsWith(remote)
            || (connectingOnly && !fields[3].equals(SYN_SENT))) {
          continue;
        }
        // The listener's own accepted sockets have it as their local side, not remote.
        String local = fields[1];
        ports.add(Integer.parseInt(local.substring(local.indexOf(':') + 1), 16));
      }
    }
    return ports;
  }

  @Override
  public void close() throws IOException {
    for (Socket s : queued) {
      s.close();
    }
    server.close();
  }
}
