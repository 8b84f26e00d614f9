"""The local cache of work orders: what the person sees, served offline.

The cache is never the source of truth for mutations (the queue is): its editable fields show
the server's record with pending local edits applied on top, and ``server_snapshot`` keeps the
server's record as last seen, the base of three-way merges. Pending counts come from the queue.
"""

from __future__ import annotations

import functools
import json
import sqlite3
from pathlib import Path
from typing import Any

import orjson
import peewee as pw

from app.mutations import intended_fields
from app.records import EDITABLE_FIELDS
from app.store.db import connection, in_batches
from app.store.errors import storage_errors
from app.store.jobs import entities_with_open_jobs
from app.store.scope import ListScope, read_identity, scope_filter

__all__ = ["SYNC_COLUMNS", "WorkOrderCache"]

SYNC_COLUMNS = (
    "server_version",
    "etag",
    "server_updated_at",
    "server_updated_by",
    "origin",
    "local_updated_at",
    "last_synced_at",
)
#: What the device knows of the scope: pinned (as the server said, or as asked here), and
#: when the work order left the scope with edits unsent ("No longer assigned to you").
SCOPE_COLUMNS = ("pinned", "left_scope_at")
_COLUMNS = ("id", *EDITABLE_FIELDS, *SYNC_COLUMNS, *SCOPE_COLUMNS)
_SELECT = (
    f"SELECT {', '.join('w.' + c for c in _COLUMNS)}, "
    "(SELECT COUNT(*) FROM jobs AS j WHERE j.entity_key = w.id "
    "AND j.finished_at IS NULL) AS pending_edits "
    "FROM work_orders AS w"
)


def _row_to_dict(row: tuple[Any, ...]) -> dict[str, Any]:
    record = dict(zip((*_COLUMNS, "pending_edits"), row, strict=True))
    record["deleted"] = bool(record["deleted"])
    record["pinned"] = bool(record["pinned"])
    # Every row of the cache is available offline; a search result says so when it is one.
    record["available_offline"] = True
    record["no_longer_assigned"] = record["left_scope_at"] is not None
    return record


class WorkOrderCache:
    """Reads and local writes of cached work orders. Call off the UI loop."""

    def __init__(self, db: pw.SqliteDatabase, path: Path) -> None:
        self.db = db
        self.path = path

    def get(self, entity_id: str) -> dict[str, Any] | None:
        with storage_errors(self.path):
            row = connection(self.db).execute(f"{_SELECT} WHERE w.id = ?", (entity_id,)).fetchone()
        return None if row is None else _row_to_dict(row)

    def existing(self, entity_ids: list[str]) -> list[str]:
        """Which of these work orders this device already holds (one query per 500)."""
        found: list[str] = []
        conn = connection(self.db)
        for chunk, marks in in_batches(entity_ids):
            rows = conn.execute(f"SELECT id FROM work_orders WHERE id IN ({marks})", chunk)
            found.extend(row[0] for row in rows)
        order = {entity_id: i for i, entity_id in enumerate(entity_ids)}
        return sorted(found, key=order.__getitem__)

    def exists(self, entity_id: str) -> bool:
        """Whether the cache holds this work order (deleted or not); cheaper than ``get``."""
        with storage_errors(self.path):
            row = (
                connection(self.db)
                .execute("SELECT 1 FROM work_orders WHERE id = ?", (entity_id,))
                .fetchone()
            )
        return row is not None

    def server_snapshot(self, entity_id: str) -> dict[str, Any] | None:
        with storage_errors(self.path):
            row = (
                connection(self.db)
                .execute("SELECT server_snapshot FROM work_orders WHERE id = ?", (entity_id,))
                .fetchone()
            )
        return None if row is None or row[0] is None else dict(json.loads(row[0]))

    def query(
        self,
        *,
        search: str = "",
        status: str | None = None,
        include_deleted: bool = False,
        limit: int = 200,
        offset: int = 0,
        scope: ListScope = "all",
    ) -> list[dict[str, Any]]:
        """Cached work orders by title; ``scope`` is the list's filter ("Mine", "My team",
        "Pinned": `app.store.scope.scope_filter`)."""
        where, params = self._filters(search, status, include_deleted, scope)
        sql = f"{_SELECT}{where} ORDER BY w.title COLLATE NOCASE, w.id LIMIT ? OFFSET ?"
        with storage_errors(self.path):
            rows = connection(self.db).execute(sql, (*params, limit, offset)).fetchall()
        return [_row_to_dict(row) for row in rows]

    def count(
        self,
        *,
        search: str = "",
        status: str | None = None,
        include_deleted: bool = False,
        scope: ListScope = "all",
    ) -> int:
        where, params = self._filters(search, status, include_deleted, scope)
        with storage_errors(self.path):
            row = (
                connection(self.db)
                .execute(f"SELECT COUNT(*) FROM work_orders AS w{where}", params)
                .fetchone()
            )
        return int(row[0])

    def _filters(
        self, search: str, status: str | None, include_deleted: bool, scope: ListScope = "all"
    ) -> tuple[str, tuple[Any, ...]]:
        clauses: list[str] = []
        params: list[Any] = []
        if scope != "all":
            clause, values = scope_filter(scope, read_identity(self))
            clauses.append(clause)
            params.extend(values)
        if not include_deleted:
            clauses.append("w.deleted = 0")
        if status:
            clauses.append("w.status = ?")
            params.append(status)
        if search:
            like = "%" + search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            clauses.append(
                "(w.title LIKE ? ESCAPE '\\' OR w.site LIKE ? ESCAPE '\\' "
                "OR w.assignee LIKE ? ESCAPE '\\')"
            )
            params.extend([like, like, like])
        where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
        return where, tuple(params)

    # -- local writes (inside the caller's transaction) ---------------------------------------

    def insert_local(self, entity_id: str, fields: dict[str, Any], now: float) -> None:
        connection(self.db).execute(
            _insert_local_sql(tuple(fields)), (entity_id, *fields.values(), "local", now)
        )

    def restore_visible(self, entity_id: str, now: float) -> None:
        """A local edit was given up: show the server's record again, with the edits still
        queued on top. A work order the server never had, with nothing queued, goes away."""
        conn = connection(self.db)
        row = conn.execute(
            "SELECT server_snapshot FROM work_orders WHERE id = ?", (entity_id,)
        ).fetchone()
        if row is None:
            return
        queued = [
            orjson.loads(payload)
            for (payload,) in conn.execute(
                "SELECT payload FROM jobs WHERE entity_key = ? AND finished_at IS NULL ORDER BY id",
                (entity_id,),
            )
        ]
        if row[0] is None:
            if not queued:
                conn.execute("DELETE FROM work_orders WHERE id = ?", (entity_id,))
            return  # a create still queued holds the fields already
        visible = dict(zip(EDITABLE_FIELDS, _visible_values(orjson.loads(row[0])), strict=True))
        for payload in queued:
            visible.update(intended_fields(payload))
        self.apply_local(entity_id, visible, now)

    def apply_local(self, entity_id: str, fields: dict[str, Any], now: float) -> None:
        # A text field the server left out (a `team` from a server older than teams) is empty.
        fields = {
            name: "" if value is None and name in _CLEARABLE_NAMES else value
            for name, value in fields.items()
        }
        assignments = ", ".join(f"{name} = ?" for name in fields)
        connection(self.db).execute(
            f"UPDATE work_orders SET {assignments}, local_updated_at = ? WHERE id = ?",
            (*fields.values(), now, entity_id),
        )


@functools.cache
def _insert_local_sql(names: tuple[str, ...]) -> str:
    """The INSERT for a new local record with these fields (one per field set, kept)."""
    columns = ("id", *names, "origin", "local_updated_at")
    return (
        f"INSERT INTO work_orders ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})"
    )


def has_outstanding(conn: sqlite3.Connection, entity_id: str) -> bool:
    """Does any local edit of this work order still wait for the server?"""
    row = conn.execute(
        "SELECT 1 FROM jobs WHERE entity_key = ? AND finished_at IS NULL LIMIT 1",
        (entity_id,),
    ).fetchone()
    return row is not None


def apply_server_record(
    conn: sqlite3.Connection, record: dict[str, Any], now: float, *, etag: str | None = None
) -> bool:
    """Store a record the server sent (inside the caller's transaction).

    The server snapshot and version always advance. The visible fields take the server's
    values only when no local edit is outstanding: pending work is never overwritten.
    Returns True when the visible fields changed to the server's.
    """
    overwrite = not has_outstanding(conn, str(record["id"]))
    conn.execute(
        _UPSERT_SERVER_RECORD if overwrite else _UPSERT_SERVER_STATE,
        _server_row(record, now, etag),
    )
    return overwrite


def apply_server_records(
    conn: sqlite3.Connection, records: list[dict[str, Any]], now: float
) -> set[str]:
    """``apply_server_record`` for a page or a batch: one lookup of outstanding edits per
    500 records and one ``executemany`` per case. Returns the ids whose visible fields
    took the server's values."""
    ids = [str(record["id"]) for record in records]
    kept = entities_with_open_jobs(conn, ids)
    overwrite = [_server_row(r, now) for r, i in zip(records, ids, strict=True) if i not in kept]
    state_only = [_server_row(r, now) for r, i in zip(records, ids, strict=True) if i in kept]
    if overwrite:
        conn.executemany(_UPSERT_SERVER_RECORD, overwrite)
    if state_only:
        conn.executemany(_UPSERT_SERVER_STATE, state_only)
    return set(ids) - kept


def _visible_values(record: dict[str, Any]) -> list[Any]:
    """A server record's editable fields as the cache stores them, in EDITABLE_FIELDS order."""
    values = [record.get(name) for name in EDITABLE_FIELDS]
    values[_DELETED] = bool(values[_DELETED])
    for index in _CLEARABLE:
        values[index] = values[index] or ""
    return values


def _server_row(record: dict[str, Any], now: float, etag: str | None = None) -> tuple[Any, ...]:
    """The parameters of the upserts below for one server record."""
    version = int(record["version"])
    return (
        str(record["id"]),
        *_visible_values(record),
        version,
        etag or f'"{version}"',
        orjson.dumps(record, option=orjson.OPT_SORT_KEYS).decode(),
        record.get("updated_at"),
        record.get("updated_by"),
        now,
        _pinned(record),
        now,
    )


def _pinned(record: dict[str, Any]) -> int | None:
    """The server's word on a pin (1 or 0), or None where its record does not say: a reply
    to a mutation may not, and must not unpin."""
    pinned = record.get("pinned")
    return None if pinned is None else int(bool(pinned))


_DELETED = EDITABLE_FIELDS.index("deleted")
_CLEARABLE_NAMES = ("site", "notes", "assignee", "team")
_CLEARABLE = tuple(EDITABLE_FIELDS.index(name) for name in _CLEARABLE_NAMES)


# One prepared statement per case (SQLite caches them): insert the record if the device has
# never seen it, else advance the server state, and the visible fields only when no local edit
# is outstanding.
_SERVER_COLUMNS = (
    "server_version",
    "etag",
    "server_snapshot",
    "server_updated_at",
    "server_updated_by",
    "last_synced_at",
    "pinned",
)
_UPSERT_HEAD = (
    f"INSERT INTO work_orders (id, {', '.join(EDITABLE_FIELDS)}, {', '.join(_SERVER_COLUMNS)}, "
    f"local_updated_at, origin) "
    f"VALUES ({', '.join('?' for _ in range(2 + len(EDITABLE_FIELDS) + len(_SERVER_COLUMNS)))}, "
    "'server') ON CONFLICT (id) DO UPDATE SET origin = 'server', "
    + ", ".join(
        f"{name} = COALESCE(excluded.{name}, {name})"
        if name == "pinned"
        else f"{name} = excluded.{name}"
        for name in _SERVER_COLUMNS
    )
)
_UPSERT_SERVER_STATE = _UPSERT_HEAD
_UPSERT_SERVER_RECORD = _UPSERT_HEAD + "".join(
    f", {name} = excluded.{name}" for name in EDITABLE_FIELDS
)
