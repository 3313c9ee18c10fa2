package io.github.redlockcore;

import io.github.redlockcore.core.Lease;
import io.github.redlockcore.core.Outcome;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * A held lock. {@link #close()} releases it (on every node), so {@code try}-with-resources
 * holds it for a block. The lock is valid until {@link #validUntil()} unless extended; with
 * {@link #keepAlive(LockListener)} the core's schedule extends it and {@link #lost()}
 * completes the moment it is lost.
 */
public final class RedLock implements AutoCloseable {
  private final RedlockClient owner;
  private final String resource;
  private final List<String> resources;
  /**
   * When it was acquired (client clock, us): the instant the core decided the acquisition,
   * or when it was rebuilt from its token. The keep-alive's lost event counts its {@code
   * elapsed} from here.
   */
  private final long acquiredAt;
  private final Object leaseLock = new Object();
  private final CompletableFuture<LockLostException> lost = new CompletableFuture<>();
  private Lease lease;
  private boolean released;
  private KeepAlive keepAlive;
  private final int attempts;

  /** A lock the core acquired ({@code outcome}: {@code ACQUIRED}). */
  RedLock(RedlockClient owner, List<String> resources, Outcome outcome) {
    // The core decided at validUntil - validity (its validity is what was left then), not
    // when this object is made on the caller's thread.
    this(owner, resources, outcome.lease().orElseThrow(), outcome.attempts(),
        outcome.lease().orElseThrow().validUntil() - outcome.validityMicros());
  }

  /** A lock rebuilt from its token: its acquisition is unknown, so it counts from now. */
  RedLock(RedlockClient owner, List<String> resources, Lease lease) {
    this(owner, resources, lease, 0, owner.now());
  }

  private RedLock(RedlockClient owner, List<String> resources, Lease lease, int attempts,
      long acquiredAt) {
    this.owner = owner;
    this.resources = resources;
    this.resource = String.join(",", resources);
    this.acquiredAt = acquiredAt;
    this.lease = lease;
    this.attempts = attempts;
  }

  /** Attempts the acquisition took (1 when the first one succeeded). */
  public int attempts() {
    return attempts;
  }

  /** The locked resource (several joined with commas). */
  public String resource() {
    return resource;
  }

  /** The locked resources. */
  public List<String> resources() {
    return resources;
  }

  long acquiredAt() {
    return acquiredAt;
  }

  /**
   * Whether this lock still holds its resources, as the nodes say now: a quorum of them
   * hold its token on every key, and its validity has not run out on this client's clock
   * (the core's inspection and {@code Inspected::is_held_by}; {@code docs/inspection.md}).
   * False once released. It reads only; it never extends or re-creates a key.
   *
   * @throws NodesFailingException when too many nodes failed for the core to say
   */
  public boolean isOwned() {
    owner.ensureOpen();
    Lease current;
    synchronized (leaseLock) {
      if (released) {
        return false;
      }
      current = lease;
    }
    return owner.inspect(resources, current).isHeldByLease();
  }

  /** The token stored under the key, unique to this acquisition. */
  public String token() {
    return lease().token();
  }

  /** Until when the lock is held, in microseconds on {@link RedlockClient#now()}'s clock. */
  public long validUntil() {
    return lease().validUntil();
  }

  /** Validity left now (zero once expired or lost). */
  public Duration remaining() {
    return Duration.ofNanos(lease().validityMicros(owner.now()) * 1000);
  }

  /** True while the lock is held: not released, not lost, not expired. */
  public boolean isValid() {
    synchronized (leaseLock) {
      if (released || lost.isDone()) {
        return false;
      }
    }
    return lease().isValid(owner.now());
  }

  /**
   * The fencing token (clients built with {@code fencing(true)}): strictly greater than
   * that of every earlier acquisition of the resource whose token was handed out. Send it
   * with every write to the protected resource, which must check it (for a Redis key,
   * {@link io.github.redlockcore.jedis.JedisFencedWrites}); empty without fencing.
   */
  public java.util.OptionalLong fencingToken() {
    return lease().fencingToken();
  }

  /** Successful extensions so far. */
  public int extensions() {
    return lease().extensions();
  }

  /** The current lease (the core's view of the lock). */
  Lease lease() {
    synchronized (leaseLock) {
      return lease;
    }
  }

  /** Replaces the lease after an extension's outcome (the old one is freed). */
  void replaceLease(Lease next) {
    Lease old;
    synchronized (leaseLock) {
      old = lease;
      lease = next;
    }
    if (old != next) {
      old.close();
    }
  }

  RedlockClient owner() {
    return owner;
  }

  /** Extends the lock by its TTL, measured from now; see {@link #extend(Duration)}. */
  public void extend() {
    extend(null);
  }

  /**
   * Extends the lock by {@code ttl} (null: its TTL) from now, on a quorum of nodes. It never
   * re-creates a key that is gone.
   *
   * @throws LockLostException when the lock is already lost (its validity is then zero)
   * @throws NodesFailingException when too many nodes failed; the lock stays held until
   *     {@link #validUntil()}
   */
  public void extend(Duration ttl) {
    owner.ensureOpen();
    Lease current;
    KeepAlive keeping;
    synchronized (leaseLock) {
      if (released) {
        throw new LockNotHeldException(resource, List.of());
      }
      current = lease;
      keeping = keepAlive;
    }
    // With keep-alive on, its machine hears this outcome too and plans from the new lease
    // (a shorter TTL makes its next extension due sooner).
    Outcome outcome = RedlockClient.await(owner.engine().run(resources,
        (links, tag, now) -> owner.core().startExtend(links, tag, current, ttl, keeping != null,
            now),
        keeping == null ? null : keeping.machine(), null));
    outcome.lease().ifPresent(this::replaceLease);
    if (keeping != null) {
      keeping.kick();
    }
    if (outcome.kind() != Outcome.Kind.EXTENDED) {
      LockException e = ErrorClasses.of(resource, outcome);
      if (e instanceof LockLostException) {
        markLost((LockLostException) e);
      }
      throw e;
    }
  }

  /** Keeps the lock alive until released or lost; see {@link #keepAlive(LockListener)}. */
  public CompletableFuture<LockLostException> keepAlive() {
    return keepAlive(new LockListener() {});
  }

  /**
   * Extends the lock automatically, when the core says to ({@code next_extension}), retrying
   * failed extensions when it says to ({@code retry_at}), until released or lost. The
   * returned future (also {@link #lost()}) completes the moment the lock is lost, and is
   * cancelled when the lock is released.
   */
  public CompletableFuture<LockLostException> keepAlive(LockListener listener) {
    owner.ensureOpen();
    synchronized (leaseLock) {
      if (released) {
        throw new RedlockStateException("used_after_close", "the lock was released");
      }
      if (keepAlive == null) {
        keepAlive = new KeepAlive(this, listener);
        keepAlive.start();
      }
    }
    return lost;
  }

  /**
   * Completes with the cause the moment the lock is known lost (by keep-alive or a failed
   * extension); cancelled when the lock is released.
   */
  public CompletableFuture<LockLostException> lost() {
    return lost;
  }

  void markLost(LockLostException cause) {
    lost.complete(cause);
  }

  /**
   * Releases the lock on every node (never deleting a key that holds another token) and
   * returns the core's release outcome. Idempotent: later calls return null. A release
   * that fails leaves the lock unreleased (its keep-alive stopped): call it again, or let
   * the keys expire with their TTL; the client's {@code close()} tries it again too.
   *
   * @throws NodesFailingException when fewer than a quorum confirmed the release (the keys
   *     left expire with their TTL)
   * @throws RedlockStateException {@code used_after_close} once the client was closed
   *     (whether or not its {@code close()} released this lock)
   */
  public Outcome release() {
    owner.ensureOpen();
    Lease current = beginRelease();
    if (current == null) {
      return null;
    }
    Outcome outcome = RedlockClient.await(owner.engine().run(resources,
        (links, tag, now) -> owner.core().startRelease(links, tag, current, now), null, null));
    if (outcome == null) {
      // The client closed while it ran (its close() releases the lock).
      throw RedlockClient.closedError();
    }
    if (!outcome.isSuccess()) {
      throw ErrorClasses.of(resource, outcome);
    }
    released(current);
    return outcome;
  }

  /**
   * The client's {@code close()}: releases the lock (nothing if released already); the
   * future completes with the outcome (null: nothing to do).
   */
  CompletableFuture<Outcome> releaseOnClose() {
    Lease current = beginRelease();
    if (current == null) {
      return CompletableFuture.completedFuture(null);
    }
    return owner.engine().runWhileClosing(resources,
        (links, tag, now) -> owner.core().startRelease(links, tag, current, now))
        .whenComplete((outcome, error) -> {
          if (outcome != null && outcome.isSuccess()) {
            released(current);
          }
        });
  }

  /** The lease to release, null if released already; the keep-alive is stopped first. */
  private Lease beginRelease() {
    Lease current;
    KeepAlive running;
    synchronized (leaseLock) {
      if (released) {
        return null;
      }
      current = lease;
      running = keepAlive;
      keepAlive = null;
    }
    if (running != null) {
      running.stop();
    }
    return current;
  }

  /**
   * True when its keys have expired on every node whatever happened to it: a full TTL
   * after its validity ended (false for a rebuilt lock, whose validity is unknown).
   */
  boolean expiredEverywhere(long now) {
    Lease current;
    synchronized (leaseLock) {
      current = lease;
    }
    long validUntil = current.validUntil();
    // The TTL is at most the core's 10^12 ms: in microseconds it fits a long.
    return validUntil > 0 && now - validUntil > current.ttlMillis() * 1000;
  }

  /** A quorum confirmed the release of {@code current}: the lock is released. */
  private void released(Lease current) {
    synchronized (leaseLock) {
      released = true;
    }
    lost.cancel(false);
    owner.forget(this);
    current.close();
  }

  /**
   * Releases the lock. A release the nodes could not confirm is not an error here: the keys
   * expire with their TTL; call {@link #release()} to see the outcome. Once the client was
   * closed (which released the lock), nothing.
   */
  @Override
  public void close() {
    try {
      release();
    } catch (RedlockStateException | NodesFailingException e) {
      // The client was closed first, or too few nodes confirmed: the keys expire with
      // their TTL.
    }
  }

  @Override
  public String toString() {
    return "RedLock{" + resource + ", validUntil=" + validUntil() + "us}";
  }
}
