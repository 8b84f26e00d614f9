"""The queue depth the status bar and the engine publish: every open job by status, and how
long the first one queued has waited."""

from __future__ import annotations

from store_support import FakeClock

from app.store.db import connection
from app.store.queue import Outcome
from app.store.stats import outstanding_depth
from app.store.store import Store


def test_the_depth_counts_every_open_job_by_status(store: Store, clock: FakeClock) -> None:
    made = [store.record_edit("create", None, {"title": f"WO {n}"}).entity_id for n in range(6)]
    store.record_edit("update", made[0], {"notes": "behind its create"})
    assert outstanding_depth(store) == {
        "pending": 7,
        "leased": 0,
        "conflict": 0,
        "dead": 0,
        "oldest_pending_age_s": 0.0,
    }
    clock.advance(90)
    jobs = store.queue.claim("w", 4)
    store.queue.ack(jobs[0], result_version=1)  # rebases the update: pending still
    store.queue.dead(jobs[1], Outcome(error="HTTP 422"))
    store.queue.conflict(jobs[2], Outcome(error="HTTP 409"))
    depth = outstanding_depth(store)
    assert depth == {"pending": 3, "leased": 1, "conflict": 1, "dead": 1,
                     "oldest_pending_age_s": 90.0}  # fmt: skip


def test_the_oldest_is_the_first_queued_whatever_the_clock_said_later(
    store: Store, clock: FakeClock
) -> None:
    store.record_edit("create", None, {"title": "First"})
    clock.advance(-3600)  # the wall clock stepped back an hour
    store.record_edit("create", None, {"title": "Second"})
    clock.advance(3600 + 60)
    assert outstanding_depth(store)["oldest_pending_age_s"] == 60.0
    [first, _] = sorted(store.queue.claim("w", 2), key=lambda job: job.id)
    store.queue.ack(first)
    assert outstanding_depth(store)["oldest_pending_age_s"] == 3660.0  # the leased second


def test_a_drain_is_counted_without_reading_a_job_row(store: Store) -> None:
    for n in range(50):
        store.record_edit("create", None, {"title": f"WO {n}"})
    store.queue.claim("w", 10)
    conn = connection(store.db)
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        outstanding_depth(store)
    finally:
        conn.set_trace_callback(None)
    plans = [
        row[3]
        for sql in seen
        if sql.startswith("SELECT") and "WHERE id = " not in sql
        for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}")
    ]
    assert len(plans) == 3, plans
    assert all(plan.startswith("SCAN jobs USING") and "INDEX" in plan for plan in plans), plans
