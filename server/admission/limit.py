"""How many device requests one process works on at once, who waits, and for how long.

A reconnect storm (every device of a region back within seconds) must not turn into an
unbounded queue: each waiting request holds a connection, its parsed head and buffered body,
and a database connection once it runs. So a process works on at most `limit` requests,
lets at most `queue` more wait (first come, first served) for at most `wait_s` seconds, and
answers every other one at once with `Retry-After`: the device comes back later, and memory
stays bounded by `limit + queue` requests whatever the number of devices.

The `Retry-After` a refused device is given is its place in a line of returns paced at the
rate the process finishes requests (`RetryAdvice`): after what is running and waiting, and
after those refused before it, so the devices come back no faster than they can be served.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable

__all__ = ["Admission", "RetryAdvice"]

#: How much each finished request moves the mean time a request takes.
_DURATION_WEIGHT = 0.1
#: The mean assumed before any request has finished.
_FIRST_DURATION_S = 0.1


class RetryAdvice:
    """The `Retry-After` of each refusal: a place in a line of returns paced at the rate the
    process finishes requests (pure, with an injected clock).

    A saturated process finishes about `limit / mean duration` requests a second (Little's
    law: measured from the requests themselves, so a storm after an idle hour meets the
    process's real pace at once). Devices honour `Retry-After` exactly, so each refusal is
    told to come back once the requests already in hand are done and those refused before it
    have had their turn: the returns arrive as fast as the process can take them, neither in
    one wave that is refused again nor spread so thin that the process idles."""

    def __init__(self, most_s: int, limit: int, clock: Callable[[], float]) -> None:
        if most_s < 1 or limit < 1:
            raise ValueError("the longest Retry-After is at least 1 s, the limit at least 1")
        self.most_s = most_s
        self.limit = limit
        self._clock = clock
        self.mean_duration_s = _FIRST_DURATION_S
        self._measured = False
        self._line_free_at = float("-inf")  # when the last return promised is taken
        self._finished: deque[float] = deque()  # when each request of the last second ended

    def finished(self, duration_s: float) -> None:
        """One admitted request ended after running `duration_s` seconds."""
        now = self._clock()
        self._finished.append(now)
        while self._finished[0] <= now - 1.0:
            self._finished.popleft()
        if not self._measured:
            self.mean_duration_s, self._measured = duration_s, True
            return
        self.mean_duration_s += _DURATION_WEIGHT * (duration_s - self.mean_duration_s)

    def refuse(self, busy: int) -> int:
        """Whole seconds a request refused now should wait; `busy` requests are running or
        waiting, and go first."""
        now = self._clock()
        while self._finished and self._finished[0] <= now - 1.0:
            self._finished.popleft()
        # The pace: what the last second finished, or what the mean duration says when
        # that is faster (the first second of a storm, or slow requests now done).
        per_second = max(self.limit / max(self.mean_duration_s, 1e-3), len(self._finished))
        turn = max(now + busy / per_second, self._line_free_at)
        wait = math.ceil(turn - now)
        if wait > self.most_s:
            return self.most_s  # the line is longer than we promise: not a place in it
        self._line_free_at = turn + 1 / per_second
        return max(1, wait)


class Admission:
    """At most `limit` requests running and `queue` waiting (each at most `wait_s` seconds).

    `enter()` returns None once the request may run (it must then call `leave()` exactly
    once), or the seconds of `Retry-After` it is refused with. One event loop only."""

    def __init__(self, limit: int, queue: int, wait_s: float, advice: RetryAdvice) -> None:
        if limit < 1 or queue < 0 or wait_s < 0:
            raise ValueError("admission needs limit >= 1, queue >= 0 and wait_s >= 0")
        self.limit = limit
        self.queue = queue
        self.wait_s = wait_s
        self.advice = advice
        self.running = 0
        self._waiting: deque[asyncio.Future[None]] = deque()
        #: Requests refused since start (for metrics and tests).
        self.refused = 0

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    async def enter(self) -> int | None:
        """None once admitted (then `leave(started)` with `time.monotonic()` of now), or the
        seconds of the refusal's Retry-After."""
        if self.running < self.limit and not self._waiting:
            self.running += 1
            return None
        if len(self._waiting) >= self.queue or self.wait_s == 0:
            return self._refuse()
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(turn)
        try:
            await asyncio.wait_for(asyncio.shield(turn), self.wait_s)
        except TimeoutError:
            pass
        except asyncio.CancelledError:  # the client went away while it waited
            if turn.done():
                self.leave(None)  # it was handed a slot it will never use
            else:
                self._forget(turn)
            raise
        if not turn.done():
            self._forget(turn)
            return self._refuse()
        return None  # `leave` handed this request its slot

    def _forget(self, turn: asyncio.Future[None]) -> None:
        self._waiting.remove(turn)
        turn.cancel()

    def leave(self, started: float | None) -> None:
        """An admitted request ended; it ran from `started` (monotonic; None: never ran)."""
        if started is not None:
            self.advice.finished(time.monotonic() - started)
        while self._waiting:
            turn = self._waiting.popleft()
            if not turn.done():
                turn.set_result(None)  # the slot passes on: `running` is unchanged
                return
        self.running -= 1

    def _refuse(self) -> int:
        self.refused += 1
        return self.advice.refuse(self.running + len(self._waiting))
