"""The work-order list: a QAbstractListModel over the cache, loaded a page at a time.

Fine at 100,000 rows: only `count()` and one page are read up front (off the loop), the view
asks for more with `fetchMore` as it scrolls, and core events repaint just the rows they name
(coalesced, so a draining queue does not repaint on every acknowledgement).
"""

from __future__ import annotations

from typing import Any

from app.attachments import AttachmentCounts, Attachments
from app.states import AttachmentState
from app.store.deadletters import EntityJobState, job_states
from app.store.drafts import drafted_among
from app.store.scope import Identity, read_identity
from app.store.store import Store
from ui.qt import Property, QModelIndex, QObject, Signal, Slot, connect
from ui.services import Services
from ui.viewmodels.attachment_words import waiting_in_words
from ui.viewmodels.badges import badge_for, with_files
from ui.viewmodels.base import Index, ListViewModel, settable
from ui.viewmodels.scope import (
    NO_LONGER_ASSIGNED,
    SCOPE_FILTERS,
    count_words,
    empty_words,
    offline_mark,
    out_of_scope_detail,
    subtitle,
)
from ui.wording import STATUS_WORDS

__all__ = ["STATUS_FILTERS", "WorkOrderListModel"]

PAGE_SIZE = 100
#: (value, label) for the status filter; "" means every status.
STATUS_FILTERS = (("", "All"), *STATUS_WORDS.items())


def _load_page(
    store: Store,
    search: str,
    status: str | None,
    scope: str,
    offset: int,
    limit: int,
    with_count: bool,
) -> tuple[int | None, list[dict[str, Any]], dict[str, EntityJobState], Identity | None]:
    where: dict[str, Any] = {"search": search, "status": status, "scope": scope}
    total = store.count_work_orders(**where) if with_count else None
    rows = store.work_orders(**where, limit=limit, offset=offset)
    ids = [row["id"] for row in rows if row["pending_edits"]]
    _with_attachments(store, rows)
    _with_drafts(store, rows)
    return total, rows, job_states(store, ids), read_identity(store) if with_count else None


def _load_rows(
    store: Store, entity_ids: list[str]
) -> tuple[dict[str, dict[str, Any] | None], dict[str, EntityJobState]]:
    rows = {entity_id: store.work_order(entity_id) for entity_id in entity_ids}
    _with_attachments(store, [row for row in rows.values() if row is not None])
    _with_drafts(store, [row for row in rows.values() if row is not None])
    return rows, job_states(store, entity_ids)


def _with_attachments(store: Store, rows: list[dict[str, Any]]) -> None:
    """Each row's photos and files (how many, what waits), for the line under its title."""
    counts = Attachments(store).counts_for(row["id"] for row in rows)
    for row in rows:
        row["attachments"] = counts.get(row["id"])


def _with_drafts(store: Store, rows: list[dict[str, Any]]) -> None:
    """Which rows hold typing kept from the editor (`app.store.drafts`): few, by key."""
    drafted = drafted_among(store, [row["id"] for row in rows])
    for row in rows:
        row["draft"] = row["id"] in drafted


#: A row's mark while the editor's typing on it is kept but not saved (issue 24).
UNSAVED_DRAFT = "Unsaved changes: open it to keep or discard them"


class WorkOrderListModel(ListViewModel[dict[str, Any]]):
    """Work orders from the cache with search, status and scope filters, a sync badge per row.

    Signals:
        searchChanged(), statusFilterChanged(), scopeFilterChanged(), totalChanged(),
        loadingChanged()
        message(str)  — from ListViewModel
    """

    searchChanged = Signal()
    statusFilterChanged = Signal()
    scopeFilterChanged = Signal()
    totalChanged = Signal()
    loadingChanged = Signal()
    ROLE_NAMES = (
        "entityId",
        "title",
        "subtitle",
        "status",
        "statusText",
        "priority",
        "badge",
        "badgeText",
        "badgeDetail",
        "pendingEdits",
        "offlineText",
        "pinned",
        "scopeText",
        "scopeDetail",
        "attachmentCount",
        "attachmentsWaiting",
        "draftText",
    )

    def __init__(self, services: Services, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._services = services
        self._states: dict[str, EntityJobState] = {}
        self._row_of: dict[str, int] = {}
        self._total = 0
        self._search = ""
        self._status = ""
        self._scope = "all"
        self._identity: Identity | None = None
        self._loading = False
        self._generation = 0
        self._dirty: set[str] = set()
        self._needs_reload = False
        self._search_timer = self._timer(250, self.reload, single_shot=True)
        self._repaint_timer = self._timer(150, self.on_repaint_timer_timeout, single_shot=True)
        # "Retrying in 3 s" counts down every second, only while a loaded row shows it.
        self._clock_timer = self._timer(1000, self.on_clock_timer_timeout)
        bridge = services.bridge
        connect(bridge.recordsChanged, self.on_bridge_records_changed)
        connect(bridge.jobStatesChanged, self.on_bridge_job_states_changed)
        connect(bridge.opChanges, self.on_bridge_op_changes)
        connect(bridge.connectivityChanged, self.on_bridge_connectivity_changed)
        connect(bridge.uploadProgress, self.on_bridge_upload_progress)

    # -- Qt model API: paging (roles and rows are ListViewModel's) ---------------------------

    def canFetchMore(self, parent: Index = QModelIndex()) -> bool:  # noqa: B008
        return not parent.isValid() and not self._loading and len(self._rows) < self._total

    def fetchMore(self, parent: Index = QModelIndex()) -> None:  # noqa: B008
        if self.canFetchMore(parent):
            self._set_loading(True)
            self._tasks.start(self._fetch_page(self._generation, len(self._rows)), "fetch-more")

    # -- properties -------------------------------------------------------------------------

    def _search_typed(self) -> None:
        self._search_timer.start()  # a reload once typing pauses, not on every key

    search = settable(str, "_search", searchChanged, _search_typed)
    statusFilter = settable(str, "_status", statusFilterChanged, lambda vm: vm.reload())

    def _get_scope_filter(self) -> str:
        return self._scope

    def _set_scope_filter(self, value: str) -> None:
        if value not in dict(SCOPE_FILTERS):
            raise ValueError(f"unknown scope filter {value!r}")
        if value != self._scope:
            self._scope = value
            self.scopeFilterChanged.emit()
            self.reload()

    #: "all" (every work order on this device), "mine", "team" or "pinned".
    scopeFilter = Property(str, _get_scope_filter, _set_scope_filter, notify=scopeFilterChanged)

    @Property(list, constant=True)
    def scopeFilters(self) -> list[dict[str, str]]:
        return [{"value": value, "label": label} for value, label in SCOPE_FILTERS]

    @Property(int, notify=totalChanged)
    def total(self) -> int:
        return self._total

    @Property(str, notify=totalChanged)
    def countText(self) -> str:
        """ "3 work orders", "1 work order assigned to ana", "2 work orders of team north"."""
        return count_words(self._total, self._scope, self._identity)

    @Property(str, notify=totalChanged)
    def emptyText(self) -> str:
        """What an empty list means, for the filters shown (read once the list is empty)."""
        filtered = bool(self._search or self._status)
        return empty_words(self._scope, self._identity, filtered=filtered)

    @Property(bool, notify=loadingChanged)
    def loading(self) -> bool:
        return self._loading

    @Property(list, constant=True)
    def statusFilterLabels(self) -> list[str]:
        return [label for _, label in STATUS_FILTERS]

    @Property(list, constant=True)
    def statusFilterValues(self) -> list[str]:
        return [value for value, _ in STATUS_FILTERS]

    # -- loading ----------------------------------------------------------------------------

    @Slot()
    def reload(self) -> None:
        """Start again from the first page (search or filter changed, or a big change)."""
        self._search_timer.stop()
        self._generation += 1
        self._set_loading(True)
        keep = max(PAGE_SIZE, min(len(self._rows), 20 * PAGE_SIZE))
        self._tasks.start(self._reload(self._generation, keep), "reload")

    async def _reload(self, generation: int, limit: int) -> None:
        store, status = self._services.store, self._status or None
        try:
            total, rows, states, identity = await self._services.executor.run(
                _load_page, store, self._search, status, self._scope, 0, limit, True
            )
        except BaseException:
            if generation == self._generation:
                self._set_loading(False)  # not stuck "loading": the next change tries again
            raise
        if generation != self._generation:
            return  # a newer search superseded this one
        if [row["id"] for row in rows] == [row["id"] for row in self._rows]:
            # Same rows in the same order (a draining queue acknowledging records): repaint
            # them in place. A model reset would rebuild every delegate, a visible stall.
            self._rows = rows
            self._states = states
            self.repaint()
        else:
            self.beginResetModel()
            self._rows = rows
            self._states = states
            self._row_of = {row["id"]: i for i, row in enumerate(rows)}
            self.endResetModel()
        self._identity = identity
        if not self._set_total(total or 0):
            self.totalChanged.emit()  # same count, other filters or person: other words
        self._set_loading(False)
        self._update_clock()

    async def _fetch_page(self, generation: int, offset: int) -> None:
        store, status = self._services.store, self._status or None
        try:
            _, rows, states, _ = await self._services.executor.run(
                _load_page, store, self._search, status, self._scope, offset, PAGE_SIZE, False
            )
        finally:
            if generation == self._generation:
                self._set_loading(False)
        if generation != self._generation or not rows:
            return
        first = len(self._rows)
        self.beginInsertRows(QModelIndex(), first, first + len(rows) - 1)
        for i, row in enumerate(rows, start=first):
            self._row_of[row["id"]] = i
        self._rows.extend(rows)
        self._states.update(states)
        self.endInsertRows()
        self._update_clock()

    # -- repaint on core events -------------------------------------------------------------

    def on_bridge_records_changed(self, entity_ids: list[str]) -> None:
        if not entity_ids:
            self._needs_reload = True
        self._dirty.update(entity_ids)
        self._repaint_timer.start()

    def on_bridge_connectivity_changed(self, state: str, reason: str) -> None:
        self.repaint(names=["badgeDetail"])  # a pending row's detail: is it on its way

    def on_bridge_op_changes(self, changes: dict[str, Any]) -> None:
        """A write on this device (a save, a discard): its rows are read again at once, not
        after the repaint timer that gathers a delivery's job states. Else a person who saves
        and goes straight back sees the old words called "Synced" for a moment."""
        if changes["entity_ids"]:
            self._dirty.update(changes["entity_ids"])
            self._repaint_timer.stop()
            self.on_repaint_timer_timeout()

    def on_bridge_upload_progress(self, change: dict[str, Any]) -> None:
        """An upload ended: its work order's "2 photos waiting" counts one less."""
        if change["state"] in (AttachmentState.UPLOADED, AttachmentState.FAILED):
            self.on_bridge_job_states_changed([change])

    def on_bridge_job_states_changed(self, changes: list[dict[str, Any]]) -> None:
        """One delivery's job states at once: the rows repaint once per batch, not per job."""
        self._dirty.update(str(change["entity_id"]) for change in changes)
        if not self._repaint_timer.isActive():
            self._repaint_timer.start()

    def on_repaint_timer_timeout(self) -> None:
        dirty, self._dirty = self._dirty, set()
        if self._needs_reload or any(entity_id not in self._row_of for entity_id in dirty):
            # A record this page has never shown (a new one, or pulled from the server) may
            # belong anywhere in the sort order: reload what is loaded.
            self._needs_reload = False
            self.reload()
            return
        if dirty:
            self._tasks.start(self._repaint(self._generation, sorted(dirty)), "repaint")

    def _retrying_rows(self) -> list[int]:
        return [
            i
            for i, row in enumerate(self._rows)
            if getattr(self._states.get(row["id"]), "retrying", 0)
        ]

    def _update_clock(self) -> None:
        if self._retrying_rows():
            if not self._clock_timer.isActive():
                self._clock_timer.start()
        else:
            self._clock_timer.stop()

    def on_clock_timer_timeout(self) -> None:
        retrying = self._retrying_rows()
        if not retrying:
            self._clock_timer.stop()
        self.repaint(retrying, ["badgeText", "badgeDetail"])

    async def _repaint(self, generation: int, entity_ids: list[str]) -> None:
        rows, states = await self._services.executor.run(
            _load_rows, self._services.store, entity_ids
        )
        if generation != self._generation:
            return
        for entity_id in entity_ids:
            i = self._row_of.get(entity_id)
            if i is None:
                continue
            row = rows.get(entity_id)
            if row is None or row["deleted"]:
                self.reload()
                return
            self._rows[i] = row
            if entity_id in states:
                self._states[entity_id] = states[entity_id]
            else:
                self._states.pop(entity_id, None)
            self.repaint([i])
        self._update_clock()

    # -- helpers ----------------------------------------------------------------------------

    def row_of(self, entity_id: str) -> int:
        return self._row_of.get(entity_id, -1)

    def _value(self, row: dict[str, Any], name: str) -> Any:
        if name == "entityId":
            return row["id"]
        if name in ("title", "status", "priority"):
            return row[name]
        if name == "subtitle":
            return subtitle(row)
        if name == "draftText":
            return UNSAVED_DRAFT if row.get("draft") else ""
        if name == "offlineText":
            return offline_mark(row)
        if name == "pinned":
            return bool(row.get("pinned"))
        if name == "scopeText":
            return NO_LONGER_ASSIGNED if row.get("no_longer_assigned") else ""
        if name == "statusText":
            return STATUS_WORDS.get(row["status"], row["status"])
        if name == "pendingEdits":
            return int(row["pending_edits"])
        if name in ("attachmentCount", "attachmentsWaiting"):
            counts: AttachmentCounts | None = row.get("attachments")
            if counts is None:
                return 0 if name == "attachmentCount" else ""
            if name == "attachmentCount":
                return counts.total
            images, failed_images = counts.waiting_images, counts.failed_images
            others, failed_others = counts.waiting - images, counts.failed - failed_images
            return waiting_in_words(images, others, failed_images, failed_others)
        badge = badge_for(
            self._states.get(row["id"]), self._services.clock(), online=self._services.online
        )
        files: AttachmentCounts | None = row.get("attachments")
        if files is not None:
            badge = with_files(badge, files.waiting, files.failed)
        if name == "scopeDetail":
            return out_of_scope_detail(badge.kind) if row.get("no_longer_assigned") else ""
        return {"badge": badge.kind, "badgeText": badge.text, "badgeDetail": badge.detail}[name]

    def _set_total(self, total: int) -> bool:
        if total == self._total:
            return False
        self._total = total
        self.totalChanged.emit()
        return True

    def _set_loading(self, loading: bool) -> None:
        if loading != self._loading:
            self._loading = loading
            self.loadingChanged.emit()
