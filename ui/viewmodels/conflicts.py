"""Conflict resolution: base / mine / server per field, choose, and send through the queue.

Reads through `app.sync.conflicts.Conflicts` (on the executor) and decides through the core
operations (`Operations.resolve_conflict`, `escalate_conflict`). Fields that merged by themselves
are shown as such and need no choice; "Resolve later" leaves the conflict open; "Send to admin"
escalates it to the server's review queue and the record waits for the decision.
"""

from __future__ import annotations

from typing import Any

from app.states import ConflictKind, ConflictStatus
from app.sync.conflicts import Conflicts, ConflictView
from ui.qt import Property, QObject, Signal, Slot, connect
from ui.services import Services
from ui.viewmodels.base import Refused
from ui.viewmodels.choices import FieldChoiceViewModel
from ui.wording import field_label, iso_when, value_in_words, when

__all__ = ["ConflictViewModel"]

_STATE_TEXT = {
    "overlap": "Changed on both sides — choose",
    "mine": "Only you changed it — yours is kept",
    "theirs": "Only the server changed it — theirs is kept",
    "both": "Same change on both sides",
    "same": "Unchanged",
}
_KIND_TEXT = {
    ConflictKind.VERSION: "Someone else changed this work order while you were editing it.",
    ConflictKind.DELETED_ON_SERVER: (
        "This work order was deleted on the server while you edited it."
    ),
    ConflictKind.EDITED_ON_SERVER: (
        "You deleted this work order, but someone edited it on the server."
    ),
    ConflictKind.EXISTS: "A work order with this id already exists on the server.",
}


class ConflictViewModel(FieldChoiceViewModel[ConflictView]):
    """Open conflicts on this device, and the one being resolved.

    Signals:
        changed(), finished(), message(str) (from ViewModel)
    """

    changed = Signal()
    finished = Signal()

    def __init__(self, services: Services, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._services = services
        self._conflicts = Conflicts(services.store)
        self._open: list[ConflictView] = []
        connect(services.bridge.opChanges, self.on_bridge_op_changes)

    def on_bridge_op_changes(self, changes: dict[str, Any]) -> None:
        if changes["conflicts"]:
            self.reload()

    # -- loading ----------------------------------------------------------------------------

    @Slot()
    def reload(self) -> None:
        self._tasks.start(self._reload(), "conflicts-reload")

    async def _reload(self) -> None:
        self._open = await self._services.executor.run(self._conflicts.views)
        if self._current is not None:
            self._current = next((v for v in self._open if v.job_id == self._current.job_id), None)
        self.changed.emit()

    @Slot(str)
    def openForEntity(self, entity_id: str) -> None:
        self._tasks.start(self._open_for(entity_id), "conflict-open")

    async def _open_for(self, entity_id: str) -> None:
        view = await self._services.executor.run(self._conflicts.open_for, entity_id)
        self._show_case(view)

    @Slot(int)
    def openJob(self, job_id: int) -> None:
        self._show_case(next((v for v in self._open if v.job_id == job_id), None))

    # -- properties -------------------------------------------------------------------------

    @Property(list, notify=changed)
    def openConflicts(self) -> list[dict[str, Any]]:
        return [
            {
                "jobId": v.job_id,
                "title": v.title or v.entity_id[:8],
                "text": _KIND_TEXT.get(v.kind, v.kind),
                "waiting": v.status != ConflictStatus.OPEN,
            }
            for v in self._open
        ]

    @Property(bool, notify=changed)
    def hasCurrent(self) -> bool:
        return self._current is not None

    @Property(str, notify=changed)
    def title(self) -> str:
        return self._current.title if self._current else ""

    @Property(str, notify=changed)
    def explanation(self) -> str:
        view = self._current
        if view is None:
            return "No open conflict."
        who = view.server_updated_by or "someone"
        at = iso_when(view.server_updated_at) if view.server_updated_at else "an unknown time"
        text = f"{_KIND_TEXT.get(view.kind, view.kind)} Server side changed by {who} at {at}."
        if view.status != ConflictStatus.OPEN:
            text += " Waiting for an admin's review."
        elif view.review_problem:
            text += f" The admin review could not be opened: {view.review_problem}."
        return text

    @Property(bool, notify=changed)
    def waitingForReview(self) -> bool:
        return self._current is not None and self._current.status != ConflictStatus.OPEN

    @Property(list, notify=changed)
    def fields(self) -> list[dict[str, Any]]:
        view = self._current
        if view is None:
            return []
        rows = []
        for f in view.fields:
            if f.state != "overlap" and value_in_words(f.mine) == value_in_words(f.server):
                continue  # both sides already agree: nothing to look at
            rows.append(
                {
                    "name": f.name,
                    "label": field_label(f.name),
                    "base": value_in_words(f.base),
                    "mine": value_in_words(f.mine),
                    "server": value_in_words(f.server),
                    "state": f.state,
                    "stateText": _STATE_TEXT.get(f.state, f.state),
                    "needsChoice": f.state == "overlap",
                    "choice": self._choices.side(f.name),
                }
            )
        return rows

    @Property(int, notify=changed)
    def unresolvedCount(self) -> int:
        view = self._current
        if view is None:
            return 0
        return self._choices.unresolved(view.overlapping)

    @Property(bool, notify=changed)
    def canResolve(self) -> bool:
        return self.hasCurrent and not self.waitingForReview and self.unresolvedCount == 0

    @Property(bool, notify=changed)
    def canRestore(self) -> bool:
        return self._current is not None and self._current.kind == ConflictKind.DELETED_ON_SERVER

    @Property(str, notify=changed)
    def raisedAt(self) -> str:
        return when(self._current.created_at) if self._current else ""

    # -- choices ----------------------------------------------------------------------------

    @Slot()
    def keepAllMine(self) -> None:
        self._decide("mine")

    @Slot()
    def takeAllTheirs(self) -> None:
        self._decide("theirs")

    @Slot()
    def restore(self) -> None:
        self._decide("restore")

    @Slot()
    def resolve(self) -> None:
        if not self.canResolve:
            self.message.emit(f"Choose mine or theirs for {self.unresolvedCount} more field(s).")
            return
        self._decide(self._choices.as_dict())

    def _decide(self, choice: str | dict[str, str]) -> None:
        view = self._current
        if view is None:
            return
        self._tasks.start(self._resolve(view, choice), "conflict-resolve")

    async def _resolve(self, view: ConflictView, choice: str | dict[str, str]) -> None:
        outcome = await self._carry_out(
            self._services.operations.resolve_conflict(
                view.job_id,
                choice,  # type: ignore[arg-type]
            ),
            "Not resolved",
        )
        if isinstance(outcome, Refused):
            return
        if outcome == "resent":
            self.message.emit("Resolved. The merged work order is queued for the server.")
        else:
            self.message.emit("Resolved. The server's version was kept.")
        self._current = None
        await self._reload()
        self.finished.emit()

    @Slot()
    def later(self) -> None:
        self._show_case(None)
        self.finished.emit()

    @Slot(str)
    def sendToAdmin(self, note: str) -> None:
        view = self._current
        if view is not None:
            self._tasks.start(self._escalate(view, note), "conflict-escalate")

    async def _escalate(self, view: ConflictView, note: str) -> None:
        sent = await self._carry_out(
            self._services.operations.escalate_conflict(view.job_id, note or None), "Not sent"
        )
        if isinstance(sent, Refused):
            return
        self.message.emit("Sent to an admin. The work order waits for their decision.")
        await self._reload()
