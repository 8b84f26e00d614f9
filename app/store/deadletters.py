"""Read-only views of queued work that needs a person: dead letters and per-record job state.

The UI's dead-letter panel and sync badges read through here (off the UI loop, via the
single-writer executor); writes stay in `JobQueue` (`retry_dead`, `discard`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from app.states import RETRYING, JobStatus, Reason, job_state
from app.store.db import connection, in_batches
from app.store.errors import storage_errors
from app.store.store import Store

__all__ = [
    "ERROR_KINDS",
    "AttemptRecord",
    "DeadJob",
    "EntityJobState",
    "error_kind",
    "get_dead",
    "job_states",
    "last_synced_at",
    "list_dead",
]

ErrorKind = Literal["auth", "rejected", "not_found", "too_large", "gave_up", "other"]
#: Error kinds, for filtering dead jobs: what a person can do differs for each.
ERROR_KINDS: tuple[ErrorKind, ...] = (
    "rejected",
    "auth",
    "not_found",
    "too_large",
    "gave_up",
    "other",
)


@dataclass(frozen=True)
class AttemptRecord:
    started_at: float
    duration_ms: float | None
    outcome: str
    http_status: int | None
    error: str | None
    #: What the reply meant and why, as codes (``ReplyKind``, ``Reason``): None before
    #: schema 5 classified them.
    kind: str | None = None
    reason_code: str | None = None


@dataclass(frozen=True)
class DeadJob:
    id: int
    entity_id: str
    title: str | None
    op: str
    payload: dict[str, Any]
    attempt_count: int
    last_error: str
    http_status: int | None
    kind: ErrorKind
    created_at: float
    failed_at: float
    idempotency_key: str
    attempts: tuple[AttemptRecord, ...] = field(default_factory=tuple)
    #: Why it failed, as a code (a ``Reason``): what the UI words.
    reason_code: str | None = None


@dataclass(frozen=True)
class EntityJobState:
    """Outstanding jobs of one work order, summarised for its sync badge."""

    pending: int = 0
    leased: int = 0
    conflict: int = 0
    dead: int = 0
    retrying: int = 0
    next_attempt_at: float | None = None
    last_error: str | None = None
    #: The conflict was sent to an admin: the record waits for the review's decision.
    in_review: bool = False


_KIND_OF_REASON: dict[str, ErrorKind] = {
    Reason.SIGNED_OUT: "auth",
    Reason.FORBIDDEN: "auth",
    Reason.INVALID: "rejected",
    Reason.KEY_REUSED: "rejected",
    Reason.REFUSED: "rejected",
    Reason.NOT_FOUND: "not_found",
    Reason.TOO_LARGE: "too_large",
    Reason.UNSUPPORTED_TYPE: "rejected",
    Reason.GAVE_UP: "gave_up",
}


def error_kind(reason_code: str | None) -> ErrorKind:
    """Sort a dead job's failure, by its reason code, into what a person would do (pure)."""
    return _KIND_OF_REASON.get(reason_code or "", "other")


_DEAD_SELECT = """
SELECT j.id, j.entity_key, w.title, j.payload, j.attempt_count, j.last_error, j.created_at,
       j.updated_at, j.idempotency_key,
       last.http_status, last.reason_code
FROM jobs AS j LEFT JOIN work_orders AS w ON w.id = j.entity_key
LEFT JOIN attempts AS last ON last.id = (
    SELECT a.id FROM attempts AS a WHERE a.job_id = j.id ORDER BY a.id DESC LIMIT 1)
WHERE j.status = 'dead'
"""


def _attempts(store: Store, job_id: int) -> tuple[AttemptRecord, ...]:
    rows = (
        connection(store.db)
        .execute(
            "SELECT started_at, duration_ms, outcome, http_status, error, kind, reason_code "
            "FROM attempts "
            "WHERE job_id = ? ORDER BY id",
            (job_id,),
        )
        .fetchall()
    )
    return tuple(AttemptRecord(*row) for row in rows)


def _dead_job(store: Store, row: tuple[Any, ...], with_attempts: bool) -> DeadJob:
    payload = json.loads(row[3])
    return DeadJob(
        id=row[0],
        entity_id=row[1],
        title=row[2],
        op=str(payload.get("op", "update")),
        payload=payload,
        attempt_count=row[4],
        last_error=row[5] or "",
        http_status=row[9],
        kind=error_kind(row[10]),
        reason_code=row[10],
        created_at=row[6],
        failed_at=row[7],
        idempotency_key=row[8],
        attempts=_attempts(store, row[0]) if with_attempts else (),
    )


def list_dead(
    store: Store, *, kind: str | None = None, limit: int = 500, with_attempts: bool = True
) -> list[DeadJob]:
    """Dead jobs, most recently failed first; `kind` filters by `error_kind`."""
    with storage_errors(store.path):
        rows = (
            connection(store.db)
            .execute(f"{_DEAD_SELECT} ORDER BY 8 DESC, j.id DESC LIMIT ?", (limit,))
            .fetchall()
        )
        jobs = [_dead_job(store, row, with_attempts) for row in rows]
    return [job for job in jobs if kind is None or job.kind == kind]


def get_dead(store: Store, job_id: int) -> DeadJob | None:
    with storage_errors(store.path):
        row = connection(store.db).execute(f"{_DEAD_SELECT} AND j.id = ?", (job_id,)).fetchone()
        return None if row is None else _dead_job(store, row, True)


def job_states(store: Store, entity_ids: list[str]) -> dict[str, EntityJobState]:
    """Outstanding job state for each of `entity_ids` that has any (others are synced)."""
    states: dict[str, EntityJobState] = {}
    if not entity_ids:
        return states
    counts: dict[str, dict[str, Any]] = {}
    with storage_errors(store.path):
        conn = connection(store.db)
        for chunk, marks in in_batches(entity_ids):
            rows = conn.execute(
                "SELECT entity_key, status, attempt_count, next_attempt_at, last_error FROM jobs "
                f"WHERE entity_key IN ({marks}) "
                "AND finished_at IS NULL ORDER BY id",
                chunk,
            ).fetchall()
            for entity_id, status, attempts, next_at, error in rows:
                entry = counts.setdefault(
                    entity_id,
                    {**dict.fromkeys(JobStatus.outstanding(), 0), RETRYING: 0},
                )
                entry[status] += 1
                if job_state(status, attempts, error) == RETRYING:
                    entry[RETRYING] += 1
                    if entry.get("next_attempt_at") is None:
                        entry["next_attempt_at"] = next_at
                if error and status != JobStatus.LEASED:
                    entry["last_error"] = error
            for (entity_id,) in conn.execute(
                "SELECT entity_key FROM conflicts WHERE status IN ('escalating', 'escalated') "
                f"AND entity_key IN ({marks})",
                chunk,
            ):
                if entity_id in counts:
                    counts[entity_id]["in_review"] = True
    for entity_id, entry in counts.items():
        states[entity_id] = EntityJobState(**entry)
    return states


def last_synced_at(store: Store) -> float | None:
    """When this device last had a record confirmed by the server (persisted across runs)."""
    with storage_errors(store.path):
        row = connection(store.db).execute("SELECT MAX(last_synced_at) FROM work_orders").fetchone()
    return None if row[0] is None else float(row[0])
