"""The engine's housekeeping of the queue and the uploads: at start, then every sweep interval.

Leases of a killed process are reclaimed, retry times set from a clock that jumped are
bounded again, and uploads whose files vanished or whose sessions expired are looked at. Each
sweep runs on the store's single-writer executor; a failed one (the disk is full) is tried
again at the next turn of the loop, not after a whole interval.
"""

from __future__ import annotations

from collections.abc import Callable

from app.store.store import Store
from app.sync.clock import Clock
from app.sync.uploader import Uploader

__all__ = ["CLOCK_JUMP_S", "Sweeps"]

#: The wall clock and the monotonic clock disagreeing by more than this between two sweeps
#: means the device clock was set: retry and lease times are bounded again.
CLOCK_JUMP_S = 60.0


class Sweeps:
    """When the next sweep is due, and what each one does."""

    def __init__(
        self, store: Store, uploader: Uploader, clock: Clock, interval_s: Callable[[], float]
    ) -> None:
        self.store = store
        self.uploader = uploader
        self.clock = clock
        self.interval_s = interval_s
        self._last = clock.monotonic()
        self._last_wall = store.clock()

    def at_start(self) -> None:
        """What a start finds: leases of a process that died, times from a clock since set."""
        self.store.queue.expire_orphaned_leases()
        self.store.queue.reclaim_expired()
        self.store.queue.clamp_times()
        self.uploader.sweep()
        self._last, self._last_wall = self.clock.monotonic(), self.store.clock()

    def due(self) -> bool:
        return self.clock.monotonic() - self._last >= self.interval_s()

    def periodic(self) -> None:
        """Reclaim expired leases, look at the uploads; bound the queue's times again if the
        wall clock moved apart from the monotonic one (set back a day during a backoff, a job
        would wait a day)."""
        elapsed = self.clock.monotonic() - self._last
        wall = self.store.clock()
        clock_moved = abs((wall - self._last_wall) - elapsed) > CLOCK_JUMP_S
        self.store.queue.reclaim_expired()
        self.uploader.sweep()
        if clock_moved:
            self.store.queue.clamp_times()
        self._last, self._last_wall = self.clock.monotonic(), wall
