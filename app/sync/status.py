"""What the sync engine tells about itself: connectivity, last sync, progress, queue depth.

The status bar shows only what it is told here. Every state is published when it changes (and
once at start), progress at most every ``PROGRESS_INTERVAL_S`` and always at the end of a
phase, so that nothing in the UI polls the engine.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from app.events import (
    AuthRequired,
    Connectivity,
    ConnectivityChanged,
    EventBus,
    LastSyncChanged,
    QueueChanged,
    SyncProgress,
)
from app.metrics import EngineMetrics, load_snapshot
from app.store.deadletters import last_synced_at
from app.store.stats import outstanding_depth
from app.sync.clock import Clock
from app.sync.connectivity import ConnectivityDetector
from app.sync.context import EngineContext, EnginePart

__all__ = [
    "PROGRESS_INTERVAL_S",
    "QUEUE_EVENT_INTERVAL_S",
    "PhaseProgress",
    "SyncStatus",
]

log = logging.getLogger(__name__)

PROGRESS_INTERVAL_S = 0.25
QUEUE_EVENT_INTERVAL_S = 0.25


class PhaseProgress:
    """The progress events of one flush or pull: the first at once, then at most one per
    ``PROGRESS_INTERVAL_S``, and the last one always (`finish`)."""

    def __init__(
        self, events: EventBus, clock: Clock, phase: Literal["flush", "pull"], total: int = 0
    ) -> None:
        self._events = events
        self._clock = clock
        self.phase: Literal["flush", "pull"] = phase
        self.done = 0
        self.total = total
        self._published: tuple[int, int] | None = None
        self._published_at = 0.0
        self._publish()

    def update(self, done: int, total: int | None = None) -> None:
        self.done = done
        if total is not None:
            self.total = total
        if self.phase == "flush":
            self.total = max(self.total, self.done)  # edits saved during the flush join it
        if self._clock.monotonic() - self._published_at >= PROGRESS_INTERVAL_S:
            self._publish()

    def finish(self) -> None:
        if self._published != (self.done, self.total):
            self._publish()

    def _publish(self) -> None:
        self._published = (self.done, self.total)
        self._published_at = self._clock.monotonic()
        self._events.publish(SyncProgress(self.done, self.total, self.phase))


class SyncStatus(EnginePart):
    """The engine's published state. Inputs come from the loop and the delivery pipeline;
    each one publishes what changed."""

    def __init__(
        self,
        context: EngineContext,
        detector: ConnectivityDetector,
        *,
        server_url: str,
        metrics: EngineMetrics,
    ) -> None:
        super().__init__(context)
        self.detector = detector
        self.server_url = server_url
        self.metrics = metrics
        self.auth_paused = False
        #: Why this engine waits for another worker's lock (None: it delivers).
        self.standing_by: str | None = None
        self.last_error: str | None = None
        self.last_sync_at: float | None = None
        self._published_state: Connectivity | None = None
        self._progressed = False
        self._queue_published_at = float("-inf")
        self._queue_interval_s = QUEUE_EVENT_INTERVAL_S
        self.queue_dirty = False
        #: The metrics changed since they were last saved to the store.
        self.metrics_dirty = False
        #: A saturated server's `Retry-After` holds every request until then (monotonic).
        self._busy_until = float("-inf")

    # -- connectivity ------------------------------------------------------------------------

    @property
    def paused(self) -> bool:
        """A metered connection, and the person's setting says not to sync on one."""
        return self.detector.metered and not self.config().sync_on_metered

    @property
    def state(self) -> Connectivity:
        if self.standing_by is not None:
            return Connectivity.STOPPED
        if self.auth_paused:
            return Connectivity.SIGNED_OUT
        detected = self.detector.state
        if detected is not Connectivity.OFFLINE and self.paused:
            return Connectivity.PAUSED
        return detected

    @property
    def reason(self) -> str:
        """Why the state is what it is, in a few words ("" when online)."""
        state = self.state
        if state is Connectivity.STOPPED:
            return self.standing_by or ""
        if state is Connectivity.SIGNED_OUT:
            return self.last_error or ""
        if state is Connectivity.PAUSED:
            return "a metered connection, and sync on metered connections is off"
        return self.detector.reason

    def health(self, *, delivering: bool, clock_skew_s: float | None) -> dict[str, Any]:
        """The engine's health, as the diagnostics page and `/health` checks read it."""
        if self.auth_paused:
            mutations = "paused (sign in)"
        else:
            mutations = "failing" if self.detector.mutations_failing else "ok"
        return {
            "store": "ok",
            "server": str(self.state),
            "server_reason": self.detector.reason,
            "mutations": mutations,
            "delivering": delivering,
            "clock_skew_s": clock_skew_s,
            "last_sync_at": self.last_sync_at,
            "last_error": self.last_error,
        }

    def publish_connectivity(self) -> None:
        """Publish the state if it differs from the last one published (the first always)."""
        state = self.state
        if state is not self._published_state:
            self._published_state = state
            self.events.publish(ConnectivityChanged(state, self.reason))

    def stand_by(self, why: str | None) -> None:
        """Another worker holds this data dir's lock (``why``), or no longer (None)."""
        self.standing_by = why
        self.publish_connectivity()

    def server_answered(self, *, mutations_ok: bool = True) -> None:
        self.detector.server_answered(mutations_ok)
        self.publish_connectivity()

    def server_busy(self, retry_after: float | None) -> None:
        """The server answered saturated (`app.sync.errors.saturated`) and asked to wait
        ``retry_after`` seconds: it said so of itself, not of one request, so no request of
        any kind goes before that."""
        if retry_after is not None and retry_after > 0:
            until = self.clock.monotonic() + retry_after
            self._busy_until = max(self._busy_until, until)

    def busy_for(self) -> float:
        """Seconds left of the server's last `Retry-After` (0: send)."""
        return max(self._busy_until - self.clock.monotonic(), 0.0)

    def network_failure(self, reason: str) -> None:
        self.last_error = reason
        self.detector.network_failure(reason)
        self.publish_connectivity()

    def probe_failed(self, reason: str) -> None:
        self.detector.probe_failed(reason)
        self.publish_connectivity()

    def pause_for_auth(self, reason: str) -> None:
        if self.auth_paused:
            return  # another batch in flight met the same 401
        self.auth_paused = True
        self.last_error = reason
        self.publish_connectivity()
        self.events.publish(AuthRequired(self.server_url, reason))

    def resume_after_sign_in(self) -> None:
        """Connecting again: the new token is not proven until the server answers."""
        self.auth_paused = False
        self.detector.reconnecting()
        self.publish_connectivity()

    # -- last sync ---------------------------------------------------------------------------

    def load_last_sync(self) -> None:
        """On the store thread at start: the last sync a previous run recorded."""
        snapshot = load_snapshot(self.store) or {}
        known = [snapshot.get("last_successful_sync_at"), last_synced_at(self.store)]
        times = [float(at) for at in known if isinstance(at, int | float)]
        self.last_sync_at = max(times) if times else None
        self.metrics.last_sync_at = self.last_sync_at

    def publish_last_sync(self) -> None:
        if self.last_sync_at is not None:
            self.events.publish(LastSyncChanged(self.last_sync_at))

    def synced(self) -> None:
        """An acknowledged delivery or a completed pull: that was a sync, now."""
        at = self.clock.time()
        if at != self.last_sync_at:
            self.last_sync_at = at
            self.metrics.last_sync_at = at
            self.events.publish(LastSyncChanged(at))

    # -- progress and queue depth ------------------------------------------------------------

    def progress(self, phase: Literal["flush", "pull"], total: int = 0) -> PhaseProgress:
        self._progressed = True
        return PhaseProgress(self.events, self.clock, phase, total)

    def idle(self) -> None:
        """Nothing runs now: say so once after a flush or a pull."""
        if self._progressed:
            self._progressed = False
            self.events.publish(SyncProgress(0, 0, "idle"))

    async def publish_queue(self, *, force: bool = False) -> None:
        """Queue depth for the status bar, at most every ``QUEUE_EVENT_INTERVAL_S`` while
        draining (counting outstanding jobs per batch would make a drain quadratic), and
        less often when counting them takes long (20,000 open jobs: tens of ms), so that
        the count never takes more than a tenth of the store's thread; the loop forces a
        last one when it goes idle."""
        now = self.clock.monotonic()
        if not force and now - self._queue_published_at < self._queue_interval_s:
            self.queue_dirty = True
            return
        self.queue_dirty = False
        self._queue_published_at = now
        depth = await self.executor.run(outstanding_depth, self.store)
        counted_s = self.clock.monotonic() - now
        self._queue_interval_s = max(QUEUE_EVENT_INTERVAL_S, 10 * counted_s)
        oldest = depth.pop("oldest_pending_age_s")
        self.events.publish(QueueChanged(depth, oldest))
