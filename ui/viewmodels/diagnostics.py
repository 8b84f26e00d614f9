"""Diagnostics: the core's metrics in words and small charts, sampled while the app runs."""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from app.store.store import Store
from ui.qt import Property, QObject, Signal, Slot
from ui.services import Services
from ui.viewmodels.base import ViewModel
from ui.wording import ago, size_in_words

__all__ = ["DiagnosticsViewModel"]

HOUR = 3600.0


def _read(store: Store) -> dict[str, Any]:
    return store.stats()


class DiagnosticsViewModel(ViewModel):
    """Samples `Store.stats()` (and the engine's health) into an hour of history.

    Signals:
        changed()
        message(str)  — from ViewModel: the store could not be read (busy, unreadable...)
    """

    changed = Signal()

    def __init__(
        self, services: Services, parent: QObject | None = None, *, interval_s: float = 30.0
    ) -> None:
        super().__init__(parent)
        self._services = services
        self._samples: deque[tuple[float, int]] = deque(maxlen=int(HOUR / interval_s) + 1)
        self._stats: dict[str, Any] = {}
        self._health: dict[str, Any] = {}
        self._sampler = self._timer(int(interval_s * 1000), self.refresh)

    def start(self) -> None:
        self._sampler.start()
        self.refresh()

    @Slot()
    def refresh(self) -> None:
        self._tasks.start(self._sample(), "diagnostics-sample")

    async def _sample(self) -> None:
        stats = await self._services.executor.run(_read, self._services.store)
        self.record(stats, time.time())

    def record(self, stats: dict[str, Any], now: float) -> None:
        self._stats = stats
        depth = stats.get("queue_depth", {})
        self._samples.append((now, int(depth.get("pending", 0)) + int(depth.get("leased", 0))))
        while self._samples and self._samples[0][0] < now - HOUR:
            self._samples.popleft()
        engine = self._services.engine
        self._health = engine.health() if engine is not None else {}
        self.changed.emit()

    # -- charts -----------------------------------------------------------------------------

    @Property(list, notify=changed)
    def depthSeries(self) -> list[int]:
        return [depth for _, depth in self._samples]

    @Property(int, notify=changed)
    def depthMax(self) -> int:
        return max([1, *(depth for _, depth in self._samples)])

    @Property(str, notify=changed)
    def depthCaption(self) -> str:
        if not self._samples:
            return "No samples yet"
        span = self._samples[-1][0] - self._samples[0][0]
        now = self._samples[-1][1]
        peak = max(depth for _, depth in self._samples)
        if span < 60:
            return f"Waiting to send now: {now}. The chart fills in while the app runs."
        window = ago(span).removesuffix(" ago")
        return f"Waiting to send over the last {window}: now {now}, peak {peak}"

    @Property(list, notify=changed)
    def histogram(self) -> list[dict[str, Any]]:
        hist = self._stats.get("attempt_histogram", {})
        return [{"label": label, "count": int(count)} for label, count in hist.items()]

    @Property(int, notify=changed)
    def histogramMax(self) -> int:
        return max([1, *(int(c) for c in self._stats.get("attempt_histogram", {}).values())])

    # -- words ------------------------------------------------------------------------------

    @Property(list, notify=changed)
    def facts(self) -> list[dict[str, str]]:
        """(label, sentence) pairs, the panel's readable summary."""
        stats = self._stats
        if not stats:
            return [{"label": "Status", "text": "Reading the local database…"}]
        depth = stats.get("queue_depth", {})
        counters = stats.get("counters", {})
        waiting = int(depth.get("pending", 0)) + int(depth.get("leased", 0))
        oldest = stats.get("oldest_pending_age_s")
        conflicts = sum(v for k, v in counters.items() if k.startswith("conflicts_")) + int(
            depth.get("conflict", 0)
        )
        facts = [
            {
                "label": "Waiting to send",
                "text": "Nothing" if waiting == 0 else f"{waiting} changes",
            },
            {
                "label": "Oldest waiting",
                "text": "—" if oldest is None else f"queued {ago(float(oldest))}",
            },
            {"label": "Failed (need a person)", "text": str(depth.get("dead", 0))},
            {"label": "Open conflicts", "text": str(depth.get("conflict", 0))},
            {"label": "Conflicts seen", "text": str(conflicts)},
            {
                "label": "Duplicates detected",
                "text": f"{counters.get('duplicates_detected', 0)} (the server had them already)",
            },
            {"label": "Lease timeouts", "text": str(stats.get("lease_timeouts", 0))},
            {"label": "Delivered", "text": f"{depth.get('done', 0)} changes kept for a week"},
            {
                "label": "Database size",
                "text": size_in_words(int(stats.get("database_size_bytes", 0))),
            },
        ]
        health = self._health
        if health:
            server = f"{health.get('server', '?')}"
            if health.get("server_reason"):
                server += f" ({health['server_reason']})"
            facts.insert(0, {"label": "Server", "text": server})
            facts.insert(1, {"label": "Sending changes", "text": str(health.get("mutations", "?"))})
            skew = health.get("clock_skew_s")
            if skew is not None and abs(skew) > 300:
                facts.append(
                    {"label": "Clock", "text": f"this device is {abs(skew):.0f} s off the server"}
                )
        else:
            facts.insert(0, {"label": "Server", "text": "sync is not running in this window"})
        return facts
