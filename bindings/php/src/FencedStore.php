<?php

declare(strict_types=1);

namespace Redlock;

use Redlock\Driver\NodeAddress;
use Redlock\Driver\PhpRedisDriver;
use Redlock\Driver\StreamCommand;
use Redlock\Exception\FencedWriteException;
use Redlock\Exception\InvalidArgumentException;
use Redlock\Ffi\Constants;
use Redlock\Ffi\FencedSet;
use Redlock\Ffi\Native;
use Redlock\Ffi\Reply;

/**
 * The resource-side check of fencing tokens (docs/fencing.md) when the protected
 * resource is a Redis key: set() writes an item only if the writer's fencing token is
 * greater than the highest one the item has accepted, atomically on the server, and
 * says which token it saw otherwise. A holder that paused past its lease and writes
 * after a newer holder has is turned away.
 *
 *     $lock = $redlock->acquire('orders:42');                  // Options(fencing: true)
 *     $store = FencedStore::create('redis://10.0.0.9:6379');   // the resource's server
 *     $write = $store->set('orders:42:state', $json, $lock);
 *     if (!$write->accepted) { ... a newer holder ($write->seen) has written: stop }
 *
 * The command and the reading of its reply are the core's (`redlock_fenced_set_*`):
 * one script sent as EVALSHA, and as EVAL once when the server answers NOSCRIPT. The
 * item's guard key (guardKey()) holds the highest accepted token, in the item's
 * cluster slot, with no TTL: it must live as long as the item.
 *
 * Over the project's own socket (create(): TLS and AUTH as in Redlock::create()) or
 * over your phpredis object (withPhpRedis()).
 */
final class FencedStore
{
    /** @param \Closure(list<string>): Reply $send */
    private function __construct(private readonly Native $native, private readonly \Closure $send, private readonly ?StreamCommand $own)
    {
    }

    /**
     * A store on the Redis server at `$url` (`redis://[[user]:password@]host:port[/db]`,
     * `rediss://` for TLS), waiting at most `$timeoutMs` for each reply.
     *
     * @param array<string, mixed> $tlsOptions PHP `ssl` context options for rediss://
     */
    public static function create(string $url, array $tlsOptions = [], int|float $timeoutMs = 1_000, ?Native $native = null): self
    {
        if ($timeoutMs <= 0) {
            throw new InvalidArgumentException("the reply timeout must be positive, got $timeoutMs ms");
        }
        $native ??= Native::get();
        $command = new StreamCommand($native, NodeAddress::fromUrl($url, $tlsOptions));
        $timeoutUs = (int) round($timeoutMs * 1000);
        return new self($native, static fn (array $args): Reply => $command->call($args, $timeoutUs), $command);
    }

    /** A store over your connected phpredis object (its own timeouts apply). */
    public static function withPhpRedis(\Redis $redis, ?Native $native = null): self
    {
        $native ??= Native::get();
        $send = static function (array $args) use ($redis, $native): Reply {
            try {
                $redis->clearLastError();
                $result = $redis->rawCommand(...$args);
                return PhpRedisDriver::replyOf($native, $result, $result === false ? $redis->getLastError() : null);
            } catch (\RedisException $e) {
                $timedOut = stripos($e->getMessage(), 'read error') !== false || stripos($e->getMessage(), 'timed out') !== false;
                return $timedOut
                    ? Reply::create($native, Constants::REPLY_TIMEOUT)
                    : Reply::create($native, Constants::REPLY_CONNECTION_FAILED, 0, $e->getMessage());
            }
        };
        return new self($native, $send, null);
    }

    /**
     * Writes `$value` to `$item` under `$token` (a Lock acquired with fencing, or its
     * fencingToken()) if the token is greater than every token the item accepted.
     * A stale token is an answer, not an error: `accepted` false, `seen` the newer token.
     *
     * @throws InvalidArgumentException an empty item, a lock without a fencing token, a
     *   token below 1 or above 2^53 - 1 (`invalid_fencing_token`)
     * @throws FencedWriteException an error reply, a failed connection, no reply in time
     */
    public function set(string $item, string $value, Lock|int $token): FencedWrite
    {
        if ($token instanceof Lock) {
            $token = $token->fencingToken() ?? throw new InvalidArgumentException(
                'the lock carries no fencing token: acquire it with new Options(fencing: true)',
                'no_fencing_token',
            );
        }
        $write = FencedSet::create($this->native, $item, $value, $token);
        $result = $write->handleReply(($this->send)($write->args(false)));
        if ($result === Constants::FENCED_RETRY_AS_EVAL) {
            $result = $write->handleReply(($this->send)($write->args(true)));
        }
        return match ($result) {
            Constants::FENCED_ACCEPTED => new FencedWrite(true, $token, $token),
            Constants::FENCED_STALE => new FencedWrite(false, $token, $write->seen() ?? $token),
            default => self::failure($write),
        };
    }

    /** The key that holds the highest token `$item` accepted (the core's guard key). */
    public static function guardKey(string $item, ?Native $native = null): string
    {
        return FencedSet::create($native ?? Native::get(), $item, '', 1)->args(false)[4];
    }

    /** Closes the store's own connection (nothing for a phpredis object, which is yours). */
    public function close(): void
    {
        $this->own?->close();
    }

    private static function failure(FencedSet $write): never
    {
        $text = $write->failure() ?? 'the server answered NOSCRIPT to EVAL';
        // A refused connection never carried the write; a timeout or a lost one may have.
        $unknown = str_starts_with($text, 'timeout')
            || (str_starts_with($text, 'connection failed') && !str_starts_with($text, 'connection failed: refused'));
        throw new FencedWriteException("fenced write failed: $text", $unknown);
    }
}
