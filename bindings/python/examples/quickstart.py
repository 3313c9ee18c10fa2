"""Acquire, work, release; then a lock extended in the background.

REDLOCK_NODES=redis://127.0.0.1:7000,redis://127.0.0.1:7001,... python quickstart.py
"""

import os

import redis

from redlock_core import LockHeldError, NodesFailedError, Redlock

# One client per independent Redis node.
urls = os.environ.get("REDLOCK_NODES", "redis://127.0.0.1:6379").split(",")
redlock = Redlock([redis.Redis.from_url(url) for url in urls], ttl=10)

with redlock.lock("orders:42") as lock:  # acquire on entry, release on exit
    print(f"holding orders:42 for {lock.validity:.1f} s more")
    lock.check()  # raises LockLostError if no longer held

try:
    lock = redlock.acquire("orders:42", ttl=5, auto_extend=True, on_lost=print)
except LockHeldError as error:  # someone else holds it
    print("held elsewhere:", error.nodes)  # per-node detail
except NodesFailedError as error:  # the nodes are failing
    print("nodes failing:", error.reason, error.nodes)
else:
    lock.extend()  # by hand, too
    print("released on", lock.release().released, "nodes")

redlock.close()
