"""The status bar: connection, what is waiting, when we last synced, progress, "Sync now".

It shows only what the engine told it (events through the bridge) and never polls the store
for sync state: the counts come with QueueChanged and the operations' OpChanges. A clock
timer only re-words ages ("12 s ago" → "13 s ago"), once a second while they are in seconds.
"""

from __future__ import annotations

from typing import Any

from app.states import Connectivity, JobStatus
from app.store.deadletters import last_synced_at
from app.store.stats import outstanding_depth
from app.store.store import Store
from app.sync.sync_now import report_in_words
from ui.bridge import from_number
from ui.qt import Property, QObject, Signal, Slot, connect
from ui.services import Services
from ui.viewmodels.base import ViewModel
from ui.wording import CONNECTIVITY_WORDS, ago, last_synced, number

__all__ = ["StatusBarViewModel", "report_in_words"]


def _read_status(store: Store) -> tuple[dict[str, Any], float | None]:
    return outstanding_depth(store), last_synced_at(store)


class StatusBarViewModel(ViewModel):
    """Always-visible sync status.

    Signals:
        changed()  — any displayed value changed
        message(str)  — something to tell the person once (a toast; from ViewModel)
    """

    changed = Signal()

    def __init__(self, services: Services, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._services = services
        self._clock = services.clock
        # The last state the engine published, as the bridge carries it (a plain string).
        self._connectivity: str = (
            Connectivity.CONNECTING if services.engine is not None else Connectivity.STOPPED
        )
        self._reason = ""
        self._depth: dict[str, int] = {}
        self._oldest_age: float | None = None
        self._oldest_seen_at = self._clock()
        self._last_sync: float | None = None
        self._progress = (0, 0, "idle")
        self._syncing_now = False
        self._from_report = False
        self._tick = self._timer(0, self.on_tick_timeout, single_shot=True)
        bridge = services.bridge
        connect(bridge.connectivityChanged, self.on_bridge_connectivity_changed)
        connect(bridge.queueChanged, self.on_bridge_queue_changed)
        connect(bridge.syncProgress, self.on_bridge_sync_progress)
        connect(bridge.authRequired, self.on_bridge_auth_required)
        connect(bridge.opChanges, self.on_bridge_op_changes)
        connect(bridge.lastSyncChanged, self.on_bridge_last_sync_changed)

    # -- inputs -----------------------------------------------------------------------------

    @Slot()
    def refresh(self) -> None:
        """Read the counts and the persisted last sync once (start-up, after a sign-in)."""
        self._tasks.start(self._refresh(), "status-refresh")

    async def _refresh(self) -> None:
        depth, synced_at = await self._services.executor.run(_read_status, self._services.store)
        self._set_depth(depth)
        self._synced(synced_at)
        self._changed()

    def on_bridge_connectivity_changed(self, state: str, reason: str) -> None:
        self._from_report = False
        if self._connectivity == Connectivity.SIGNED_OUT and state != Connectivity.ONLINE:
            return  # still paused for sign-in; the probe alone does not fix a refused token
        self._connectivity, self._reason = state, reason
        self._changed()

    def on_bridge_auth_required(self, server_url: str, reason: str) -> None:
        self._connectivity, self._reason = Connectivity.SIGNED_OUT, reason
        self._changed()

    def on_bridge_queue_changed(self, depth: dict[str, int], oldest_age: float) -> None:
        self._depth = {k: int(v) for k, v in depth.items()}
        self._set_oldest(from_number(oldest_age))
        self._changed()

    def on_bridge_last_sync_changed(self, at: float) -> None:
        self._synced(at)
        self._changed()

    def on_bridge_op_changes(self, changes: dict[str, Any]) -> None:
        if changes["queue"] or changes["conflicts"]:
            self.refresh()

    def on_bridge_sync_progress(self, done: int, total: int, phase: str) -> None:
        # A pull that ends is not yet a sync: one cut by a network failure ends too. The
        # engine says when one completed (lastSyncChanged), and only then.
        self._progress = (done, total, phase)
        self._changed()

    def signed_in(self) -> None:
        self._connectivity = (
            Connectivity.CONNECTING if self._services.engine is not None else Connectivity.STOPPED
        )
        self._reason = ""
        self._changed()

    def on_tick_timeout(self) -> None:
        self._changed()

    @Slot()
    def syncNow(self) -> None:
        """Flush, then pull, then revalidate, even with nothing queued; say what happened."""
        engine = self._services.engine
        if engine is None:
            self.message.emit("Sync is not running in this window.")
            return
        if self._syncing_now:
            return
        self._syncing_now = True
        self._changed()
        self._tasks.start(self._sync_now(engine), "sync-now")

    async def _sync_now(self, engine: Any) -> None:
        try:
            report = await engine.sync_now()
        finally:
            self._syncing_now = False
            self._changed()
        if not report.problem:
            self._synced(self._clock())
        elif str(report.problem) in (
            Connectivity.OFFLINE,
            Connectivity.UNREACHABLE,
            Connectivity.SIGNED_OUT,
            Connectivity.PAUSED,
        ):
            # The engine's answer is news about the connection too: say it in the bar, until
            # the engine shows the server answering again (a delivery or a pull).
            self._connectivity, self._reason = str(report.problem), report.detail
            self._from_report = True
        self.message.emit(report_in_words(report))
        self._changed()

    # -- helpers ----------------------------------------------------------------------------

    def _synced(self, at: float | None) -> None:
        if at is not None and (self._last_sync is None or at > self._last_sync):
            if self._from_report and self._connectivity != Connectivity.SIGNED_OUT:
                # A sync since "Sync now" failed: the server answers again.
                state = getattr(self._services.engine, "connectivity_state", Connectivity.ONLINE)
                self._connectivity, self._reason = str(state), ""
            self._from_report = False
            self._last_sync = at

    def _set_depth(self, depth: dict[str, Any]) -> None:
        depth = dict(depth)
        self._set_oldest(depth.pop("oldest_pending_age_s", None))
        self._depth = {k: int(v) for k, v in depth.items()}

    def _set_oldest(self, age: float | None) -> None:
        self._oldest_age = age
        self._oldest_seen_at = self._clock()

    def _changed(self) -> None:
        """Tell QML, and plan the next re-wording of the ages shown."""
        self.changed.emit()
        now = self._clock()
        ages = [now - self._last_sync] if self._last_sync is not None else []
        if self.pendingCount and self._oldest_age is not None:
            ages.append(self._oldest_age + (now - self._oldest_seen_at))
        if not ages:
            self._tick.stop()
            return
        youngest = min(ages)
        # Seconds tick every second; minutes are re-worded within 10 s of changing.
        self._tick.start(1000 if youngest < 60 else 10_000)

    # -- outputs ----------------------------------------------------------------------------

    @Property(str, notify=changed)
    def connectivity(self) -> str:
        return self._connectivity

    @Property(str, notify=changed)
    def connectivityText(self) -> str:
        return CONNECTIVITY_WORDS.get(self._connectivity, self._connectivity)

    @Property(str, notify=changed)
    def reason(self) -> str:
        return self._reason

    @Property(int, notify=changed)
    def pendingCount(self) -> int:
        return self._depth.get(JobStatus.PENDING, 0) + self._depth.get(JobStatus.LEASED, 0)

    @Property(int, notify=changed)
    def failedCount(self) -> int:
        return self._depth.get(JobStatus.DEAD, 0)

    @Property(int, notify=changed)
    def conflictCount(self) -> int:
        return self._depth.get(JobStatus.CONFLICT, 0)

    @Property(str, notify=changed)
    def pendingText(self) -> str:
        n = self.pendingCount
        if n == 0:
            return "Nothing waiting to send"
        noun = "change" if n == 1 else "changes"
        oldest = self._oldest_age
        if oldest is None:
            return f"{number(n)} {noun} waiting"
        age = oldest + (self._clock() - self._oldest_seen_at)
        return f"{number(n)} {noun} waiting, oldest {ago(age)}"

    @Property(str, notify=changed)
    def attentionText(self) -> str:
        """What cannot go out without a person: failed changes and conflicts ("" if none)."""
        parts = []
        failed, conflicts = self.failedCount, self.conflictCount
        if failed:
            parts.append(f"{number(failed)} failed {'change' if failed == 1 else 'changes'}")
        if conflicts:
            parts.append(f"{number(conflicts)} {'conflict' if conflicts == 1 else 'conflicts'}")
        if not parts:
            return ""
        verb = "needs" if failed + conflicts == 1 else "need"
        return f"{' and '.join(parts)} {verb} you"

    @Property(str, notify=changed)
    def lastSyncText(self) -> str:
        return last_synced(self._last_sync, self._clock())

    @Property(bool, notify=changed)
    def syncingNow(self) -> bool:
        """True while "Sync now" runs (its button waits for the answer)."""
        return self._syncing_now

    @Property(bool, notify=changed)
    def syncing(self) -> bool:
        done, total, phase = self._progress
        return phase == "pull" or (phase == "flush" and total > 0)

    @Property(bool, notify=changed)
    def progressDeterminate(self) -> bool:
        """A flush knows how many it sends; a pull only counts what arrived."""
        done, total, phase = self._progress
        return phase == "flush" and total > 0

    @Property(str, notify=changed)
    def progressText(self) -> str:
        done, total, phase = self._progress
        if phase == "flush" and total > 0:
            return f"Sending {number(done)} of {number(total)}"
        if phase == "pull":
            if done <= 0:
                return "Receiving changes…"
            return f"Receiving {number(done)} {'change' if done == 1 else 'changes'}"
        return ""

    @Property(float, notify=changed)
    def progressFraction(self) -> float:
        done, total, phase = self._progress
        return 0.0 if phase != "flush" or total <= 0 else min(1.0, done / total)
