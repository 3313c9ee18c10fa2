package io.github.redlockcore.internal;

import io.github.redlockcore.RedlockStateException;
import io.github.redlockcore.core.Command;
import io.github.redlockcore.core.Operation;
import io.github.redlockcore.core.Outcome;
import io.github.redlockcore.core.Output;
import io.github.redlockcore.core.Reply;
import io.github.redlockcore.core.RespDecoder;
import io.github.redlockcore.core.Scripts;
import io.github.redlockcore.spi.CloseCause;
import io.github.redlockcore.spi.Driver;
import io.github.redlockcore.spi.LoopContext;
import io.github.redlockcore.spi.NodeConnection;
import io.github.redlockcore.spi.NodeEvents;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.channels.SelectableChannel;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.function.LongFunction;

/**
 * The loop: one thread that starts operations, sends what they emit through each node's
 * link to the driver's connections, feeds replies and timeouts back, and polls until each
 * operation waits or ends. It decides nothing about the lock: every output comes from the
 * core ({@link Operation}) or, for the transport, from the node's link ({@link
 * InterimLink}).
 *
 * <p>The thread sleeps in a {@link Selector}, so raw-socket drivers register their
 * channels with it and are served on this same thread; other drivers report from their own
 * threads and the loop takes their events over through {@link #execute}.
 */
public final class Engine implements LoopContext, AutoCloseable {
  private final Driver driver;
  private final Selector selector;
  private final Thread thread;
  private final ConcurrentLinkedQueue<Runnable> tasks = new ConcurrentLinkedQueue<>();
  private final long origin = System.nanoTime();
  private final boolean wantsArgs;
  private volatile boolean running = true;

  // ---- loop-thread state ----
  private final InterimLink[] links;
  private final NodeConnection[] connections;
  private final Map<Long, Op> ops = new HashMap<>();
  private final PriorityQueue<Timer> timers = new PriorityQueue<>();
  private final ArrayDeque<InterimLink.Deliver> deliveries = new ArrayDeque<>();
  private long nextTag = 1;
  private long timerSeq;
  private volatile boolean closing;

  private static final class Op {
    final long tag;
    final Operation operation;
    final CompletableFuture<Outcome> future;
    final long giveUpAt;
    long waitUntil = -1;

    Op(long tag, Operation operation, CompletableFuture<Outcome> future, long giveUpAt) {
      this.tag = tag;
      this.operation = operation;
      this.future = future;
      this.giveUpAt = giveUpAt;
    }
  }

  /** A task due at a time on the loop's clock. */
  public static final class Timer implements Comparable<Timer> {
    final long at;
    final long seq;
    final Runnable task;
    boolean cancelled;

    Timer(long at, long seq, Runnable task) {
      this.at = at;
      this.seq = seq;
      this.task = task;
    }

    /** Cancels it (loop thread). */
    public void cancel() {
      cancelled = true;
    }

    @Override
    public int compareTo(Timer o) {
      return at != o.at ? Long.compare(at, o.at) : Long.compare(seq, o.seq);
    }
  }

  public Engine(Driver driver) {
    this.driver = driver;
    this.wantsArgs = driver instanceof ArgsDriver;
    try {
      this.selector = Selector.open();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    int n = driver.nodes();
    links = new InterimLink[n];
    connections = new NodeConnection[n];
    for (int i = 0; i < n; i++) {
      links[i] = new InterimLink(i);
    }
    thread = new Thread(this::loop, "redlock-loop-" + driver.name());
    thread.setDaemon(true);
    // Connections are opened on the loop thread, so drivers may register channels.
    CompletableFuture<Void> opened = new CompletableFuture<>();
    tasks.add(() -> {
      try {
        for (int i = 0; i < n; i++) {
          connections[i] = driver.open(i, this, new Events(i));
        }
        opened.complete(null);
      } catch (RuntimeException e) {
        opened.completeExceptionally(e);
      }
    });
    thread.start();
    opened.join();
  }

  /** Marker for drivers that send argv (a client library) rather than RESP bytes. */
  public interface ArgsDriver {}

  // ---- LoopContext ----

  @Override
  public SelectionKey register(SelectableChannel channel, int interest, Consumer<SelectionKey> ready)
      throws IOException {
    channel.configureBlocking(false);
    return channel.register(selector, interest, ready);
  }

  @Override
  public void execute(Runnable task) {
    if (Thread.currentThread() == thread) {
      task.run();
    } else {
      tasks.add(task);
      selector.wakeup();
    }
  }

  @Override
  public long now() {
    // +1 s: never 0, which the core takes as "unknown" in rebuilt leases.
    return (System.nanoTime() - origin) / 1000 + 1_000_000;
  }

  public boolean inLoop() {
    return Thread.currentThread() == thread;
  }

  public int nodes() {
    return links.length;
  }

  // ---- operations ----

  /**
   * Starts the operation {@code start} creates (given {@code now}, on the loop thread) and
   * completes with its outcome. With {@code giveUpAt >= 0}, an acquisition that is between
   * attempts (every node settled) and would try again only after {@code giveUpAt} is
   * dropped and completes with null.
   */
  public CompletableFuture<Outcome> run(LongFunction<Operation> start, long giveUpAt) {
    CompletableFuture<Outcome> future = new CompletableFuture<>();
    if (closing || !running) {
      future.completeExceptionally(
          new RedlockStateException("used_after_close", "the Redlock client was closed"));
      return future;
    }
    execute(() -> {
      if (closing) {
        future.completeExceptionally(
            new RedlockStateException("used_after_close", "the Redlock client was closed"));
        return;
      }
      Operation operation;
      long now = now();
      try {
        operation = start.apply(now);
      } catch (RuntimeException e) {
        future.completeExceptionally(e);
        return;
      }
      Op op = new Op(nextTag++, operation, future, giveUpAt);
      ops.put(op.tag, op);
      drain(op, now);
      deliverAll();
    });
    return future;
  }

  /** Runs {@code task} on the loop thread at {@code at} (loop clock). Loop thread only. */
  public Timer schedule(long at, Runnable task) {
    Timer t = new Timer(at, timerSeq++, task);
    timers.add(t);
    return t;
  }

  private void drain(Op op, long now) {
    try {
      if (wantsArgs) {
        Output out;
        while ((out = op.operation.poll(false, true)) != null) {
          if (handle(op, out, now)) {
            return;
          }
        }
      } else {
        // Raw sockets: every output of this input in one native call.
        for (Output out : op.operation.drain(true)) {
          if (handle(op, out, now)) {
            return;
          }
        }
      }
    } catch (RuntimeException e) {
      ops.remove(op.tag);
      op.operation.close();
      op.future.completeExceptionally(e);
    }
  }

  /** Acts on one output; true once the operation is finished (or given up). */
  private boolean handle(Op op, Output out, long now) {
    if (out instanceof Output.Send) {
      Command c = ((Output.Send) out).command();
      InterimLink link = links[c.node()];
      link.submit(op.tag, c, now);
      pump(link);
      return false;
    }
    if (out instanceof Output.Wait) {
      long until = ((Output.Wait) out).until();
      op.waitUntil = until;
      if (op.giveUpAt >= 0 && until > op.giveUpAt && op.operation.isSettled()) {
        finish(op, null);
        return true;
      }
      return false;
    }
    finish(op, ((Output.Finished) out).outcome());
    return true;
  }

  private void finish(Op op, Outcome outcome) {
    ops.remove(op.tag);
    op.operation.close();
    op.future.complete(outcome);
  }

  /** Acts on a link's outputs; deliveries are queued for {@link #deliverAll()}. */
  private void pump(InterimLink link) {
    Object out;
    while ((out = link.pollOutput()) != null) {
      int i = link.node();
      if (out instanceof InterimLink.Deliver) {
        deliveries.add((InterimLink.Deliver) out);
      } else if (out instanceof InterimLink.Write) {
        InterimLink.Write w = (InterimLink.Write) out;
        if (w.command != null) {
          connections[i].write(w.writeId, w.command, w.command.resp(), w.command.args());
        } else {
          connections[i].write(w.writeId, null, Scripts.loadCommand(w.script),
              new byte[][] {Native.utf8("SCRIPT"), Native.utf8("LOAD"), Native.utf8(w.script)});
        }
      } else if (out instanceof InterimLink.Connect) {
        connections[i].connect();
      } else if (out instanceof InterimLink.Close) {
        connections[i].close();
      }
    }
  }

  private void deliverAll() {
    InterimLink.Deliver d;
    while ((d = deliveries.poll()) != null) {
      Op op = ops.get(d.tag);
      if (op == null) {
        // A late reply to an operation that already ended: it changes nothing.
        InterimLink.free(d.reply);
        continue;
      }
      long now = now();
      try {
        if (d.reply instanceof RespDecoder.Decoded) {
          op.operation.handleReply(d.requestId, (RespDecoder.Decoded) d.reply, now);
          ((RespDecoder.Decoded) d.reply).close();
        } else {
          op.operation.handleReply(d.requestId, (Reply) d.reply, now);
        }
      } catch (RuntimeException e) {
        InterimLink.free(d.reply);
        ops.remove(op.tag);
        op.operation.close();
        op.future.completeExceptionally(e);
        continue;
      }
      drain(op, now);
    }
  }

  /** A node's events, taken over by the loop thread. */
  private final class Events implements NodeEvents {
    private final int node;

    Events(int node) {
      this.node = node;
    }

    @Override
    public void connected() {
      execute(() -> {
        links[node].handleConnected(now());
        pump(links[node]);
        deliverAll();
      });
    }

    @Override
    public void closed(CloseCause cause, String text) {
      execute(() -> {
        links[node].handleClosed(cause, text, now());
        pump(links[node]);
        deliverAll();
      });
    }

    @Override
    public void reply(long writeId, Object reply) {
      execute(() -> {
        links[node].handleReply(writeId, reply, now());
        pump(links[node]);
        deliverAll();
      });
    }
  }

  // ---- the loop ----

  private void loop() {
    while (running) {
      try {
        long wake = nextWake();
        long now = now();
        if (tasks.isEmpty()) {
          if (wake < 0) {
            selector.select();
          } else if (wake > now) {
            // Round up: waking early only loops once more.
            selector.select(Math.max(1, (wake - now + 999) / 1000));
          } else {
            selector.selectNow();
          }
        } else {
          selector.selectNow();
        }
        Iterator<SelectionKey> it = selector.selectedKeys().iterator();
        while (it.hasNext()) {
          SelectionKey key = it.next();
          it.remove();
          @SuppressWarnings("unchecked")
          Consumer<SelectionKey> ready = (Consumer<SelectionKey>) key.attachment();
          if (key.isValid() && ready != null) {
            ready.accept(key);
          }
        }
        Runnable task;
        while ((task = tasks.poll()) != null) {
          try {
            task.run();
          } catch (RuntimeException e) {
            Thread t = Thread.currentThread();
            t.getUncaughtExceptionHandler().uncaughtException(t, e);
          }
        }
        fireDue(now());
      } catch (IOException | RuntimeException e) {
        // A bug or a selector failure: fail what is running rather than hang it.
        for (Op op : new ArrayList<>(ops.values())) {
          ops.remove(op.tag);
          op.operation.close();
          op.future.completeExceptionally(e);
        }
      }
    }
  }

  private long nextWake() {
    long wake = -1;
    for (Op op : ops.values()) {
      wake = min(wake, op.waitUntil);
    }
    for (InterimLink link : links) {
      wake = min(wake, link.pollTimeout());
    }
    Timer t;
    while ((t = timers.peek()) != null && t.cancelled) {
      timers.poll();
    }
    if (t != null) {
      wake = min(wake, t.at);
    }
    return wake;
  }

  private static long min(long a, long b) {
    if (a < 0) {
      return b;
    }
    return b < 0 ? a : Math.min(a, b);
  }

  private void fireDue(long now) {
    for (Op op : new ArrayList<>(ops.values())) {
      if (op.waitUntil >= 0 && op.waitUntil <= now && ops.containsKey(op.tag)) {
        op.waitUntil = -1;
        op.operation.handleTimeout(now);
        drain(op, now);
      }
    }
    for (InterimLink link : links) {
      long due = link.pollTimeout();
      if (due >= 0 && due <= now) {
        link.handleTimeout(now);
        pump(link);
      }
    }
    deliverAll();
    List<Timer> due = new ArrayList<>();
    Timer t;
    while ((t = timers.peek()) != null && t.at <= now) {
      timers.poll();
      if (!t.cancelled) {
        due.add(t);
      }
    }
    for (Timer timer : due) {
      try {
        timer.task.run();
      } catch (RuntimeException e) {
        // A timer's task (keep-alive) failing must not fail the operations of others.
        Thread self = Thread.currentThread();
        self.getUncaughtExceptionHandler().uncaughtException(self, e);
      }
    }
  }

  /**
   * Stops taking operations, lets the commands still out finish (up to their deadlines, so
   * the last releases reach their nodes), closes every connection and the driver.
   */
  @Override
  public void close() {
    if (!running) {
      return;
    }
    if (inLoop()) {
      throw new RedlockStateException("invalid_call", "close the client from outside its loop");
    }
    CompletableFuture<Void> drained = new CompletableFuture<>();
    closing = true;
    execute(() -> awaitIdle(drained));
    try {
      drained.get(30, TimeUnit.SECONDS);
    } catch (Exception e) {
      // Closing anyway: the keys left behind expire with their TTL.
    }
    CompletableFuture<Void> closed = new CompletableFuture<>();
    execute(() -> {
      for (NodeConnection c : connections) {
        if (c != null) {
          c.close();
        }
      }
      for (Op op : new ArrayList<>(ops.values())) {
        finish(op, null);
      }
      running = false;
      closed.complete(null);
    });
    closed.join();
    selector.wakeup();
    try {
      thread.join(5000);
      selector.close();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (IOException e) {
      // Nothing left to do with it.
    }
    driver.close();
  }

  private void awaitIdle(CompletableFuture<Void> drained) {
    long now = now();
    boolean idle = ops.isEmpty();
    for (InterimLink link : links) {
      idle &= link.idle(now);
    }
    if (idle) {
      drained.complete(null);
    } else {
      schedule(now + 1000, () -> awaitIdle(drained));
    }
  }
}
