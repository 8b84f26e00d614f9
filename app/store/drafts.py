"""Typing not yet saved: one draft per editor form, durable, never sent.

The editor writes its form here within a second of the last keystroke (`EditorViewModel`
debounces), so a kill, a crash or a power cut loses at most that second. A draft is not an
edit: no job is queued, nothing reaches the server; Save turns it into an edit and removes it
in the same transaction (`Operations.save_edit`), Discard removes it.

A draft keeps the form as it was when the person began typing (``base``) and the server
version it showed (``base_version``): reopened over a work order that changed on the server
meanwhile, the two merge field by field (`app.sync.merge.three_way`) instead of one
overwriting the other. ``entity_id`` is '' for a new work order (the editor has one new form).

A work order with a draft stays on the device (its editing hold outlives the app run that
wrote it, `release_all_editing`). Synchronous: call it off the UI loop.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from app.store.db import WriteTransaction, connection, in_batches
from app.store.errors import storage_errors

__all__ = [
    "NEW_FORM",
    "Draft",
    "count_drafts",
    "drafted_among",
    "drop_draft",
    "keep_draft",
    "read_draft",
]

#: The draft key of the editor's new-work-order form.
NEW_FORM = ""


@dataclass(frozen=True)
class Draft:
    """The person's typing on one form, as last written."""

    entity_id: str
    #: The whole form as typed: field name -> the text in it.
    fields: dict[str, str]
    #: The form as it was opened (the record before the typing; blank for a new one).
    base: dict[str, str]
    #: The server version the form showed (None: a new or never-synced work order).
    base_version: int | None
    #: When it was last written (wall clock, seconds).
    updated_at: float

    @property
    def typed(self) -> dict[str, str]:
        """Only the fields the person changed."""
        return {k: v for k, v in self.fields.items() if v != self.base.get(k)}


def keep_draft(store: Any, draft: Draft) -> None:
    """Write (or overwrite) the draft of its form, committed before it returns."""
    with WriteTransaction(store.db, store.path) as conn:
        conn.execute(
            "INSERT INTO drafts (entity_id, fields, base, base_version, updated_at) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (entity_id) DO UPDATE SET "
            "fields = excluded.fields, base = excluded.base, "
            "base_version = excluded.base_version, updated_at = excluded.updated_at",
            (
                draft.entity_id,
                json.dumps(draft.fields, sort_keys=True),
                json.dumps(draft.base, sort_keys=True),
                draft.base_version,
                draft.updated_at,
            ),
        )


def drop_draft(store: Any, entity_id: str) -> bool:
    """Remove the draft of ``entity_id``'s form (inside the caller's transaction when one is
    open). True when there was one."""
    with WriteTransaction(store.db, store.path) as conn:
        return conn.execute("DELETE FROM drafts WHERE entity_id = ?", (entity_id,)).rowcount > 0


def read_draft(store: Any, entity_id: str) -> Draft | None:
    """The draft of ``entity_id``'s form, or None. A row that is not a draft (written by
    something else, or damaged) is left as it is and reads as none: it is never shown as
    the person's typing."""
    with storage_errors(store.path):
        row = (
            connection(store.db)
            .execute(
                "SELECT fields, base, base_version, updated_at FROM drafts WHERE entity_id = ?",
                (entity_id,),
            )
            .fetchone()
        )
    if row is None:
        return None
    try:
        fields, base = _form(row[0]), _form(row[1])
    except ValueError:
        return None
    version = None if row[2] is None else int(row[2])
    return Draft(entity_id, fields, base, version, float(row[3]))


def drafted_among(store: Any, entity_ids: list[str]) -> set[str]:
    """Which of ``entity_ids`` hold typing kept from the editor (the list marks them)."""
    drafted: set[str] = set()
    with storage_errors(store.path):
        conn = connection(store.db)
        for chunk, marks in in_batches(entity_ids):
            query = f"SELECT entity_id FROM drafts WHERE entity_id IN ({marks})"
            drafted.update(row[0] for row in conn.execute(query, chunk))
    return drafted


def count_drafts(conn: Any) -> int:
    return int(conn.execute("SELECT COUNT(*) FROM drafts").fetchone()[0])


def _form(text: str) -> dict[str, str]:
    value = json.loads(text)
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValueError("not a form")
    return value
