package io.github.redlockcore.jedis;

import io.github.redlockcore.FencedWriteException;
import io.github.redlockcore.FencedWriteResult;
import io.github.redlockcore.core.FencedSet;
import io.github.redlockcore.core.Reply;
import java.util.Arrays;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.commands.ProtocolCommand;
import redis.clients.jedis.exceptions.JedisConnectionException;
import redis.clients.jedis.exceptions.JedisDataException;

/**
 * The resource-side fencing check over the user's own Jedis connection to the resource's
 * server (which need not be one of the lock's nodes): the core's {@link FencedSet}
 * script, sent as {@code EVALSHA} and, if the server answers {@code NOSCRIPT}, once more
 * as {@code EVAL}.
 *
 * <pre>{@code
 * try (RedLock lock = redlock.acquire("orders:42")) {
 *   long token = lock.fencingToken().orElseThrow();   // fencing(true) in the builder
 *   FencedWriteResult r = JedisFencedWrites.set(jedis, "orders:42:state", bytes, token);
 *   if (!r.isAccepted()) { ... a newer holder has written: stop ... }
 * }
 * }</pre>
 */
public final class JedisFencedWrites {
  private JedisFencedWrites() {}

  /**
   * Sets {@code item} to {@code value} only if {@code token} is greater than every token
   * the item accepted before.
   *
   * @throws io.github.redlockcore.RedlockArgumentException for an empty item or a token
   *     outside 1 to 2^53 - 1 ({@code invalid_fencing_token})
   * @throws FencedWriteException when the server answered an error or the connection
   *     failed (whether the write happened is then not known)
   */
  public static FencedWriteResult set(Jedis jedis, String item, byte[] value, long token) {
    if (jedis == null) {
      throw new io.github.redlockcore.RedlockArgumentException(
          "invalid_argument", "the Jedis connection must not be null");
    }
    try (FencedSet write = new FencedSet(item, value, token)) {
      FencedSet.Result result = write.handleReply(send(jedis, write.args(false)));
      if (result == FencedSet.Result.RETRY_AS_EVAL) {
        result = write.handleReply(send(jedis, write.args(true)));
      }
      switch (result) {
        case ACCEPTED:
          return FencedWriteResult.accepted(token);
        case STALE:
          return FencedWriteResult.stale(token, write.seen());
        default:
          throw new FencedWriteException("fenced write to " + item + " failed: "
              + (result == FencedSet.Result.RETRY_AS_EVAL ? "NOSCRIPT after EVAL"
                  : write.failure()));
      }
    }
  }

  private static Reply send(Jedis jedis, byte[][] args) {
    byte[] name = args[0];
    ProtocolCommand command = () -> name;
    try {
      return JedisConnection.toReply(
          jedis.sendCommand(command, Arrays.copyOfRange(args, 1, args.length)));
    } catch (JedisConnectionException e) {
      throw new FencedWriteException("fenced write: connection failed: " + e.getMessage(), e);
    } catch (JedisDataException e) {
      // Jedis throws error replies; the core reads their full text (NOSCRIPT, ERR ...).
      return Reply.error(e.getMessage());
    }
  }
}
