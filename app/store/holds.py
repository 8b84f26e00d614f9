"""Jobs held for a person: dead letters, conflicts, and the decisions that release them.

Part of `JobQueue` (see `app.store.queue`), the only writer of ``jobs``, ``attempts``,
``conflicts`` and ``audit_log``: sync code (delivery, conflict resolution, the give-up policy)
decides, these methods write. Each one runs in the caller's transaction when there is one (a
``WriteTransaction`` nests as a savepoint), so a decision and its effects commit together.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from app.states import AttemptOutcome, JobStatus, Reason, ReplyKind
from app.store.db import WriteTransaction, connection
from app.store.errors import InvalidEditError, StoreError, storage_errors
from app.store.jobs import (
    ClaimedJob,
    ConflictHold,
    Outcome,
    QueueParts,
    new_idempotency_key,
    payload_text,
)
from app.store.statements import INSERT_ATTEMPT, REBASE_JOB

__all__ = ["QueueHolds"]

#: A job re-sent with a new body: a new request, so a new idempotency key, and its own base.
_REQUEUE = (
    "UPDATE jobs SET payload = ?, idempotency_key = ?, base_version = ?, chained = 0, "
    "status = 'pending', locked_by = NULL, locked_until = NULL, next_attempt_at = ?, "
    "last_error = NULL, finished_at = NULL, updated_at = ?"
)


class QueueHolds(QueueParts):
    """The dead-letter and conflict operations of a `JobQueue`."""

    # -- dead letters ------------------------------------------------------------------------

    def retry_dead(self, job_id: int, payload: dict[str, Any] | None = None) -> str:
        """Send a dead (or conflicted) job again. Unchanged, it keeps its idempotency key;
        with an edited payload it is a new request and gets a new key. Returns the key."""
        now = self.clock()
        with WriteTransaction(self.db, self.path) as conn:
            row = conn.execute(
                "SELECT payload, idempotency_key, status FROM jobs WHERE id = ?", (job_id,)
            ).fetchone()
            if row is None or row[2] not in JobStatus.needs_person():
                raise StoreError(f"job {job_id} is not a dead or conflicted job")
            key = row[1]
            body = row[0]
            if payload is not None:
                new_body = payload_text(payload)
                if new_body != body:
                    body, key = new_body, new_idempotency_key()
            conn.execute(
                "UPDATE jobs SET status = 'pending', payload = ?, idempotency_key = ?, "
                "attempt_count = 0, next_attempt_at = ?, finished_at = NULL, updated_at = ? "
                "WHERE id = ?",
                (body, key, now, now, job_id),
            )
            self._close_conflict(conn, job_id, {"outcome": "retried"}, now)
        return str(key)

    def discard(self, job_id: int) -> dict[str, Any]:
        """Give up on a dead or conflicted job; returns its row (as the audit log keeps it,
        with its base version). The job only: a discard enters at ``app.sync.give_up.give_up``,
        which settles the work order and the next queued edit too."""
        found = self._discard_where("id = ? AND status IN ('dead', 'conflict')", (job_id,))
        if not found:
            raise StoreError(f"job {job_id} is not a dead or conflicted job")
        return found[0]

    def discard_after(self, entity_key: str, job_id: int) -> list[dict[str, Any]]:
        """Give up on every edit of ``entity_key`` queued after ``job_id`` (its create was
        given up: they could never reach it). A job being sent right now is left alone."""
        return self._discard_where(
            "entity_key = ? AND id > ? AND finished_at IS NULL "
            "AND status IN ('pending', 'dead', 'conflict')",
            (entity_key, job_id),
        )

    def discard_waiting_for(self, entity_key: str) -> list[dict[str, Any]]:
        """Give up on every job waiting for ``entity_key``'s create (its attachments'
        uploads and removals): the create was given up, so they could never be sent."""
        return self._discard_where(
            "waits_for = ? AND finished_at IS NULL AND status IN ('pending', 'dead', 'conflict')",
            (entity_key,),
        )

    def _discard_where(self, condition: str, params: tuple[Any, ...]) -> list[dict[str, Any]]:
        now = self.clock()
        with WriteTransaction(self.db, self.path) as conn:
            rows = conn.execute(
                "UPDATE jobs SET status = 'done', last_error = 'discarded: ' || "
                f"COALESCE(last_error, ''), updated_at = ?, finished_at = ? WHERE {condition} "
                "RETURNING id, entity_key, payload, idempotency_key, last_error, base_version",
                (now, now, *params),
            ).fetchall()
            entries: list[dict[str, Any]] = []
            for row in sorted(rows):
                self._close_conflict(conn, row[0], {"outcome": "discarded"}, now)
                entry = {
                    "id": row[0],
                    "entity_key": row[1],
                    "payload": json.loads(row[2]),
                    "idempotency_key": row[3],
                    "last_error": row[4],
                }
                self._audit(conn, "discard", row[0], row[1], entry, now)
                entries.append({**entry, "base_version": row[5]})
            if entries:
                self._bump(conn, "jobs_discarded", len(entries))
        return entries

    # -- conflicts ---------------------------------------------------------------------------

    def open_conflict(self, job_id: int, hold: ConflictHold) -> None:
        """Keep what a conflicted job needs a person for (its job is already ``conflict``)."""
        with WriteTransaction(self.db, self.path) as conn:
            conn.execute(
                "INSERT OR REPLACE INTO conflicts (job_id, entity_key, kind, op, base, mine, "
                "server, overlapping, auto_merged, status, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'open', ?)",
                (
                    job_id,
                    hold.entity_key,
                    hold.kind,
                    hold.op,
                    None if hold.base is None else json.dumps(hold.base),
                    json.dumps(hold.mine),
                    json.dumps(hold.server),
                    json.dumps(list(hold.overlapping)),
                    json.dumps(hold.auto_merged),
                    self.clock(),
                ),
            )

    def hold(self, job_id: int, reason: str, hold: ConflictHold) -> None:
        """Hold a pending job as a conflict before it is ever sent (its base is unknown)."""
        with WriteTransaction(self.db, self.path) as conn:
            conn.execute(
                "UPDATE jobs SET status = 'conflict', chained = 0, last_error = ?, updated_at = ? "
                "WHERE id = ?",
                (reason, self.clock(), job_id),
            )
            self.open_conflict(job_id, hold)

    def requeue_merged(
        self, job: ClaimedJob, payload: dict[str, Any], base_version: int, outcome: Outcome
    ) -> None:
        """A conflict that merged by itself: the job is sent again with only what the server
        lacks, against the server's version; the attempt is kept as ``auto_merged``."""
        now = self.clock()
        with WriteTransaction(self.db, self.path) as conn:
            conn.execute(
                f"{_REQUEUE} WHERE id = ?",
                (payload_text(payload), new_idempotency_key(), base_version, now, now, job.id),
            )
            duration = outcome.duration_ms
            conn.execute(
                INSERT_ATTEMPT,
                (
                    job.id,
                    job.claimed_at,
                    duration,
                    AttemptOutcome.AUTO_MERGED,
                    outcome.http_status,
                    outcome.error,
                    ReplyKind.CONFLICT,
                    Reason.AUTO_MERGED,
                ),
            )

    def resend_resolved(self, job_id: int, payload: dict[str, Any], base_version: int) -> None:
        """A person resolved a conflict with a change to send: the job goes again with it."""
        now = self.clock()
        with WriteTransaction(self.db, self.path) as conn:
            resent = conn.execute(
                f"{_REQUEUE}, attempt_count = 0 WHERE id = ? AND status = 'conflict'",
                (payload_text(payload), new_idempotency_key(), base_version, now, now, job_id),
            )
            if resent.rowcount != 1:
                raise InvalidEditError(f"job {job_id} is no longer in conflict")

    def record_resolution(
        self, job_id: int, entity_key: str | None, resolution: dict[str, Any], audit: Any = None
    ) -> None:
        """Close a conflict with how it was decided; with ``audit``, a ``resolve_conflict``
        row keeps the decision."""
        now = self.clock()
        with WriteTransaction(self.db, self.path) as conn:
            self._close_conflict(conn, job_id, resolution, now, overwrite=True)
            if audit is not None:
                self._audit(conn, "resolve_conflict", job_id, entity_key, audit, now)

    def escalate(self, job_id: int, note: str | None) -> None:
        """Mark a conflict for an admin's review; the worker delivers it (its key is new)."""
        with WriteTransaction(self.db, self.path) as conn:
            conn.execute(
                "UPDATE conflicts SET status = 'escalating', note = ?, review_key = ?, "
                "review_problem = NULL WHERE job_id = ?",
                (note, new_idempotency_key(), job_id),
            )

    def escalation_refused(self, job_id: int, problem: str) -> None:
        """The server refused to open the review: the conflict is the person's again."""
        with WriteTransaction(self.db, self.path) as conn:
            conn.execute(
                "UPDATE conflicts SET status = 'open', review_key = NULL, review_problem = ? "
                "WHERE job_id = ? AND status = 'escalating'",
                (problem, job_id),
            )

    def mark_escalated(self, job_id: int, review_id: str) -> None:
        with WriteTransaction(self.db, self.path) as conn:
            conn.execute(
                "UPDATE conflicts SET status = 'escalated', review_id = ? WHERE job_id = ?",
                (review_id, job_id),
            )

    # -- chained jobs ------------------------------------------------------------------------

    def next_chained(self, entity_key: str, after_id: int) -> tuple[int, dict[str, Any]] | None:
        """The first job of ``entity_key`` after ``after_id`` still waiting for its base."""
        with storage_errors(self.path):
            row = (
                connection(self.db)
                .execute(
                    "SELECT id, payload FROM jobs WHERE entity_key = ? AND id > ? "
                    "AND finished_at IS NULL AND chained = 1 AND status = 'pending' "
                    "ORDER BY id LIMIT 1",
                    (entity_key, after_id),
                )
                .fetchone()
            )
        return None if row is None else (int(row[0]), json.loads(row[1]))

    def rebase(self, job_id: int, base_version: int) -> None:
        """A chained job gets its base version: it may be sent now."""
        with WriteTransaction(self.db, self.path) as conn:
            conn.execute(REBASE_JOB, (base_version, job_id))

    # -- shared ------------------------------------------------------------------------------

    @staticmethod
    def _close_conflict(
        conn: sqlite3.Connection,
        job_id: int,
        resolution: dict[str, Any],
        now: float,
        *,
        overwrite: bool = False,
    ) -> None:
        """Close a job's conflict. Without ``overwrite`` only an open one: a conflicted job
        that left another way (retried, discarded) takes its conflict along, or resolving it
        later would revive the job; a resolution then writes the person's decision over."""
        still_open = "" if overwrite else " AND status != 'resolved'"
        conn.execute(
            "UPDATE conflicts SET status = 'resolved', resolved_at = ?, resolution = ? "
            f"WHERE job_id = ?{still_open}",
            (now, json.dumps(resolution), job_id),
        )

    @staticmethod
    def _audit(
        conn: sqlite3.Connection,
        action: str,
        job_id: int,
        entity_key: str | None,
        detail: Any,
        now: float,
    ) -> None:
        conn.execute(
            "INSERT INTO audit_log (at, action, job_id, entity_key, detail) VALUES (?, ?, ?, ?, ?)",
            (now, action, job_id, entity_key, json.dumps(detail)),
        )
