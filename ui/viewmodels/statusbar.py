"""The status bar: connection, what is waiting, when we last synced, and "Sync now"."""

from __future__ import annotations

import time
from typing import Any

from app.store.deadletters import last_synced_at
from app.store.store import Store
from ui.bridge import from_number
from ui.qt import Property, QObject, QTimer, Signal, Slot, connect
from ui.services import Services
from ui.tasks import TaskOwner
from ui.wording import ago

__all__ = ["StatusBarViewModel"]

_CONNECTIVITY_TEXT = {
    "online": "Online",
    "offline": "Offline — edits are kept on this device",
    "checking": "Checking the connection…",
    "connecting": "Checking the connection…",
    "degraded": "Server reachable, but changes are failing",
    "signed_out": "Signed out — sign in to sync",
    "stopped": "Sync is not running",
}


def _read_status(store: Store) -> tuple[dict[str, Any], float | None]:
    return store.stats(), last_synced_at(store)


class StatusBarViewModel(QObject):
    """Always-visible sync status.

    Signals:
        changed()  — any displayed value changed
        message(str)  — something to tell the person once (a toast)
    """

    changed = Signal()
    message = Signal(str)

    def __init__(self, services: Services, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._services = services
        self._tasks = TaskOwner(on_condition=self.message.emit)
        self._connectivity = "checking" if services.engine is not None else "stopped"
        self._reason = ""
        self._depth: dict[str, int] = {}
        self._oldest_age: float | None = None
        self._oldest_seen_at = time.time()
        self._last_sync: float | None = None
        self._progress = (0, 0, "idle")
        self._tick = QTimer(self, interval=10_000)
        connect(self._tick.timeout, self.changed.emit)
        self._tick.start()
        bridge = services.bridge
        connect(bridge.connectivityChanged, self.on_bridge_connectivity_changed)
        connect(bridge.queueChanged, self.on_bridge_queue_changed)
        connect(bridge.syncProgress, self.on_bridge_sync_progress)
        connect(bridge.jobStateChanged, self.on_bridge_job_state_changed)
        connect(bridge.authRequired, self.on_bridge_auth_required)

    # -- inputs -----------------------------------------------------------------------------

    @Slot()
    def refresh(self) -> None:
        self._tasks.start(self._refresh(), "status-refresh")

    async def _refresh(self) -> None:
        stats, synced_at = await self._services.executor.run(_read_status, self._services.store)
        self._depth = dict(stats["queue_depth"])
        self._set_oldest(stats["oldest_pending_age_s"])
        if synced_at is not None and (self._last_sync is None or synced_at > self._last_sync):
            self._last_sync = synced_at
        self.changed.emit()

    async def wait_idle(self) -> None:
        await self._tasks.wait_idle()

    async def aclose(self) -> None:
        self._tick.stop()
        await self._tasks.aclose()

    def on_bridge_connectivity_changed(self, state: str, reason: str) -> None:
        if self._connectivity == "signed_out" and state != "online":
            return  # still paused for sign-in; the probe alone does not fix a refused token
        self._connectivity, self._reason = state, reason
        self.changed.emit()

    def on_bridge_auth_required(self, server_url: str, reason: str) -> None:
        self._connectivity, self._reason = "signed_out", reason
        self.changed.emit()

    def on_bridge_queue_changed(self, depth: dict[str, int], oldest_age: float) -> None:
        self._depth = dict(depth)
        self._set_oldest(from_number(oldest_age))
        self.changed.emit()

    def on_bridge_sync_progress(self, done: int, total: int, phase: str) -> None:
        self._progress = (done, total, phase)
        if phase == "idle" and self._connectivity == "online":
            self._last_sync = time.time()
        self.changed.emit()

    def on_bridge_job_state_changed(
        self, job_id: int, entity_id: str, status: str, error: str, next_attempt_at: float
    ) -> None:
        if status == "done":
            self._last_sync = time.time()

    def signed_in(self) -> None:
        self._connectivity = "checking" if self._services.engine is not None else "stopped"
        self.changed.emit()

    @Slot()
    def syncNow(self) -> None:
        engine = self._services.engine
        if engine is None:
            self.message.emit("Sync is not running in this window.")
            return
        engine.wake()
        if self._connectivity in ("offline", "stopped"):
            self._connectivity = "checking"
        self.message.emit("Syncing now…")
        self.changed.emit()

    def _set_oldest(self, age: float | None) -> None:
        self._oldest_age = age
        self._oldest_seen_at = time.time()

    # -- outputs ----------------------------------------------------------------------------

    @Property(str, notify=changed)
    def connectivity(self) -> str:
        return self._connectivity

    @Property(str, notify=changed)
    def connectivityText(self) -> str:
        text = _CONNECTIVITY_TEXT.get(self._connectivity, self._connectivity)
        return text

    @Property(str, notify=changed)
    def reason(self) -> str:
        return self._reason

    @Property(int, notify=changed)
    def pendingCount(self) -> int:
        return self._depth.get("pending", 0) + self._depth.get("leased", 0)

    @Property(int, notify=changed)
    def failedCount(self) -> int:
        return self._depth.get("dead", 0)

    @Property(int, notify=changed)
    def conflictCount(self) -> int:
        return self._depth.get("conflict", 0)

    @Property(str, notify=changed)
    def pendingText(self) -> str:
        n = self.pendingCount
        if n == 0:
            return "Nothing waiting to send"
        noun = "change" if n == 1 else "changes"
        oldest = self._oldest_age
        if oldest is None:
            return f"{n} {noun} waiting"
        age = oldest + (time.time() - self._oldest_seen_at)
        return f"{n} {noun} waiting, oldest {ago(age)}"

    @Property(str, notify=changed)
    def attentionText(self) -> str:
        """What cannot go out without a person: failed changes and conflicts ("" if none)."""
        parts = []
        failed, conflicts = self.failedCount, self.conflictCount
        if failed:
            parts.append(f"{failed} failed {'change' if failed == 1 else 'changes'}")
        if conflicts:
            parts.append(f"{conflicts} {'conflict' if conflicts == 1 else 'conflicts'}")
        return " and ".join(parts) + " need you" if parts else ""

    @Property(str, notify=changed)
    def lastSyncText(self) -> str:
        if self._last_sync is None:
            return "Never synced"
        return f"Last sync {ago(time.time() - self._last_sync)}"

    @Property(bool, notify=changed)
    def syncing(self) -> bool:
        done, total, phase = self._progress
        return phase not in ("idle", "") and total > 0

    @Property(str, notify=changed)
    def progressText(self) -> str:
        done, total, phase = self._progress
        if phase in ("idle", "") or total <= 0:
            return ""
        verb = {"flush": "Sending", "pull": "Receiving", "revalidate": "Checking"}.get(phase, phase)
        return f"{verb} {done} of {total}"

    @Property(float, notify=changed)
    def progressFraction(self) -> float:
        done, total, _ = self._progress
        return 0.0 if total <= 0 else min(1.0, done / total)
