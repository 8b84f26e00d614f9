"""The editor's typing kept through a kill: written after each pause, restored when it opens.

`DraftKeeper` belongs to the `EditorViewModel`: after every change to the form it waits
`PAUSE_MS` for the person to stop typing, then writes the whole form as a draft
(`app.store.drafts`), so a kill 300 ms after the last keystroke still finds it. A form with
nothing typed (or typed back to what it was) has its draft removed instead.

When a form opens over a draft, the keeper says so ("Restored your unsaved changes from
14:02", with Keep and Discard) and merges the typing over the record as it is now
(`app.sync.merge.merge_draft`): what the person did not touch follows the server; a field
both changed differently is named with both values and waits for the person's choice (the
editor does not save until then), so neither side is overwritten unseen.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from app.store.drafts import Draft
from app.sync.merge import merge_draft
from ui.qt import Property, QObject, Signal, Slot
from ui.services import Services
from ui.viewmodels.base import ViewModel
from ui.wording import field_label

__all__ = ["PAUSE_MS", "DraftKeeper"]

#: How long after the last keystroke the draft is written: well inside the second the
#: issue allows, short enough that a kill soon after typing stops finds it.
PAUSE_MS = 100

#: What to keep of the form now: (its draft key, the draft; None: nothing typed, remove it).
Snapshot = Callable[[], tuple[str, Draft | None]]


def restored_words(updated_at: float) -> str:
    return (
        f"Restored your unsaved changes from {time.strftime('%H:%M', time.localtime(updated_at))}"
    )


class DraftKeeper(ViewModel):
    """Writes the editor's drafts and shows one that was restored.

    Signals:
        changed()  — the restored notice or the fields to choose changed
        discardRequested()  — the person pressed Discard on the restored notice
        chosen(str name, str value)  — the person chose a value for a field both changed
    """

    changed = Signal()
    discardRequested = Signal()
    chosen = Signal(str, str)

    def __init__(self, services: Services, snapshot: Snapshot, parent: QObject | None) -> None:
        super().__init__(parent)
        self._services = services
        self._snapshot = snapshot
        self._pause = self._timer(PAUSE_MS, self.on_pause_timeout, single_shot=True)
        self._restored_at: float | None = None
        self._overlapping: dict[str, str] = {}  # field -> the server's value
        self._mine: dict[str, str] = {}  # field -> the person's value, while they choose
        self._from_server: tuple[str, ...] = ()

    # -- writing ----------------------------------------------------------------------------

    def typed(self) -> None:
        """The form changed: write it once the person pauses."""
        self._pause.start()

    def on_pause_timeout(self) -> None:
        key, draft = self._snapshot()
        operations = self._services.operations
        if draft is None:
            self._tasks.start(operations.drop_draft(key), "draft-drop")
        else:
            self._tasks.start(operations.keep_draft(draft), "draft-keep")

    def flush(self) -> None:
        """Write the draft now if a pause is still running (before a save: the save then
        removes it in its transaction, and a save that fails leaves all of the typing)."""
        if self._pause.isActive():
            self._pause.stop()
            self.on_pause_timeout()

    def forget(self) -> None:
        """The form was saved, discarded or replaced: nothing more to write for it, and no
        notice of a restore."""
        self._pause.stop()
        self.clear()

    def drop(self, key: str) -> None:
        """The person discarded the typing of the form ``key``: its draft goes."""
        self.forget()
        self._tasks.start(self._services.operations.drop_draft(key), "draft-drop")

    async def aclose(self) -> None:
        # The window closes while a pause is still running: the typing is kept all the same.
        pending = self._pause.isActive()
        await super().aclose()
        if pending:
            key, draft = self._snapshot()
            if draft is not None:
                await self._services.operations.keep_draft(draft)

    # -- restoring --------------------------------------------------------------------------

    def restore(self, draft: Draft, record: dict[str, str]) -> dict[str, str]:
        """The form to show for ``draft`` over ``record`` (the work order now, as a form; the
        blank form for a new one); the notice shows until Keep or Discard."""
        merged = merge_draft(draft.base, draft.fields, record)
        self._restored_at = draft.updated_at
        self._overlapping = dict(merged.overlapping)
        self._mine = {name: merged.form[name] for name in merged.overlapping}
        self._from_server = merged.from_server
        self.changed.emit()
        return merged.form

    def clear(self) -> None:
        if self._restored_at is None and not self._overlapping:
            return
        self._restored_at = None
        self._overlapping = {}
        self._mine = {}
        self._from_server = ()
        self.changed.emit()

    @Slot()
    def keep(self) -> None:
        """Keep the restored typing: the notice goes, the typing stays (and its draft)."""
        self._restored_at = None
        self._from_server = ()
        self.changed.emit()

    @Slot()
    def discard(self) -> None:
        self.discardRequested.emit()

    @Slot(str)
    def chooseMine(self, name: str) -> None:
        self._choose(name, self._mine.get(name))

    @Slot(str)
    def chooseServer(self, name: str) -> None:
        self._choose(name, self._overlapping.get(name))

    def _choose(self, name: str, value: str | None) -> None:
        if value is None:
            return
        self._overlapping.pop(name, None)
        self._mine.pop(name, None)
        self.changed.emit()
        self.chosen.emit(name, value)

    # -- properties -------------------------------------------------------------------------

    @Property(bool, notify=changed)
    def restored(self) -> bool:
        return self._restored_at is not None

    @Property(str, notify=changed)
    def restoredText(self) -> str:
        return "" if self._restored_at is None else restored_words(self._restored_at)

    @Property(str, notify=changed)
    def mergeText(self) -> str:
        """What the server changed meanwhile, in words ("" when nothing)."""
        parts = []
        if self._from_server:
            names = ", ".join(field_label(name) for name in self._from_server)
            parts.append(f"Changed on the server since, and shown as it is now: {names}.")
        if self._overlapping:
            names = ", ".join(field_label(name) for name in self._overlapping)
            parts.append(f"Changed on the server too, differently: {names}. Choose what to keep.")
        return " ".join(parts)

    @Property(bool, notify=changed)
    def choosing(self) -> bool:
        """A field both changed differently still waits for the person's choice."""
        return bool(self._overlapping)

    @Property(list, notify=changed)
    def choices(self) -> list[dict[str, Any]]:
        return [
            {
                "name": name,
                "label": field_label(name),
                "mine": self._mine.get(name, ""),
                "server": server,
            }
            for name, server in self._overlapping.items()
        ]
