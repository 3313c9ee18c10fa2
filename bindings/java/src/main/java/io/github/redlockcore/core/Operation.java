package io.github.redlockcore.core;

import io.github.redlockcore.internal.Native;
import io.github.redlockcore.internal.NativeHandle;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * One acquisition, extension or release, as the core's state machine. After creating it
 * and after every input ({@link #handleReply}, {@link #handleTimeout}), call {@link #poll()}
 * until it returns null: send each command, arm a timer for a {@link Output.Wait}, stop at
 * the {@link Output.Finished} outcome. Calls are serialised on this object.
 */
public final class Operation extends NativeHandle {
  /** What {@link #poll(boolean, boolean)} fetches for each command. */
  private final long[] out = new long[6];
  /** Buffers {@link #drain} reuses: 7 numbers per output, and the commands' RESP bytes. */
  private final long[] records = new long[7 * 16];
  private byte[] respBuffer = new byte[4096];

  Operation(long handle) {
    super(handle, Native::operationFree, "operation");
  }

  /** The next output (commands with RESP bytes and argv), or null when there is none. */
  public Output poll() {
    return poll(true, true);
  }

  /**
   * The next output, or null. {@code resp} and {@code args} choose what each command
   * carries (a raw-socket driver needs only RESP, a client library only the argv).
   */
  public synchronized Output poll(boolean resp, boolean args) {
    long h = handle();
    byte[] bytes = null;
    int kind;
    if (resp && !args) {
      // One crossing per command for raw-socket drivers.
      bytes = Native.operationPollResp(h, out);
      kind = (int) out[5];
    } else {
      kind = Native.operationPoll(h, out);
      if (kind == 1 && resp) {
        bytes = Native.operationCommandResp(h);
      }
    }
    switch (kind) {
      case 0:
        return null;
      case 1:
        return new Output.Send(
            new Command(
                (int) out[0],
                out[1],
                out[2],
                Command.Kind.of(out[3]),
                out[4] != 0,
                bytes,
                args ? Native.operationCommandArgs(h) : null));
      case 2:
        return new Output.Wait(out[0]);
      case 3:
        return new Output.Finished(Outcome.fromNative(Native.operationOutcome(h)));
      default:
        throw new io.github.redlockcore.RedlockStateException(
            "unsupported_output", "unknown output " + kind);
    }
  }

  /**
   * Every output until there is none, polled in one native call: what {@link #poll()}
   * would return one by one. Commands carry their RESP bytes when {@code resp}, never argv.
   */
  public synchronized List<Output> drain(boolean resp) {
    long h = handle();
    List<Output> outputs = new ArrayList<>(8);
    while (true) {
      int n = Native.operationDrainInto(h, records, respBuffer);
      if (n < 0) {
        respBuffer = new byte[Math.max(respBuffer.length * 2, -n)];
        continue;
      }
      int offset = 0;
      for (int i = 0; i < n; i++) {
        int at = i * 7;
        switch ((int) records[at]) {
          case 1:
            int length = (int) records[at + 6];
            byte[] bytes = resp ? Arrays.copyOfRange(respBuffer, offset, offset + length) : null;
            offset += length;
            outputs.add(new Output.Send(new Command((int) records[at + 1], records[at + 2],
                records[at + 3], Command.Kind.of(records[at + 4]), records[at + 5] != 0, bytes,
                null)));
            break;
          case 2:
            outputs.add(new Output.Wait(records[at + 1]));
            break;
          case 3:
            outputs.add(new Output.Finished(Outcome.fromNative(Native.operationOutcome(h))));
            break;
          default:
            throw new io.github.redlockcore.RedlockStateException(
                "unsupported_output", "unknown output " + records[at]);
        }
      }
      if (n < records.length / 7) {
        return outputs;
      }
    }
  }

  /** Hands in the reply to {@code request}, received at {@code now}. */
  public synchronized void handleReply(long request, Reply reply, long now) {
    long h = handle();
    if (reply.type() == Reply.Type.ARRAY) {
      Native.operationHandleReplyResp(h, request, reply.toResp(), now);
    } else {
      Native.operationHandleReply(h, request, reply.type().ordinal(), reply.integer(),
          reply.data(), now);
    }
  }

  /** Hands in a reply the core's decoder produced (consumed: do not use it again). */
  public synchronized void handleReply(long request, RespDecoder.Decoded reply, long now) {
    Native.operationHandleReplyHandle(handle(), request, reply.handle0(), now);
  }

  /** Hands in the passing of time (every pending command past its deadline times out). */
  public synchronized void handleTimeout(long now) {
    Native.operationHandleTimeout(handle(), now);
  }

  /**
   * Hands in a release notice for this acquisition's resource from node {@code node}: a
   * waiting acquisition may try again at once (the core decides). {@code unknown_node} for
   * an index outside the nodes.
   */
  public synchronized void handleNotice(int node, long now) {
    Native.operationHandleNotice(handle(), node, now);
  }

  /**
   * Node {@code node} confirmed the subscription to this acquisition's notice channel: a
   * release published there before it took effect reached nobody, and the core decides
   * whether one may have gone unheard (docs/bindings.md, rule 13). {@code unknown_node}
   * for an index outside the nodes.
   */
  public synchronized void handleSubscribed(int node, long now) {
    Native.operationHandleSubscribed(handle(), node, now);
  }

  /**
   * As {@link #handleNotice}, with the message the notice carried (the pub/sub payload,
   * exactly as received): the id of the waiter first in the resource's queue on that node,
   * or empty. The waiter it names tries at once; the others give it time. {@code
   * invalid_argument} for a null message.
   */
  public synchronized void handleNoticeMessage(int node, byte[] message, long now) {
    Native.operationHandleNoticeMessage(handle(), node, message, now);
  }

  public synchronized boolean isFinished() {
    return Native.operationIsFinished(handle());
  }

  /**
   * Whether this acquisition should listen for its release notices now (the core decides,
   * once for every driver): with a wait limit, from the first refusal by a held key or a
   * failed attempt, or from its start when its client waited for one of its resources a
   * moment ago; otherwise once an attempt failed and another may follow (from the failed
   * attempt's cleanup on); never for
   * extensions, releases, inspections or finished operations. Once true it stays true until
   * the operation finishes: check it after every input, with the outputs, start listening
   * when it turns true and stop when the operation ends.
   */
  public synchronized boolean listens() {
    return Native.operationListens(handle());
  }

  /**
   * Cancels it: an acquisition emits the release of its token on every node (poll it),
   * then nothing more.
   */
  public synchronized void abandon(long now) {
    Native.operationAbandon(handle(), now);
  }

  long handle0() {
    return handle();
  }
}
