<?php

declare(strict_types=1);

namespace Redlock;

/**
 * What became of a fenced write (FencedStore::set()): accepted, or refused because the
 * item had already accepted `$seen`, a token at least as high as `$token` (the writer
 * is a stale holder: its lock expired and someone newer has written; stop, and do not
 * retry with the same token). One exception: a retry after a FencedWriteException
 * whose outcome was unknown, refused with `$seen === $token`, means the first try wrote.
 */
final class FencedWrite
{
    public function __construct(
        /** The item now holds the value and its guard the token. */
        public readonly bool $accepted,
        /** The token this write carried. */
        public readonly int $token,
        /** The highest token the item had accepted: `$token` when accepted, else the newer one. */
        public readonly int $seen,
    ) {
    }

    /** The write was refused: the writer holds an older token than one already accepted. */
    public function isStale(): bool
    {
        return !$this->accepted;
    }
}
