package io.github.redlockcore.internal;

import io.github.redlockcore.RedlockStateException;
import io.github.redlockcore.core.Operation;
import io.github.redlockcore.core.Outcome;
import io.github.redlockcore.core.Reply;
import io.github.redlockcore.core.RespDecoder;
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
import java.util.function.ObjLongConsumer;

/**
 * The loop: one thread that starts operations, sends what they emit through each node's
 * link to the driver's connections, feeds replies and timeouts back, and polls until each
 * operation waits or ends. It decides nothing about the lock: every output comes from the
 * core ({@link Operation}) or, for the transport, from the core's node links ({@link
 * CoreLinks}): the loop never resends, queues or decides that a node is dead.
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
  private final CoreLinks links;
  private final long linksHandle;
  private final NodeConnection[] connections;
  private final Map<Long, Op> ops = new HashMap<>();
  private final PriorityQueue<Timer> timers = new PriorityQueue<>();
  /** Operations handed a reply since they were last polled. */
  private final ArrayDeque<Op> touched = new ArrayDeque<>();
  private final long[] pumpOut = new long[1];
  private final long[] linkOut = new long[4];
  /** An operation was polled since the links were last: they may have output. */
  private boolean submitted;
  /** The next instant a link wants its timeout handled, or -1. */
  private long linkWake = -1;
  private long nextTag = 1;
  private long timerSeq;
  private volatile boolean closing;

  private static final class Op {
    final long tag;
    final Operation operation;
    final CompletableFuture<Outcome> future;
    final ObjLongConsumer<Operation> beforeOutcome;
    long waitUntil = -1;
    boolean touched;

    Op(long tag, Operation operation, CompletableFuture<Outcome> future,
        ObjLongConsumer<Operation> beforeOutcome) {
      this.tag = tag;
      this.operation = operation;
      this.future = future;
      this.beforeOutcome = beforeOutcome;
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
    links = new CoreLinks(n);
    linksHandle = links.raw();
    connections = new NodeConnection[n];
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

  /** True once {@link #close()} began. */
  public boolean isClosed() {
    return closing || !running;
  }

  public boolean inLoop() {
    return Thread.currentThread() == thread;
  }

  public int nodes() {
    return links.nodes();
  }

  /** A snapshot of one node's link, taken on the loop thread (diagnostics, tests). */
  public CoreLinks.Info linkInfo(int node) {
    if (!running) {
      throw new RedlockStateException("used_after_close", "the Redlock client was closed");
    }
    if (inLoop()) {
      return links.info(node, now());
    }
    CompletableFuture<CoreLinks.Info> info = new CompletableFuture<>();
    execute(() -> {
      try {
        info.complete(links.info(node, now()));
      } catch (RuntimeException e) {
        info.completeExceptionally(e);
      }
    });
    return info.join();
  }

  // ---- operations ----

  /**
   * Starts the operation {@code start} creates (given {@code now}, on the loop thread) and
   * completes with its outcome. Cancelling the future abandons the operation: an
   * acquisition's release goes to every node, and the operation is forgotten.
   */
  public CompletableFuture<Outcome> run(LongFunction<Operation> start) {
    return run(start, null);
  }

  /**
   * As {@link #run(LongFunction)}; {@code beforeOutcome} sees the operation (on the loop
   * thread) when its outcome is ready and before it is taken (the core's keep-alive).
   */
  public CompletableFuture<Outcome> run(LongFunction<Operation> start,
      ObjLongConsumer<Operation> beforeOutcome) {
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
      if (future.isDone()) {
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
      Op op = new Op(nextTag++, operation, future, beforeOutcome);
      ops.put(op.tag, op);
      future.whenComplete((outcome, error) -> {
        if (future.isCancelled()) {
          execute(() -> abandon(op));
        }
      });
      drain(op, now);
      pumpLinks();
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

  /** Polls the operation until it waits or ends; its commands go to the links. */
  private void drain(Op op, long now) {
    if (!ops.containsKey(op.tag)) {
      return;
    }
    submitted = true;
    try {
      int code = op.operation.pump(linksHandle, op.tag, now, pumpOut);
      if (code == 2) {
        op.waitUntil = pumpOut[0];
      } else if (code == 3) {
        if (op.beforeOutcome != null) {
          op.beforeOutcome.accept(op.operation, now);
        }
        finish(op, op.operation.outcome());
      } else {
        finish(op, null);
      }
    } catch (RuntimeException e) {
      ops.remove(op.tag);
      op.operation.close();
      op.future.completeExceptionally(e);
    }
  }

  private void finish(Op op, Outcome outcome) {
    ops.remove(op.tag);
    op.operation.close();
    op.future.complete(outcome);
  }

  /** Cancellation: the core's abandon, its releases to the links, and the op forgotten. */
  private void abandon(Op op) {
    if (ops.remove(op.tag) == null) {
      return;
    }
    long now = now();
    try {
      op.operation.abandon(now);
      submitted = true;
      op.operation.pump(linksHandle, op.tag, now, pumpOut);
    } finally {
      op.operation.close();
    }
    pumpLinks();
    deliverAll();
  }

  /**
   * Does what the links output. A delivery is handed to its operation at once (the reply
   * stays native); the operation is polled in {@link #deliverAll()}.
   */
  private void pumpLinks() {
    submitted = false;
    pollLinks();
    // Due link timeouts (a stalled node, a reconnect backoff) may output more.
    linkWake = Native.linksTimeout(linksHandle, now());
    pollLinks();
  }

  private void pollLinks() {
    while (true) {
      Object data = Native.linksPoll(linksHandle, linkOut, wantsArgs);
      int code = (int) linkOut[0];
      if (code == 0) {
        break;
      }
      int node = (int) linkOut[1];
      switch (code) {
        case 1:
          connections[node].connect();
          break;
        case 2:
          if (wantsArgs) {
            connections[node].write(linkOut[2], null, null, (byte[][]) data);
          } else {
            connections[node].write(linkOut[2], null, (byte[]) data, null);
          }
          break;
        case 3:
          connections[node].close();
          break;
        case 4:
          Op op = ops.get(linkOut[2]);
          if (op == null) {
            // A late reply to an operation that already ended: it changes nothing.
            Native.linksDropDelivery(linksHandle);
            break;
          }
          try {
            op.operation.deliver(linksHandle, now());
          } catch (RuntimeException e) {
            Native.linksDropDelivery(linksHandle);
            ops.remove(op.tag);
            op.operation.close();
            op.future.completeExceptionally(e);
            break;
          }
          if (!op.touched) {
            op.touched = true;
            touched.add(op);
          }
          break;
        default:
          throw new RedlockStateException("unsupported_output", "unknown link output " + code);
      }
    }
  }

  /** Polls every operation a reply reached, until they all wait or end. */
  private void deliverAll() {
    Op op;
    while ((op = touched.poll()) != null) {
      op.touched = false;
      drain(op, now());
      pumpLinks();
    }
  }

  /** A node's events, taken over by the loop thread (always queued: never re-entrant). */
  private final class Events implements NodeEvents {
    private final int node;

    Events(int node) {
      this.node = node;
    }

    private void later(Runnable task) {
      tasks.add(() -> {
        if (!running) {
          return;
        }
        task.run();
        pumpLinks();
        deliverAll();
      });
      selector.wakeup();
    }

    @Override
    public void connected() {
      later(() -> Native.linksConnected(linksHandle, node, now()));
    }

    @Override
    public void closed(CloseCause cause, String text) {
      later(() -> Native.linksClosed(linksHandle, node, cause.ordinal(), text, now()));
    }

    @Override
    public void reply(long writeId, Object reply) {
      later(() -> {
        long now = now();
        if (reply instanceof RespDecoder.Decoded) {
          RespDecoder.Decoded d = (RespDecoder.Decoded) reply;
          try {
            Native.linksReplyHandle(linksHandle, node, writeId, d.handle0(), now);
          } finally {
            d.close();
          }
        } else {
          Reply r = (Reply) reply;
          if (r.type() == Reply.Type.ARRAY) {
            Native.linksReplyResp(linksHandle, node, writeId, r.toResp(), now);
          } else {
            Native.linksReply(linksHandle, node, writeId, r.type().ordinal(), r.integer(),
                r.data(), now);
          }
        }
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
    wake = min(wake, linkWake);
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
    // The operations' commands (a retry's) and any due link timeout.
    if (submitted || (linkWake >= 0 && linkWake <= now)) {
      pumpLinks();
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
    if (!thread.isAlive()) {
      // Only once the loop is gone: it holds the links' raw handle.
      links.close();
    }
  }

  private void awaitIdle(CompletableFuture<Void> drained) {
    long now = now();
    boolean idle = ops.isEmpty();
    for (int i = 0; i < links.nodes(); i++) {
      idle &= links.info(i, now).idle;
    }
    if (idle) {
      drained.complete(null);
    } else {
      schedule(now + 1000, () -> awaitIdle(drained));
    }
  }
}
