"""Benchmarks of the Python package (`make bench-python`).

1. End-to-end acquire + release latency against five local Redis nodes (base port
   7380, started and stopped here), this package's sync and asyncio drivers side by
   side with pottery's Redlock on the same nodes in one run: all nodes healthy, then
   node 4 frozen with SIGSTOP. Each client makes --cycles acquire + release pairs on
   its own resource after a warm-up; the table gives p50, p99 and mean in microseconds.
   With a frozen node, pottery (and redis-py) need a socket timeout or they block for
   about a minute per call, so those rows use clients with socket_timeout=50 ms; this
   package's rows use redis-py's defaults as well, to show that its deadlines do not
   depend on them. Threads alive after each row are reported (pottery keeps one per
   call stuck on the frozen node).
   Two floors run on the same nodes: the same two rounds (SET NX PX on the five nodes,
   then the release script by EVALSHA) with redis-py alone, each round returning at
   the quorum (3), once with ``asyncio.gather``-style concurrency (tasks, first
   completed) and once with a thread pool. The summary gives ours against the floors
   (target: within 1.2x), the frozen-node p50 against the healthy one (target:
   within 1.3x), and the fenced rows (``fencing=True``: one more round, the write-back)
   against the unfenced ones (target: within 1.6x).
2. The ctypes overhead of one N = 5 decision cycle with no I/O: acquire, five OK
   replies, the outcome and its lease, release, five replies, through this package's
   ctypes layer and the core's node links (what the drivers pay per lock on top of
   the network).

    python bench/bench.py [--cycles N] [--base-port P]   (P also $REDLOCK_BENCH_BASE_PORT)

bench/handoff.py measures hand-offs between contenders (release notices).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import os
import secrets
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
import redis.asyncio
from pottery import Redlock as PotteryRedlock

from redlock_core import AsyncRedlock, Redlock, core
from redlock_core import _ffi as ffi

REPO = Path(__file__).resolve().parents[3]
NODES = REPO / "scripts" / "redis-nodes.sh"


def nodes_script(*args: str, base_port: int) -> None:
    subprocess.run(
        ["bash", str(NODES), *args, "--base-port", str(base_port)],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def summary(name: str, samples: list[float]) -> str:
    micros = sorted(sample * 1e6 for sample in samples)
    p50 = micros[len(micros) // 2]
    p99 = micros[min(len(micros) - 1, int(len(micros) * 0.99))]
    return (
        f"| {name:<58} | {p50:>9,.0f} | {p99:>9,.0f} | {statistics.fmean(micros):>9,.0f} "
        f"| {threading.active_count():>7} |"
    )


def timed(cycle: Callable[[int], None], cycles: int, warmup: int) -> list[float]:
    for i in range(warmup):
        cycle(-1 - i)
    samples = []
    for i in range(cycles):
        started = time.perf_counter()
        cycle(i)
        samples.append(time.perf_counter() - started)
    return samples


#: The Redlock settings of the fenced rows (the rest are the defaults).
FENCED = {"fencing": True}


def run_sync(ports: list[int], name: str, cycles: int, warmup: int, **client: Any) -> list[float]:
    settings = client.pop("redlock", {})
    with Redlock([redis.Redis(port=port, **client) for port in ports], **settings) as redlock:

        def cycle(i: int) -> None:
            redlock.acquire(name).release()

        return timed(cycle, cycles, warmup)


def run_async(ports: list[int], name: str, cycles: int, warmup: int, **client: Any) -> list[float]:
    settings = client.pop("redlock", {})

    async def main() -> list[float]:
        clients = [redis.asyncio.Redis(port=port, **client) for port in ports]
        async with AsyncRedlock(clients, **settings) as redlock:
            samples = []
            for i in range(warmup + cycles):
                started = time.perf_counter()
                await (await redlock.acquire(name)).release()
                if i >= warmup:
                    samples.append(time.perf_counter() - started)
            return samples

    return asyncio.run(main())


def run_pottery(
    ports: list[int], name: str, cycles: int, warmup: int, **client: Any
) -> list[float]:
    masters = {redis.Redis(port=port, **client) for port in ports}
    lock = PotteryRedlock(key=name, masters=masters, auto_release_time=10)

    def cycle(i: int) -> None:
        if not lock.acquire(blocking=False):
            raise RuntimeError("pottery did not acquire a free lock")
        lock.release()

    return timed(cycle, cycles, warmup)


QUORUM = 3


def released(reply: Any) -> bool:
    """The release script deleted the key: it answers how many keys it deleted."""
    return reply == 1


def _release_script(clients: list[redis.Redis]) -> str:
    text = core.script_text(ffi.SCRIPT_RELEASE)
    for client in clients:
        client.script_load(text)
    return core.script_sha1(ffi.SCRIPT_RELEASE)


def run_floor_gather(
    ports: list[int], name: str, cycles: int, warmup: int, **client: Any
) -> list[float]:
    """The two rounds with redis.asyncio alone, concurrently, each done at the quorum."""
    sha = _release_script([redis.Redis(port=port) for port in ports])

    async def quorum(calls: list[Any], ok: Callable[[Any], bool]) -> None:
        tasks = [asyncio.ensure_future(call) for call in calls]
        done_ok = 0
        pending = set(tasks)
        while done_ok < QUORUM and pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            done_ok += sum(1 for task in done if not task.exception() and ok(task.result()))
        if done_ok < QUORUM:
            raise RuntimeError("the floor did not reach a quorum")

    async def main() -> list[float]:
        clients = [redis.asyncio.Redis(port=port, **client) for port in ports]
        samples = []
        for i in range(warmup + cycles):
            token = secrets.token_hex(20)
            started = time.perf_counter()
            await quorum(
                [c.set(name, token, nx=True, px=10_000) for c in clients], lambda r: bool(r)
            )
            await quorum([c.evalsha(sha, 1, name, token) for c in clients], released)
            if i >= warmup:
                samples.append(time.perf_counter() - started)
        await asyncio.sleep(0.01)  # the slower nodes' replies
        for c in clients:
            await c.aclose()
        return samples

    return asyncio.run(main())


def run_floor_threads(
    ports: list[int], name: str, cycles: int, warmup: int, **client: Any
) -> list[float]:
    """The two rounds with redis-py alone on a thread pool, each done at the quorum."""
    clients = [redis.Redis(port=port, **client) for port in ports]
    sha = _release_script(clients)
    with concurrent.futures.ThreadPoolExecutor(max_workers=10) as pool:

        def quorum(calls: list[Callable[[], Any]], ok: Callable[[Any], bool]) -> None:
            pending = {pool.submit(call) for call in calls}
            done_ok = 0
            while done_ok < QUORUM and pending:
                done, pending = concurrent.futures.wait(
                    pending, return_when=concurrent.futures.FIRST_COMPLETED
                )
                done_ok += sum(1 for f in done if not f.exception() and ok(f.result()))
            if done_ok < QUORUM:
                raise RuntimeError("the floor did not reach a quorum")

        def cycle(i: int) -> None:
            token = secrets.token_hex(20)
            quorum(
                [lambda c=c: c.set(name, token, nx=True, px=10_000) for c in clients],
                lambda r: bool(r),
            )
            quorum([lambda c=c: c.evalsha(sha, 1, name, token) for c in clients], released)

        return timed(cycle, cycles, warmup)


def p50(samples: list[float]) -> float:
    return sorted(samples)[len(samples) // 2] * 1e6


def bench_nodes(cycles: int, base_port: int) -> None:
    ports = [base_port + i for i in range(5)]
    print(f"## acquire + release, 5 local nodes (ports {ports[0]}-{ports[-1]}), {cycles} cycles")
    print()
    header = f"| {'client':<58} | {'p50 us':>9} | {'p99 us':>9} | {'mean us':>9} | threads |"
    print(header)
    print("|" + "|".join("-" * (len(cell)) for cell in header.split("|")[1:-1]) + "|")
    warmup = 30
    healthy = [
        ("redlock-core sync", run_sync, {}),
        ("redlock-core sync, fencing", run_sync, {"redlock": FENCED}),
        ("redlock-core asyncio", run_async, {}),
        ("redlock-core asyncio, fencing", run_async, {"redlock": FENCED}),
        ("floor: redis-py thread pool, quorum", run_floor_threads, {}),
        ("floor: redis.asyncio tasks (gather), quorum", run_floor_gather, {}),
        ("pottery 3.0.1", run_pottery, {}),
    ]
    medians: dict[str, float] = {}
    for label, run, client in healthy:
        samples = run(ports, f"bench:{label}", cycles, warmup, **client)
        medians[label] = p50(samples)
        print(summary(label, samples), flush=True)
    nodes_script("pause", "4", base_port=base_port)
    try:
        frozen = [
            ("redlock-core sync, node 4 frozen, redis-py defaults", run_sync, {}),
            ("redlock-core asyncio, node 4 frozen, redis-py defaults", run_async, {}),
            ("redlock-core sync, node 4 frozen, socket_timeout 50 ms", run_sync, _timeout()),
            ("redlock-core asyncio, node 4 frozen, socket_timeout 50 ms", run_async, _timeout()),
            ("pottery 3.0.1, node 4 frozen, socket_timeout 50 ms", run_pottery, _timeout()),
        ]
        for label, run, client in frozen:
            samples = run(ports, f"bench:frozen:{label}", cycles, warmup, **client)
            medians[label] = p50(samples)
            print(summary(label, samples), flush=True)
    finally:
        nodes_script("resume", "4", base_port=base_port)
    print()
    sync_floor = medians["floor: redis-py thread pool, quorum"]
    async_floor = medians["floor: redis.asyncio tasks (gather), quorum"]
    print(
        f"p50 against the floors: sync {medians['redlock-core sync'] / sync_floor:.2f}x the "
        f"thread pool, asyncio {medians['redlock-core asyncio'] / async_floor:.2f}x the tasks "
        "(target 1.2x)"
    )
    print(
        f"p50 fenced against unfenced: sync "
        f"{medians['redlock-core sync, fencing'] / medians['redlock-core sync']:.2f}x, asyncio "
        f"{medians['redlock-core asyncio, fencing'] / medians['redlock-core asyncio']:.2f}x "
        "(target 1.6x: one more round trip)"
    )
    frozen_sync = medians["redlock-core sync, node 4 frozen, redis-py defaults"]
    frozen_async = medians["redlock-core asyncio, node 4 frozen, redis-py defaults"]
    print(
        f"p50 with node 4 frozen against healthy: sync "
        f"{frozen_sync / medians['redlock-core sync']:.2f}x, asyncio "
        f"{frozen_async / medians['redlock-core asyncio']:.2f}x (target 1.3x)"
    )
    print()


def _timeout() -> dict[str, Any]:
    return {"socket_timeout": 0.05, "socket_connect_timeout": 0.05}


def drive_without_io(op: core.Operation, links: list[core.Link], reply: int, now: int) -> Any:
    """The drivers' loop with the network taken out: every command to its node's link,
    each write answered at once with ``reply`` (OK or the integer 1), each delivery
    back to the operation; the outcome."""
    kind, integer = (ffi.REPLY_OK, 0) if reply == 0 else (ffi.REPLY_INTEGER, reply)
    with op:
        while True:
            output = op.poll()
            if output == ffi.OUTPUT_SEND:
                links[op.target()[0]].submit(1, op, now)
                continue
            if output == ffi.OUTPUT_OUTCOME:
                return op.take_outcome()
            for link in links:
                while True:
                    out = link.poll()
                    if out == ffi.LINK_OUTPUT_NONE:
                        break
                    if out == ffi.LINK_OUTPUT_WRITE:
                        write_id, _ = link.write()
                        link.handle_reply(write_id, kind, integer, now=now)
                    elif out == ffi.LINK_OUTPUT_DELIVER:
                        op.handle_delivery(link, now)


def ctypes_cycle(client: core.Client, links: list[core.Link]) -> None:
    """One N = 5 acquire + release decision cycle through the links, no I/O."""
    with drive_without_io(client.acquire("bench", 1_000), links, 0, 1_100) as won:
        lease = won.lease()
    assert lease is not None
    with lease, client.release(lease, 2_000) as op:
        drive_without_io(op, links, 1, 2_100).close()


def connected_links() -> list[core.Link]:
    links = [core.Link() for _ in range(5)]
    for link in links:
        link.handle_connected(1)
        while link.poll() == ffi.LINK_OUTPUT_WRITE:
            write_id, _ = link.write()
            link.handle_reply(write_id, ffi.REPLY_BULK, 0, b"sha", now=1)
    return links


def bench_ctypes(repeats: int = 5, cycles: int = 5_000) -> None:
    links = connected_links()
    with core.Config(5, 10_000) as config, core.Client(config, seed=bytes(32)) as client:
        for _ in range(500):
            ctypes_cycle(client, links)
        per_cycle = []
        for _ in range(repeats):
            started = time.perf_counter()
            for _ in range(cycles):
                ctypes_cycle(client, links)
            per_cycle.append((time.perf_counter() - started) / cycles * 1e6)
        # The cost of one bare call through ctypes, for scale.
        with client.acquire("bench", 0) as op:
            started = time.perf_counter()
            for _ in range(100_000):
                ffi.lib.redlock_operation_is_finished(op._p())
            per_call = (time.perf_counter() - started) / 100_000 * 1e6
    for link in links:
        link.close()
    title = "ctypes overhead, N = 5 acquire + release decision cycle through links, no I/O"
    print(f"## {title} ({cycles} cycles x {repeats})")
    print()
    print(
        f"best {min(per_cycle):.1f} us, median {statistics.median(per_cycle):.1f} us per cycle "
        f"(one bare ctypes call: {per_call:.2f} us)"
    )
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=500)
    parser.add_argument(
        "--base-port", type=int, default=int(os.environ.get("REDLOCK_BENCH_BASE_PORT", 7380))
    )
    args = parser.parse_args()
    print(
        f"python {sys.version.split()[0]}, redis-py {redis.__version__}, "
        f"libredlock {core.version()}, {os.cpu_count()} cores"
    )
    print()
    bench_ctypes()
    nodes_script("start", "--nodes", "5", base_port=args.base_port)
    try:
        bench_nodes(args.cycles, args.base_port)
    finally:
        nodes_script("stop", base_port=args.base_port)


if __name__ == "__main__":
    main()
