"""Wall-clock jumps: a clock set back neither strands jobs nor fires them all at once; a clock
set forward expires leases, which come back and are counted as lease timeouts."""

from __future__ import annotations

import pytest
from store_support import FakeClock

from app.store.queue import Outcome, QueueConfig
from app.store.store import Store

DAY = 86_400.0
CAP = 300.0
LEASE = 60.0


@pytest.fixture
def queue_config() -> QueueConfig:
    return QueueConfig(lease_seconds=LEASE)


def enqueue(store: Store, count: int) -> list[int]:
    return [store.queue.enqueue("work_orders", {"n": n}, f"wo-{n}") for n in range(count)]


def column(store: Store, name: str, status: str) -> list[float]:
    return [
        row[0]
        for row in store.db.execute_sql(
            f"SELECT {name} FROM jobs WHERE status = ? ORDER BY id", (status,)
        )
    ]


def test_clock_set_back_a_day_bounds_and_spreads_retries(store: Store, clock: FakeClock) -> None:
    enqueue(store, 50)
    for job in store.queue.claim("worker-1", limit=50):
        # Server asked for a long pause: the retries are due up to 300 s from "now".
        assert store.queue.retry(job, Outcome(error="503"), retry_after=CAP) == "pending"
    clock.advance(-DAY)
    assert store.queue.claim("worker-1", limit=50) == [], "stranded until the clock catches up"
    near = store.queue.enqueue("work_orders", {"n": "near"}, "wo-near")
    store.db.execute_sql("UPDATE jobs SET next_attempt_at = ? WHERE id = ?", (clock() + 10, near))

    assert store.queue.clamp_times() == 50

    scheduled = column(store, "next_attempt_at", "pending")
    retried, untouched = scheduled[:50], scheduled[50]
    assert all(clock() <= at <= clock() + CAP for at in retried)
    assert len(set(retried)) > 40, "spread over the cap, not all at one instant"
    assert max(retried) - min(retried) > CAP / 4
    assert untouched == clock() + 10, "a wait within the cap is left alone"
    clock.advance(CAP)
    # Within one backoff cap of the jump, everything is claimable again.
    assert len(store.queue.claim("worker-1", limit=100)) == 51


def test_clock_set_back_clamps_leases_to_the_lease_time(store: Store, clock: FakeClock) -> None:
    enqueue(store, 5)
    assert len(store.queue.claim("worker-1", limit=5)) == 5
    clock.advance(-DAY)

    assert store.queue.clamp_times() == 5
    assert column(store, "locked_until", "leased") == [clock() + LEASE] * 5
    assert store.queue.clamp_times() == 0, "clamping twice changes nothing"

    clock.advance(LEASE - 1)
    assert store.queue.reclaim_expired() == 0
    clock.advance(1)
    assert store.queue.reclaim_expired() == 5
    assert store.stats()["lease_timeouts"] == 5
    assert len(store.queue.claim("worker-2", limit=5)) == 5


def test_clock_forward_expires_leases_which_come_back_counted(
    store: Store, clock: FakeClock
) -> None:
    enqueue(store, 8)
    held = store.queue.claim("worker-1", limit=8)
    assert len(held) == 8
    assert store.queue.reclaim_expired() == 0
    clock.advance(DAY)

    assert store.queue.reclaim_expired() == 8
    stats = store.stats()
    assert stats["lease_timeouts"] == 8
    assert stats["queue_depth"]["pending"] == 8
    assert stats["queue_depth"]["leased"] == 0
    reclaimed = store.queue.claim("worker-2", limit=8)
    assert [job.id for job in reclaimed] == [job.id for job in held]
    assert all(
        job.idempotency_key == old.idempotency_key for job, old in zip(reclaimed, held, strict=True)
    )
    outcomes = store.db.execute_sql(
        "SELECT outcome, COUNT(*) FROM attempts GROUP BY outcome"
    ).fetchall()
    assert outcomes == [("lease_expired", 8)]
    # The late worker's answer still lands exactly once.
    assert store.queue.ack(held[0])
    assert not store.queue.ack(reclaimed[0])
    assert store.queue.reclaim_expired() == 0
    assert store.stats()["lease_timeouts"] == 8
