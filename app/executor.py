"""The single-writer executor: every blocking store or keyring call runs on one thread.

One thread serialises database access in this process (as Anki's taskman does), keeps the
asyncio loop (and, under qasync, the Qt UI) free, and never waits on the network.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

__all__ = ["StoreExecutor"]

P = ParamSpec("P")
T = TypeVar("T")


class StoreExecutor:
    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fieldsync-store")

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    def submit(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run on the store thread and wait (for synchronous callers off the loop)."""
        return self._pool.submit(fn, *args, **kwargs).result()

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True)
