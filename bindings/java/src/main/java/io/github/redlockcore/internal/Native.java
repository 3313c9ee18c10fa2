package io.github.redlockcore.internal;

import java.nio.charset.StandardCharsets;

/**
 * The JNI functions of the native library ({@code bindings/java/native}). Not part of the
 * public API: the {@code io.github.redlockcore.core} types wrap these with ownership and
 * checks. Handles are {@code long}s; 0 is refused with {@code used_after_close}. Times are
 * microseconds on the caller's monotonic clock; a negative optional number means "not
 * given".
 */
public final class Native {
  private Native() {}

  static {
    NativeLibrary.load();
  }

  /** Makes sure the library is loaded (throws if it cannot be). */
  public static void ensureLoaded() {
    // The static initialiser did the work.
  }

  public static byte[] utf8(String text) {
    return text.getBytes(StandardCharsets.UTF_8);
  }

  public static native String version();

  /**
   * ACQUIRE, RELEASE, EXTEND script texts, then their SHA-1s; then FENCED_ACQUIRE,
   * WRITE_BACK, FENCED_SET texts, then their SHA-1s; then the QUEUED_ACQUIRE text and its
   * SHA-1.
   */
  public static native String[] scripts();

  public static native void panicForTest();

  /** How long a notice channel stays subscribed after its last waiter ended (ms). */
  public static native long noticeChannelLingerMs();

  /** How long a failed subscriber connection stays closed at first (ms; the core's). */
  public static native long subscriberReopenFirstMs();

  /** How long a failed subscriber connection stays closed at most (ms; the core's). */
  public static native long subscriberReopenMaxMs();

  /**
   * How long a connection attempt may take before the core gives it up (a node's link), and
   * a subscriber connection to open and confirm a subscription, when the client sets no
   * connect timeout of its own (ms; the core's).
   */
  public static native long connectTimeoutDefaultMs();

  /**
   * How long one Redis Sentinel may take to connect (TCP, TLS, {@code AUTH}) and answer
   * {@code SENTINEL get-master-addr-by-name} before it is skipped for the next one, when the
   * user sets no bound (ms; the core's {@code SENTINEL_QUERY_TIMEOUT_DEFAULT_MS}).
   */
  public static native long sentinelQueryTimeoutDefaultMs();

  /**
   * The connect timeout of a node reached through {@code sentinels} Sentinels (ms; the
   * core's {@code sentinel_connect_timeout_ms}): each Sentinel's {@code queryMs} in turn,
   * then {@code connectMs} for the master's connection; saturating ({@code Long.MAX_VALUE}
   * at most). Throws {@code RedlockArgumentException} {@code invalid_argument} for a
   * negative argument.
   */
  public static native long sentinelConnectTimeoutMs(int sentinels, long queryMs, long connectMs);

  /** Native objects made and not yet freed (every handle type together). */
  public static native long liveHandles();

  public static native byte[] encodeCommand(byte[][] args);

  public static native long configNew(
      int nodes,
      long ttlMs,
      double driftFactor,
      long driftFixedUs,
      long nodeTimeoutUs,
      long minValidityUs,
      int attempts,
      long retryDelayUs,
      long retryJitterUs,
      byte[] keyPrefix,
      int tokenBytes,
      long maxExtensions,
      boolean fencing);

  public static native void configFree(long config);

  /**
   * nodes, quorum, ttlMs, driftUs, nodeTimeoutUs, minValidityUs, attempts, retryDelayUs,
   * retryJitterUs, tokenBytes, maxExtensions (-1 none), driftFixedUs.
   */
  public static native long[] configInfo(long config);

  public static native double configDriftFactor(long config);

  public static native byte[] configKeyPrefix(long config);

  public static native long configNextExtension(long config, long lease, long now);

  public static native long clientNew(long config, byte[] seed);

  public static native void clientFree(long client);

  /** {@code ttlMs} and {@code waitMicros} negative when not given. */
  public static native long clientAcquire(
      long client, byte[][] resources, long ttlMs, long waitMicros, byte[] random, long now);

  public static native long clientExtend(long client, long lease, long ttlMs, long now);

  public static native long clientRelease(long client, long lease, long now);

  public static native long clientInspect(long client, byte[][] resources, long now);

  public static native long clientLease(
      long client, byte[][] resources, String token, long validUntil);

  public static native void operationFree(long operation);

  public static native void operationHandleReply(
      long operation, long request, int type, long integer, byte[] data, long now);

  public static native void operationHandleReplyResp(
      long operation, long request, byte[] resp, long now);

  public static native void operationHandleReplyHandle(
      long operation, long request, long reply, long now);

  public static native void operationHandleTimeout(long operation, long now);

  /** 0 none, 1 send (out: node, request, deadline, kind, eval), 2 wait (out[0]), 3 outcome. */
  public static native int operationPoll(long operation, long[] out);

  /** Like operationPoll (code in out[5]); a command's RESP bytes are returned at once. */
  public static native byte[] operationPollResp(long operation, long[] out);

  public static native byte[] operationCommandResp(long operation);

  /**
   * Every output, written into the buffers without creating objects: 7 numbers per output
   * in records, RESP bytes in resp; returns the count, or minus the resp size needed.
   */
  public static native int operationDrainInto(long operation, long[] records, byte[] resp);

  /** Every output until none, in one call: {long[] records (6 each), byte[][] resp, Object[] outcome}. */
  public static native Object[] operationDrain(long operation, boolean resp);

  public static native byte[][] operationCommandArgs(long operation);

  /** {long[] numbers, String token, int[] nodeCodes, String[] nodeTexts}. */
  public static native Object[] operationOutcome(long operation);

  public static native boolean operationIsFinished(long operation);

  /**
   * Whether the acquisition should listen for release notices now (the core decides: from
   * its start with a wait limit, otherwise once an attempt failed and another may follow);
   * once true, true until it finishes.
   */
  public static native boolean operationListens(long operation);

  public static native void operationHandleNotice(long operation, int node, long now);

  public static native void operationHandleSubscribed(long operation, int node, long now);

  /** A release notice with its message (the waiter first in the node's queue, or empty). */
  public static native void operationHandleNoticeMessage(long operation, int node,
      byte[] message, long now);

  /**
   * The channels the client's acquisitions of the resources listen on: each key's notice
   * channel, then the client's waiter channel of each key.
   */
  public static native byte[][] noticeChannels(long client, byte[][] resources);

  // ---- the resource-side fencing check (the core's FencedSet) ----

  public static native long fencedSetNew(byte[] item, byte[] value, long token);

  public static native void fencedSetFree(long write);

  public static native byte[][] fencedSetArgs(long write, boolean eval);

  /** 0 accepted, 1 stale (out[0] the token seen), 2 retry as EVAL, 3 failed (text returned). */
  public static native String fencedSetReply(long write, byte[] resp, long[] out);

  /** Per node, the current round's result code (0 not asked, 1 pending, 2 success, ...). */
  public static native int[] operationNodeCodes(long operation);

  public static native void leaseFree(long lease);

  /** {String token, long[] {validUntil, extensions, ttlMs}, byte[][] keys}. */
  public static native Object[] leaseInfo(long lease);

  public static native long decoderNew();

  public static native void decoderFree(long decoder);

  public static native void decoderFeed(long decoder, byte[] bytes, int offset, int length);

  /** A reply handle, or 0 when more bytes are needed. */
  public static native long decoderNext(long decoder);

  public static native void replyFree(long reply);

  public static native int replyType(long reply);

  public static native Object replyToJava(long reply);

  public static native void operationAbandon(long operation, long now);

  // ---- the loop's native half: links and operations (see CoreLinks) ----
  // Every input returns the number of events written into records/bytes (whose lengths
  // it is given), or -1 when they need larger arrays (then loopEvents).

  public static native long loopNew(int nodes, boolean raw);

  public static native void loopFree(long loop);

  public static native int loopEvents(long loop, long[] records, byte[] bytes);

  public static native int loopAcquire(long loop, long client, long tag, byte[][] resources,
      long ttlMs, long waitMicros, long now, long[] records, byte[] bytes, int recordsRoom,
      int bytesRoom);

  public static native int loopExtend(long loop, long client, long lease, long ttlMs, long tag,
      boolean keep, long now, long[] records, byte[] bytes, int recordsRoom, int bytesRoom);

  public static native int loopRelease(long loop, long client, long lease, long tag, long now,
      long[] records, byte[] bytes, int recordsRoom, int bytesRoom);

  public static native int loopInspect(long loop, long client, long tag, byte[][] resources,
      long lease, long now, long[] records, byte[] bytes, int recordsRoom, int bytesRoom);

  public static native void loopListen(long loop, boolean on);

  public static native int loopAbandon(long loop, long tag, long now, long[] records,
      byte[] bytes, int recordsRoom, int bytesRoom);

  public static native int loopDecline(long loop, long tag, long now, long[] records,
      byte[] bytes, int recordsRoom, int bytesRoom);

  public static native void loopClaimed(long loop, long tag);

  public static native int loopNotice(long loop, long tag, int node, byte[] message, long now,
      long[] records, byte[] bytes, int recordsRoom, int bytesRoom);

  public static native int loopSubscribed(long loop, long tag, int node, long now,
      long[] records, byte[] bytes, int recordsRoom, int bytesRoom);

  public static native int loopTimeout(long loop, long now, long[] records, byte[] bytes,
      int recordsRoom, int bytesRoom);

  public static native int loopConnected(long loop, int node, long now, long[] records,
      byte[] bytes, int recordsRoom, int bytesRoom);

  public static native int loopClosed(long loop, int node, int cause, String text, long now,
      long[] records, byte[] bytes, int recordsRoom, int bytesRoom);

  public static native int loopReply(long loop, int node, long write, int kind, long integer,
      byte[] data, long now, long[] records, byte[] bytes, int recordsRoom, int bytesRoom);

  public static native int loopReplyResp(long loop, int node, long write, byte[] resp, long now,
      long[] records, byte[] bytes, int recordsRoom, int bytesRoom);

  public static native int loopFeed(long loop, int node, byte[] data, int offset, int length,
      long now, long[] records, byte[] bytes, int recordsRoom, int bytesRoom);

  public static native void loopKeepAliveOutcome(long loop, long tag, long keepAlive, long now);

  public static native void loopForget(long loop, long tag);

  public static native int loopRunning(long loop);

  /** In flight, queued, owed, idle, stalled, open. */
  public static native long[] loopLinkInfo(long loop, int node, long now);

  /**
   * How long node {@code node}'s link lets a connection attempt take before it gives it up
   * (a close event, the attempt failed with {@code timeout}); 0 counts as 1 ms, negative is
   * {@code invalid_argument}, an unknown node {@code unknown_node}.
   */
  public static native void loopSetConnectTimeout(long loop, int node, long timeoutMs);

  /** Node {@code node}'s link's connect timeout (ms). */
  public static native long loopConnectTimeoutMs(long loop, int node);

  /** The first two indexes naming one server, or null. */
  public static native int[] duplicateNode(String[] addresses);

  // ---- the core's notice subscriptions (see core.Subscriptions) ----

  /** no_nodes / too_many_nodes for a bad node count. */
  public static native long subscriptionsNew(int nodes, long timeoutMs);

  public static native void subscriptionsFree(long subscriptions);

  public static native void subscriptionsWant(long subscriptions, byte[] channel, long now);

  /** False (nothing changes) for a channel nobody listens on. */
  public static native boolean subscriptionsUnwant(long subscriptions, byte[] channel,
      long now);

  /** unknown_node for a node outside the count (as the three below). */
  public static native void subscriptionsHandleOpened(long subscriptions, int node, long now);

  public static native void subscriptionsHandleLost(long subscriptions, int node, long now);

  public static native void subscriptionsHandleRefused(long subscriptions, int node, long now);

  /** True when the confirmation counts (hand it to the channel's waiting operations). */
  public static native boolean subscriptionsHandleConfirmed(long subscriptions, int node,
      byte[] channel, long now);

  public static native void subscriptionsHandleTimeout(long subscriptions, long now);

  /**
   * The next output: out[0] its kind (0 none, 1 open, 2 subscribe, 3 unsubscribe, 4 close),
   * out[1] its node; returns the channel of a subscribe or unsubscribe, else null.
   */
  public static native byte[] subscriptionsPollOutput(long subscriptions, long[] out);

  /** When subscriptionsHandleTimeout is next due, or -1. */
  public static native long subscriptionsPollTimeout(long subscriptions);

  public static native boolean subscriptionsIsOpen(long subscriptions, int node);

  public static native boolean subscriptionsIsSubscribed(long subscriptions, int node,
      byte[] channel);

  /** Channels wanted or lingering. */
  public static native int subscriptionsChannelCount(long subscriptions);

  // ---- the core's keep-alive ----

  public static native long keepAliveNew(long config, long lease);

  public static native void keepAliveFree(long keepAlive);

  /** 1 extend, 2 wait until out[0], 3 lost (out[0] the reason), 4 stopped. */
  public static native int keepAlivePoll(long keepAlive, long now, long[] out);

  /** The outcome the operation handed out last, polled or taken. */
  public static native void keepAliveHandleOutcome(long keepAlive, long operation, long now);

  /** A lease handle of its own: the keep-alive's lease as it stands. */
  public static native long keepAliveLease(long keepAlive);

  public static native void keepAliveHandleFailure(long keepAlive, long now);

  public static native void keepAliveStop(long keepAlive);
}
