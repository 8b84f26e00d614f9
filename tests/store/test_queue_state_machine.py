"""The job queue against a plain in-memory model, driven by a hypothesis state machine.

Two workers claim, ack, retry, dead-letter, conflict and release; the clock moves; expired
leases are reclaimed; dead jobs are retried (edited or not) or discarded. After every step
the database must agree with the model: statuses, leases, attempt counts, idempotency keys,
schedules and the attempt history, plus the queue's own invariants (claim order, per-entity
order, one holder per job).
"""

from __future__ import annotations

import random
import shutil
import sqlite3
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from store_support import FakeClock

from app.store.backoff import BackoffPolicy
from app.store.db import open_database
from app.store.errors import StoreError
from app.store.queue import ClaimedJob, JobQueue, Outcome, QueueConfig

LEASE = 30.0
MAX_ATTEMPTS = 3
# No jitter: the model can compute every next_attempt_at exactly.
POLICY = BackoffPolicy(initial=1.0, base=2.0, cap=20.0, jitter=0.0)
ENTITIES = ("wo-a", "wo-b", "wo-c", "wo-d")
PRIORITIES = (0, 10, 100)
WORKERS = ("worker-1", "worker-2")
BLOCKING = frozenset({"pending", "leased", "conflict", "dead"})
OUTSTANDING_FOR_OUTCOME = frozenset({"leased", "pending"})


@dataclass
class ModelJob:
    id: int
    entity: str
    priority: int
    payload: dict[str, Any]
    key: str
    next_attempt_at: float
    status: str = "pending"
    attempt_count: int = 0
    locked_by: str | None = None
    locked_until: float | None = None
    attempts: list[str] = field(default_factory=list)

    def unlock(self, status: str) -> None:
        self.status = status
        self.locked_by = None
        self.locked_until = None


@dataclass(frozen=True)
class Handle:
    """What a worker holds after a claim: possibly stale by the time it uses it."""

    worker: str
    job: ClaimedJob


def model_delay(attempt_count: int, retry_after: float | None) -> float:
    delay = min(POLICY.cap, POLICY.initial * POLICY.base ** max(attempt_count - 1, 0))
    if retry_after is not None and retry_after > 0:
        delay = max(delay, min(retry_after, POLICY.cap))
    return delay


class QueueMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="fieldsync-queue-model-"))
        self.path = self.dir / "fieldsync.sqlite3"
        self.clock = FakeClock()
        # NORMAL: durability is not what this test is about, and it keeps examples fast.
        self.db = open_database(self.path, synchronous="NORMAL")
        config = QueueConfig(lease_seconds=LEASE, max_attempts=MAX_ATTEMPTS, backoff=POLICY)
        self.queue = JobQueue(self.db, self.path, config, clock=self.clock, rng=random.Random(0))
        self.conn: sqlite3.Connection = self.db.connection()
        self.jobs: dict[int, ModelJob] = {}
        self.handles: list[Handle] = []
        self.keys_ever: set[str] = set()
        self.lease_timeouts = 0
        self.discarded = 0
        self.serial = 0

    def teardown(self) -> None:
        self.db.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- helpers -------------------------------------------------------------------------------

    def _key_of(self, job_id: int) -> str:
        row = self.conn.execute("SELECT idempotency_key FROM jobs WHERE id = ?", (job_id,))
        return str(row.fetchone()[0])

    def _claimable(self) -> list[ModelJob]:
        now = self.clock.now
        ready = [
            job
            for job in self.jobs.values()
            if job.status == "pending"
            and job.next_attempt_at <= now
            and not any(
                other.entity == job.entity and other.id < job.id and other.status in BLOCKING
                for other in self.jobs.values()
            )
        ]
        return sorted(ready, key=lambda job: (-job.priority, job.id))

    def _jobs_in(self, *statuses: str) -> list[ModelJob]:
        return sorted(
            (job for job in self.jobs.values() if job.status in statuses), key=lambda j: j.id
        )

    def _finish(self, handle: Handle, status: str, result: str) -> None:
        job = self.jobs[handle.job.id]
        if job.status in OUTSTANDING_FOR_OUTCOME:
            assert result == status
            job.unlock(status)
            job.attempts.append(status)
        else:
            assert result == "stale", (job, result)

    # -- rules ---------------------------------------------------------------------------------

    @initialize(count=st.integers(0, 4), entity=st.sampled_from(ENTITIES))
    def seed_jobs(self, count: int, entity: str) -> None:
        for _ in range(count):
            self.enqueue(entity, 100)

    @rule(entity=st.sampled_from(ENTITIES), priority=st.sampled_from(PRIORITIES))
    def enqueue(self, entity: str, priority: int) -> None:
        self.serial += 1
        payload = {"op": "update", "fields": {"notes": f"edit {self.serial}"}}
        job_id = self.queue.enqueue("work_orders", payload, entity, priority=priority)
        assert job_id not in self.jobs
        key = self._key_of(job_id)
        assert key not in self.keys_ever, "idempotency keys are never reused"
        self.keys_ever.add(key)
        self.jobs[job_id] = ModelJob(job_id, entity, priority, payload, key, self.clock.now)

    @rule(worker=st.sampled_from(WORKERS), limit=st.integers(1, 3))
    def claim(self, worker: str, limit: int) -> None:
        expected = self._claimable()[:limit]
        claimed = self.queue.claim(worker, limit)
        assert [job.id for job in claimed] == [job.id for job in expected]
        for got in claimed:
            job = self.jobs[got.id]
            job.status = "leased"
            job.attempt_count += 1
            job.locked_by = worker
            job.locked_until = got.locked_until
            assert got.locked_until == self.clock.now + LEASE
            assert got.idempotency_key == job.key
            assert got.payload == job.payload
            assert got.entity_key == job.entity
            assert got.priority == job.priority
            assert got.attempt_count == job.attempt_count
            self.handles.append(Handle(worker, got))
        # A real clock moves between claims; leases are told apart by their expiry time
        # (see test_stale_handle_cannot_touch_a_lease_claimed_at_the_same_instant).
        self.clock.advance(0.001)

    @precondition(lambda self: self.handles)
    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        handle = data.draw(st.sampled_from(self.handles))
        job = self.jobs[handle.job.id]
        before_done = job.status == "done"
        acked = self.queue.ack(handle.job, Outcome(http_status=200))
        # Done is accepted once, from leased or pending (a lease that expired in flight);
        # a second ack of a done job changes nothing.
        assert acked is (job.status in OUTSTANDING_FOR_OUTCOME)
        if before_done:
            assert not acked
        if acked:
            job.unlock("done")
            job.attempts.append("done")

    @precondition(lambda self: self.handles)
    @rule(
        data=st.data(),
        retry_after=st.none() | st.sampled_from([0.0, 3.0, 15.0, 10_000.0]),
    )
    def retry(self, data: st.DataObject, retry_after: float | None) -> None:
        handle = data.draw(st.sampled_from(self.handles))
        job = self.jobs[handle.job.id]
        result = self.queue.retry(
            handle.job, Outcome(error="HTTP 503", http_status=503), retry_after=retry_after
        )
        if handle.job.attempt_count >= MAX_ATTEMPTS:
            self._finish(handle, "dead", result)
            return
        live = job.status == "leased" and job.locked_until == handle.job.locked_until
        if not live:
            assert result == "stale"
            return
        assert result == "pending"
        job.unlock("pending")
        job.next_attempt_at = self.clock.now + model_delay(handle.job.attempt_count, retry_after)
        job.attempts.append("retry")

    @precondition(lambda self: self.handles)
    @rule(data=st.data())
    def dead(self, data: st.DataObject) -> None:
        handle = data.draw(st.sampled_from(self.handles))
        result = self.queue.dead(handle.job, Outcome(error="HTTP 422", http_status=422))
        self._finish(handle, "dead", result)

    @precondition(lambda self: self.handles)
    @rule(data=st.data())
    def conflict(self, data: st.DataObject) -> None:
        handle = data.draw(st.sampled_from(self.handles))
        result = self.queue.conflict(handle.job, Outcome(error="HTTP 409", http_status=409))
        self._finish(handle, "conflict", result)

    @precondition(lambda self: self.handles)
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        chosen = data.draw(st.lists(st.sampled_from(self.handles), min_size=1, max_size=3))
        expected = 0
        for handle in chosen:
            job = self.jobs[handle.job.id]
            if job.status == "leased" and job.locked_until == handle.job.locked_until:
                expected += 1
                job.unlock("pending")
                job.attempt_count = max(job.attempt_count - 1, 0)
                job.next_attempt_at = min(job.next_attempt_at, self.clock.now)
        assert self.queue.release([handle.job for handle in chosen]) == expected

    # -1000.0003: the device clock set back (an odd step no sum of the others cancels, so
    # leases stay told apart by their expiry time).
    @rule(seconds=st.sampled_from([0.0, 0.5, 1.0, 4.0, 16.0, 29.0, 31.0, 120.0, -1000.0003]))
    def advance_clock(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule()
    def clamp_times(self) -> None:
        now = self.clock.now
        far = [j for j in self._jobs_in("pending") if j.next_attempt_at > now + POLICY.cap]
        long = [
            j
            for j in self._jobs_in("leased")
            if j.locked_until is not None and j.locked_until > now + LEASE
        ]
        assert self.queue.clamp_times() == len(far) + len(long)
        for job in far:
            row = self.conn.execute("SELECT next_attempt_at FROM jobs WHERE id = ?", (job.id,))
            job.next_attempt_at = row.fetchone()[0]
            assert now <= job.next_attempt_at <= now + POLICY.cap
        for job in long:
            job.locked_until = now + LEASE

    @rule()
    def reclaim_expired(self) -> None:
        now = self.clock.now
        expired = [
            job
            for job in self._jobs_in("leased")
            if job.locked_until is not None and job.locked_until <= now
        ]
        assert self.queue.reclaim_expired() == len(expired)
        for job in expired:
            job.unlock("pending")
            job.next_attempt_at = min(job.next_attempt_at, now)
            job.attempts.append("lease_expired")
        self.lease_timeouts += len(expired)

    @precondition(lambda self: any(j.status in ("dead", "conflict") for j in self.jobs.values()))
    @rule(data=st.data(), change=st.sampled_from(["none", "same", "edited"]))
    def retry_dead(self, data: st.DataObject, change: str) -> None:
        job = data.draw(st.sampled_from(self._jobs_in("dead", "conflict")))
        payload: dict[str, Any] | None = None
        if change == "same":
            payload = dict(job.payload)
        elif change == "edited":
            self.serial += 1
            payload = {"op": "update", "fields": {"notes": f"fixed {self.serial}"}}
        key = self.queue.retry_dead(job.id, payload)
        if change == "edited":
            assert key != job.key, "an edited payload is a new request: new key"
            assert key not in self.keys_ever
            self.keys_ever.add(key)
            job.key = key
            assert payload is not None
            job.payload = payload
        else:
            assert key == job.key, "an unchanged retry keeps its idempotency key"
        job.unlock("pending")
        job.attempt_count = 0
        job.next_attempt_at = self.clock.now

    @precondition(
        lambda self: any(j.status not in ("dead", "conflict") for j in self.jobs.values())
    )
    @rule(data=st.data())
    def retry_dead_refused(self, data: st.DataObject) -> None:
        job = data.draw(st.sampled_from(self._jobs_in("pending", "leased", "done")))
        with pytest.raises(StoreError, match="not a dead or conflicted job"):
            self.queue.retry_dead(job.id)
        with pytest.raises(StoreError, match="not a dead or conflicted job"):
            self.queue.discard(job.id)

    @precondition(lambda self: any(j.status in ("dead", "conflict") for j in self.jobs.values()))
    @rule(data=st.data())
    def discard(self, data: st.DataObject) -> None:
        job = data.draw(st.sampled_from(self._jobs_in("dead", "conflict")))
        entry = self.queue.discard(job.id)
        assert entry["id"] == job.id
        assert entry["idempotency_key"] == job.key
        assert entry["payload"] == job.payload
        job.unlock("done")
        self.discarded += 1

    # -- invariants ----------------------------------------------------------------------------

    @invariant()
    def database_matches_model(self) -> None:
        found = {
            row[0]: row
            for row in self.conn.execute(
                "SELECT id, status, idempotency_key, attempt_count, locked_by, locked_until, "
                "next_attempt_at, payload, entity_key, priority, finished_at FROM jobs"
            )
        }
        assert set(found) == set(self.jobs)
        for job_id, job in self.jobs.items():
            (_, status, key, attempts, locked_by, locked_until, next_at, payload, entity, prio) = (
                found[job_id][:10]
            )
            fin = found[job_id][10]
            assert status == job.status, job
            # jobs_entity_open keys on it: set when done and only then.
            assert (fin is not None) == (status == "done"), (job, fin)
            assert key == job.key, job
            assert attempts == job.attempt_count, job
            assert (locked_by, locked_until) == (job.locked_by, job.locked_until), job
            assert (entity, prio) == (job.entity, job.priority)
            assert payload is not None
            if status == "pending":
                assert next_at == job.next_attempt_at, job

    @invariant()
    def idempotency_keys_unique(self) -> None:
        keys = [row[0] for row in self.conn.execute("SELECT idempotency_key FROM jobs")]
        assert len(keys) == len(set(keys))

    @invariant()
    def per_entity_order(self) -> None:
        # A leased job never overtook an earlier job of its entity that is not yet done.
        overtaken = self.conn.execute(
            "SELECT l.id, e.id FROM jobs AS l JOIN jobs AS e "
            "ON e.entity_key = l.entity_key AND e.id < l.id "
            "WHERE l.status = 'leased' AND e.status != 'done'"
        ).fetchall()
        assert overtaken == []

    @invariant()
    def one_holder_per_job(self) -> None:
        holders: dict[int, set[str]] = {}
        for handle in self.handles:
            job = self.jobs[handle.job.id]
            if job.status == "leased" and job.locked_until == handle.job.locked_until:
                holders.setdefault(job.id, set()).add(handle.worker)
                assert handle.worker == job.locked_by
        assert all(len(workers) == 1 for workers in holders.values())

    @invariant()
    def attempt_history_matches(self) -> None:
        history: dict[int, list[str]] = {}
        for job_id, outcome in self.conn.execute(
            "SELECT job_id, outcome FROM attempts ORDER BY id"
        ):
            history.setdefault(job_id, []).append(outcome)
        for job_id, job in self.jobs.items():
            assert history.get(job_id, []) == job.attempts, job

    @invariant()
    def counters_match(self) -> None:
        counters = dict(self.conn.execute("SELECT name, value FROM counters").fetchall())
        assert counters.get("lease_timeouts", 0) == self.lease_timeouts
        assert counters.get("jobs_discarded", 0) == self.discarded


QueueMachine.TestCase.settings = settings(
    max_examples=80,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestQueueAgainstModel = QueueMachine.TestCase
