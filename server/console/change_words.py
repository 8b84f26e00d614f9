"""A work order's change log in words, for the console's history: who, from where, what."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from server.db.store import Store

__all__ = ["FIELD_LABELS", "change_history", "field_words"]

#: The work-order form's labels (templates/_work_order_fields.html), and the tombstone's.
FIELD_LABELS: dict[str, str] = {
    "title": "Title", "site": "Site", "status": "Status", "priority": "Priority",
    "assignee": "Assignee", "team": "Team", "due_date": "Due date", "notes": "Notes",
    "deleted": "Deleted",
}  # fmt: skip

_KINDS = {"create": "Created", "update": "Changed", "delete": "Deleted"}
_SOURCES = {"device": "device", "console": "console", "conflict": "conflict"}


def _value(value: Any) -> str:
    if value is None or value == "":
        return "(empty)"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def field_words(fields: dict[str, list[Any]]) -> list[str]:
    """`["Status: open → done", …]` in the form's order of fields; a field that reads the
    same before and after (a create's blank notes: `None` → "") says nothing and is left out."""
    words = []
    for name, label in FIELD_LABELS.items():
        if name not in fields:
            continue
        before, after = (_value(value) for value in fields[name])
        if before != after:
            words.append(f"{label}: {before} → {after}")
    return words


def change_history(store: Store, entity_id: str) -> list[dict[str, Any]]:
    """The change log's entries of one work order, newest first, in words."""
    log = store.tables.WorkOrderChange
    query = (
        log.select().where(log.entity_id == entity_id).order_by(log.version.desc(), log.id.desc())
    )
    return [
        {
            "at": row.at,
            "what": _KINDS.get(row.kind, row.kind),
            "who": row.actor,
            "device": row.device,
            "source": _SOURCES.get(row.source, row.source),
            "version": row.version,
            "changes": field_words(json.loads(row.fields)),
        }
        for row in query
    ]
