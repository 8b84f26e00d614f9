"""The admin review inbox: every device's escalated conflicts, decided field by field.

Talks to the server's review queue through `ServerClient` (`conflicts`, `resolve_conflict`,
`dismiss_conflict`) on the loop: network work, so never on the store executor. Only an admin
token may decide; `refresh()` asks the server first (`can_review`) and shows nothing else to
a worker. Resolving sends the fields the admin kept from the device as one change against the
server's version; keeping the server's side everywhere is a dismissal.
"""

from __future__ import annotations

from typing import Any, Protocol

from app.sync.errors import Reason, ReplyKind, SyncError, classify_decision
from app.sync.transport import Reply
from ui.qt import Property, QObject, Signal, Slot
from ui.viewmodels.base import notified
from ui.viewmodels.choices import FieldChoiceViewModel
from ui.wording import field_label, iso_when, value_in_words

__all__ = ["ReviewClient", "ReviewViewModel"]


class ReviewClient(Protocol):
    """The review-queue part of `app.sync.transport.ServerClient`."""

    async def can_review(self) -> bool: ...

    async def conflicts(self, status: str = "open") -> Reply: ...

    async def resolve_conflict(self, review_id: str, body: dict[str, Any]) -> Reply: ...

    async def dismiss_conflict(self, review_id: str) -> Reply: ...


def _title(conflict: dict[str, Any]) -> str:
    mine, server = conflict.get("mine") or {}, conflict.get("server") or {}
    return str(mine.get("title") or server.get("title") or conflict.get("entity_id", "")[:8])


def _newest_first(conflicts: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    return sorted(conflicts, key=lambda c: (c.get(key) or "", c.get("id", 0)), reverse=True)


class ReviewViewModel(FieldChoiceViewModel[dict[str, Any]]):
    """Open review conflicts from every device, the one being decided, and past decisions.

    Signals:
        changed()  — the lists, the current conflict or a choice changed
        message(str)  — a result to tell the person once (from ViewModel)
    """

    changed = Signal()

    def __init__(self, client: ReviewClient | None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._client = client
        self._admin = False
        self._checked = False
        self._loading = False
        self._error = ""
        self._open: list[dict[str, Any]] = []
        self._decided: list[dict[str, Any]] = []

    def set_client(self, client: ReviewClient | None) -> None:
        """A new sign-in: forget what the previous token was allowed to see."""
        self._client = client
        self._admin = self._checked = False
        self._open, self._decided, self._current = [], [], None
        self.changed.emit()

    # -- loading ----------------------------------------------------------------------------

    @Slot()
    def refresh(self) -> None:
        if self._client is not None:
            self._tasks.start(self._refresh(), "review-refresh")

    async def _refresh(self) -> None:
        client = self._client
        assert client is not None
        self._loading = True
        self.changed.emit()
        try:
            self._admin = await client.can_review()
            self._checked = True
            if not self._admin:
                self._open, self._decided = [], []
                return
            open_reply = await client.conflicts("open")
            resolved = await client.conflicts("resolved")
            dismissed = await client.conflicts("dismissed")
        except SyncError as exc:
            self._error = f"Could not reach the server: {exc}"
            return
        finally:
            self._loading = False
            self.changed.emit()
        if open_reply.status != 200:
            self._error = f"The server refused the review list (HTTP {open_reply.status})."
            self.changed.emit()
            return
        self._error = ""
        self._open = _newest_first(_items(open_reply), "created_at")
        self._decided = _newest_first(_items(resolved) + _items(dismissed), "decided_at")
        if self._current is not None:
            current_id = self._current["id"]
            self._current = next((c for c in self._open if c["id"] == current_id), None)
        self.changed.emit()

    # -- the lists --------------------------------------------------------------------------

    @Property(bool, notify=changed)
    def available(self) -> bool:
        """Signed in with an admin token (known after the first refresh)."""
        return self._admin

    loading = notified(bool, "_loading", changed)
    error = notified(str, "_error", changed)

    @Property(str, notify=changed)
    def notice(self) -> str:
        if self._client is None:
            return "Sync is not running in this window."
        if self._loading and not self._checked:
            return "Asking the server…"
        if self._checked and not self._admin:
            return "Only an admin device can review conflicts. Sign in with an admin token."
        if self._checked and not self._open:
            return "No conflicts are waiting for review."
        return ""

    @Property(list, notify=changed)
    def openConflicts(self) -> list[dict[str, Any]]:
        return [
            {
                "reviewId": int(c["id"]),
                "title": _title(c),
                "device": str(c.get("device") or "?"),
                "raisedAt": iso_when(c.get("created_at")),
                "note": str(c.get("note") or ""),
                "text": f"From {c.get('device') or '?'}, {iso_when(c.get('created_at'))}",
            }
            for c in self._open
        ]

    @Property(list, notify=changed)
    def decisions(self) -> list[dict[str, Any]]:
        rows = []
        for c in self._decided:
            verb = "Resolved" if c.get("status") == "resolved" else "Dismissed"
            rows.append(
                {
                    "reviewId": int(c["id"]),
                    "title": _title(c),
                    "status": str(c.get("status")),
                    "decidedBy": str(c.get("decided_by") or "?"),
                    "decidedAt": iso_when(c.get("decided_at")),
                    "text": f"{verb} by {c.get('decided_by') or '?'} at "
                    f"{iso_when(c.get('decided_at'))} (raised by {c.get('device') or '?'})",
                }
            )
        return rows

    # -- the current conflict ---------------------------------------------------------------

    @Slot(int)
    def openReview(self, review_id: int) -> None:
        self._show_case(next((c for c in self._open if c["id"] == review_id), None))

    @Slot()
    def close(self) -> None:
        self._show_case(None)

    @Property(bool, notify=changed)
    def hasCurrent(self) -> bool:
        return self._current is not None

    @Property(str, notify=changed)
    def title(self) -> str:
        return _title(self._current) if self._current else ""

    @Property(str, notify=changed)
    def explanation(self) -> str:
        c = self._current
        if c is None:
            return ""
        server = c.get("server") or {}
        text = (
            f"{c.get('device') or 'A device'} sent this at {iso_when(c.get('created_at'))}. "
            f"Server side changed by {server.get('updated_by') or 'someone'} at "
            f"{iso_when(server.get('updated_at'))}."
        )
        if c.get("note"):
            text += f" Note: “{c['note']}”"
        return text

    def _overlapping(self) -> list[str]:
        c = self._current or {}
        mine, server = c.get("mine") or {}, c.get("server") or {}
        return [
            name
            for name, value in mine.items()
            if value_in_words(value) != value_in_words(server.get(name))
        ]

    @Property(list, notify=changed)
    def fields(self) -> list[dict[str, Any]]:
        c = self._current
        if c is None:
            return []
        mine, server = c.get("mine") or {}, c.get("server") or {}
        differing = set(self._overlapping())
        return [
            {
                "name": name,
                "label": field_label(name),
                "mine": value_in_words(value),
                "server": value_in_words(server.get(name)),
                "needsChoice": name in differing,
                "stateText": "Differs — choose" if name in differing else "Same on both sides",
                "choice": self._choices.side(name),
            }
            for name, value in mine.items()
        ]

    @Property(int, notify=changed)
    def unresolvedCount(self) -> int:
        return self._choices.unresolved(self._overlapping())

    @Property(bool, notify=changed)
    def canResolve(self) -> bool:
        return self._current is not None and self.unresolvedCount == 0

    @Slot()
    def keepAllMine(self) -> None:
        self._choices.choose_all(self._overlapping(), "mine")
        self.changed.emit()

    @Slot()
    def takeAllTheirs(self) -> None:
        self._choices.choose_all(self._overlapping(), "theirs")
        self.changed.emit()

    @Slot()
    def resolve(self) -> None:
        c = self._current
        if c is None:
            return
        if not self.canResolve:
            self.message.emit(f"Choose a side for {self.unresolvedCount} more field(s).")
            return
        mine = c.get("mine") or {}
        chosen = self._choices.as_dict()
        kept = {name: mine[name] for name, side in chosen.items() if side == "mine"}
        if not kept:
            self._tasks.start(self._decide(c, None), "review-dismiss")
            return
        self._tasks.start(self._decide(c, kept), "review-resolve")

    @Slot()
    def dismiss(self) -> None:
        if self._current is not None:
            self._tasks.start(self._decide(self._current, None), "review-dismiss")

    async def _decide(self, conflict: dict[str, Any], fields: dict[str, Any] | None) -> None:
        client = self._client
        assert client is not None
        review_id = str(conflict["id"])
        try:
            if fields is None:
                reply = await client.dismiss_conflict(review_id)
            else:
                version = int((conflict.get("server") or {}).get("version") or 1)
                body = {"fields": fields, "base_version": version}
                reply = await client.resolve_conflict(review_id, body)
        except SyncError as exc:
            self.message.emit(f"Not decided: could not reach the server ({exc}).")
            return
        verdict = classify_decision(reply.status, reply.error)
        if verdict.kind is ReplyKind.SUCCESS:
            self.message.emit(
                "Dismissed: the server's version stands."
                if fields is None
                else "Resolved: the merged work order is on the server."
            )
            self._current = None
            self._choices.clear()
        elif verdict.code is Reason.ALREADY_DECIDED:
            self.message.emit("Someone else already decided this conflict.")
            self._current = None
        elif verdict.code is Reason.VERSION_CONFLICT:
            self.message.emit(
                "The work order changed on the server since this was raised; dismiss it, or "
                "ask the device to send it again."
            )
        elif verdict.code is Reason.FORBIDDEN:
            self.message.emit("Only an admin device can decide conflicts.")
        else:
            self.message.emit(f"Not decided: the server answered HTTP {reply.status}.")
        await self._refresh()


def _items(reply: Reply) -> list[dict[str, Any]]:
    if reply.status != 200 or reply.body is None:
        return []
    items = reply.body.get("conflicts")
    return [c for c in items if isinstance(c, dict)] if isinstance(items, list) else []
