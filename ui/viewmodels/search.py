"""Search the whole organisation on the server: online only, a page of results at a time.

The work-order list searches what this device holds; this page asks the server, through the
core's `Finder` (`GET /v1/records?q=…&limit=…&cursor=…`), for every work order the device may
read. It says plainly that it needs a connection when the engine last said the server is not
answering (or the search found it so), and a result says whether this device holds it
("Available offline") or not ("Online only"): opening one it holds goes to the editor, one it
does not is shown read-only with "Keep offline" (a pin; it then arrives with the next pull).
"""

from __future__ import annotations

from typing import Any

from app.states import Connectivity
from app.store.store import Store
from app.sync.errors import (
    AuthError,
    MalformedReplyError,
    ServerBusyError,
    SyncError,
    TransientError,
)
from app.sync.scope import NeedsConnection
from ui.qt import Property, QObject, Signal, Slot, connect
from ui.services import Services
from ui.viewmodels.base import Refused, ViewModel, notified
from ui.viewmodels.scope import offline_mark, subtitle
from ui.wording import FIELD_LABELS, STATUS_WORDS

__all__ = ["PAGE_SIZE", "SearchViewModel"]

PAGE_SIZE = 25

#: Why the search cannot run, by the connectivity state the engine published.
_NO_CONNECTION = {
    Connectivity.OFFLINE: "You are offline.",
    Connectivity.UNREACHABLE: "The server is not answering.",
    Connectivity.SIGNED_OUT: "This device is signed out. Sign in first.",
    Connectivity.PAUSED: "Sync is paused on this metered connection.",
    Connectivity.STOPPED: "Sync is not running in this window.",
    "": "Sync is not running in this window.",
}


def _held(store: Store, entity_ids: list[str]) -> set[str]:
    return set(store.held_here(entity_ids))


class SearchViewModel(ViewModel):
    """The server search page: query, results (paged by the server's cursor), one opened result.

    Signals:
        changed()  — results, state or the opened result changed
        openLocal(str entity_id)  — the person opened a result this device holds
        message(str)  — from ViewModel
    """

    changed = Signal()
    openLocal = Signal(str)

    def __init__(self, services: Services, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._services = services
        self._query = ""
        self._searched = ""  # the query the results are for
        self._answered = False  # the server answered it (else no "nothing matches")
        self._results: list[dict[str, Any]] = []
        self._held: set[str] = set()
        self._unreachable = False  # the last search found no server, whatever was said before
        self._cursor: str | None = None
        self._loading = False
        self._error = ""
        self._current: dict[str, Any] | None = None
        self._generation = 0
        connect(services.bridge.connectivityChanged, self.on_bridge_connectivity_changed)
        connect(services.bridge.recordsChanged, self.on_bridge_records_changed)
        connect(services.bridge.opChanges, self.on_bridge_op_changes)

    # -- slots ------------------------------------------------------------------------------

    @Slot(str)
    def setQuery(self, text: str) -> None:
        if text != self._query:
            self._query = text
            self.changed.emit()

    @Slot()
    def search(self) -> None:
        query = self._query.strip()
        if not query:
            self._error = "Type a word of a title, a site or a person's name."
            self.changed.emit()
            return
        if not self.canSearch:
            self._error = ""
            self.changed.emit()
            return
        self._generation += 1
        self._searched, self._results, self._cursor, self._current = query, [], None, None
        self._answered = False
        self._tasks.start(self._fetch(self._generation, query, None), "search")

    @Slot()
    def loadMore(self) -> None:
        if self._cursor and not self._loading and self.canSearch:
            self._tasks.start(self._fetch(self._generation, self._searched, self._cursor), "more")

    @Slot(str)
    def openResult(self, entity_id: str) -> None:
        if entity_id in self._held:
            self.openLocal.emit(entity_id)
            return
        self._current = next((r for r in self._results if r.get("id") == entity_id), None)
        self.changed.emit()

    @Slot()
    def closeResult(self) -> None:
        self._current = None
        self.changed.emit()

    @Slot(str)
    def keepOffline(self, entity_id: str) -> None:
        self._tasks.start(self._pin(entity_id), "search-pin")

    async def _pin(self, entity_id: str) -> None:
        finder = self._services.finder
        assert finder is not None
        # refused for good (unknown work order), or signed out
        how = await self._carry_out(finder.pin(entity_id), "Not kept offline", (SyncError,))
        if isinstance(how, Refused):
            return
        if how == "queued":
            self.message.emit("Kept offline once the server is reachable again.")
        else:
            self.message.emit("Kept offline: it arrives on this device with the next sync.")

    async def _fetch(self, generation: int, query: str, cursor: str | None) -> None:
        finder = self._services.finder
        assert finder is not None
        self._loading = True
        self._error = ""
        self.changed.emit()
        try:
            page = await finder.search(query, PAGE_SIZE, cursor)
        except (ServerBusyError, MalformedReplyError) as exc:
            if generation == self._generation:
                self._error = f"The server could not search now; try again. ({exc})"
            return
        except (NeedsConnection, TransientError):
            # No server answering: say so, not a riddle.
            if generation == self._generation:
                self._unreachable = True
            return
        except AuthError:
            if generation == self._generation:
                self._error = "The server did not accept this device's sign-in. Sign in again."
            return
        except SyncError as exc:
            if generation == self._generation:
                self._error = f"The server could not search: {exc}"
            return
        finally:
            if generation == self._generation:
                self._loading = False
                self.changed.emit()
        if generation != self._generation:
            return  # a newer search replaced this one
        self._unreachable = False
        self._answered = True
        records = [r for r in page.records if isinstance(r.get("id"), str)]
        self._results.extend(records)
        self._held |= {r["id"] for r in records if r.get("available_offline")}
        self._cursor = page.next_cursor or None
        self.changed.emit()

    async def _refresh_held(self) -> None:
        ids = [r["id"] for r in self._results]
        if ids:
            held = await self._services.executor.run(_held, self._services.store, ids)
            self._held = held
            self.changed.emit()

    def on_bridge_connectivity_changed(self, state: str, reason: str) -> None:
        if state in (Connectivity.ONLINE, Connectivity.DEGRADED):
            self._unreachable = False
        self.changed.emit()

    def on_bridge_records_changed(self, entity_ids: list[str]) -> None:
        # A pinned result arrived with a pull: it is now "Available offline" and opens.
        if self._results and (not entity_ids or set(entity_ids) & {r["id"] for r in self._results}):
            self._tasks.start(self._refresh_held(), "search-held")

    def on_bridge_op_changes(self, changes: dict[str, Any]) -> None:
        if changes["entity_ids"]:
            self.on_bridge_records_changed(changes["entity_ids"])

    # -- properties -------------------------------------------------------------------------

    query = notified(str, "_query", changed)

    @Property("QVariantMap", constant=True)
    def fieldLabels(self) -> dict[str, str]:
        """Each field's label by its name, for the opened result (QML names no field)."""
        return dict(FIELD_LABELS)

    @Property(bool, notify=changed)
    def canSearch(self) -> bool:
        services = self._services
        return services.finder is not None and services.online and not self._unreachable

    @Property(str, notify=changed)
    def connectionNotice(self) -> str:
        """Empty when the search can run; otherwise why not, in words."""
        if self.canSearch:
            return ""
        state = self._services.bridge.connectivity if self._services.finder else ""
        if self._unreachable and state in (Connectivity.ONLINE, Connectivity.DEGRADED):
            state = "unreachable"
        why = _NO_CONNECTION.get(state, "The server has not answered yet.")
        return (
            f"Searching every work order needs a connection to the server. {why} "
            "The work orders on this device are still in the list."
        )

    loading = notified(bool, "_loading", changed)

    error = notified(str, "_error", changed)

    @Property(str, notify=changed)
    def summary(self) -> str:
        if self._loading and not self._results:
            return "Searching the server…"
        if not self._answered:
            return ""
        count = len(self._results)
        if count == 0:
            return f"No work order matches “{self._searched}” on the server."
        more = ", more on the server" if self._cursor else ""
        noun = "work order" if count == 1 else "work orders"
        return f"{count} {noun} for “{self._searched}”{more}"

    @Property(bool, notify=changed)
    def hasMore(self) -> bool:
        return self._cursor is not None

    @Property(list, notify=changed)
    def results(self) -> list[dict[str, Any]]:
        return [self._row(record) for record in self._results]

    @Property("QVariantMap", notify=changed)
    def current(self) -> dict[str, Any]:
        """The opened result this device does not hold ({}: none)."""
        if self._current is None:
            return {}
        row = self._row(self._current)
        row["notes"] = str(self._current.get("notes") or "")
        row["team"] = str(self._current.get("team") or "")
        row["assignee"] = str(self._current.get("assignee") or "")
        row["site"] = str(self._current.get("site") or "")
        return row

    def _row(self, record: dict[str, Any]) -> dict[str, Any]:
        held = record["id"] in self._held
        status = str(record.get("status") or "")
        return {
            "entityId": record["id"],
            "title": str(record.get("title") or ""),
            "statusText": STATUS_WORDS.get(status, status),
            "subtitle": subtitle(record),
            "held": held,
            "pinned": bool(record.get("pinned")),
            # "Kept offline" as the server says it is pinned for this person.
            "offlineText": offline_mark({**record, "available_offline": held}),
        }
