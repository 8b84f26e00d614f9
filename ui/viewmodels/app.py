"""The window's view-model: which page is shown, and the wiring between the view-models.

Navigation is decided here, not in QML, so it is tested without a window: on a phone the
list is a page and back returns to it; on a wide window QML shows the list beside the page.
The view-models do not call each other to repaint: each follows the bridge's `opChanges`
(what a core operation changed) and the engine's events.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ui.qt import Property, QObject, Signal, Slot, connect
from ui.services import Services
from ui.viewmodels.attachments import AttachmentListModel
from ui.viewmodels.base import ListViewModel, ViewModel
from ui.viewmodels.conflicts import ConflictViewModel
from ui.viewmodels.deadletters import DeadLetterModel
from ui.viewmodels.diagnostics import DiagnosticsViewModel
from ui.viewmodels.editor import EditorViewModel
from ui.viewmodels.export import PendingExportViewModel
from ui.viewmodels.review import ReviewViewModel
from ui.viewmodels.scope import KeepOfflineViewModel
from ui.viewmodels.search import SearchViewModel
from ui.viewmodels.settings import SettingsViewModel
from ui.viewmodels.signin import SignInViewModel
from ui.viewmodels.statusbar import StatusBarViewModel
from ui.viewmodels.workorders import WorkOrderListModel

__all__ = ["PAGES", "AppViewModel"]

PAGES = {
    "list": "Work orders",
    "editor": "Work order",
    "conflict": "Resolve conflict",
    "dead": "Failed changes",
    "diagnostics": "Diagnostics",
    "signin": "Sign in",
    "review": "Review inbox",
    "settings": "Settings",
    "search": "Search",
}

OnSignedIn = Callable[[str, str], None]


class AppViewModel(QObject):
    """Signals:
    pageChanged()
    titleChanged()
    askingChanged() — a way out of the editor waits for the person to keep or drop typing
    message(str)  — a short notice for the person (shown as a toast)
    """

    pageChanged = Signal()
    titleChanged = Signal()
    askingChanged = Signal()
    message = Signal(str)

    def __init__(
        self,
        services: Services,
        parent: QObject | None = None,
        *,
        on_signed_in: OnSignedIn | None = None,
        diagnostics_interval_s: float = 30.0,
    ) -> None:
        super().__init__(parent)
        self._services = services
        self._on_signed_in = on_signed_in
        self._page = "list"
        self._leaving: Callable[[], None] | None = None
        self._dead_count = -1
        self._work_orders = WorkOrderListModel(services, self)
        self._status = StatusBarViewModel(services, self)
        self._editor = EditorViewModel(services, self)
        self._dead = DeadLetterModel(services, self)
        self._diagnostics = DiagnosticsViewModel(services, self, interval_s=diagnostics_interval_s)
        self._sign_in = SignInViewModel(services, self)
        self._conflicts = ConflictViewModel(services, self)
        self._review = ReviewViewModel(services.review_client, self)
        self._settings = SettingsViewModel(services, self)
        self._export = PendingExportViewModel(services, self)
        self._keep_offline = KeepOfflineViewModel(services, self)
        self._search = SearchViewModel(services, self)
        self._attachments = AttachmentListModel(services, self)
        for child in self._children():
            connect(child.message, self.message.emit)
        connect(self._editor.changed, self.on_editor_changed)
        connect(self._keep_offline.discarded, self.on_keep_offline_discarded)
        connect(self._search.openLocal, self.openWorkOrder)
        connect(self._editor.restoredNew, self.on_editor_restored_new)
        connect(self._editor.changed, self.titleChanged.emit)
        connect(self._conflicts.finished, self.on_conflicts_finished)
        connect(self._sign_in.signedIn, self.on_sign_in_signed_in)
        bridge = services.bridge
        connect(bridge.recordsChanged, self._editor.on_bridge_records_changed)
        connect(bridge.jobStatesChanged, self._editor.on_bridge_job_states_changed)
        connect(bridge.authRequired, self.on_bridge_auth_required)
        connect(bridge.conflictRaised, self.on_bridge_conflict_raised)
        connect(bridge.queueChanged, self.on_bridge_queue_changed)

    def start(self) -> None:
        """First reads, off the loop; call once the loop runs (or before `wait_idle`)."""
        self._editor.start()
        self._work_orders.reload()
        self._status.refresh()
        self._dead.reload()
        self._conflicts.reload()
        self._diagnostics.start()
        self._review.refresh()
        self._settings.reload()

    async def wait_idle(self) -> None:
        for vm in self._children():
            await vm.wait_idle()

    async def aclose(self) -> None:
        for vm in self._children():
            await vm.aclose()

    def _children(self) -> tuple[ViewModel | ListViewModel[Any], ...]:
        return (
            self._work_orders,
            self._status,
            self._editor,
            self._dead,
            self._diagnostics,
            self._sign_in,
            self._conflicts,
            self._review,
            self._settings,
            self._export,
            self._keep_offline,
            self._search,
            self._attachments,
        )

    # -- navigation -------------------------------------------------------------------------

    @Property(str, notify=pageChanged)
    def page(self) -> str:
        return self._page

    @Property(str, notify=titleChanged)
    def title(self) -> str:
        if self._page == "editor":
            return "New work order" if self._editor.isNew else "Work order"
        return PAGES[self._page]

    @Property(bool, notify=pageChanged)
    def canGoBack(self) -> bool:
        return self._page != "list"

    @Slot(str)
    def open(self, page: str) -> None:
        if page not in PAGES:
            raise ValueError(f"unknown page {page!r}")
        if page != self._page:
            self._leave_editor(lambda: self._show(page))
        else:
            self._show(page)

    def _show(self, page: str) -> None:
        if page == "dead":
            self._dead.reload()
        elif page == "diagnostics":
            self._diagnostics.refresh()
        elif page == "conflict" and not self._conflicts.hasCurrent:
            self._conflicts.reload()
        elif page == "review":
            self._review.refresh()
        if page != self._page:
            if self._page == "editor":
                self._editor.close()  # the core may let go of its work order
            self._page = page
            self.pageChanged.emit()
            self.titleChanged.emit()

    @Slot()
    def back(self) -> None:
        self.open("list")

    @Slot(str)
    def openWorkOrder(self, entity_id: str) -> None:
        if self._page == "editor" and self._editor.dirty and self._editor.entityId == entity_id:
            return  # already open, with the person's typing: reading it again would drop it

        def go() -> None:
            self._editor.load(entity_id)
            self._show("editor")

        self._leave_editor(go)

    @Slot()
    def newWorkOrder(self) -> None:
        def go() -> None:
            self._editor.newRecord()
            self._show("editor")

        self._leave_editor(go)

    @Slot(str)
    def searchServer(self, text: str) -> None:
        """From the list's "no match" on this device: the same words, asked of the server."""
        self._search.setQuery(text)
        self.open("search")
        self._search.search()

    @Slot(str)
    def openTarget(self, target: str) -> None:
        """The page a desktop notification's action names (`app.desktop.notifications`):
        ``conflict:<id>``, ``conflict``, ``dead``, ``editor:<id>``, ``signin``."""
        page, _, entity_id = target.partition(":")
        if page == "conflict" and entity_id:
            self.resolveConflictFor(entity_id)
        elif page == "editor" and entity_id:
            self.openWorkOrder(entity_id)
        elif page in PAGES:
            self.open(page)

    @Slot(str)
    def resolveConflictFor(self, entity_id: str) -> None:
        def go() -> None:
            self._conflicts.openForEntity(entity_id)
            self._show("conflict")

        self._leave_editor(go)

    # -- typing is never dropped without asking ---------------------------------------------

    def _leave_editor(self, go: Callable[[], None]) -> None:
        """Run `go` (a way out of the editor), unless it would drop unsaved typing: then
        the person is asked first, and `go` waits for `discardEdits`. Typing being saved is
        not dropped: the save goes on (and its draft keeps the typing if it fails)."""
        if self._page == "editor" and self._editor.dirty and not self._editor.saving:
            self._leaving = go
            self.askingChanged.emit()
            return
        self._leaving = None
        go()

    @Property(bool, notify=askingChanged)
    def askingToDiscardEdits(self) -> bool:
        return self._leaving is not None

    @Slot()
    def keepEditing(self) -> None:
        self._leaving = None
        self.askingChanged.emit()

    @Slot()
    def discardEdits(self) -> None:
        go, self._leaving = self._leaving, None
        self.askingChanged.emit()
        if go is not None:
            self._editor.revert()
            go()

    # -- wiring -----------------------------------------------------------------------------

    def on_editor_restored_new(self) -> None:
        """A new work order's typing from an earlier run is back: show it, as it was."""
        if self._page == "list":
            self._show("editor")

    def on_editor_changed(self) -> None:
        self._keep_offline.follow(self._editor.entityId if self._editor.loaded else "")
        self._keep_offline.setUnsaved(self._editor.dirty)
        self._attachments.show(self._editor.entityId)

    def on_keep_offline_discarded(self, entity_id: str) -> None:
        if self._editor.entityId == entity_id:
            # It left the device: the editor lets go of it (a refresh still under way must
            # not say "no longer on this device" over what the person just did).
            self._editor.newRecord()
            if self._page == "editor":
                self.back()

    def on_conflicts_finished(self) -> None:
        if self._page == "conflict":
            self.back()

    def on_bridge_auth_required(self, server_url: str, reason: str) -> None:
        if self._page == "editor" and self._editor.dirty and not self._editor.saving:
            # Never taken away from typing: the status bar says signed out meanwhile. Typing
            # being saved is kept by its save, as on any way out of the editor.
            self.message.emit("Signed out. Your typing stays here: save it, then sign in.")
            return
        self.open("signin")

    def on_bridge_conflict_raised(self, entity_id: str, job_id: int, kind: str) -> None:
        self._conflicts.reload()
        self.message.emit("A change conflicts with the server's version: choose what to keep.")

    def on_bridge_queue_changed(self, depth: dict[str, int], oldest: float) -> None:
        dead = int(depth.get("dead", 0))
        if dead != self._dead_count:
            self._dead_count = dead
            self._dead.reload()

    def on_sign_in_signed_in(self, server_url: str, token: str) -> None:
        if self._on_signed_in is not None:
            self._on_signed_in(server_url, token)
        self._status.signed_in()
        self._review.refresh()
        self.message.emit("Signed in. Syncing…")
        self.back()

    # -- children, for QML ------------------------------------------------------------------

    @Property(QObject, constant=True)
    def workOrders(self) -> WorkOrderListModel:
        return self._work_orders

    @Property(QObject, constant=True)
    def status(self) -> StatusBarViewModel:
        return self._status

    @Property(QObject, constant=True)
    def editor(self) -> EditorViewModel:
        return self._editor

    @Property(QObject, constant=True)
    def deadLetters(self) -> DeadLetterModel:
        return self._dead

    @Property(QObject, constant=True)
    def diagnostics(self) -> DiagnosticsViewModel:
        return self._diagnostics

    @Property(QObject, constant=True)
    def signIn(self) -> SignInViewModel:
        return self._sign_in

    @Property(QObject, constant=True)
    def conflicts(self) -> ConflictViewModel:
        return self._conflicts

    @Property(QObject, constant=True)
    def review(self) -> ReviewViewModel:
        return self._review

    @Property(QObject, constant=True)
    def settings(self) -> SettingsViewModel:
        return self._settings

    @Property(QObject, constant=True)
    def keepOffline(self) -> KeepOfflineViewModel:
        return self._keep_offline

    @Property(QObject, constant=True)
    def search(self) -> SearchViewModel:
        return self._search

    @Property(QObject, constant=True)
    def attachments(self) -> AttachmentListModel:
        return self._attachments

    @Property(QObject, constant=True)
    def pendingExport(self) -> PendingExportViewModel:
        return self._export
