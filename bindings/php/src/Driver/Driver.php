<?php

declare(strict_types=1);

namespace Redlock\Driver;

use Redlock\Ffi\Operation;

/**
 * Moves the core's commands to the nodes and the nodes' replies back. The loop
 * (Redlock::run) polls the operation; for every send it calls submit(), for every
 * wait it calls wait(), and after the outcome settle(). A driver hands replies to the
 * operation a command came from (Operation::handleReply), never decides anything about
 * the lock, and stops waiting at the instant it is given: the core then times out
 * whatever is still pending.
 */
interface Driver
{
    /**
     * One label per node (URL without credentials), in the core's node order.
     *
     * @return list<string>
     */
    public function labels(): array;

    /**
     * Takes the operation's current send output (node, request id, deadline, argc are
     * what Operation::command() returned; read the bytes or arguments from `$op`
     * before returning: they are valid until the next poll).
     */
    public function submit(Operation $op, int $node, int $requestId, int $deadlineUs, int $argc): void;

    /**
     * Does I/O until at least one reply was handed to `$op`, or until `$untilUs` (on
     * Clock::nowUs()).
     */
    public function wait(Operation $op, int $untilUs): void;

    /** Called after an operation's outcome: the driver may finish what it left. */
    public function settle(): void;

    /**
     * Lets commands still in flight finish, up to their deadlines (an early decision
     * leaves the slower nodes' commands out; for a release those clean the rest).
     */
    public function flush(): void;

    /** flush(), then closes the connections this driver opened. */
    public function close(): void;
}
