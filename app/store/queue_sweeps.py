"""The queue's sweeps: expired leases back to pending, clock jumps clamped, done jobs pruned,
and when the worker should wake next. Part of `JobQueue` (see `app.store.queue`)."""

from __future__ import annotations

from app.states import AttemptOutcome, Reason
from app.store.db import WriteTransaction, connection
from app.store.errors import storage_errors
from app.store.jobs import QueueParts
from app.store.statements import INSERT_ATTEMPT, WAITS_FOR_CREATE, WAITS_FOR_HELD_CREATE

__all__ = ["QueueSweeps"]


class QueueSweeps(QueueParts):
    """Maintenance of a `JobQueue`: methods that move jobs no worker is sending."""

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
                        None,
                        Reason.LEASE_EXPIRED,
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
                    "AND e.id < j.id AND e.finished_at IS NULL) "
                    f"AND (j.waits_for IS NULL OR NOT {WAITS_FOR_CREATE})"
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
                "AND e.id < j.id AND e.finished_at IS NULL AND e.status IN ('conflict', 'dead')) "
                f"AND (j.waits_for IS NULL OR NOT {WAITS_FOR_HELD_CREATE})"
            ).fetchone()
        return int(leased[0]) + int(pending[0])
