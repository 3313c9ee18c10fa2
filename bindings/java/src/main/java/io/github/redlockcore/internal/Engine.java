package io.github.redlockcore.internal;

import io.github.redlockcore.RedlockStateException;
import io.github.redlockcore.RedlockArgumentException;
import io.github.redlockcore.RedlockProtocolException;
import io.github.redlockcore.core.KeepAliveMachine;
import io.github.redlockcore.core.Outcome;
import io.github.redlockcore.core.Reply;
import io.github.redlockcore.core.RespDecoder;
import io.github.redlockcore.core.Subscriptions;
import io.github.redlockcore.spi.CloseCause;
import io.github.redlockcore.spi.Driver;
import io.github.redlockcore.spi.LoopContext;
import io.github.redlockcore.spi.NodeConnection;
import io.github.redlockcore.spi.NodeEvents;
import io.github.redlockcore.spi.NoticeListener;
import io.github.redlockcore.spi.NoticeSubscriber;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.channels.SelectableChannel;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.nio.charset.StandardCharsets;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.function.Consumer;

/**
 * The loop: one thread that starts operations, hands every node event (bytes or a reply,
 * connected, closed) and the passing of time to the loop's native half ({@link
 * CoreLinks}), and does what comes back: open, write, close a connection, complete an
 * operation's future. It decides nothing about the lock: the operations and node links
 * are the core's, and one native call takes each input through them (operations polled,
 * commands handed to links, replies delivered); the loop never resends, queues or
 * decides that a node is dead.
 *
 * <p>Release notices work the same way: the core's {@link Subscriptions} (one per client)
 * decides when each node's subscriber connection opens, which channels it subscribes,
 * when it closes and how long a failed one stays closed; the loop tells it which channels
 * waiting acquisitions listen on and what happened to each connection, opens, subscribes,
 * unsubscribes and closes through the driver's {@link NoticeSubscriber}s as it says, and
 * hands each notice, and each confirmation it counts, to the channel's waiters.
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
  /** The epoch (us) minus {@link #now()}, taken once: events' wall-clock times. */
  private final long epochOffset;
  private final boolean wantsArgs;
  private final boolean raw;
  private volatile boolean running = true;

  // ---- loop-thread state ----
  private final CoreLinks links;
  private final long linksHandle;
  private final NodeConnection[] connections;
  /**
   * Per node, how many times the loop closed its connection (the link's {@link
   * CoreLinks#CLOSE}, or bytes that are not RESP): a node event reported before the close
   * that followed it is dropped, so nothing from a connection (or an attempt) the link gave
   * up reaches the link afterwards. Written on the loop thread, read by drivers' threads.
   */
  private final AtomicIntegerArray closes;
  private final Map<Long, Op> ops = new HashMap<>();
  private final PriorityQueue<Timer> timers = new PriorityQueue<>();
  /**
   * Operations that ended in the events being processed, each followed by its outcome (null:
   * none), completed after them; an outcome whose operation was forgotten comes after its tag.
   */
  private final ArrayList<Object> finished = new ArrayList<>();
  /** The core's policy for the subscriber connections (see the class documentation). */
  private final Subscriptions subscriptions;
  /** Per node, its current subscriber connection (the core asked for it), or null. */
  private final SubscriberConnection[] subscribers;
  /** When {@link #subscriptions} wants its timeout handled, or -1. */
  private long subscriptionsWake = -1;
  /** Waiting acquisitions by the notice channel they listen on (ISO-8859-1 of its bytes). */
  private final Map<String, List<Op>> waiters = new HashMap<>();
  /** The next instant the native half wants {@code timeout}, or -1. */
  private long linkWake = -1;
  private long nextTag = 1;
  /** Hears the core's events (null: none, and the native half does not report them). */
  private volatile Consumer<io.github.redlockcore.core.Event> listener;
  /** Events read from the last native call, handed to the listener after the others. */
  private final ArrayList<io.github.redlockcore.core.Event> heardEvents = new ArrayList<>();
  private long timerSeq;
  private volatile boolean closing;

  private static final class Op {
    final long tag;
    final CompletableFuture<Outcome> future;
    /** The keep-alive that hears this extension's outcome first, or null. */
    final KeepAliveMachine keepAlive;
    /**
     * The notice channels this acquisition may listen on (null: none, notices are not for
     * it); it listens on them once the core says so ({@link CoreLinks#LISTEN}).
     */
    final List<String> channels;
    /** It listens on {@link #channels} (the core's subscriptions want each of them). */
    boolean listening;
    /** The lock's resources, for the events. */
    final List<String> resources;
    /** An acquisition (it has notice channels): abandoned when the client closes. */
    final boolean acquisition;

    Op(long tag, CompletableFuture<Outcome> future, KeepAliveMachine keepAlive,
        List<String> channels, List<String> resources) {
      this.resources = resources;
      this.acquisition = channels != null;
      this.tag = tag;
      this.future = future;
      this.keepAlive = keepAlive;
      this.channels = channels;
    }
  }

  /** Starts one operation inside the loop's links, under {@code tag}, at {@code now}. */
  public interface Starter {
    void start(CoreLinks links, long tag, long now);
  }

  /** A task due at a time on the loop's clock. */
  public static final class Timer implements Comparable<Timer>, LoopContext.Scheduled {
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
    @Override
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
    java.time.Instant wall = java.time.Instant.now();
    this.epochOffset = wall.getEpochSecond() * 1_000_000 + wall.getNano() / 1000 - now();
    this.wantsArgs = driver instanceof ArgsDriver;
    this.raw = driver instanceof RawDriver;
    int n = driver.nodes();
    // The user's client's connect timeout, else the core's: the same bound for every link's
    // connection attempts and for the subscriber connections (docs/bindings.md, rule 4).
    java.time.Duration connectTimeout = driver.connectTimeout();
    this.subscriptions = new Subscriptions(n, connectTimeout);
    this.closes = new AtomicIntegerArray(n);
    this.subscribers = new SubscriberConnection[n];
    try {
      this.selector = Selector.open();
    } catch (IOException e) {
      subscriptions.close();
      throw new UncheckedIOException(e);
    }
    try {
      links = new CoreLinks(n, raw, connectTimeout);
    } catch (RuntimeException e) {
      subscriptions.close();
      try {
        selector.close();
      } catch (IOException closing) {
        e.addSuppressed(closing);
      }
      throw e;
    }
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

  /**
   * Marker for drivers that own a socket: they write the RESP bytes as given and report
   * what they read with {@link NodeEvents#received}; the core's decoder does the rest.
   */
  public interface RawDriver {}

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
    return onLoop(() -> links.info(node, now()));
  }

  /**
   * How long node {@code node}'s link lets a connection attempt take (the driver's {@link
   * Driver#connectTimeout()}), read on the loop thread (diagnostics, tests).
   */
  public java.time.Duration connectTimeout(int node) {
    return onLoop(() -> links.connectTimeout(node));
  }

  /** {@code read} on the loop thread, and its result (or what it threw). */
  private <T> T onLoop(java.util.function.Supplier<T> read) {
    if (!running) {
      throw new RedlockStateException("used_after_close", "the Redlock client was closed");
    }
    if (inLoop()) {
      return read.get();
    }
    CompletableFuture<T> result = new CompletableFuture<>();
    execute(() -> {
      try {
        result.complete(read.get());
      } catch (RuntimeException e) {
        result.completeExceptionally(e);
      }
    });
    try {
      return result.join();
    } catch (java.util.concurrent.CompletionException e) {
      if (e.getCause() instanceof RuntimeException) {
        throw (RuntimeException) e.getCause();
      }
      throw e;
    }
  }

  // ---- operations ----

  /**
   * Starts the operation {@code start} creates (given {@code now}, on the loop thread) and
   * completes with its outcome. Cancelling the future abandons the operation: an
   * acquisition's release goes to every node, and the operation is forgotten.
   */
  public CompletableFuture<Outcome> run(Starter start) {
    return run(start, null);
  }

  /**
   * As {@link #run(Starter)}; {@code keepAlive} hears the extension's outcome (on the loop
   * thread) before the future completes.
   */
  public CompletableFuture<Outcome> run(Starter start, KeepAliveMachine keepAlive) {
    return run(start, keepAlive, null);
  }

  /**
   * As {@link #run(Starter)}, for an acquisition whose release notices come on {@code
   * channels} (null: it never listens). When it listens is the core's decision ({@code
   * Operation::listens}: with a wait limit from the first refusal by a held key, or from its
   * start after a recent wait for the resource; otherwise once an attempt failed and another
   * may follow), checked after every input: from then until it ends, the
   * core's subscriptions want each channel (a subscriber connection per node), and each
   * notice goes to the operation with its message (the core's {@code
   * handle_notice_message}), which may try again at once.
   */
  public CompletableFuture<Outcome> run(Starter start, KeepAliveMachine keepAlive,
      List<byte[]> channels) {
    return run(List.of(), start, keepAlive, channels);
  }

  /** As {@link #run(Starter, KeepAliveMachine, List)}, naming the lock's resources for events. */
  public CompletableFuture<Outcome> run(List<String> resources, Starter start,
      KeepAliveMachine keepAlive, List<byte[]> channels) {
    return run(resources, start, keepAlive, channels, false);
  }

  /**
   * As {@link #run(List, Starter, KeepAliveMachine, List)} for the releases the client's
   * {@code close()} makes after {@link #beginClose()}: taken while the loop closes (until
   * {@link #close()} stopped it), when every other operation is refused.
   */
  public CompletableFuture<Outcome> runWhileClosing(List<String> resources, Starter start) {
    return run(resources, start, null, null, true);
  }

  private CompletableFuture<Outcome> run(List<String> resources, Starter start,
      KeepAliveMachine keepAlive, List<byte[]> channels, boolean whileClosing) {
    List<String> names = null;
    if (channels != null) {
      names = new ArrayList<>(channels.size());
      for (byte[] channel : channels) {
        names.add(new String(channel, StandardCharsets.ISO_8859_1));
      }
    }
    List<String> listening = names;
    CompletableFuture<Outcome> future = new CompletableFuture<>();
    if ((closing && !whileClosing) || !running) {
      future.completeExceptionally(
          new RedlockStateException("used_after_close", "the Redlock client was closed"));
      return future;
    }
    execute(() -> {
      if ((closing && !whileClosing) || !running) {
        future.completeExceptionally(
            new RedlockStateException("used_after_close", "the Redlock client was closed"));
        return;
      }
      if (future.isDone()) {
        return;
      }
      Op op = new Op(nextTag++, future, keepAlive, listening, resources);
      ops.put(op.tag, op);
      try {
        start.start(links, op.tag, now());
      } catch (RuntimeException e) {
        take(op.tag);
        future.completeExceptionally(e);
        return;
      }
      process();
      future.whenComplete((outcome, error) -> {
        if (future.isCancelled()) {
          execute(() -> abandon(op));
        }
      });
    });
    return future;
  }

  /** Removes a running operation (it ended) and stops its listening; null if unknown. */
  private Op take(long tag) {
    Op op = ops.remove(tag);
    if (op != null && op.listening) {
      op.listening = false;
      long now = now();
      for (String channel : op.channels) {
        List<Op> list = waiters.get(channel);
        if (list != null && list.remove(op)) {
          if (list.isEmpty()) {
            waiters.remove(channel);
          }
          subscriptions.unwant(channel.getBytes(StandardCharsets.ISO_8859_1), now);
        }
      }
      pumpSubscriptions();
    }
    return op;
  }

  /**
   * The acquisition listens on its channels from now on (the core said so: {@link
   * CoreLinks#LISTEN}): the core's subscriptions hear of each. Nothing for one without
   * channels or already listening.
   */
  private void listen(Op op) {
    if (op.channels == null || op.listening) {
      return;
    }
    op.listening = true;
    long now = now();
    for (String channel : op.channels) {
      waiters.computeIfAbsent(channel, c -> new ArrayList<>(2)).add(op);
      subscriptions.want(channel.getBytes(StandardCharsets.ISO_8859_1), now);
    }
    pumpSubscriptions();
  }

  /**
   * Does what the core's subscriptions say (open, subscribe, unsubscribe, close a node's
   * subscriber connection) until they say nothing more, then notes when they want their
   * timeout. Loop thread.
   */
  private void pumpSubscriptions() {
    Subscriptions.Output out;
    while ((out = subscriptions.poll()) != null) {
      int node = out.node();
      SubscriberConnection current = subscribers[node];
      switch (out.kind()) {
        case OPEN:
          openSubscriber(node);
          break;
        case SUBSCRIBE:
        case UNSUBSCRIBE:
          if (current != null && current.subscriber != null) {
            try {
              if (out.kind() == Subscriptions.Output.Kind.SUBSCRIBE) {
                current.subscriber.subscribe(out.channel());
              } else {
                current.subscriber.unsubscribe(out.channel());
              }
            } catch (RuntimeException e) {
              // A connection that cannot take the command is of no use: lost.
              uncaught(e);
              drop(node);
              subscriptions.handleLost(node, now());
            }
          }
          break;
        case CLOSE:
          drop(node);
          break;
        default:
          break;
      }
    }
    subscriptionsWake = subscriptions.pollTimeout();
  }

  /**
   * Opens node {@code node}'s subscriber connection through the driver; one it cannot
   * open (null, or it throws) is lost at once, and the core says when to try again.
   */
  private void openSubscriber(int node) {
    drop(node);
    SubscriberConnection connection = new SubscriberConnection(node);
    NoticeSubscriber subscriber = null;
    if (running && !closing) {
      try {
        subscriber = driver.openSubscriber(node, this, connection);
      } catch (RuntimeException e) {
        uncaught(e);
      }
    }
    if (subscriber == null) {
      subscriptions.handleLost(node, now());
      return;
    }
    connection.subscriber = subscriber;
    subscribers[node] = connection;
  }

  /** Closes node {@code node}'s subscriber connection, if any; it reports nothing more. */
  private void drop(int node) {
    SubscriberConnection connection = subscribers[node];
    subscribers[node] = null;
    if (connection != null && connection.subscriber != null) {
      try {
        connection.subscriber.close();
      } catch (RuntimeException e) {
        uncaught(e);
      }
    }
  }

  private static void uncaught(RuntimeException e) {
    Thread t = Thread.currentThread();
    t.getUncaughtExceptionHandler().uncaughtException(t, e);
  }

  /**
   * One subscriber connection's reports, taken over by the loop thread (always queued:
   * never re-entrant). Those of a connection that is no longer its node's current one
   * (closed, or lost) are ignored.
   */
  private final class SubscriberConnection implements NoticeListener {
    final int node;
    NoticeSubscriber subscriber;

    SubscriberConnection(int node) {
      this.node = node;
    }

    private void later(Runnable task) {
      tasks.add(() -> {
        if (running && subscribers[node] == this) {
          task.run();
        }
      });
      selector.wakeup();
    }

    @Override
    public void opened() {
      later(() -> {
        subscriptions.handleOpened(node, now());
        pumpSubscriptions();
      });
    }

    @Override
    public void lost() {
      later(() -> {
        drop(node);
        subscriptions.handleLost(node, now());
        pumpSubscriptions();
      });
    }

    @Override
    public void refused() {
      later(() -> {
        subscriptions.handleRefused(node, now());
        pumpSubscriptions();
      });
    }

    @Override
    public void subscribed(byte[] channel) {
      later(() -> {
        if (subscriptions.handleConfirmed(node, channel, now())) {
          heard(node, channel, null, true);
        }
        pumpSubscriptions();
      });
    }

    @Override
    public void notice(byte[] channel, byte[] message) {
      later(() -> heard(node, channel, message, false));
    }
  }

  /**
   * A release notice from {@code node} with its message, or with {@code subscribed} the
   * confirmation of the subscription to {@code channel} there (one the core counts):
   * every acquisition waiting on the channel hears it (the core tells from the message
   * whether it names that one, and from a confirmation whether a release may have gone
   * unheard).
   */
  private void heard(int node, byte[] channel, byte[] message, boolean subscribed) {
    if (!running) {
      return;
    }
    List<Op> list = waiters.get(new String(channel, StandardCharsets.ISO_8859_1));
    if (list == null) {
      return;
    }
    for (Op op : new ArrayList<>(list)) {
      if (ops.containsKey(op.tag)) {
        try {
          if (subscribed) {
            links.subscribed(op.tag, node, now());
          } else {
            links.notice(op.tag, node, message, now());
          }
        } catch (RedlockArgumentException e) {
          // A notice the core refuses changes nothing: dropped.
          continue;
        }
        process();
      }
    }
  }

  /** Runs {@code task} on the loop thread at {@code at} (loop clock). Loop thread only. */
  @Override
  public Timer schedule(long at, Runnable task) {
    Timer t = new Timer(at, timerSeq++, task);
    timers.add(t);
    return t;
  }

  /** Cancellation: the core's abandon, its releases to the links, and the op forgotten. */
  private void abandon(Op op) {
    if (!ops.containsKey(op.tag)) {
      return;
    }
    links.abandon(op.tag, now());
    process();
    // An operation that had ended already is forgotten all the same.
    take(op.tag);
  }

  /**
   * Does what the last native call's events say: open, write, close connections, and
   * complete the operations that ended (after the events, so that what their futures run
   * on this thread cannot overwrite the events being read).
   */
  private void process() {
    long[] r = links.records();
    int count = links.count();
    int at = 4;
    int byteAt = 0;
    for (int i = 0; i < count; i++) {
      int code = (int) r[at];
      switch (code) {
        case CoreLinks.CONNECT:
          connections[(int) r[at + 1]].connect();
          at += 2;
          break;
        case CoreLinks.WRITE: {
          int node = (int) r[at + 1];
          int length = (int) r[at + 3];
          if (wantsArgs) {
            byte[] resp = Arrays.copyOfRange(links.bytes(), byteAt, byteAt + length);
            connections[node].write(r[at + 2], null, null, argv(resp));
          } else {
            connections[node].writeRaw(r[at + 2], links.bytes(), byteAt, length);
          }
          byteAt += length;
          at += 4;
          break;
        }
        case CoreLinks.CLOSE:
          // The connection, or the attempt to open one, is given up: the driver closes it
          // and reports nothing more for it; what it reported before is dropped.
          closeConnection((int) r[at + 1]);
          at += 2;
          break;
        case CoreLinks.OUTCOME: {
          long tag = r[at + 1];
          int numbers = (int) r[at + 2];
          Outcome outcome = Outcome.fromEvent(links, at + 3, byteAt);
          byteAt += Outcome.eventBytes(r, at + 3);
          at += 3 + numbers;
          Op op = take(tag);
          if (op == null) {
            finished.add(tag);
            finished.add(outcome);
            break;
          }
          if (op.keepAlive != null) {
            try {
              op.keepAlive.handleOutcome(links, tag, now());
            } catch (RedlockStateException e) {
              // The keep-alive was stopped meanwhile: nobody needs this outcome.
              links.forget(tag);
            }
          }
          finished.add(op);
          finished.add(outcome);
          break;
        }
        case CoreLinks.EVENT: {
          long tag = r[at + 1];
          int numbers = (int) r[at + 2];
          Op op = ops.get(tag);
          heardEvents.add(io.github.redlockcore.core.Event.fromRecord(r, links.bytes(), at + 3,
              byteAt, tag, op == null ? List.of() : op.resources, epochOffset));
          byteAt += io.github.redlockcore.core.Event.recordBytes(r, at + 3);
          at += 3 + numbers;
          break;
        }
        case CoreLinks.LISTEN: {
          // The core's decision (Operation::listens), taken after the input that changed
          // it and before the operation's outputs that follow in these events.
          Op op = ops.get(r[at + 1]);
          if (op != null) {
            listen(op);
          }
          at += 2;
          break;
        }
        case CoreLinks.ENDED: {
          Op op = take(r[at + 1]);
          if (op != null) {
            finished.add(op);
            finished.add(null);
          }
          at += 2;
          break;
        }
        default:
          throw new RedlockStateException("unsupported_output", "unknown loop event " + code);
      }
    }
    linkWake = links.nextWake();
    if (!heardEvents.isEmpty()) {
      Object[] heard = heardEvents.toArray();
      heardEvents.clear();
      for (Object event : heard) {
        emit((io.github.redlockcore.core.Event) event);
      }
    }
    if (!finished.isEmpty()) {
      Object[] done = finished.toArray();
      finished.clear();
      for (int i = 0; i < done.length; i += 2) {
        Outcome outcome = (Outcome) done[i + 1];
        Op op = done[i] instanceof Op ? (Op) done[i] : null;
        if (op != null && closing && outcome != null
            && outcome.kind() == Outcome.Kind.ACQUIRED) {
          // The client is closing: nobody may get a lock any more; declined below, so the
          // core releases it.
          op.future.completeExceptionally(closedError());
        }
        boolean claimed = op != null && op.future.complete(outcome);
        if (outcome != null && outcome.kind() == Outcome.Kind.ACQUIRED) {
          long tag = op != null ? op.tag : (Long) done[i];
          if (claimed) {
            links.claimed(tag);
          } else {
            decline(tag, outcome);
          }
        } else if (!claimed && outcome != null) {
          outcome.lease().ifPresent(io.github.redlockcore.core.Lease::close);
        }
      }
    }
  }

  /**
   * An acquired lock whose future was cancelled just before it could complete: its caller
   * stopped waiting, so the outcome goes back to the core ({@code decline}), which releases
   * the lock at once. The events it gives are done here: the events being completed were
   * read already.
   */
  private void decline(long tag, Outcome outcome) {
    outcome.lease().ifPresent(io.github.redlockcore.core.Lease::close);
    links.decline(tag, now());
    process();
  }

  /**
   * Sets the listener of every event (null: none). Events are read from the native half
   * only while one is set. Before the first operation.
   */
  public void listener(Consumer<io.github.redlockcore.core.Event> listener) {
    this.listener = listener;
    execute(() -> links.listen(listener != null));
  }

  /** The epoch in microseconds minus {@link #now()} (for events' wall-clock times). */
  public long epochOffset() {
    return epochOffset;
  }

  /** True when a listener hears events. */
  public boolean listening() {
    return listener != null;
  }

  /**
   * Hands {@code event} to the listener (loop thread). What the listener throws goes to
   * this thread's uncaught-exception handler, never into the loop.
   */
  public void emit(io.github.redlockcore.core.Event event) {
    Consumer<io.github.redlockcore.core.Event> to = listener;
    if (to != null) {
      emitTo(to, event);
    }
  }

  /** Hands {@code event} to {@code to}, catching what it throws as {@link #emit} does. */
  public void emitTo(Consumer<io.github.redlockcore.core.Event> to,
      io.github.redlockcore.core.Event event) {
    try {
      to.accept(event);
    } catch (RuntimeException | Error e) {
      if (e instanceof VirtualMachineError) {
        throw (VirtualMachineError) e;
      }
      Thread t = Thread.currentThread();
      t.getUncaughtExceptionHandler().uncaughtException(t, e);
    }
  }

  /** A command's argv from its RESP bytes (an array of bulk strings, as the core writes). */
  static byte[][] argv(byte[] resp) {
    int at = 1;
    int count = 0;
    while (resp[at] != '\r') {
      count = count * 10 + (resp[at++] - '0');
    }
    at += 2;
    byte[][] args = new byte[count][];
    for (int i = 0; i < count; i++) {
      at++; // '$'
      int length = 0;
      while (resp[at] != '\r') {
        length = length * 10 + (resp[at++] - '0');
      }
      at += 2;
      args[i] = Arrays.copyOfRange(resp, at, at + length);
      at += length + 2;
    }
    return args;
  }

  /**
   * Closes node {@code node}'s connection (or gives up the attempt to open one) and drops
   * what it reported and the loop has not taken yet. Loop thread.
   */
  private void closeConnection(int node) {
    connections[node].close();
    // After close() returned: a driver reporting from its own thread reports nothing more
    // for that connection from then on, and what it reported before is now stale.
    closes.incrementAndGet(node);
  }

  /**
   * A node's events, taken over by the loop thread (always queued: never re-entrant). An
   * event reported before the loop closed the node's connection, and taken after, belongs
   * to the connection (or the connection attempt) the link gave up: it is dropped, never
   * reported to the link as the next connection's.
   */
  private final class Events implements NodeEvents {
    private final int node;

    Events(int node) {
      this.node = node;
    }

    private void later(Runnable task) {
      int connection = closes.get(node);
      tasks.add(() -> {
        if (!running || closes.get(node) != connection) {
          return;
        }
        task.run();
        process();
      });
      selector.wakeup();
    }

    @Override
    public void connected() {
      later(() -> links.connected(node, now()));
    }

    @Override
    public void closed(CloseCause cause, String text) {
      later(() -> links.closed(node, cause.ordinal(), text, now()));
    }

    @Override
    public void received(byte[] data, int offset, int length) {
      if (!raw) {
        throw new UnsupportedOperationException("this driver reports replies, not bytes");
      }
      byte[] copy = Arrays.copyOfRange(data, offset, offset + length);
      later(() -> {
        try {
          links.feed(node, copy, 0, copy.length, now());
        } catch (RedlockProtocolException e) {
          // Not RESP: the connection cannot be trusted any more.
          closeConnection(node);
          links.closed(node, CloseCause.OTHER.ordinal(), e.getMessage(), now());
        }
      });
    }

    @Override
    public void reply(long writeId, Object reply) {
      later(() -> {
        long now = now();
        Reply r;
        if (reply instanceof RespDecoder.Decoded) {
          try (RespDecoder.Decoded d = (RespDecoder.Decoded) reply) {
            r = d.toReply();
          }
        } else {
          r = (Reply) reply;
        }
        if (r.type() == Reply.Type.ARRAY) {
          links.replyResp(node, writeId, r.toResp(), now);
        } else {
          links.reply(node, writeId, r.type().ordinal(), r.integer(), r.data(), now);
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
          take(op.tag);
          op.future.completeExceptionally(e);
        }
      }
    }
  }

  private long nextWake() {
    long wake = linkWake;
    Timer t;
    while ((t = timers.peek()) != null && t.cancelled) {
      timers.poll();
    }
    if (t != null) {
      wake = min(wake, t.at);
    }
    return min(wake, subscriptionsWake);
  }

  private static long min(long a, long b) {
    if (a < 0) {
      return b;
    }
    return b < 0 ? a : Math.min(a, b);
  }

  private void fireDue(long now) {
    if (linkWake >= 0 && linkWake <= now) {
      links.timeout(now);
      process();
    }
    if (subscriptionsWake >= 0 && subscriptionsWake <= now && running) {
      subscriptions.handleTimeout(now);
      pumpSubscriptions();
    }
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

  private static RedlockStateException closedError() {
    return new RedlockStateException("used_after_close", "the Redlock client was closed");
  }

  /**
   * The first step of closing (from outside the loop; waits for the loop to take it): no
   * new operation is taken except through {@link #runWhileClosing}, every acquisition under
   * way is abandoned (the core releases what it may have set; its caller gets {@code
   * used_after_close}), and one that ends from now on is declined (released) rather than
   * handed out. {@link #close()} follows.
   */
  public void beginClose() {
    if (!running) {
      return;
    }
    if (inLoop()) {
      throw new RedlockStateException("invalid_call", "close the client from outside its loop");
    }
    closing = true;
    CompletableFuture<Void> done = new CompletableFuture<>();
    execute(() -> {
      try {
        for (Op op : new ArrayList<>(ops.values())) {
          if (op.acquisition) {
            // First, so that an "acquired" outcome the abandon may still give is declined.
            op.future.completeExceptionally(closedError());
            abandon(op);
          }
        }
      } finally {
        done.complete(null);
      }
    });
    done.join();
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
        take(op.tag);
        op.future.complete(null);
      }
      for (int i = 0; i < subscribers.length; i++) {
        drop(i);
      }
      subscriptionsWake = -1;
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
      subscriptions.close();
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
