"""A fake clock for the sync engine: time moves only when a test moves it, or jumps ahead
by itself to the next timer while the engine sleeps (`run_for`), like trio's MockClock with
``autojump_threshold=0``. Network I/O stays real (the real server on loopback): only the
engine's own waits (backoffs, probes, idle sleeps, Retry-After) are virtual.

The engine sleeps only from its loop, once its batches have all ended, so "a sleeper is
waiting" means the engine has nothing else to do: the moment to jump.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools

__all__ = ["EPOCH", "FakeClock"]

EPOCH = 1_800_000_000.0

#: How long (real seconds) to wait for the engine to reach its next sleep before failing.
REAL_PATIENCE_S = 15.0


class FakeClock:
    """``time()`` / ``monotonic()`` / ``sleep()`` for `SyncEngine(clock=..., sleep=...)`,
    ``time`` also for the store (`Store(clock=clock.time)`)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.skew = 0.0  # the device's wall clock stepped (NTP, a person) apart from time
        #: Every sleep asked for, in order (seconds): the engine's waits, to assert on.
        self.slept: list[float] = []
        self._timers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._changed: asyncio.Event | None = None
        self.sleeps_begun = 0

    def time(self) -> float:
        return EPOCH + self.now + self.skew

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        timer: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._timers, (self.now + seconds, next(self._order), timer))
        self.sleeps_begun += 1
        self._signal()
        try:
            await timer
        finally:
            timer.cancel()  # woken another way: the timer no longer counts
            self._signal()

    # -- moving time -------------------------------------------------------------------------

    def sleeping(self) -> list[float]:
        """When the waiting sleepers are due (monotonic)."""
        return sorted(due for due, _, timer in self._timers if not timer.done())

    async def asleep(self, *, since: int | None = None) -> None:
        """Return once a sleeper waits (begun after ``since``, a `sleeps_begun` count read
        before the action whose end this waits for). Fails after ``REAL_PATIENCE_S``."""
        async with asyncio.timeout(REAL_PATIENCE_S):
            while not (self.sleeping() and (since is None or self.sleeps_begun > since)):
                await self._wait_change()
        # Let a sleeper woken in the same turn (wake event) cancel its timer first.
        await asyncio.sleep(0)
        if not self.sleeping() or (since is not None and self.sleeps_begun <= since):
            await self.asleep(since=since)

    async def advance(self, seconds: float, *, settle: bool = True) -> None:
        """Move time on by ``seconds``, waking each sleeper whose time comes, in order, and
        letting the engine run until it sleeps again before the next one. First waits for
        the engine to sleep (``settle=False``: not, for an engine that waits on no timer)."""
        if settle:
            await self.asleep()
        end = self.now + seconds
        while True:
            due = self.sleeping()
            if not due or due[0] > end:
                self.now = max(self.now, end)
                return
            self.now = max(self.now, due[0])
            begun = self.sleeps_begun
            self._fire_due()
            await self._settle(begun)

    async def run_for(self, seconds: float) -> None:
        """Let the engine run for ``seconds`` of virtual time, jumping from sleep to sleep."""
        await self.advance(seconds)

    # -- internals ---------------------------------------------------------------------------

    def _fire_due(self) -> None:
        while self._timers and (self._timers[0][0] <= self.now or self._timers[0][2].done()):
            _, _, timer = heapq.heappop(self._timers)
            if not timer.done():
                timer.set_result(None)

    async def _settle(self, begun: int) -> None:
        """After waking a sleeper: wait until the engine sleeps again (a new sleep began and
        a sleeper waits) or, if it holds without a timer (signed out), until nothing moves."""
        try:
            await self.asleep(since=begun)
        except TimeoutError:
            raise AssertionError("the engine did not sleep again after a timer fired") from None

    def _signal(self) -> None:
        if self._changed is not None:
            self._changed.set()

    async def _wait_change(self) -> None:
        self._changed = self._changed or asyncio.Event()
        self._changed.clear()
        await self._changed.wait()
