<?php

declare(strict_types=1);

namespace Redlock\Driver;

use Redlock\Ffi\Reply;

/**
 * The events a node's transport reports: the per-node contract between the I/O
 * (StreamConnection) and what decides about commands (StreamDriver's per-node channel, which reports them to the core's link).
 */
interface ConnectionListener
{
    /** A new or re-opened connection is ready (TLS and AUTH done). */
    public function connected(): void;

    /**
     * The connection failed or closed. `$cause`: refused, auth, tls, timeout, other.
     */
    public function closed(string $cause, string $text): void;

    /** The next reply, in the order of the writes. */
    public function reply(Reply $reply): void;
}
