"""The same with asyncio, and @synchronized for a function that must run alone.

REDLOCK_NODES=redis://127.0.0.1:7000,redis://127.0.0.1:7001,... python quickstart_async.py
"""

import asyncio
import os

from redlock_core import AsyncRedlock, synchronized

urls = os.environ.get("REDLOCK_NODES", "redis://127.0.0.1:6379").split(",")


async def main() -> None:
    async with AsyncRedlock.from_urls(urls) as redlock:
        async with redlock.lock("orders:42", auto_extend=True) as lock:
            print(f"holding orders:42 for {lock.validity:.1f} s more")

        @synchronized(redlock, lambda day: f"report:{day}", auto_extend=True)
        async def nightly_report(day: str) -> str:
            await asyncio.sleep(0.1)  # runs only while holding report:<day>
            return f"report for {day} done"

        print(await nightly_report("2026-11-22"))


asyncio.run(main())
