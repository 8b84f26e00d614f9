"""Device settings a person may change: today, whether to sync on metered connections.

Kept in the store's `settings` table (small, per data dir, never a secret) and read once at
start-up into `SyncConfig`; a change is handed to the running engine at once.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from app.store.settings import read_setting, write_setting
from app.store.store import Store
from ui.qt import Property, QObject, Signal, Slot
from ui.services import Services
from ui.tasks import TaskOwner

__all__ = ["SYNC_ON_METERED", "SettingsViewModel", "apply_to_engine", "load_sync_on_metered"]

SYNC_ON_METERED = "ui.sync_on_metered"


def load_sync_on_metered(store: Store) -> bool:
    """On unless the person turned it off. Blocking: run it on the executor."""
    return read_setting(store, SYNC_ON_METERED) != "0"


def save_sync_on_metered(store: Store, enabled: bool) -> None:
    with store.db.atomic():
        write_setting(store, SYNC_ON_METERED, "1" if enabled else "0")


def apply_to_engine(engine: Any, enabled: bool) -> None:
    """Give a running `SyncEngine` the new choice; it looks at its config before each send."""
    config = getattr(engine, "config", None)
    if config is None or not dataclasses.is_dataclass(config):
        return
    engine.config = dataclasses.replace(config, sync_on_metered=enabled)
    engine.wake()


class SettingsViewModel(QObject):
    """Signals:
    changed()
    message(str)
    """

    changed = Signal()
    message = Signal(str)

    def __init__(self, services: Services, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._services = services
        self._tasks = TaskOwner(on_condition=self.message.emit)
        self._sync_on_metered = True

    @Slot()
    def reload(self) -> None:
        self._tasks.start(self._reload(), "settings-reload")

    async def _reload(self) -> None:
        store = self._services.store
        self._sync_on_metered = await self._services.executor.run(load_sync_on_metered, store)
        self.changed.emit()

    @Property(bool, notify=changed)
    def syncOnMetered(self) -> bool:
        return self._sync_on_metered

    @Slot(bool)
    def setSyncOnMetered(self, enabled: bool) -> None:
        if enabled == self._sync_on_metered:
            return
        self._sync_on_metered = enabled
        self.changed.emit()
        self._tasks.start(self._save(enabled), "settings-save")

    async def _save(self, enabled: bool) -> None:
        store = self._services.store
        await self._services.executor.run(save_sync_on_metered, store, enabled)
        if self._services.engine is not None:
            apply_to_engine(self._services.engine, enabled)
        self.message.emit(
            "Syncing on metered connections too."
            if enabled
            else "On metered connections, edits wait on this device until you are on Wi-Fi."
        )

    @Property(str, constant=True)
    def dataDir(self) -> str:
        return str(self._services.store.data_dir)

    async def wait_idle(self) -> None:
        await self._tasks.wait_idle()

    async def aclose(self) -> None:
        await self._tasks.aclose()
