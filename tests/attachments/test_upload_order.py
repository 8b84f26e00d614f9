"""Where an upload stands in the queue: after its work order's create, never before an edit."""

from __future__ import annotations

from pathlib import Path

from app.attachments import Attachments
from app.store.jobs import TOPIC_ATTACHMENTS, Outcome
from app.store.store import Store
from tests.attachments.conftest import photo


def test_an_upload_waits_for_its_work_orders_create_and_holds_back_no_edit(
    tmp_path: Path, store: Store, attachments: Attachments, work_order: str
) -> None:
    queue = store.queue
    view = attachments.attach(work_order, photo(tmp_path))
    edit = store.record_edit("update", work_order, {"notes": "seal replaced"}).job_id

    assert queue.claim("uploader", 1, TOPIC_ATTACHMENTS) == [], "the server lacks the work order"
    assert queue.next_attempt_at() is not None  # the create is due, not the upload
    (create,) = queue.claim("pipeline", 10)
    assert create.payload["op"] == "create"
    queue.ack(create, result_version=1)

    (upload,) = queue.claim("uploader", 1, TOPIC_ATTACHMENTS)
    assert upload.idempotency_key == view.id
    # The upload is leased (a long transfer): the edit queued after it still goes at once.
    assert [job.id for job in queue.claim("pipeline", 10)] == [edit]


def test_an_upload_behind_a_failed_create_is_not_counted_as_moving(
    tmp_path: Path, store: Store, attachments: Attachments, work_order: str
) -> None:
    queue = store.queue
    attachments.attach(work_order, photo(tmp_path))
    (create,) = queue.claim("pipeline", 10)
    queue.dead(create, Outcome(error="HTTP 422", http_status=422))
    # `sync --until-idle` ends: nothing can move without a person.
    assert queue.in_flight() == 0
    assert queue.next_attempt_at() is None, "no wake-up for a job that cannot be claimed"
    queue.retry_dead(create.id)
    assert queue.in_flight() == 2


def test_a_failed_edit_of_the_work_order_does_not_hold_its_upload(
    tmp_path: Path, store: Store, attachments: Attachments, work_order: str
) -> None:
    queue = store.queue
    (create,) = queue.claim("pipeline", 10)
    queue.ack(create, result_version=1)
    store.record_edit("update", work_order, {"title": "Replace the gasket"})
    (edit,) = queue.claim("pipeline", 10)
    queue.dead(edit, Outcome(error="HTTP 422", http_status=422))
    attachments.attach(work_order, photo(tmp_path))
    assert len(queue.claim("uploader", 1, TOPIC_ATTACHMENTS)) == 1
