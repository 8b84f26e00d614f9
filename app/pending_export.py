"""Export my pending data: every change not yet on the server, as one JSON file.

The safety net a field worker asks for before trusting a sync: whatever happens to the device
or the server, the unsent edits (waiting, being sent, failed, in conflict) can be handed to the
office. Read-only on the store; the file is written whole or not at all.

    {"format": "fieldsync-pending-changes", "version": 1, "exported_at": ISO-8601 UTC,
     "count": n, "changes": [{"job_id", "entity_id", "title", "state", "op", "fields",
     "base_version", "idempotency_key", "queued_at", "attempts", "last_error"}, ...]}
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.states import JobStatus
from app.store.db import connection
from app.store.errors import StoreError, storage_errors
from app.store.store import Store

__all__ = ["EXPORT_FORMAT", "ExportError", "ExportSummary", "export_pending", "pending_changes"]

EXPORT_FORMAT = "fieldsync-pending-changes"
#: The job states a person reads: a leased job is one being sent right now.
_STATES = {
    JobStatus.PENDING: "waiting",
    JobStatus.LEASED: "sending",
    JobStatus.DEAD: "failed",
    JobStatus.CONFLICT: "conflict",
}


class ExportError(StoreError):
    """The export file could not be written (nothing else changed)."""


@dataclass(frozen=True)
class ExportSummary:
    path: Path
    count: int
    failed: int


def _iso(timestamp: float) -> str:
    moment = dt.datetime.fromtimestamp(timestamp, dt.UTC)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def pending_changes(store: Store) -> list[dict[str, Any]]:
    """Every open job (not yet acknowledged by the server), oldest first."""
    with storage_errors(store.path):
        rows = (
            connection(store.db)
            .execute(
                "SELECT j.id, j.entity_key, w.title, j.status, j.payload, j.base_version, "
                "j.idempotency_key, j.created_at, j.attempt_count, j.last_error "
                "FROM jobs AS j LEFT JOIN work_orders AS w ON w.id = j.entity_key "
                "WHERE j.finished_at IS NULL ORDER BY j.id"
            )
            .fetchall()
        )
    changes = []
    for job_id, entity_id, title, status, payload, base, key, created, attempts, error in rows:
        body = json.loads(payload)
        changes.append(
            {
                "job_id": job_id,
                "entity_id": entity_id,
                "title": title,
                "state": _STATES.get(status, status),
                "op": body.get("op"),
                "fields": body.get("fields", {}),
                "base_version": base,
                "idempotency_key": key,
                "queued_at": _iso(created),
                "attempts": attempts,
                "last_error": error,
            }
        )
    return changes


def export_pending(store: Store, path: Path, *, now: float | None = None) -> ExportSummary:
    """Write every unsent change to ``path`` (replaced atomically). Blocking: run it on the
    executor. Raises ExportError, naming the file, when it cannot be written."""
    changes = pending_changes(store)
    stamp = now if now is not None else store.clock()
    document = {
        "format": EXPORT_FORMAT,
        "version": 1,
        "exported_at": _iso(stamp),
        "count": len(changes),
        "changes": changes,
    }
    text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    tmp = path.with_name(f".{path.name}.part")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise ExportError(f"could not write {path}: {exc.strerror or exc}") from None
    failed = sum(1 for change in changes if change["state"] == _STATES[JobStatus.DEAD])
    return ExportSummary(path=path, count=len(changes), failed=failed)
