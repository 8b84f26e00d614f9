"""Virtual time for the real sync engine: an asyncio loop whose clock jumps when it would sleep.

Like trio's `autojump_clock`: when nothing is ready, the loop does not block in `select`, it
moves its clock to the next timer. With the store called inline (`InlineExecutor`) and the
network faked in-process (`httpx.MockTransport`) nothing real ever waits, so a simulated week
runs in seconds and is deterministic. `VirtualClock.wall()` is the device's wall clock, which
tests may step forward or back (`skew`) independently of the loop's monotonic time.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, ParamSpec, TypeVar

__all__ = ["InlineExecutor", "VirtualClock", "virtual_loop"]

P = ParamSpec("P")
T = TypeVar("T")

EPOCH = 1_700_000_000.0


class VirtualClock:
    def __init__(self) -> None:
        self.now = 0.0  # monotonic seconds since the start of the simulation
        self.skew = 0.0  # how far the device's wall clock has been stepped

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> float:
        return EPOCH + self.now + self.skew

    def time_module(self) -> Any:
        """Stands in for the `time` module inside the engine (it reads both clocks there)."""
        return SimpleNamespace(monotonic=self.monotonic, time=self.wall)


class _AutojumpSelector(selectors.DefaultSelector):
    def __init__(self, clock: VirtualClock) -> None:
        super().__init__()
        self._clock = clock

    def select(self, timeout: float | None = None) -> list[Any]:
        ready = super().select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:
            raise RuntimeError("virtual loop: nothing scheduled and nothing ready (deadlock)")
        self._clock.now += timeout
        return []


class _VirtualLoop(asyncio.SelectorEventLoop):
    def __init__(self, clock: VirtualClock) -> None:
        super().__init__(_AutojumpSelector(clock))
        self._virtual = clock

    def time(self) -> float:
        return self._virtual.now


def virtual_loop(clock: VirtualClock) -> asyncio.AbstractEventLoop:
    return _VirtualLoop(clock)


class InlineExecutor:
    """The store executor's interface, running each call at once on the loop's thread."""

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        return fn(*args, **kwargs)

    def submit(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        return fn(*args, **kwargs)

    def shutdown(self) -> None:
        pass
