"""A work order's change log in words, for the console's history: who, from where, what."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from app.words import FIELD_LABELS, value_in_words

if TYPE_CHECKING:
    from server.db.store import Store

__all__ = ["change_history", "field_words"]

#: The order of the console's work-order form (templates/_work_order_fields.html), then the
#: tombstone; the labels are the product's (`app.words`).
_FORM_ORDER = ("title", "site", "status", "priority", "assignee", "team", "due_date", "notes",
               "deleted")  # fmt: skip
_KINDS = {"create": "Created", "update": "Changed", "delete": "Deleted"}
_SOURCES = {"device": "device", "console": "console", "conflict": "conflict"}


def field_words(fields: dict[str, list[Any]]) -> list[str]:
    """`["Status: open → done", …]` in the form's order of fields; a field that reads the
    same before and after (a create's blank notes: `None` → "") says nothing and is left out."""
    words = []
    for name in _FORM_ORDER:
        if name not in fields:
            continue
        before, after = (value_in_words(value) for value in fields[name])
        label = FIELD_LABELS[name]
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
