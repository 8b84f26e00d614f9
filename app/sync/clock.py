"""The engine's sense of time, injected: a wall clock, a monotonic clock and a sleep.

In production they are the `time` module and `asyncio.sleep`; tests hand in a fake clock whose
sleep returns when the test moves time on, so backoffs, probes and Retry-After waits are
checked without sleeping for real (trio's ``MockClock`` is the model).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol

__all__ = ["Clock", "Sleep", "sleep_or_wake"]


class Clock(Protocol):
    """What the engine reads: ``time()`` (wall, epoch seconds) and ``monotonic()``. The
    `time` module is one."""

    def time(self) -> float: ...

    def monotonic(self) -> float: ...


Sleep = Callable[[float], Awaitable[None]]


async def sleep_or_wake(sleep: Sleep, seconds: float | None, wake: asyncio.Event) -> None:
    """Return when ``wake`` is set or ``seconds`` have passed on ``sleep``'s clock (None:
    only when woken). Both waits are ended before this returns: nothing is left running."""
    if wake.is_set():
        return
    if seconds is None:
        await wake.wait()
        return
    woken = asyncio.ensure_future(wake.wait())
    timer = asyncio.ensure_future(sleep(seconds))
    try:
        await asyncio.wait({woken, timer}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        woken.cancel()
        timer.cancel()
        await asyncio.gather(woken, timer, return_exceptions=True)
