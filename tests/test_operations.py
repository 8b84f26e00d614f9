"""Core operations: each write does its job and publishes what it changed (OpChanges)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.events import Event, EventBus, OpChanges
from app.executor import StoreExecutor
from app.operations import Operations, load_sync_on_metered
from app.pending_export import EXPORT_FORMAT, ExportError
from app.store.errors import InvalidEditError
from app.store.queue import Outcome
from app.store.store import Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "data", synchronous="NORMAL") as opened:
        yield opened


@pytest.fixture
def ops(store: Store) -> Iterator[tuple[Operations, list[Event]]]:
    executor = StoreExecutor()
    bus = EventBus()
    seen: list[Event] = []
    bus.subscribe(seen.append)
    yield Operations(store, executor, bus), seen
    executor.shutdown()


def refused(store: Store, title: str = "Fix gate") -> tuple[str, int]:
    result = store.record_edit("create", None, {"title": title, "site": "North yard"})
    (job,) = store.queue.claim("test")
    store.queue.dead(job, Outcome(error="invalid_payload: site", http_status=422))
    return result.entity_id, result.job_id


def key_of(store: Store, job_id: int) -> str:
    row = store.db.execute_sql("SELECT idempotency_key FROM jobs WHERE id = ?", (job_id,))
    return str(row.fetchone()[0])


def test_an_edited_retry_reaches_the_cache_with_a_new_key(store: Store, ops) -> None:
    operations, seen = ops
    entity_id, job_id = refused(store)
    before = key_of(store, job_id)
    payload = {"op": "create", "fields": {"title": "Fix gate hinge", "site": "Yard 2"}}
    asyncio.run(operations.retry_failed(job_id, payload))
    record = store.cache.get(entity_id)
    assert record is not None
    assert (record["title"], record["site"]) == ("Fix gate hinge", "Yard 2")
    assert key_of(store, job_id) != before
    assert seen == [OpChanges(frozenset({entity_id}), queue=True, conflicts=True)]


def test_an_unchanged_retry_keeps_its_key(store: Store, ops) -> None:
    operations, _ = ops
    _, job_id = refused(store)
    before = key_of(store, job_id)
    asyncio.run(operations.retry_failed(job_id))
    assert key_of(store, job_id) == before
    status = store.db.execute_sql("SELECT status FROM jobs WHERE id = ?", (job_id,)).fetchone()
    assert status == ("pending",)


def test_an_invalid_edited_retry_changes_nothing(store: Store, ops) -> None:
    operations, _ = ops
    entity_id, job_id = refused(store)
    with pytest.raises(InvalidEditError, match="title"):
        asyncio.run(operations.retry_failed(job_id, {"op": "create", "fields": {"title": ""}}))
    status = store.db.execute_sql("SELECT status FROM jobs WHERE id = ?", (job_id,)).fetchone()
    assert status == ("dead",)
    assert store.cache.get(entity_id)["title"] == "Fix gate"


def test_save_and_settings_publish_what_changed(store: Store, ops) -> None:
    operations, seen = ops
    result = asyncio.run(operations.save_edit("create", None, {"title": "Inspect boiler"}))
    asyncio.run(operations.set_sync_on_metered(False))
    assert not load_sync_on_metered(store)
    assert seen == [
        OpChanges(frozenset({result.entity_id}), queue=True),
        OpChanges(settings=True),
    ]


def test_export_holds_every_unsent_change_and_nothing_delivered(
    store: Store, ops, tmp_path: Path
) -> None:
    operations, seen = ops
    delivered = store.record_edit("create", None, {"title": "Already on the server"})
    (job,) = store.queue.claim("test")
    store.queue.ack(job, Outcome(), result_version=1)
    _, dead_job = refused(store, "Refused one")
    waiting = store.record_edit("create", None, {"title": "Waiting one"})
    target = tmp_path / "out" / "pending.json"
    summary = asyncio.run(operations.export_pending(target))
    document = json.loads(target.read_text(encoding="utf-8"))
    assert document["format"] == EXPORT_FORMAT
    assert (summary.count, summary.failed, document["count"]) == (2, 1, 2)
    by_job = {change["job_id"]: change for change in document["changes"]}
    assert set(by_job) == {dead_job, waiting.job_id}
    assert delivered.job_id not in by_job
    assert by_job[dead_job]["state"] == "failed"
    assert by_job[waiting.job_id]["fields"]["title"] == "Waiting one"
    assert seen == []  # an export changes nothing


def test_export_to_an_unwritable_place_says_so_and_leaves_nothing(
    store: Store, ops, tmp_path: Path
) -> None:
    operations, _ = ops
    store.record_edit("create", None, {"title": "Waiting one"})
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(ExportError, match="could not write"):
        asyncio.run(operations.export_pending(blocker / "pending.json"))
    assert blocker.read_text() == "not a directory"


def test_a_work_order_that_left_goes_with_its_files_when_the_editor_lets_go(
    store: Store, ops: tuple[Operations, list[Event]], tmp_path: Path
) -> None:
    from app.attachments import Attachments
    from app.attachments.files import AttachmentFiles
    from app.store.jobs import TOPIC_ATTACHMENTS
    from app.sync.reconcile import apply_page

    operations, seen = ops
    record = {"id": "6d1f3c7e-2f1a-4b7e-9a51-0c6f3f1e2a10", "version": 1, "title": "Pump",
              "site": "", "status": "open", "priority": "normal", "notes": "",
              "assignee": "ana", "team": "", "due_date": None, "deleted": False}  # fmt: skip
    apply_page(store, [record], "1")
    photo = tmp_path / "pump.jpg"
    photo.write_bytes(b"\xff\xd8\xff" + b"0" * 1000)
    Attachments(store).attach(record["id"], photo)
    [upload] = store.queue.claim("w", topic=TOPIC_ATTACHMENTS)
    store.queue.ack(upload)
    assert asyncio.run(operations.hold_for_editing(record["id"])) is True
    page = apply_page(store, [], "2", [record["id"]])
    assert page.kept_unsent == {record["id"]}, "open in the editor: it stays"

    kept = AttachmentFiles(store.data_dir).path_for(hashlib.sha256(photo.read_bytes()).hexdigest())
    assert kept.exists()

    assert asyncio.run(operations.release_editing(record["id"])) == {record["id"]}
    assert store.cache.get(record["id"]) is None
    assert store.read("SELECT COUNT(*) FROM attachments") == [(0,)], "its files went too"
    assert not kept.exists()
    assert seen[-1] == OpChanges(frozenset({record["id"]}), attachments=True)
