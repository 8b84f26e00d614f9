"""The durable job queue: enqueue with the local change, lease-based claims, outcomes.

The life of a job (``JobStatus``; each arrow out of LEASED writes an ``AttemptOutcome`` row)::

                  enqueue
                     |
                     v              claim
     +-------->  PENDING  ----------------------------->  LEASED
     |            |  ^  ^      release, lease expired       |  |  |
     |            |  |  +-----------------------------------+  |  |  ack
     |            |  +-------- retry (transient, backoff) -----+  +--------> DONE
     |            |                                            |              ^
     |            | hold (behind its entity's conflict)        | dead,        |
     |            v                                            v conflict     |
     +----- retry_dead, resolve (resend) -------------  DEAD, CONFLICT  ------+
                                                           discard, resolve (drop)

DONE is the only end, reached when the server acknowledged the job (``ack`` also accepts a
PENDING job whose lease expired while the reply was on its way) or a person gave it up
(``discard``, ``discard_after``, a resolve that drops it: an ``audit_log`` row each). A chained
job (queued behind another job of its entity) waits in PENDING until the job before it is
acknowledged and rebases it (``base_version``). Done rows are pruned after retention.

Every state change is one SQLite transaction (``BEGIN IMMEDIATE``, or a single statement, which
is its own write transaction), so a process killed at any instant leaves each job either as it
was or as it became, never between. A claim only leases a job, and an expired lease returns it
to ``pending`` (``reclaim_expired``), so a crashed worker never strands work.

Claims honour priority (highest first, oldest first within it) and per-entity order: a job is
not claimable while an earlier job for the same entity is pending, leased, in conflict or dead,
yet a stuck entity never blocks the others.

This class is the only writer of the ``jobs``, ``attempts``, ``conflicts`` (holds) and
``audit_log`` tables.
"""

from __future__ import annotations

import json
import random
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson
import peewee as pw

from app.records import PAYLOAD_SCHEMA_VERSION
from app.states import AttemptOutcome, JobStatus
from app.store.backoff import BackoffPolicy, backoff_delay
from app.store.db import WriteTransaction, connection
from app.store.errors import StoreError, storage_errors
from app.store.statements import (
    ACK_MANY,
    CLAIM,
    INSERT_ATTEMPT,
    INSERT_FIRST_JOB,
    INSERT_JOB,
)

__all__ = ["ClaimedJob", "JobQueue", "Outcome", "QueueConfig"]

PRIORITY_USER = 100
PRIORITY_IMPORT = 10
PRIORITY_BACKGROUND = 0

Clock = Callable[[], float]

#: What an outcome method returns when the lease was lost and nothing changed: not a status.
Stale = Literal["stale"]
STALE: Stale = "stale"


@dataclass(frozen=True)
class QueueConfig:
    lease_seconds: float = 60.0
    max_attempts: int = 12
    backoff: BackoffPolicy = field(default_factory=BackoffPolicy)
    done_retention_seconds: float = 7 * 86400.0


@dataclass(frozen=True)
class ClaimedJob:
    id: int
    topic: str
    payload: dict[str, Any]
    payload_version: int
    idempotency_key: str
    entity_key: str
    base_version: int | None
    priority: int
    attempt_count: int
    correlation_id: str
    created_at: float
    claimed_at: float
    locked_until: float
    #: The worker holding the lease: with locked_until, the fencing token of this claim.
    locked_by: str = ""


@dataclass(frozen=True)
class Outcome:
    """What one attempt ended with; recorded in the attempt history."""

    error: str | None = None
    http_status: int | None = None
    duration_ms: float | None = None


_NORMAL = 1  # PRAGMA synchronous levels: 0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA


def new_idempotency_key() -> str:
    return str(uuid.uuid4())


def entities_with_open_jobs(
    conn: sqlite3.Connection, entity_keys: Iterable[str], *, chained_only: bool = False
) -> set[str]:
    """Which of these entities have a job still outstanding (pending, leased, in conflict or
    dead); with ``chained_only``, one waiting for its base version. One query per 500 keys."""
    found: set[str] = set()
    keys = sorted(set(entity_keys))
    chained = " AND chained = 1" if chained_only else ""
    for start in range(0, len(keys), 500):
        chunk = keys[start : start + 500]
        found.update(
            key
            for (key,) in conn.execute(
                f"SELECT DISTINCT entity_key FROM jobs WHERE entity_key IN "
                f"({', '.join('?' for _ in chunk)}) "
                f"AND finished_at IS NULL{chained}",
                chunk,
            )
        )
    return found


def _close_conflict(conn: sqlite3.Connection, job_id: int, outcome: str, now: float) -> None:
    """A conflicted job left the conflict another way (retried or discarded from the dead
    letters): its conflict is closed with it, or resolving it later would revive the job."""
    conn.execute(
        "UPDATE conflicts SET status = 'resolved', resolved_at = ?, resolution = ? "
        "WHERE job_id = ? AND status != 'resolved'",
        (now, json.dumps({"outcome": outcome}), job_id),
    )


class JobQueue:
    """The queue over one open database. Methods are synchronous; call them off the UI loop."""

    def __init__(
        self,
        db: pw.SqliteDatabase,
        path: Path,
        config: QueueConfig | None = None,
        *,
        clock: Clock = time.time,
        rng: random.Random | None = None,
    ) -> None:
        self.db = db
        self.path = path
        self.config = config or QueueConfig()
        self.clock = clock
        self.rng = rng or random.Random()
        #: The durability the store was opened with, restored after each claim.
        self._synchronous = int(connection(db).execute("PRAGMA synchronous").fetchone()[0])

    # -- enqueue -----------------------------------------------------------------------------

    def enqueue(
        self,
        topic: str,
        payload: dict[str, Any],
        entity_key: str,
        *,
        priority: int = PRIORITY_USER,
        base_version: int | None = None,
        correlation_id: str | None = None,
        new_entity: bool = False,
    ) -> int:
        """Add a job; inside an outer ``WriteTransaction`` it commits with the caller's change.

        The idempotency key is generated here, once, and never changes across retries.
        A job enqueued behind outstanding jobs for the same entity is *chained*: its base
        version is filled in by the acknowledgement of the job before it. ``new_entity``
        says the entity was created in this transaction with a fresh id, so it has no jobs.
        """
        now = self.clock()
        body = orjson.dumps(payload).decode()
        with storage_errors(self.path):
            cursor = connection(self.db).execute(
                INSERT_FIRST_JOB if new_entity else INSERT_JOB,
                (
                    topic,
                    body,
                    PAYLOAD_SCHEMA_VERSION,
                    new_idempotency_key(),
                    entity_key,
                    base_version,
                    priority,
                    now,
                    correlation_id or str(uuid.uuid4()),
                ),
            )
            job_id = cursor.lastrowid
        assert job_id is not None
        return job_id

    # -- claim -------------------------------------------------------------------------------

    def claim(self, worker_id: str, limit: int = 1) -> list[ClaimedJob]:
        """Lease up to ``limit`` ready jobs to ``worker_id`` in one statement.

        Two processes on one database never hold the same job: the UPDATE is a single
        statement, so it is its own write transaction (it takes the write lock before it reads,
        like ``BEGIN IMMEDIATE``) and only takes rows that are still ``pending``.

        The claim commits without an fsync (``synchronous=NORMAL`` for this one statement):
        a lease is not data. A power cut can forget it, which is the same as its expiry: the
        job is pending again and is sent again under its key. The outcome that follows is
        fsynced, and with it this claim. Edits and outcomes keep the store's durability; a
        process crash (SIGKILL) loses nothing either way, WAL pages being in the OS already.
        """
        now = self.clock()
        until = now + self.config.lease_seconds
        with storage_errors(self.path):
            conn = connection(self.db)
            relax = not conn.in_transaction and self._synchronous > _NORMAL
            if relax:
                conn.execute("PRAGMA synchronous=NORMAL")
            try:
                rows = conn.execute(CLAIM, (worker_id, until, now, now, limit)).fetchall()
            finally:
                if relax:
                    conn.execute(f"PRAGMA synchronous={self._synchronous}")
        jobs = [
            ClaimedJob(
                id=row[0],
                topic=row[1],
                payload=orjson.loads(row[2]),
                payload_version=row[3],
                idempotency_key=row[4],
                entity_key=row[5],
                base_version=row[6],
                priority=row[7],
                attempt_count=row[8],
                correlation_id=row[9],
                created_at=row[10],
                claimed_at=now,
                locked_until=row[11],
                locked_by=worker_id,
            )
            for row in rows
        ]
        jobs.sort(key=lambda job: (-job.priority, job.id))
        return jobs

    # -- outcomes ----------------------------------------------------------------------------

    def ack(
        self,
        job: ClaimedJob,
        outcome: Outcome | None = None,
        *,
        result_version: int | None = None,
    ) -> bool:
        """The server applied the job (or had already: a replay). Returns False if it was
        already finished by someone else."""
        return self.ack_many([(job, outcome or Outcome(), result_version)]) == 1

    def ack_many(self, results: Iterable[tuple[ClaimedJob, Outcome, int | None]]) -> int:
        """Mark many jobs done in one commit (the batch path). Returns how many changed.

        Done is accepted from ``leased`` or ``pending`` (a lease that expired while the
        response was on its way): the server's idempotency key made the effect single either
        way. ``result_version`` rebases the next chained job of the same entity. One UPDATE
        per 500 jobs and one batch of attempt rows, not a statement pair per job.
        """
        now = self.clock()
        results = list(results)
        if not results:
            return 0
        with WriteTransaction(self.db, self.path) as conn:
            done: set[int] = set()
            for start in range(0, len(results), 500):
                ids = [job.id for job, _, _ in results[start : start + 500]]
                done.update(row[0] for row in conn.execute(ACK_MANY, (now, now, json.dumps(ids))))
            if not done:
                return 0
            conn.executemany(
                INSERT_ATTEMPT,
                [
                    self._attempt_row(job, AttemptOutcome.DONE, outcome, now)
                    for job, outcome, _ in results
                    if job.id in done
                ],
            )
            rebases = [
                (job, version)
                for job, _, version in results
                if version is not None and job.id in done
            ]
            if rebases:
                # One query per batch, instead of a rebase attempt per acknowledged job.
                chained = entities_with_open_jobs(
                    conn, {job.entity_key for job, _ in rebases}, chained_only=True
                )
                for job, version in rebases:
                    if job.entity_key in chained:
                        self._rebase_next(conn, job, version)
        return len(done)

    def _rebase_next(self, conn: sqlite3.Connection, job: ClaimedJob, version: int) -> None:
        conn.execute(
            "UPDATE jobs SET base_version = ?, chained = 0, updated_at = updated_at "
            "WHERE id = (SELECT MIN(id) FROM jobs WHERE entity_key = ? AND id > ? "
            # Spelled as the partial index's condition (jobs_entity_open): `status != 'done'`
            # would scan every later row, an O(n) step per ack and O(n^2) per drain.
            "AND finished_at IS NULL) AND chained = 1",
            (version, job.entity_key, job.id),
        )

    def retry(
        self, job: ClaimedJob, outcome: Outcome, *, retry_after: float | None = None
    ) -> JobStatus | Stale:
        """A transient failure: back to pending after a backoff, or dead past the limit.

        Returns the job's new status (``PENDING`` or ``DEAD``); ``STALE`` when the lease was
        lost meanwhile and another worker owns the job now (nothing is changed then).
        """
        now = self.clock()
        if job.attempt_count >= self.config.max_attempts:
            reason = f"gave up after {job.attempt_count} attempts: {outcome.error}"
            return self._finish(
                job, JobStatus.DEAD, Outcome(reason, outcome.http_status, outcome.duration_ms), now
            )
        delay = backoff_delay(
            job.attempt_count, self.config.backoff, self.rng, retry_after=retry_after
        )
        with WriteTransaction(self.db, self.path) as conn:
            cursor = conn.execute(
                "UPDATE jobs SET status = 'pending', locked_by = NULL, locked_until = NULL, "
                "next_attempt_at = ?, last_error = ?, updated_at = ? "
                "WHERE id = ? AND status = 'leased' AND locked_until = ? AND locked_by = ?",
                (now + delay, outcome.error, now, job.id, job.locked_until, job.locked_by),
            )
            if cursor.rowcount == 0:
                return STALE
            self._record_attempt(conn, job, AttemptOutcome.RETRY, outcome, now)
        return JobStatus.PENDING

    def dead(self, job: ClaimedJob, outcome: Outcome) -> JobStatus | Stale:
        """A permanent failure: dead-lettered with the reason, kept for review."""
        return self._finish(job, JobStatus.DEAD, outcome, self.clock())

    def conflict(self, job: ClaimedJob, outcome: Outcome) -> JobStatus | Stale:
        """The server holds a newer version: the job waits for a person, not for a retry."""
        return self._finish(job, JobStatus.CONFLICT, outcome, self.clock())

    def _finish(
        self, job: ClaimedJob, status: JobStatus, outcome: Outcome, now: float
    ) -> JobStatus | Stale:
        """Move a leased (or expired-lease pending) job to DEAD or CONFLICT (or STALE)."""
        with WriteTransaction(self.db, self.path) as conn:
            cursor = conn.execute(
                # Not finished: a dead or conflicted job still holds back its work order.
                "UPDATE jobs SET status = ?, locked_by = NULL, locked_until = NULL, "
                "last_error = ?, updated_at = ? "
                "WHERE id = ? AND status IN ('leased', 'pending')",
                (status, outcome.error, now, job.id),
            )
            if cursor.rowcount == 0:
                return STALE
            self._record_attempt(conn, job, AttemptOutcome(status.value), outcome, now)
        return status

    def release(self, jobs: Sequence[ClaimedJob]) -> int:
        """Give leases back unsent (graceful stop); the claim does not count as an attempt."""
        now = self.clock()
        released = 0
        with WriteTransaction(self.db, self.path) as conn:
            for job in jobs:
                cursor = conn.execute(
                    "UPDATE jobs SET status = 'pending', locked_by = NULL, locked_until = NULL, "
                    "attempt_count = MAX(attempt_count - 1, 0), "
                    "next_attempt_at = MIN(next_attempt_at, ?), updated_at = ? "
                    "WHERE id = ? AND status = 'leased' AND locked_until = ? AND locked_by = ?",
                    (now, now, job.id, job.locked_until, job.locked_by),
                )
                released += cursor.rowcount
        return released

    def _record_attempt(
        self,
        conn: sqlite3.Connection,
        job: ClaimedJob,
        result: AttemptOutcome,
        outcome: Outcome,
        now: float,
    ) -> None:
        conn.execute(INSERT_ATTEMPT, self._attempt_row(job, result, outcome, now))

    @staticmethod
    def _attempt_row(
        job: ClaimedJob, result: AttemptOutcome, outcome: Outcome, now: float
    ) -> tuple[int, float, float, str, int | None, str | None]:
        duration = outcome.duration_ms
        if duration is None:
            duration = max(now - job.claimed_at, 0.0) * 1000.0
        return (job.id, job.claimed_at, duration, result, outcome.http_status, outcome.error)

    # -- maintenance -------------------------------------------------------------------------

    def reclaim_expired(self) -> int:
        """Return jobs whose lease ran out to pending; count them as lease timeouts."""
        now = self.clock()
        with WriteTransaction(self.db, self.path) as conn:
            rows = conn.execute(
                # A leased job was due when claimed: it is due now, even if the clock went
                # back since (clamp_times only sees pending jobs).
                "UPDATE jobs SET status = 'pending', locked_by = NULL, locked_until = NULL, "
                "next_attempt_at = MIN(next_attempt_at, ?), "
                "last_error = COALESCE(last_error, 'lease expired'), updated_at = ? "
                "WHERE status = 'leased' AND locked_until <= ? "
                "RETURNING id, locked_until",
                (now, now, now),
            ).fetchall()
            for job_id, _ in rows:
                conn.execute(
                    INSERT_ATTEMPT,
                    (
                        job_id,
                        now,
                        None,
                        AttemptOutcome.LEASE_EXPIRED,
                        None,
                        "lease expired (worker stopped?)",
                    ),
                )
            if rows:
                self._bump(conn, "lease_timeouts", len(rows))
        return len(rows)

    def expire_orphaned_leases(self) -> int:
        """Call holding the worker lock, before `reclaim_expired`. Only the lock holder claims,
        so every lease found then belongs to a worker that died (SIGKILL, power loss): expire
        it at once instead of making its edits wait out the lease after every crash."""
        with WriteTransaction(self.db, self.path) as conn:
            cursor = conn.execute("UPDATE jobs SET locked_until = 0 WHERE status = 'leased'")
        return int(cursor.rowcount)

    def clamp_times(self) -> int:
        """Guard against the device clock moving: no wait longer than the backoff cap, no
        lease longer than the lease time. Spread clamped retries over the cap so a clock set
        back a day neither strands jobs for a day nor fires them all at once."""
        now = self.clock()
        cap = self.config.backoff.cap
        changed = 0
        with WriteTransaction(self.db, self.path) as conn:
            ids = conn.execute(
                "SELECT id FROM jobs WHERE status = 'pending' AND next_attempt_at > ?",
                (now + cap,),
            ).fetchall()
            for (job_id,) in ids:
                conn.execute(
                    "UPDATE jobs SET next_attempt_at = ? WHERE id = ?",
                    (now + self.rng.uniform(0.0, cap), job_id),
                )
            changed += len(ids)
            cursor = conn.execute(
                "UPDATE jobs SET locked_until = ? WHERE status = 'leased' AND locked_until > ?",
                (now + self.config.lease_seconds, now + self.config.lease_seconds),
            )
            changed += cursor.rowcount
        return changed

    def prune_done(self, *, batch: int = 5000) -> int:
        """Delete done jobs (and their attempts) older than the retention age."""
        cutoff = self.clock() - self.config.done_retention_seconds
        total = 0
        while True:
            with WriteTransaction(self.db, self.path) as conn:
                cursor = conn.execute(
                    "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE status = 'done' "
                    "AND finished_at < ? LIMIT ?)",
                    (cutoff, batch),
                )
            total += cursor.rowcount
            if cursor.rowcount < batch:
                return total

    def next_attempt_at(self) -> float | None:
        """When the earliest *claimable* pending job becomes ready (the worker sleeps until
        then). A job behind an earlier outstanding job of its entity does not count: waking
        for a job that cannot be claimed would be a busy poll."""
        with storage_errors(self.path):
            row = (
                connection(self.db)
                .execute(
                    "SELECT MIN(j.next_attempt_at) FROM jobs AS j WHERE j.status = 'pending' "
                    "AND NOT EXISTS (SELECT 1 FROM jobs AS e WHERE e.entity_key = j.entity_key "
                    "AND e.id < j.id AND e.finished_at IS NULL)"
                )
                .fetchone()
            )
        return None if row[0] is None else float(row[0])

    def in_flight(self) -> int:
        """Jobs that will still move without a person: leased, or pending and not held
        behind a conflict or a dead job of the same work order."""
        with storage_errors(self.path):
            conn = connection(self.db)
            # Two index-friendly counts: an OR across both would scan the whole table.
            leased = conn.execute("SELECT COUNT(*) FROM jobs WHERE status = 'leased'").fetchone()
            pending = conn.execute(
                "SELECT COUNT(*) FROM jobs AS j WHERE j.status = 'pending' "
                "AND NOT EXISTS (SELECT 1 FROM jobs AS e WHERE e.entity_key = j.entity_key "
                # finished_at IS NULL is jobs_entity_open's condition: the index is usable.
                "AND e.id < j.id AND e.finished_at IS NULL AND e.status IN ('conflict', 'dead'))"
            ).fetchone()
        return int(leased[0]) + int(pending[0])

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
                new_body = json.dumps(payload, separators=(",", ":"))
                if new_body != body:
                    body, key = new_body, new_idempotency_key()
            conn.execute(
                "UPDATE jobs SET status = 'pending', payload = ?, idempotency_key = ?, "
                "attempt_count = 0, next_attempt_at = ?, finished_at = NULL, updated_at = ? "
                "WHERE id = ?",
                (body, key, now, now, job_id),
            )
            _close_conflict(conn, job_id, "retried", now)
        return str(key)

    def discard(self, job_id: int) -> dict[str, Any]:
        """Give up on a dead or conflicted job; returns its row (as the audit log keeps it,
        with its base version). ``Store.discard`` also settles the work order: call that."""
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
                _close_conflict(conn, row[0], "discarded", now)
                entry = {
                    "id": row[0],
                    "entity_key": row[1],
                    "payload": json.loads(row[2]),
                    "idempotency_key": row[3],
                    "last_error": row[4],
                }
                conn.execute(
                    "INSERT INTO audit_log (at, action, job_id, entity_key, detail) "
                    "VALUES (?, 'discard', ?, ?, ?)",
                    (now, row[0], row[1], json.dumps(entry)),
                )
                entries.append({**entry, "base_version": row[5]})
            if entries:
                self._bump(conn, "jobs_discarded", len(entries))
        return entries

    # -- counters ----------------------------------------------------------------------------

    def _bump(self, conn: sqlite3.Connection, name: str, amount: int) -> None:
        conn.execute(
            "INSERT INTO counters (name, value) VALUES (?, ?) "
            "ON CONFLICT (name) DO UPDATE SET value = value + excluded.value",
            (name, amount),
        )

    def bump(self, name: str, amount: int = 1) -> None:
        with WriteTransaction(self.db, self.path) as conn:
            self._bump(conn, name, amount)
