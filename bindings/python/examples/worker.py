"""A process contending for one lock (the tests and `make demo`): under the lock it
reads a counter file, sleeps a little, and writes it back incremented, a
read-modify-write that loses updates whenever two holders overlap.

    python worker.py [--nodes URL,URL,...] [--resource NAME] [--counter FILE]
                     [--rounds N] [--sleep SECONDS] [--intervals FILE] [--stats FILE]
                     [--asyncio] [--tasks N] [--fence FILE]

Defaults come from the demo's environment: REDLOCK_NODES, DEMO_RESOURCE,
DEMO_COUNTER, DEMO_ROUNDS, DEMO_STATS, DEMO_FENCE. --intervals appends "start end"
(time.monotonic seconds) per critical section, so the caller can check that no two
overlapped; --stats appends one JSON line per acquisition:
{"event":"acquired","attempts":N,"acquire_us":MICROSECONDS}. With --asyncio, --tasks
coroutines contend inside the process too. With --fence, locks carry fencing tokens and
the counter is fenced: a write goes ahead only if the lock's token is above the one
recorded in FILE, which it then records (a stale token ends the worker with status 3),
and each stats line carries "fencing_token".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

from redlock_core import AsyncRedlock, Redlock

SETTINGS = dict(ttl=5, attempts=100_000, retry_delay=0.010, retry_jitter=0.008)


def check_fence(args: argparse.Namespace, token: int | None) -> None:
    """The counter's fencing check: the token must be above the last one it accepted."""
    if args.fence is None:
        return
    seen = int(args.fence.read_text() or "0")
    if token is None or token <= seen:
        print(f"worker: stale fencing token {token}, counter saw {seen}", file=sys.stderr)
        sys.exit(3)


def record_fence(args: argparse.Namespace, token: int | None) -> None:
    if args.fence is not None:
        args.fence.write_text(f"{token}\n")


def critical_section(
    args: argparse.Namespace, intervals: list[tuple[float, float]], token: int | None
) -> None:
    start = time.monotonic()
    check_fence(args, token)
    value = int(args.counter.read_text() or "0")
    time.sleep(args.sleep)
    args.counter.write_text(f"{value + 1}\n")
    record_fence(args, token)
    intervals.append((start, time.monotonic()))


async def critical_section_async(
    args: argparse.Namespace, intervals: list[tuple[float, float]], token: int | None
) -> None:
    start = time.monotonic()
    check_fence(args, token)
    value = int(args.counter.read_text() or "0")
    await asyncio.sleep(args.sleep)  # other tasks run meanwhile: only the lock excludes them
    args.counter.write_text(f"{value + 1}\n")
    record_fence(args, token)
    intervals.append((start, time.monotonic()))


def record(stats: Path | None, attempts: int | None, started: int, token: int | None) -> None:
    if stats is None:
        return
    line: dict[str, int | str | None] = {
        "event": "acquired",
        "attempts": attempts,
        "acquire_us": (time.monotonic_ns() - started) // 1000,
    }
    if token is not None:
        line["fencing_token"] = token
    with stats.open("a") as out:
        out.write(json.dumps(line, separators=(",", ":")) + "\n")


def run_sync(args: argparse.Namespace, intervals: list[tuple[float, float]]) -> None:
    with Redlock.from_urls(args.nodes, fencing=args.fence is not None, **SETTINGS) as redlock:
        for _ in range(args.rounds):
            started = time.monotonic_ns()
            with redlock.lock(args.resource) as lock:
                record(args.stats, lock.attempts, started, lock.fencing_token)
                lock.check()
                critical_section(args, intervals, lock.fencing_token)


async def run_async(args: argparse.Namespace, intervals: list[tuple[float, float]]) -> None:
    fencing = args.fence is not None
    async with AsyncRedlock.from_urls(args.nodes, fencing=fencing, **SETTINGS) as redlock:

        async def task() -> None:
            for _ in range(args.rounds):
                started = time.monotonic_ns()
                async with redlock.lock(args.resource) as lock:
                    record(args.stats, lock.attempts, started, lock.fencing_token)
                    lock.check()
                    await critical_section_async(args, intervals, lock.fencing_token)

        await asyncio.gather(*(task() for _ in range(args.tasks)))


def main() -> None:
    env = os.environ.get
    parser = argparse.ArgumentParser(description="Contend for one lock on a counter file.")
    parser.add_argument("--nodes", default=env("REDLOCK_NODES"))
    parser.add_argument("--resource", default=env("DEMO_RESOURCE"))
    parser.add_argument("--counter", type=Path, default=env("DEMO_COUNTER"))
    parser.add_argument("--rounds", type=int, default=int(env("DEMO_ROUNDS", "20")))
    parser.add_argument("--sleep", type=float, default=0.005)
    parser.add_argument("--intervals", type=Path)
    parser.add_argument("--stats", type=Path, default=env("DEMO_STATS"))
    parser.add_argument("--asyncio", action="store_true")
    parser.add_argument("--tasks", type=int, default=1)
    parser.add_argument("--fence", type=Path, default=env("DEMO_FENCE"))
    args = parser.parse_args()
    for name in ("nodes", "resource", "counter"):
        if not getattr(args, name):
            parser.error(f"--{name} is required (or its environment variable)")
    intervals: list[tuple[float, float]] = []
    try:
        if args.asyncio:
            asyncio.run(run_async(args, intervals))
        else:
            run_sync(args, intervals)
    finally:
        if args.intervals is not None:
            with args.intervals.open("a") as out:
                out.writelines(f"{start} {end}\n" for start, end in intervals)


if __name__ == "__main__":
    main()
