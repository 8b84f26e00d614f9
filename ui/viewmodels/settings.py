"""Device settings a person may change: whether to sync on metered connections, and whether
the desktop shows notifications of what needs the person (the app's and the worker's).

Kept in the store's `settings` table (small, per data dir, never a secret) and read once at
start-up into `SyncConfig`; a change is saved through the core operation
(`Operations.set_sync_on_metered`) and handed to the running engine
(`SyncEngine.set_sync_on_metered`) at once.
"""

from __future__ import annotations

from app.desktop.notifications import load_notifications_enabled
from app.operations import SYNC_ON_METERED, load_sync_on_metered
from ui.qt import Property, QObject, Signal, Slot
from ui.services import Services
from ui.viewmodels.base import ViewModel, notified

__all__ = ["SYNC_ON_METERED", "SettingsViewModel", "load_sync_on_metered"]


class SettingsViewModel(ViewModel):
    """Signals:
    changed()
    message(str)  — from ViewModel
    """

    changed = Signal()

    def __init__(self, services: Services, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._services = services
        self._sync_on_metered = True
        self._notifications = True
        self._samples = 0

    @Slot()
    def reload(self) -> None:
        self._tasks.start(self._reload(), "settings-reload")

    async def _reload(self) -> None:
        store = self._services.store
        self._sync_on_metered = await self._services.executor.run(load_sync_on_metered, store)
        self._notifications = await self._services.executor.run(load_notifications_enabled, store)
        self._samples = len(await self._services.operations.sample_ids())
        self.changed.emit()

    sampleCount = notified(int, "_samples", changed)

    @Slot()
    def removeSamples(self) -> None:
        """The first run's sample work orders go, all of them, in one step."""
        self._tasks.start(self._remove_samples(), "settings-samples")

    async def _remove_samples(self) -> None:
        removed = await self._carry_out(self._services.operations.remove_samples(), "Not removed")
        if isinstance(removed, list):
            self._samples = 0
            self.changed.emit()
            self.message.emit(f"Removed {len(removed)} sample work orders.")

    notifications = notified(bool, "_notifications", changed)

    @Slot(bool)
    def setNotifications(self, enabled: bool) -> None:
        if enabled == self._notifications:
            return
        self._notifications = enabled
        self.changed.emit()
        self._tasks.start(self._save_notifications(enabled), "settings-notifications")

    async def _save_notifications(self, enabled: bool) -> None:
        await self._services.operations.set_notifications(enabled)
        self.message.emit(
            "Notifications on: conflicts, failed changes and files, and sign-outs."
            if enabled
            else "Notifications off: what needs you shows in the app only."
        )

    syncOnMetered = notified(bool, "_sync_on_metered", changed)

    @Slot(bool)
    def setSyncOnMetered(self, enabled: bool) -> None:
        if enabled == self._sync_on_metered:
            return
        self._sync_on_metered = enabled
        self.changed.emit()
        self._tasks.start(self._save(enabled), "settings-save")

    async def _save(self, enabled: bool) -> None:
        await self._services.operations.set_sync_on_metered(enabled)
        if self._services.engine is not None:
            self._services.engine.set_sync_on_metered(enabled)
        self.message.emit(
            "Syncing on metered connections too."
            if enabled
            else "On metered connections, edits wait on this device until you are on Wi-Fi."
        )

    @Property(str, constant=True)
    def dataDir(self) -> str:
        return str(self._services.store.data_dir)
