"""Hand-off benchmark of the Python package (`make bench-python` runs it after bench.py).

Contenders, each a process with its own clients, take one lock in a loop (acquire,
release, acquire again) on five local Redis nodes, for a fixed time, at default
settings: this package's sync and asyncio drivers waiting with ``blocking_timeout``
and release notices, the sync one with ``notices=False`` (woken by its retry delay
only), and pottery's Redlock (blocking ``acquire()``, its defaults). Reported per
client and contender count: acquisitions and hand-offs (the lock going to another
contender) per second, the latency from a holder's release to the next contender's
acquisition (p50, p99), and fairness: the longest wait for the lock against the mean
wait, over the whole run and over the waits asked after its first 0.5 s (a process's
first waits also open its subscriber connections, in a herd), and the fewest
acquisitions of one contender against the most. For scale, the
p50 of one uncontended acquisition.

    python bench/handoff.py [--base-port P] [--seconds S] [--contenders 4,16]

The nodes are started (and stopped) on ``--base-port`` (default
``$REDLOCK_BENCH_BASE_PORT`` or 7390); ``--ports 7000,7001,...`` uses nodes that
already run instead.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]
NODES = REPO / "scripts" / "redis-nodes.sh"

KINDS = ("notices", "asyncio", "no-notices", "pottery")
#: The first seconds of a run, left out of the "after warm-up" fairness column.
WARM_UP = 0.5
LABELS = {
    "notices": "redlock-core sync, notices",
    "asyncio": "redlock-core asyncio, notices",
    "no-notices": "redlock-core sync, notices=False",
    "pottery": "pottery 3.0.1 Redlock",
}


def worker(kind: str, ports: list[int], name: str, start: float, end: float) -> None:
    """One contender: acquire and release in a loop from ``start`` to ``end``
    (``time.monotonic()``, the same clock in every process); prints its events."""
    import redis

    from redlock_core import RedlockError

    events = []
    if kind == "pottery":
        from pottery import Redlock as PotteryRedlock

        lock = PotteryRedlock(key=name, masters={redis.Redis(port=p) for p in ports})
        time.sleep(max(0.0, start - time.monotonic()))
        while time.monotonic() < end:
            asked = time.monotonic()
            lock.acquire()
            got = time.monotonic()
            released = time.monotonic()
            lock.release()
            events.append((asked, got, released))
    elif kind == "asyncio":
        import asyncio

        import redis.asyncio

        from redlock_core import AsyncRedlock

        async def loop() -> None:
            clients = [redis.asyncio.Redis(port=p) for p in ports]
            async with AsyncRedlock(clients) as redlock:
                with contextlib.suppress(RedlockError):  # only opens the connections
                    await (await redlock.acquire(f"{name}:warm:{os.getpid()}")).release()
                await asyncio.sleep(max(0.0, start - time.monotonic()))
                while time.monotonic() < end:
                    asked = time.monotonic()
                    held = await redlock.acquire(name, blocking_timeout=30)
                    got = time.monotonic()
                    released = time.monotonic()
                    await held.release()
                    events.append((asked, got, released))

        asyncio.run(loop())
    else:
        from redlock_core import Redlock

        redlock = Redlock([redis.Redis(port=p) for p in ports], notices=kind == "notices")
        with contextlib.suppress(RedlockError):  # opens the connections before the start
            redlock.acquire(f"{name}:warm:{os.getpid()}").release()
        time.sleep(max(0.0, start - time.monotonic()))
        while time.monotonic() < end:
            asked = time.monotonic()
            held = redlock.acquire(name, blocking_timeout=30)
            got = time.monotonic()
            released = time.monotonic()
            held.release()
            events.append((asked, got, released))
        redlock.close()
    print(json.dumps(events), flush=True)


def uncontended(ports: list[int], name: str, cycles: int = 300) -> float:
    """p50 of one uncontended acquisition (the acquire call alone), in seconds."""
    import redis

    from redlock_core import Redlock

    samples = []
    with Redlock([redis.Redis(port=p) for p in ports]) as redlock:
        for i in range(cycles + 30):
            started = time.perf_counter()
            lock = redlock.acquire(name)
            took = time.perf_counter() - started
            lock.release()
            if i >= 30:
                samples.append(took)
    return statistics.median(samples)


def run(kind: str, contenders: int, ports: list[int], seconds: float) -> dict[str, Any]:
    name = f"bench:handoff:{kind}:{contenders}:{time.monotonic_ns()}"
    start = time.monotonic() + 2.0 + 0.1 * contenders  # every process ready by then
    end = start + seconds
    processes = [
        subprocess.Popen(
            [
                *(sys.executable, __file__, "--worker", kind),
                *("--ports", ",".join(map(str, ports)), "--name", name),
                *("--start", repr(start), "--end", repr(end)),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(contenders)
    ]
    per_client = []
    for process in processes:
        out, _ = process.communicate(timeout=seconds + 120)
        if process.returncode != 0:
            raise RuntimeError(f"a {kind} contender failed")
        per_client.append([tuple(event) for event in json.loads(out)])
    # Only what happened within the window counts (the last acquisitions may end later).
    acquisitions = sorted(
        (got, released, got - asked, client)
        for client, events in enumerate(per_client)
        for asked, got, released in events
        if got <= end
    )
    # A hand-off is the lock going to another contender; a contender taking it again
    # right after its own release is not one.
    handoffs = [
        following[0] - previous[1]
        for previous, following in zip(acquisitions, acquisitions[1:])
        if following[3] != previous[3]
    ]
    waits = [wait for _, _, wait, _ in acquisitions]
    # The same, for the waits asked after the first WARM_UP seconds: every process's
    # first waits also pay for its subscriber connections and a herd start.
    warm = [
        got - asked
        for events in per_client
        for asked, got, _ in events
        if got <= end and asked >= start + WARM_UP
    ]
    counts = [sum(1 for a in acquisitions if a[3] == c) for c in range(contenders)]
    ordered = sorted(handoffs)
    return {
        "handoffs_per_s": len(handoffs) / (end - start),
        "acquisitions_per_s": len(acquisitions) / (end - start),
        "p50_ms": ordered[len(ordered) // 2] * 1e3 if ordered else float("nan"),
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1e3
        if ordered
        else float("nan"),
        "max_over_mean_wait": max(waits) / statistics.fmean(waits) if waits else float("nan"),
        "max_over_mean_warm": max(warm) / statistics.fmean(warm) if warm else float("nan"),
        "p99_over_mean_wait": sorted(waits)[min(len(waits) - 1, int(len(waits) * 0.99))]
        / statistics.fmean(waits)
        if waits
        else float("nan"),
        "mean_wait_ms": statistics.fmean(waits) * 1e3 if waits else float("nan"),
        "max_wait_ms": max(waits) * 1e3 if waits else float("nan"),
        "fewest_most": (min(counts), max(counts)),
    }


def nodes_script(*args: str, base_port: int) -> None:
    subprocess.run(
        ["bash", str(NODES), *args, "--base-port", str(base_port)],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--base-port", type=int, default=int(os.environ.get("REDLOCK_BENCH_BASE_PORT", 7390))
    )
    parser.add_argument("--ports", help="comma-separated ports of five running nodes")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--contenders", default="4,16")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--worker", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--name", help=argparse.SUPPRESS)
    parser.add_argument("--start", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--end", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        ports = [int(p) for p in args.ports.split(",")]
        worker(args.worker, ports, args.name, args.start, args.end)
        return
    started_here = args.ports is None
    ports = (
        [args.base_port + i for i in range(5)]
        if started_here
        else [int(p) for p in args.ports.split(",")]
    )
    if started_here:
        nodes_script("start", "--nodes", "5", base_port=args.base_port)
    try:
        single = uncontended(ports, f"bench:handoff:single:{time.monotonic_ns()}")
        print(
            f"## hand-off: contenders taking one lock in a loop, 5 local nodes "
            f"(ports {ports[0]}-{ports[-1]}), {args.seconds:g} s per row, default settings"
        )
        print()
        print(f"one uncontended acquisition (sync driver): p50 {single * 1e3:.2f} ms")
        print()
        header = (
            f"| {'client':<34} | contenders | acquisitions/s | hand-offs/s "
            "| release-to-next p50 ms | p99 ms "
            "| max wait / mean wait | after 0.5 s | p99 wait / mean | mean wait ms "
            "| fewest / most acquisitions |"
        )
        print(header)
        print("|" + "|".join("-" * len(cell) for cell in header.split("|")[1:-1]) + "|")
        for contenders in [int(c) for c in args.contenders.split(",")]:
            for kind in args.kinds.split(","):
                r = run(kind, contenders, ports, args.seconds)
                fewest, most = r["fewest_most"]
                print(
                    f"| {LABELS[kind]:<34} | {contenders:>10} "
                    f"| {r['acquisitions_per_s']:>14,.0f} | {r['handoffs_per_s']:>11,.0f} "
                    f"| {r['p50_ms']:>22.2f} | {r['p99_ms']:>6.1f} "
                    f"| {r['max_over_mean_wait']:>20.1f} | {r['max_over_mean_warm']:>11.1f} "
                    f"| {r['p99_over_mean_wait']:>15.1f} "
                    f"| {r['mean_wait_ms']:>12.1f} "
                    f"| {fewest:>12} / {most:<13} |",
                    flush=True,
                )
        print()
        print(
            "targets: >= 300 hand-offs/s with 4 contenders, release-to-next p50 within 3x "
            f"one uncontended acquisition ({3 * single * 1e3:.2f} ms), max wait <= 3x the mean"
        )
    finally:
        if started_here:
            nodes_script("stop", base_port=args.base_port)


if __name__ == "__main__":
    main()
