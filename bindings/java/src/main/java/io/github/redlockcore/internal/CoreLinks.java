package io.github.redlockcore.internal;

/**
 * The core's node links ({@code redlock_core::Link}), one per node, behind one native
 * handle. Loop thread only. The per-node policy (order, the bound in flight, stalled
 * nodes, owed releases, scripts first on every connection, resends, reconnect backoff) is
 * the core's; {@link Engine} only does what they output.
 */
public final class CoreLinks extends NativeHandle {
  private final int nodes;

  public CoreLinks(int nodes) {
    super(Native.linksNew(nodes), Native::linksFree, "links");
    this.nodes = nodes;
  }

  public long raw() {
    return handle();
  }

  public int nodes() {
    return nodes;
  }

  /** One node's link at {@code now}. */
  public Info info(int node, long now) {
    long[] v = Native.linksInfo(handle(), node, now);
    return new Info((int) v[0], (int) v[1], (int) v[2], v[3] != 0, v[4] != 0, v[5] != 0);
  }

  /** A snapshot of one link's state. */
  public static final class Info {
    public final int inFlight;
    public final int queued;
    public final int owed;
    public final boolean idle;
    public final boolean stalled;
    public final boolean open;

    Info(int inFlight, int queued, int owed, boolean idle, boolean stalled, boolean open) {
      this.inFlight = inFlight;
      this.queued = queued;
      this.owed = owed;
      this.idle = idle;
      this.stalled = stalled;
      this.open = open;
    }

    @Override
    public String toString() {
      return "in flight " + inFlight + ", queued " + queued + ", owed " + owed
          + (stalled ? ", stalled" : "") + (open ? ", open" : "");
    }
  }
}
