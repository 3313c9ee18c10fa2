package io.github.redlockcore.nio;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.redlockcore.Unanswered;
import io.github.redlockcore.core.Reply;
import io.github.redlockcore.core.RespDecoder;
import io.github.redlockcore.spi.LoopContext;
import io.github.redlockcore.spi.NoticeListener;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.channels.SelectableChannel;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;

/**
 * What the nio subscriber makes of the replies its connection reads, without a socket; and
 * what one connection reports over a socket to a scripted server: it decides nothing
 * (the core's subscriptions do), so it never reconnects on its own.
 */
class NioSubscriberTest {
  private static final String NAMED = "\0id \u00ff\r\n";
  private static final String STREAM = "*3\r\n$9\r\nsubscribe\r\n$4\r\nchan\r\n:1\r\n"
      + "*3\r\n$7\r\nmessage\r\n$4\r\nchan\r\n$" + NAMED.length() + "\r\n" + NAMED + "\r\n"
      + "*3\r\n$7\r\nmessage\r\n$4\r\nchan\r\n$0\r\n\r\n"
      + "*3\r\n$11\r\nunsubscribe\r\n$4\r\nchan\r\n:0\r\n";

  private static String text(byte[] bytes) {
    return new String(bytes, StandardCharsets.ISO_8859_1);
  }

  /** Every reply in {@code stream}, fed in two pieces split at {@code split}. */
  private static List<Reply> replies(String stream, int split) {
    byte[] bytes = stream.getBytes(StandardCharsets.ISO_8859_1);
    List<Reply> replies = new ArrayList<>();
    try (RespDecoder decoder = new RespDecoder()) {
      decoder.feed(bytes, 0, split);
      for (Reply r; (r = decoder.nextReply()) != null; ) {
        replies.add(r);
      }
      decoder.feed(bytes, split, bytes.length - split);
      for (Reply r; (r = decoder.nextReply()) != null; ) {
        replies.add(r);
      }
    }
    return replies;
  }

  /**
   * Each message's payload comes out byte for byte (the waiter a release names, or empty);
   * a confirmed subscription is reported as such (rule 13 of docs/bindings.md); an
   * unsubscription is nothing; an error reply (a refused SUBSCRIBE) is reported as such.
   */
  @Test
  void aConfirmedSubscriptionIsReported() {
    for (int split : new int[] {0, 20, 40, STREAM.length()}) {
      List<String> heard = new ArrayList<>();
      NoticeListener listener =
          (channel, message) -> heard.add(text(channel) + "=" + text(message));
      for (Reply reply : replies(STREAM, split)) {
        assertTrue(NioSubscriber.heard(reply, listener));
      }
      // A listener that does not take confirmations hears the messages alone.
      assertEquals(List.of("chan=" + NAMED, "chan="), heard, "split at " + split);
    }

    // The confirmation is told apart from a message, for the engine.
    List<String> confirmed = new ArrayList<>();
    NoticeListener listener = new NoticeListener() {
      @Override
      public void notice(byte[] channel, byte[] message) {
        confirmed.add("notice " + text(channel));
      }

      @Override
      public void subscribed(byte[] channel) {
        confirmed.add("subscribed " + text(channel));
      }
    };
    for (Reply reply : replies(STREAM, STREAM.length())) {
      NioSubscriber.heard(reply, listener);
    }
    assertEquals(List.of("subscribed chan", "notice chan", "notice chan"), confirmed);

    assertFalse(NioSubscriber.heard(
        Reply.error("NOPERM User default has no permissions to run the 'subscribe' command"),
        listener));
    assertEquals(3, confirmed.size());
  }

  /** A loop thread with a selector and timers, as the client's loop offers drivers. */
  static final class TestLoop implements LoopContext, AutoCloseable {
    final Selector selector;
    final Thread thread;
    final ConcurrentLinkedQueue<Runnable> tasks = new ConcurrentLinkedQueue<>();
    /** Scheduled tasks (loop thread only), each with its time and whether it was cancelled. */
    final List<Timer> timers = new ArrayList<>();
    volatile boolean running = true;

    static final class Timer implements Scheduled {
      final long at;
      final Runnable task;
      boolean cancelled;

      Timer(long at, Runnable task) {
        this.at = at;
        this.task = task;
      }

      @Override
      public void cancel() {
        cancelled = true;
      }
    }

    TestLoop() throws IOException {
      selector = Selector.open();
      thread = new Thread(this::loop, "test-loop");
      thread.setDaemon(true);
      thread.start();
    }

    private void loop() {
      while (running) {
        try {
          selector.select(50);
          for (SelectionKey key : selector.selectedKeys()) {
            @SuppressWarnings("unchecked")
            Consumer<SelectionKey> ready = (Consumer<SelectionKey>) key.attachment();
            if (key.isValid()) {
              ready.accept(key);
            }
          }
          selector.selectedKeys().clear();
          for (Runnable task; (task = tasks.poll()) != null; ) {
            task.run();
          }
          long now = now();
          List<Timer> due = new ArrayList<>();
          timers.removeIf(t -> t.cancelled || (t.at <= now && due.add(t)));
          for (Timer t : due) {
            if (!t.cancelled) {
              t.task.run();
            }
          }
        } catch (IOException e) {
          return;
        }
      }
    }

    @Override
    public SelectionKey register(SelectableChannel channel, int ops,
        Consumer<SelectionKey> ready) throws IOException {
      channel.configureBlocking(false);
      return channel.register(selector, ops, ready);
    }

    @Override
    public void execute(Runnable task) {
      tasks.add(task);
      selector.wakeup();
    }

    /** Runs {@code task} on the loop thread and waits for it. */
    void run(Runnable task) throws Exception {
      CompletableFuture<Void> done = new CompletableFuture<>();
      execute(() -> {
        task.run();
        done.complete(null);
      });
      done.get(5, TimeUnit.SECONDS);
    }

    @Override
    public long now() {
      return System.nanoTime() / 1000;
    }

    @Override
    public Scheduled schedule(long at, Runnable task) {
      Timer timer = new Timer(at, task);
      timers.add(timer);
      return timer;
    }

    @Override
    public void close() throws IOException {
      running = false;
      selector.wakeup();
      try {
        thread.join(5000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      selector.close();
    }
  }

  /** Records what a connection reports, in order. */
  static final class Reports implements NoticeListener {
    final BlockingQueue<String> events = new LinkedBlockingQueue<>();

    @Override
    public void opened() {
      events.add("opened");
    }

    @Override
    public void notice(byte[] channel, byte[] message) {
      events.add("notice " + text(channel) + "=" + text(message));
    }

    @Override
    public void subscribed(byte[] channel) {
      events.add("subscribed " + text(channel));
    }

    @Override
    public void refused() {
      events.add("refused");
    }

    @Override
    public void lost() {
      events.add("lost");
    }

    String next() throws InterruptedException {
      String e = events.poll(5, TimeUnit.SECONDS);
      return e == null ? "nothing within 5 s" : e;
    }
  }

  private static String readCommand(InputStream in, int bytes) throws IOException {
    byte[] got = in.readNBytes(bytes);
    return new String(got, StandardCharsets.ISO_8859_1);
  }

  private static void write(OutputStream out, String resp) throws IOException {
    out.write(resp.getBytes(StandardCharsets.ISO_8859_1));
    out.flush();
  }

  /**
   * Opened once connected; each SUBSCRIBE and UNSUBSCRIBE sent as asked; a refusal, a
   * confirmation and a message reported as read; the connection dropped by the node
   * reported lost once, and never opened again by the subscriber itself.
   */
  @Test
  void aConnectionReportsWhatHappensAndNeverReconnects() throws Exception {
    try (TestLoop loop = new TestLoop();
        ServerSocket server = new ServerSocket(0, 8, InetAddress.getLoopbackAddress())) {
      server.setSoTimeout(5000);
      Reports reports = new Reports();
      NioDriver.Node node = NioDriver.parse("redis://127.0.0.1:" + server.getLocalPort());
      NioSubscriber[] subscriber = new NioSubscriber[1];
      loop.run(() -> {
        subscriber[0] = new NioSubscriber(node, loop, reports);
        subscriber[0].open();
      });
      try (Socket peer = server.accept()) {
        assertEquals("opened", reports.next());
        InputStream in = peer.getInputStream();
        OutputStream out = peer.getOutputStream();
        byte[] chan = "chan".getBytes(StandardCharsets.US_ASCII);
        loop.run(() -> subscriber[0].subscribe(chan));
        String subscribe = "*2\r\n$9\r\nSUBSCRIBE\r\n$4\r\nchan\r\n";
        assertEquals(subscribe, readCommand(in, subscribe.length()));
        write(out, "-NOPERM no permissions to run the 'subscribe' command\r\n");
        assertEquals("refused", reports.next());
        write(out, "*3\r\n$9\r\nsubscribe\r\n$4\r\nchan\r\n:1\r\n"
            + "*3\r\n$7\r\nmessage\r\n$4\r\nchan\r\n$2\r\nid\r\n");
        assertEquals("subscribed chan", reports.next());
        assertEquals("notice chan=id", reports.next());
        loop.run(() -> subscriber[0].unsubscribe(chan));
        String unsubscribe = "*2\r\n$11\r\nUNSUBSCRIBE\r\n$4\r\nchan\r\n";
        assertEquals(unsubscribe, readCommand(in, unsubscribe.length()));
      }
      assertEquals("lost", reports.next());
      server.setSoTimeout(300);
      assertThrows(SocketTimeoutException.class, server::accept, "it reconnected by itself");
      assertNull(reports.events.poll(100, TimeUnit.MILLISECONDS), "reported more");
      // Closed after it was lost: harmless, nothing reported.
      loop.run(() -> subscriber[0].close());

      // Closed by the loop while open: nothing is reported, not even the end of the socket.
      server.setSoTimeout(5000);
      Reports second = new Reports();
      loop.run(() -> {
        subscriber[0] = new NioSubscriber(node, loop, second);
        subscriber[0].open();
      });
      try (Socket peer = server.accept()) {
        assertEquals("opened", second.next());
        loop.run(() -> subscriber[0].close());
        assertEquals(-1, peer.getInputStream().read(), "the socket is closed");
      }
      assertNull(second.events.poll(200, TimeUnit.MILLISECONDS), "a closed one reported");
    }
  }

  /**
   * A connection that never opens reports nothing by itself (no deadline of its own: the
   * core's subscriptions give it up at the driver's connect timeout); closed by the loop
   * while it connects, its socket is gone and nothing is reported.
   */
  @Test
  void aConnectionClosedWhileItOpensIsGivenUp() throws Exception {
    // Never skipped: a test without its prerequisite fails.
    assertTrue(Unanswered.tableReadable(), "needs Linux's /proc/net/tcp");
    try (TestLoop loop = new TestLoop(); Unanswered unanswered = new Unanswered()) {
      Reports reports = new Reports();
      NioDriver.Node node = NioDriver.parse(unanswered.url());
      NioSubscriber[] subscriber = new NioSubscriber[1];
      loop.run(() -> {
        subscriber[0] = new NioSubscriber(node, loop, reports);
        subscriber[0].open();
      });
      Set<Integer> attempt = Set.of();
      for (int i = 0; i < 100 && attempt.isEmpty(); i++) {
        Thread.sleep(10);
        attempt = unanswered.connecting();
      }
      assertEquals(1, attempt.size(), "one connection attempt: " + attempt);
      assertNull(reports.events.poll(300, TimeUnit.MILLISECONDS), "reported by itself");
      loop.run(() -> subscriber[0].close());
      Set<Integer> left = unanswered.sockets();
      left.retainAll(attempt);
      assertEquals(Set.of(), left, "the given-up attempt's socket is still there");
      assertNull(reports.events.poll(200, TimeUnit.MILLISECONDS), "a closed one reported");
    }
  }

  /** A node that cannot be reached is reported lost once, at once or when it fails. */
  @Test
  void aConnectionThatCannotOpenIsLost() throws Exception {
    int port;
    try (ServerSocket closed = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      port = closed.getLocalPort();
    }
    try (TestLoop loop = new TestLoop()) {
      Reports reports = new Reports();
      NioDriver.Node node = NioDriver.parse("redis://127.0.0.1:" + port);
      loop.run(() -> new NioSubscriber(node, loop, reports).open());
      assertEquals("lost", reports.next());
      assertNull(reports.events.poll(200, TimeUnit.MILLISECONDS), "reported more");
    }
  }
}
