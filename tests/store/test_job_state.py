"""One rule for "retrying": the badge's counts and the engine's events read a job alike."""

from __future__ import annotations

from app.states import RETRYING, JobStatus, job_state
from app.store.deadletters import job_states
from app.store.queue import Outcome
from app.store.store import Store
from app.sync.pipeline import job_states_now


def test_the_rule_is_tried_and_failed() -> None:
    assert job_state("pending", 1, "timeout") == RETRYING
    assert job_state("pending", 0, "timeout") == JobStatus.PENDING  # a person sent it again
    assert job_state("pending", 2, None) == JobStatus.PENDING
    assert job_state("pending", 2, "") == JobStatus.PENDING
    assert job_state("dead", 3, "refused") == JobStatus.DEAD
    assert job_state("leased", 1, "timeout") == JobStatus.LEASED


def test_a_failed_try_is_retrying_and_a_person_retry_is_pending_in_both_readers(
    store: Store,
) -> None:
    entity_id = store.record_edit("create", fields={"title": "Pump"}).entity_id
    (job,) = store.queue.claim("w")
    store.queue.retry(job, Outcome(error="connect error"))
    (event,) = job_states_now(store, [job.id])
    assert (event.status, event.error) == (RETRYING, "connect error")
    assert job_states(store, [entity_id])[entity_id].retrying == 1

    # Dead, then sent again by a person: it keeps its last error, but it is due now and
    # is not a retry counting down (the engine and the badge used to disagree here).
    store.db.execute_sql("UPDATE jobs SET next_attempt_at = 0")
    (job,) = store.queue.claim("w")
    store.queue.dead(job, Outcome(error="refused"))
    store.queue.retry_dead(job.id)
    (event,) = job_states_now(store, [job.id])
    assert (event.status, event.error, event.next_attempt_at) == (JobStatus.PENDING, None, None)
    state = job_states(store, [entity_id])[entity_id]
    assert (state.retrying, state.pending) == (0, 1)
