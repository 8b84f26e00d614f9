"""The sync engine's own measurements, kept in memory and snapshotted into the store so that
`fieldsync status --json` (another process) can print them: enqueue-to-done latency,
reconcile duration, clock skew, last successful sync. Counters that must add up across
restarts (delivered, dead, retried per topic, retry reasons, conflicts by kind, duplicates)
live in the `counters` table, written in the same transaction as the outcomes they count.
"""

from __future__ import annotations

import json
import statistics
import time
from collections import deque
from collections.abc import Iterable
from typing import Any

from app.store.settings import read_setting, write_setting

__all__ = ["SNAPSHOT_KEY", "EngineMetrics", "load_snapshot"]

SNAPSHOT_KEY = "engine_metrics"


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(int(q * len(ordered)), len(ordered) - 1)
    return ordered[index]


class EngineMetrics:
    def __init__(self, window: int = 2048) -> None:
        self.latencies_s: deque[float] = deque(maxlen=window)
        self.reconcile_s: float | None = None
        self.reconcile_changes = 0
        self.clock_skew_s: float | None = None
        self.last_sync_at: float | None = None
        self.batches = 0

    def delivered(self, latencies_s: Iterable[float]) -> None:
        self.latencies_s.extend(latencies_s)
        self.batches += 1

    def snapshot(self) -> dict[str, Any]:
        latencies = list(self.latencies_s)
        latency = None
        if latencies:
            latency = {
                "count": len(latencies),
                "p50": round(statistics.median(latencies), 3),
                "p95": round(_quantile(latencies, 0.95), 3),
                "max": round(max(latencies), 3),
            }
        return {
            "enqueue_to_done_s": latency,
            "reconcile_duration_s": self.reconcile_s,
            "reconcile_changes": self.reconcile_changes,
            "clock_skew_s": None if self.clock_skew_s is None else round(self.clock_skew_s, 3),
            "last_successful_sync_at": self.last_sync_at,
            "batches": self.batches,
            "taken_at": time.time(),
        }

    def save(self, store: Any) -> None:
        """Call on the store thread; one small statement."""
        write_setting(store, SNAPSHOT_KEY, json.dumps(self.snapshot()))


def load_snapshot(store: Any) -> dict[str, Any] | None:
    raw = read_setting(store, SNAPSHOT_KEY)
    return None if raw is None else dict(json.loads(raw))
