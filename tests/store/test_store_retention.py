"""Retention: old done jobs and their attempt history are pruned; nothing else is."""

from __future__ import annotations

import pytest
from store_support import FakeClock

from app.store.queue import Outcome, QueueConfig
from app.store.store import Store

RETENTION = 3600.0


@pytest.fixture
def queue_config() -> QueueConfig:
    return QueueConfig(done_retention_seconds=RETENTION, lease_seconds=10 * RETENTION)


def test_prune_done_deletes_old_done_jobs_with_their_attempts(
    store: Store, clock: FakeClock
) -> None:
    queue = store.queue
    old_done = [queue.enqueue("work_orders", {"n": n}, f"old-{n}") for n in range(5)]
    old_other = {
        status: queue.enqueue("work_orders", {"s": status}, f"other-{status}")
        for status in ("dead", "conflict", "leased", "pending", "discarded")
    }
    claimed = {job.id: job for job in queue.claim("worker-1", limit=20)}
    for job_id in old_done:
        queue.retry(claimed[job_id], Outcome(error="flaky"))
    clock.advance(300)
    reclaimed = {job.id: job for job in queue.claim("worker-1", limit=20)}
    for job_id in old_done:
        assert queue.ack(reclaimed[job_id])
    queue.dead(claimed[old_other["dead"]], Outcome(error="HTTP 422"))
    queue.conflict(claimed[old_other["conflict"]], Outcome(error="HTTP 409"))
    queue.dead(claimed[old_other["discarded"]], Outcome(error="HTTP 400"))
    queue.discard(old_other["discarded"])
    queue.release([claimed[old_other["pending"]]])

    clock.advance(RETENTION - 100)
    recent = queue.enqueue("work_orders", {"n": "recent"}, "recent", priority=200)
    [job] = queue.claim("worker-2", limit=1)
    assert job.id == recent
    queue.ack(job)
    clock.advance(200)  # the old ones are now past retention, the recent one is not

    pruned_ids = [*old_done, old_other["discarded"]]
    attempts = store.db.execute_sql(
        f"SELECT COUNT(*) FROM attempts WHERE job_id IN ({','.join('?' * len(pruned_ids))})",
        pruned_ids,
    ).fetchone()[0]
    assert attempts == 2 * len(old_done) + 1

    assert queue.prune_done(batch=2) == len(pruned_ids)

    remaining = dict(store.db.execute_sql("SELECT id, status FROM jobs").fetchall())
    assert set(remaining) == {recent, *old_other.values()} - {old_other["discarded"]}
    assert remaining[recent] == "done"
    orphans = store.db.execute_sql(
        "SELECT COUNT(*) FROM attempts WHERE job_id NOT IN (SELECT id FROM jobs)"
    ).fetchone()
    assert orphans == (0,), "attempts go with their job (foreign key cascade)"
    kept_attempts = store.db.execute_sql("SELECT COUNT(*) FROM attempts").fetchone()[0]
    assert kept_attempts == 3  # dead, conflict, recent done
    # The audit trail of the person's discard outlives the job.
    assert store.db.execute_sql("SELECT COUNT(*) FROM audit_log").fetchone() == (1,)
    assert queue.prune_done() == 0

    clock.advance(RETENTION)
    assert queue.prune_done() == 1
    assert store.stats()["queue_depth"] == {
        "pending": 1,
        "leased": 1,
        "done": 0,
        "dead": 1,
        "conflict": 1,
    }
