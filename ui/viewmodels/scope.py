"""What this device holds and why, in words: the list's filters, the "Available offline" mark,
the "No longer assigned to you" state, and the editor's "Keep offline" control.

A work order stays on a device while it is in the device's scope (assigned to its user, of its
team, created or pinned here). One that left the scope with edits not yet delivered stays,
marked "No longer assigned to you", until they are delivered or the person discards them; the
screen says which of the two will happen.
"""

from __future__ import annotations

from typing import Any

from app.store.deadletters import EntityJobState, job_states
from app.store.scope import Identity
from app.store.store import Store
from app.sync.errors import SyncError
from ui.qt import Property, QObject, Signal, Slot, connect
from ui.services import Services
from ui.viewmodels.badges import BadgeKind, badge_for
from ui.viewmodels.base import Refused, ViewModel, notified

__all__ = [
    "NO_LONGER_ASSIGNED",
    "OFFLINE_MARK",
    "ONLINE_ONLY_MARK",
    "SCOPE_FILTERS",
    "KeepOfflineViewModel",
    "out_of_scope_detail",
    "subtitle",
]

#: (value, label) of the list's scope filters; "all" is every work order on this device.
SCOPE_FILTERS = (("all", "All"), ("mine", "Mine"), ("team", "My team"), ("pinned", "Pinned"))
OFFLINE_MARK = "Available offline"
ONLINE_ONLY_MARK = "Online only"
PINNED_MARK = "Kept offline"
NO_LONGER_ASSIGNED = "No longer assigned to you"


def count_words(total: int, scope: str, identity: Identity | None) -> str:
    noun = "1 work order" if total == 1 else f"{total:,} work orders"
    if scope == "mine" and identity and identity.user:
        return f"{noun} assigned to {identity.user}"
    if scope == "team" and identity and identity.team:
        return f"{noun} of team {identity.team}"
    if scope == "pinned":
        return f"{noun} kept offline"
    return noun


def empty_words(scope: str, identity: Identity | None, *, filtered: bool) -> str:
    if filtered:
        return "No work order matches."
    if scope in ("mine", "team") and identity is None:
        return "This device does not know yet who you are: it asks the server at the next sync."
    if scope == "mine":
        return "Nothing on this device is assigned to you."
    if scope == "team":
        if not identity or not identity.team:
            return "The server has not put you in a team."
        return f"Nothing on this device is assigned to team {identity.team}."
    if scope == "pinned":
        return "No work order is kept offline. Open one and turn on “Keep offline”."
    return "No work orders on this device yet. Press “New” to add one."


def subtitle(record: dict[str, Any]) -> str:
    """Where and who: "Pump house 2 · Ana · Team north · due 2026-12-03"."""
    team = record.get("team") or ""
    parts = [
        record.get("site") or "",
        record.get("assignee") or "",
        f"Team {team}" if team else "",
        f"due {record['due_date']}" if record.get("due_date") else "",
    ]
    return " · ".join(str(part) for part in parts if part)


def offline_mark(record: dict[str, Any]) -> str:
    """ "Available offline" (a pinned one: kept on purpose), or "Online only"."""
    if not record.get("available_offline", True):
        return ONLINE_ONLY_MARK
    return f"{OFFLINE_MARK} · {PINNED_MARK}" if record.get("pinned") else OFFLINE_MARK


def out_of_scope_detail(badge: BadgeKind, *, unsaved: bool = False) -> str:
    """What happens to a work order that left the scope, by the state of its unsent edits
    (and of the person's typing not saved yet: the editor keeps it here meanwhile)."""
    if unsaved and badge not in (BadgeKind.CONFLICT, BadgeKind.FAILED):
        return (
            "Your changes are not saved yet: save them and they are sent to the server; "
            "then it leaves this device. Or undo them."
        )
    if badge == BadgeKind.CONFLICT:
        return (
            "Your edit conflicts with the server's version: resolve the conflict, then it "
            "leaves this device. Or discard your edits."
        )
    if badge == BadgeKind.FAILED:
        return (
            "The server refused your edit: retry it from Failed changes, or discard it. "
            "Then it leaves this device."
        )
    if badge == BadgeKind.SYNCED:
        return "Nothing of yours waits to be sent: it leaves this device when you close it."
    return (
        "Your edits stay on this device and will be sent; then it leaves this device. "
        "Or discard them now."
    )


def _load(store: Store, entity_id: str) -> tuple[dict[str, Any] | None, EntityJobState | None]:
    return store.work_order(entity_id), job_states(store, [entity_id]).get(entity_id)


class KeepOfflineViewModel(ViewModel):
    """The editor's work order as held by this device: pinned or not, left the scope or not.

    Signals:
        changed()  — pinned, out of scope or busy changed
        discarded(str entity_id)  — the person discarded the edits of a work order that left
        message(str)  — from ViewModel
    """

    changed = Signal()
    discarded = Signal(str)

    def __init__(self, services: Services, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._services = services
        self._entity_id = ""
        self._record: dict[str, Any] | None = None
        self._state: EntityJobState | None = None
        self._busy = False
        self._unsaved = False
        self._generation = 0
        connect(services.bridge.recordsChanged, self.on_bridge_records_changed)
        connect(services.bridge.opChanges, self.on_bridge_op_changes)
        connect(services.bridge.jobStatesChanged, self.on_bridge_job_states_changed)

    @Slot(str)
    def follow(self, entity_id: str) -> None:
        """Show `entity_id` ("" for a new work order, not on the server yet)."""
        if entity_id == self._entity_id:
            return
        self._generation += 1
        self._entity_id, self._record, self._state = entity_id, None, None
        self.changed.emit()
        if entity_id:
            self._tasks.start(self._load(self._generation), "keep-offline-load")

    async def _load(self, generation: int) -> None:
        record, state = await self._services.executor.run(
            _load, self._services.store, self._entity_id
        )
        if generation == self._generation:
            was_here = self._record is not None and not self.outOfScope
            self._record, self._state = record, state
            self.changed.emit()
            if was_here and self.outOfScope:
                # It left while on screen, maybe scrolled away from the card: say so once.
                self.message.emit(f"{NO_LONGER_ASSIGNED}. {self.outOfScopeText}")

    @Slot(bool)
    def setUnsaved(self, unsaved: bool) -> None:
        """The editor's form holds typing not saved yet (the words above depend on it)."""
        if unsaved != self._unsaved:
            self._unsaved = unsaved
            self.changed.emit()

    @Slot(bool)
    def setPinned(self, pinned: bool) -> None:
        if self._entity_id and not self._busy and pinned != self.pinned:
            self._busy = True
            self.changed.emit()
            self._tasks.start(self._set_pinned(self._entity_id, pinned), "keep-offline-pin")

    async def _set_pinned(self, entity_id: str, pinned: bool) -> None:
        finder = self._services.finder
        assert finder is not None
        try:  # refused for good (unknown work order), or signed out
            how = await self._carry_out(
                finder.pin(entity_id) if pinned else finder.unpin(entity_id),
                "Not changed",
                (SyncError,),
            )
        finally:
            self._busy = False
            self.changed.emit()
        if isinstance(how, Refused):
            return
        later = " The server is told when it is reachable." if how == "queued" else ""
        if pinned:
            self.message.emit("Kept offline: it stays on this device." + later)
        else:
            self.message.emit(
                "No longer kept offline: it leaves this device unless it is yours or your "
                "team's." + later
            )

    @Slot()
    def discardEdits(self) -> None:
        if self._entity_id and self.canDiscard:
            self._busy = True
            self.changed.emit()
            self._tasks.start(self._discard(self._entity_id), "keep-offline-discard")

    async def _discard(self, entity_id: str) -> None:
        try:
            finder = self._services.finder
            assert finder is not None
            await finder.discard_edits(entity_id)
        finally:
            self._busy = False
            self.changed.emit()
        self.message.emit("Your edits were discarded; the work order left this device.")
        self.discarded.emit(entity_id)

    def on_bridge_records_changed(self, entity_ids: list[str]) -> None:
        if self._entity_id and (not entity_ids or self._entity_id in entity_ids):
            self._tasks.start(self._load(self._generation), "keep-offline-refresh")

    def on_bridge_job_states_changed(self, changes: list[dict[str, Any]]) -> None:
        if any(change["entity_id"] == self._entity_id for change in changes):
            self._tasks.start(self._load(self._generation), "keep-offline-state")

    def on_bridge_op_changes(self, changes: dict[str, Any]) -> None:
        if self._entity_id in changes["entity_ids"]:
            self.on_bridge_records_changed(changes["entity_ids"])

    # -- properties -------------------------------------------------------------------------

    @Property(bool, notify=changed)
    def available(self) -> bool:
        """A saved work order (a new form has nothing to pin yet), and a server to tell."""
        return self._record is not None and self._services.finder is not None

    @Property(bool, notify=changed)
    def pinned(self) -> bool:
        return bool(self._record and self._record.get("pinned"))

    @Property(bool, notify=changed)
    def outOfScope(self) -> bool:
        return bool(self._record and self._record.get("no_longer_assigned"))

    @Property(str, notify=changed)
    def outOfScopeText(self) -> str:
        """What will happen to it, and what the person can do; "" while in the scope."""
        if not self.outOfScope:
            return ""
        services = self._services
        badge = badge_for(self._state, services.clock(), online=services.online)
        return out_of_scope_detail(badge.kind, unsaved=self._unsaved)

    @Property(bool, notify=changed)
    def canDiscard(self) -> bool:
        return self.outOfScope and self._services.finder is not None and not self._busy

    busy = notified(bool, "_busy", changed)

    @Property(str, notify=changed)
    def offlineText(self) -> str:
        return offline_mark(self._record) if self._record else ""

    @Property(str, notify=changed)
    def pinHint(self) -> str:
        if self.pinned:
            return "Stays on this device even when it is not assigned to you or your team."
        return "Keep it on this device even when it is not assigned to you or your team."
