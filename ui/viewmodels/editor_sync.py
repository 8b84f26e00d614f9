"""The editor's work order in the local queue: its badge, its sync line, its countdown."""

from __future__ import annotations

from typing import Any

from app.store.deadletters import EntityJobState, job_states
from app.store.store import Store
from ui.qt import QObject, SignalInstance, connect
from ui.services import Services
from ui.viewmodels.badges import Badge, badge_for
from ui.viewmodels.base import ViewModel

__all__ = ["EditorSyncViewModel"]


def job_state(store: Store, entity_id: str) -> EntityJobState | None:
    return job_states(store, [entity_id]).get(entity_id)


class EditorSyncViewModel(ViewModel):
    """What the queue holds of the work order on the form (``_entity_id``, "" for a new one).

    The editor (`ui.viewmodels.editor`) derives from it and sets ``_state`` when it reads
    the work order; this class keeps it current as the queue moves.

    The editor declares ``changed`` and the properties that show these (a property of a
    QObject notifies only with a signal of its own class).
    """

    changed: SignalInstance

    def __init__(self, services: Services, parent: QObject | None, **options: Any) -> None:
        super().__init__(parent, **options)
        self._services = services
        self._entity_id = ""
        self._state: EntityJobState | None = None
        # "Retrying in 3 s" counts down on screen; runs only while the badge shows a countdown.
        self._clock_timer = self._timer(1000, self.changed.emit)
        connect(services.bridge.connectivityChanged, self.on_bridge_connectivity_changed)
        connect(self.changed, self.on_changed)

    def on_changed(self) -> None:
        counting = self._state is not None and bool(self._state.retrying)
        if counting and not self._clock_timer.isActive():
            self._clock_timer.start()
        elif not counting and self._clock_timer.isActive():
            self._clock_timer.stop()

    def on_bridge_connectivity_changed(self, state: str, reason: str) -> None:
        if self._unsynced():
            self.changed.emit()  # "will be sent when reachable" / "being sent"

    def on_bridge_job_states_changed(self, changes: list[dict[str, Any]]) -> None:
        if self._entity_id and any(c["entity_id"] == self._entity_id for c in changes):
            self._tasks.start(self._refresh_state(), "editor-state")

    async def _refresh_state(self) -> None:
        store = self._services.store
        self._state = await self._services.executor.run(job_state, store, self._entity_id)
        self.changed.emit()

    def _unsynced(self) -> bool:
        state = self._state
        return (
            state is not None and (state.pending + state.leased + state.conflict + state.dead) > 0
        )

    def _badge(self) -> Badge:
        return badge_for(self._state, self._services.clock(), online=self._services.online)
