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

import contextlib
import json
import random
import sqlite3
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import peewee as pw

from app.records import PAYLOAD_SCHEMA_VERSION
from app.states import AttemptOutcome, JobStatus, Reason, ReplyKind
from app.store.backoff import backoff_delay
from app.store.db import WriteTransaction, connection
from app.store.errors import storage_errors
from app.store.holds import QueueHolds
from app.store.jobs import (
    PRIORITY_IMPORT,
    PRIORITY_USER,
    STALE,
    TOPIC_WORK_ORDERS,
    ClaimedJob,
    Clock,
    Outcome,
    QueueConfig,
    Stale,
    entities_with_open_jobs,
    new_idempotency_key,
)
from app.store.queue_sweeps import QueueSweeps
from app.store.statements import (
    ACK_MANY,
    CLAIM,
    INSERT_ATTEMPT,
    INSERT_FIRST_JOB,
    INSERT_JOB,
    INSERT_WAITING_JOB,
    REBASE_NEXT,
)

__all__ = [
    "PRIORITY_IMPORT",
    "PRIORITY_USER",
    "ClaimedJob",
    "JobQueue",
    "Outcome",
    "QueueConfig",
    "entities_with_open_jobs",
]

_NORMAL = 1  # PRAGMA synchronous levels: 0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA


class JobQueue(QueueSweeps, QueueHolds):
    """The queue over one open database. Methods are synchronous; call them off the UI loop.

    Its sweeps are in `app.store.queue_sweeps`, the jobs held for a person (dead letters,
    conflicts) in `app.store.holds`."""

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
        idempotency_key: str | None = None,
        waits_for: str | None = None,
    ) -> int:
        """Add a job; inside an outer ``WriteTransaction`` it commits with the caller's change.

        The idempotency key is generated here, once, and never changes across retries.
        A job enqueued behind outstanding jobs for the same entity is *chained*: its base
        version is filled in by the acknowledgement of the job before it. ``new_entity``
        says the entity was created in this transaction with a fresh id, so it has no jobs.
        ``idempotency_key`` is given when the caller fixed it already (an attachment's id);
        ``waits_for`` names another entity whose open create holds this job back (an upload
        waits for its work order to exist on the server, yet never blocks its edits).
        """
        now = self.clock()
        body = orjson.dumps(payload).decode()
        params: tuple[Any, ...] = (
            topic,
            body,
            PAYLOAD_SCHEMA_VERSION,
            idempotency_key or new_idempotency_key(),
            entity_key,
            base_version,
            priority,
            now,
            correlation_id or str(uuid.uuid4()),
        )
        if waits_for is not None:
            statement, params = INSERT_WAITING_JOB, (*params, waits_for)
        else:
            statement = INSERT_FIRST_JOB if new_entity else INSERT_JOB
        with storage_errors(self.path):
            cursor = connection(self.db).execute(statement, params)
            job_id = cursor.lastrowid
        assert job_id is not None
        return job_id

    # -- claim -------------------------------------------------------------------------------

    def claim(
        self, worker_id: str, limit: int = 1, topic: str = TOPIC_WORK_ORDERS
    ) -> list[ClaimedJob]:
        """Lease up to ``limit`` ready jobs of ``topic`` to ``worker_id`` in one statement.

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
        with storage_errors(self.path), self.unsynced() as conn:
            rows = conn.execute(CLAIM, (worker_id, until, now, now, topic, limit)).fetchall()
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

    @contextlib.contextmanager
    def unsynced(self) -> Iterator[sqlite3.Connection]:
        """The thread's connection, its commits meanwhile without an fsync (``synchronous=
        NORMAL``), for writes a power cut may forget because they are learnt again: a lease
        (its expiry), an upload's offset (the server's ``HEAD``). A process crash loses
        nothing either way (WAL pages are in the OS), and the next fsynced commit makes
        them durable too. Inside an open transaction the store's durability stays."""
        conn = connection(self.db)
        relax = not conn.in_transaction and self._synchronous > _NORMAL
        if relax:
            conn.execute("PRAGMA synchronous=NORMAL")
        try:
            yield conn
        finally:
            if relax:
                conn.execute(f"PRAGMA synchronous={self._synchronous}")

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

    @staticmethod
    def _rebase_next(conn: sqlite3.Connection, job: ClaimedJob, version: int) -> None:
        conn.execute(REBASE_NEXT, (version, job.entity_key, job.id))

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
                job,
                JobStatus.DEAD,
                replace(outcome, error=reason, code=Reason.GAVE_UP),
                now,
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

    def refused(self, job: ClaimedJob, outcome: Outcome, retry_after: float) -> bool:
        """The server declined the job unseen, for its load (`app.sync.errors.declined`),
        and said when to come back: pending again exactly then (at most the backoff's cap),
        the claim not counted as an attempt, so a storm neither stretches the backoff nor
        gives an edit up. False if the lease was lost meanwhile."""
        now = self.clock()
        delay = min(max(retry_after, 0.0), self.config.backoff.cap)
        with WriteTransaction(self.db, self.path) as conn:
            cursor = conn.execute(
                "UPDATE jobs SET status = 'pending', locked_by = NULL, locked_until = NULL, "
                "attempt_count = MAX(attempt_count - 1, 0), next_attempt_at = ?, "
                "last_error = ?, updated_at = ? "
                "WHERE id = ? AND status = 'leased' AND locked_until = ? AND locked_by = ?",
                (now + delay, outcome.error, now, job.id, job.locked_until, job.locked_by),
            )
            if cursor.rowcount == 0:
                return False
            self._record_attempt(conn, job, AttemptOutcome.RETRY, outcome, now)
        return True

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

    def progress(self, job: ClaimedJob) -> bool:
        """A step of a long job went through (an upload's chunk): back to pending, due at
        once, its attempts counted from zero again (failures count from the last step that
        moved). No attempt row: a step is not an outcome. False if the lease was lost."""
        now = self.clock()
        with WriteTransaction(self.db, self.path) as conn:
            cursor = conn.execute(
                "UPDATE jobs SET status = 'pending', locked_by = NULL, locked_until = NULL, "
                "attempt_count = 0, next_attempt_at = ?, last_error = NULL, updated_at = ? "
                "WHERE id = ? AND status = 'leased' AND locked_until = ? AND locked_by = ?",
                (now, now, job.id, job.locked_until, job.locked_by),
            )
        return cursor.rowcount == 1

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
    ) -> tuple[Any, ...]:
        duration = outcome.duration_ms
        if duration is None:
            duration = max(now - job.claimed_at, 0.0) * 1000.0
        kind, code = outcome.kind, outcome.code
        if result is AttemptOutcome.DONE:
            kind, code = kind or ReplyKind.SUCCESS, code or Reason.APPLIED
        return (
            job.id,
            job.claimed_at,
            duration,
            result,
            outcome.http_status,
            outcome.error,
            kind,
            code,
        )

    # -- counters ----------------------------------------------------------------------------

    def bump(self, name: str, amount: int = 1) -> None:
        self.bump_many([(name, amount)])

    def bump_many(self, amounts: Iterable[tuple[str, int]]) -> None:
        """Add to persistent counters, in the caller's transaction when there is one."""
        with WriteTransaction(self.db, self.path) as conn:
            self._bump_many(conn, amounts)
