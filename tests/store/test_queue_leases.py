"""Lease ownership and outcomes that the state machine cannot reach with a moving clock."""

from __future__ import annotations

import pytest
from store_support import FakeClock

from app.store.queue import Outcome, QueueConfig
from app.store.store import Store


@pytest.fixture
def queue_config() -> QueueConfig:
    return QueueConfig(max_attempts=2)


def test_stale_handle_cannot_touch_a_lease_claimed_at_the_same_instant(
    store: Store, clock: FakeClock
) -> None:
    store.queue.enqueue("work_orders", {"n": 1}, "wo-1")
    [first] = store.queue.claim("worker-a")
    assert store.queue.release([first]) == 1
    [second] = store.queue.claim("worker-b")  # same clock reading: same locked_until
    assert store.queue.release([first]) == 0
    assert store.queue.retry(first, Outcome(error="late")) == "stale"
    row = store.db.execute_sql("SELECT status, locked_by FROM jobs").fetchone()
    assert row == ("leased", "worker-b")
    assert store.queue.ack(second)


def test_too_many_attempts_dead_letters_with_the_reason(store: Store, clock: FakeClock) -> None:
    job_id = store.queue.enqueue("work_orders", {"n": 1}, "wo-1")
    [job] = store.queue.claim("worker-1")
    assert store.queue.retry(job, Outcome(error="HTTP 503", http_status=503)) == "pending"
    clock.advance(10)
    [job] = store.queue.claim("worker-1")
    assert job.attempt_count == 2
    assert store.queue.retry(job, Outcome(error="HTTP 503", http_status=503)) == "dead"
    status, error = store.db.execute_sql(
        "SELECT status, last_error FROM jobs WHERE id = ?", (job_id,)
    ).fetchone()
    assert status == "dead"
    assert "gave up after 2 attempts" in error
    assert "HTTP 503" in error
    history = store.db.execute_sql(
        "SELECT outcome, http_status FROM attempts WHERE job_id = ? ORDER BY id", (job_id,)
    ).fetchall()
    assert history == [("retry", 503), ("dead", 503)]
    # A dead job holds back later edits of its work order, but not other work orders.
    later = store.queue.enqueue("work_orders", {"n": 2}, "wo-1")
    other = store.queue.enqueue("work_orders", {"n": 3}, "wo-2")
    assert [j.id for j in store.queue.claim("worker-1", limit=5)] == [other]
    store.queue.discard(job_id)
    assert [j.id for j in store.queue.claim("worker-1", limit=5)] == [later]


def test_claim_never_deletes_and_retry_keeps_the_key(store: Store, clock: FakeClock) -> None:
    store.queue.enqueue("work_orders", {"n": 1}, "wo-1")
    [job] = store.queue.claim("worker-1")
    assert store.db.execute_sql("SELECT COUNT(*) FROM jobs").fetchone() == (1,)
    store.queue.retry(job, Outcome(error="timeout"), retry_after=42)
    assert store.queue.next_attempt_at() == pytest.approx(clock() + 42)
    clock.advance(42)
    [again] = store.queue.claim("worker-2")
    assert again.idempotency_key == job.idempotency_key
    assert again.correlation_id == job.correlation_id
