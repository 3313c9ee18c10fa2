package io.github.redlockcore.nio;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.redlockcore.internal.Native;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** How long a nio connection may take to open: the core's connect timeout. */
class NioSocketTest {
  /**
   * A node whose accept queue is full drops new connection requests, as an address that
   * never answers does: the connection fails with a timeout after the core's 2 s, instead
   * of after the system's SYN retries (minutes).
   */
  @Test
  void aConnectionNotEstablishedInTimeFailsAfterTheCoresConnectTimeout() throws Exception {
    assertEquals(2000, Native.connectTimeoutDefaultMs());
    List<Socket> queued = new ArrayList<>();
    try (NioSubscriberTest.TestLoop loop = new NioSubscriberTest.TestLoop();
        ServerSocket full = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      InetSocketAddress address =
          new InetSocketAddress(InetAddress.getLoopbackAddress(), full.getLocalPort());
      // Nobody accepts: once the queue is full, the next connection requests are dropped.
      boolean hangs = false;
      for (int i = 0; i < 16 && !hangs; i++) {
        Socket socket = new Socket();
        try {
          socket.connect(address, 300);
          queued.add(socket);
        } catch (SocketTimeoutException e) {
          socket.close();
          hangs = true;
        }
      }
      assertTrue(hangs, "the accept queue never filled");

      CompletableFuture<Exception> failure = new CompletableFuture<>();
      NioSocket socket = new NioSocket(1024);
      long[] opened = new long[1];
      loop.run(() -> {
        opened[0] = System.nanoTime();
        try {
          socket.open(loop, address, new NioSocket.Handler() {
            @Override
            public void connected() {
              failure.completeExceptionally(new AssertionError("connected to a full queue"));
            }

            @Override
            public void received(byte[] data, int length) {}

            @Override
            public void ended() {}

            @Override
            public void failed(Exception e) {
              failure.complete(e);
            }
          });
        } catch (java.io.IOException e) {
          failure.complete(e);
        }
      });
      Exception e = failure.get(10, TimeUnit.SECONDS);
      long tookMs = (System.nanoTime() - opened[0]) / 1_000_000;
      assertTrue(e instanceof SocketTimeoutException, String.valueOf(e));
      assertTrue(tookMs >= 1900 && tookMs < 4000, "failed after " + tookMs + " ms");
      loop.run(socket::close);
    } finally {
      for (Socket s : queued) {
        s.close();
      }
    }
  }
}
