"""One edit, one transaction: the cached record and its job are both written or neither."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from store_support import rows, run_python

from app.store.errors import InvalidEditError
from app.store.queue import PRIORITY_IMPORT, PRIORITY_USER
from app.store.store import Store


def snapshot(store: Store) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Every job and every cached row, as plain tuples."""
    jobs = store.db.execute_sql("SELECT * FROM jobs ORDER BY id").fetchall()
    cached = store.db.execute_sql("SELECT * FROM work_orders ORDER BY id").fetchall()
    return jobs, cached


@pytest.fixture
def existing(store: Store) -> dict[str, str]:
    live = store.record_edit("create", None, {"title": "Pump seal", "site": "North"}).entity_id
    gone = store.record_edit("create", None, {"title": "Old fence"}).entity_id
    store.record_edit("delete", gone)
    return {"live": live, "gone": gone, "missing": str(uuid.uuid4()), "none": ""}


INVALID_EDITS = {
    "unknown field": ("create", "none", {"title": "x", "colour": "red"}, "colour"),
    "missing title": ("create", "none", {"site": "North"}, "title"),
    "blank title": ("create", "none", {"title": "   "}, "blank"),
    "title too long": ("create", "none", {"title": "x" * 201}, "200"),
    "bad status enum": ("create", "none", {"title": "x", "status": "finished"}, "status"),
    "bad priority enum": ("update", "live", {"priority": "urgent"}, "priority"),
    "bad due date": ("update", "live", {"due_date": "next tuesday"}, "due_date"),
    "null title": ("update", "live", {"title": None}, "title"),
    "create over existing id": ("create", "live", {"title": "x"}, "already exists"),
    "create with a non-UUID id": ("create", "not-a-uuid", {"title": "x"}, "UUID"),
    "update unknown record": ("update", "missing", {"title": "x"}, "no work order"),
    "update deleted record": ("update", "gone", {"title": "x"}, "deleted"),
    "update with no fields": ("update", "live", {}, "nothing to change"),
    "update without id": ("update", "none", {"title": "x"}, "needs a work-order id"),
    "delete with fields": ("delete", "live", {"title": "x"}, "no fields"),
    "unknown operation": ("upsert", "live", {"title": "x"}, "unknown operation"),
}


@pytest.mark.parametrize(
    ("op", "which", "fields", "reason"), INVALID_EDITS.values(), ids=INVALID_EDITS.keys()
)
def test_invalid_edit_writes_nothing(
    store: Store,
    existing: dict[str, str],
    op: Any,
    which: str,
    fields: dict[str, Any],
    reason: str,
) -> None:
    before = snapshot(store)
    entity_id = existing.get(which, which) or None
    with pytest.raises(InvalidEditError, match=reason) as caught:
        store.record_edit(op, entity_id, fields)
    assert "\n" not in str(caught.value)
    assert snapshot(store) == before


def test_failure_between_cache_write_and_enqueue_rolls_back_both(
    store: Store, existing: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot(store)

    def fail_enqueue(*args: Any, **kwargs: Any) -> int:
        raise RuntimeError("power cut between the cache write and the job insert")

    monkeypatch.setattr(store.queue, "enqueue", fail_enqueue)
    new_id = str(uuid.uuid4())
    with pytest.raises(RuntimeError, match="power cut"):
        store.record_edit("create", new_id, {"title": "Never saved"})
    with pytest.raises(RuntimeError, match="power cut"):
        store.record_edit("update", existing["live"], {"title": "Never changed"})
    with pytest.raises(RuntimeError, match="power cut"):
        store.record_edit("delete", existing["live"])

    assert snapshot(store) == before
    assert store.cache.get(new_id) is None
    live = store.cache.get(existing["live"])
    assert live is not None
    assert (live["title"], live["deleted"]) == ("Pump seal", False)
    monkeypatch.undo()
    # The connection is healthy afterwards: the next edit commits normally.
    store.record_edit("update", existing["live"], {"title": "Changed"})
    assert store.cache.get(existing["live"])["title"] == "Changed"  # type: ignore[index]


def test_edit_writes_cache_and_job_together(store: Store) -> None:
    created = store.record_edit(
        "create", None, {"title": "Pump seal", "due_date": "2025-03-01", "priority": "high"}
    )
    updated = store.record_edit("update", created.entity_id, {"notes": "bring gasket"})
    cached = store.cache.get(created.entity_id)
    assert cached is not None
    assert cached["notes"] == "bring gasket"
    assert cached["due_date"] == "2025-03-01"
    assert cached["pending_edits"] == 2
    assert cached["origin"] == "local"
    jobs = store.db.execute_sql(
        "SELECT id, entity_key, payload, priority, status FROM jobs ORDER BY id"
    ).fetchall()
    assert [(j[0], j[1], j[3], j[4]) for j in jobs] == [
        (created.job_id, created.entity_id, PRIORITY_USER, "pending"),
        (updated.job_id, created.entity_id, PRIORITY_USER, "pending"),
    ]
    assert json.loads(jobs[0][2])["op"] == "create"
    assert json.loads(jobs[0][2])["fields"]["title"] == "Pump seal"
    assert json.loads(jobs[1][2]) == {"op": "update", "fields": {"notes": "bring gasket"}}


def test_chained_edits_rebase_on_each_acknowledgement(store: Store) -> None:
    """create + update + update offline: each ack's result version becomes the next base."""
    entity = store.record_edit("create", None, {"title": "Pump seal"}).entity_id
    store.record_edit("update", entity, {"notes": "first"})
    store.record_edit("update", entity, {"notes": "second"})

    [create] = store.queue.claim("worker-1", limit=5)
    assert create.payload["op"] == "create"
    assert create.base_version is None
    assert store.queue.claim("worker-1", limit=5) == [], "later edits wait for the create"
    assert store.queue.ack(create, result_version=1)

    [first] = store.queue.claim("worker-1", limit=5)
    assert first.payload["fields"] == {"notes": "first"}
    assert first.base_version == 1
    assert store.queue.ack(first, result_version=2)

    [second] = store.queue.claim("worker-1", limit=5)
    assert second.payload["fields"] == {"notes": "second"}
    assert second.base_version == 2
    assert store.queue.ack(second, result_version=3)
    assert store.queue.claim("worker-1", limit=5) == []


def test_unchained_edit_uses_the_cached_server_version(store: Store) -> None:
    entity = store.record_edit("create", None, {"title": "Pump seal"}).entity_id
    [create] = store.queue.claim("worker-1")
    store.queue.ack(create, result_version=4)
    store.db.execute_sql("UPDATE work_orders SET server_version = 4 WHERE id = ?", (entity,))
    store.record_edit("update", entity, {"notes": "later"})
    [update] = store.queue.claim("worker-1")
    assert update.base_version == 4
    # Enqueued behind an outstanding job, an edit is chained: the ack decides its base.
    store.record_edit("update", entity, {"notes": "chained"}, base_version=3)
    store.queue.ack(update, result_version=5)
    [chained] = store.queue.claim("worker-1")
    assert chained.base_version == 5
    store.queue.ack(chained, result_version=6)
    # With nothing outstanding, an explicit base version (what the person saw) is kept.
    store.record_edit("update", entity, {"notes": "explicit"}, base_version=3)
    [explicit] = store.queue.claim("worker-1")
    assert explicit.base_version == 3


def test_import_checks_every_record_before_saving_any(store: Store) -> None:
    records = [{"title": f"Imported {n}"} for n in range(5)]
    records.append({"title": "bad", "status": "bogus"})
    with pytest.raises(InvalidEditError, match=r"record 6: status"):
        store.import_records(records, chunk=2)
    # Nothing saved: fixed and imported again, the file does not duplicate the good ones.
    assert store.cache.count() == 0
    records[-1]["status"] = "open"
    assert len(store.import_records(records, chunk=2)) == 6
    assert store.cache.count() == 6
    priorities = store.db.execute_sql("SELECT DISTINCT priority FROM jobs").fetchall()
    assert priorities == [(PRIORITY_IMPORT,)]


def test_disk_full_during_enqueue_keeps_earlier_edits(data_dir: Path) -> None:
    result = run_python(
        [str(Path(__file__).with_name("disk_full_worker.py")), str(data_dir)], data_dir
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["error"] in ("StorageFullError", "StorageIOError"), report
    assert "Queued edits are kept" in report["message"]
    saved = report["saved"]
    assert len(saved) > 5, "the limit was reached after some large edits went through"
    assert report["readable"]
    assert report["pending"] == len(saved)

    path = data_dir / "fieldsync.sqlite3"
    assert rows(path, "PRAGMA integrity_check") == [("ok",)]
    with Store(data_dir) as store:
        assert store.cache.count() == len(saved)
        assert all(store.cache.get(entity_id) is not None for entity_id in saved)
        entities = {row[0] for row in store.db.execute_sql("SELECT entity_key FROM jobs")}
        assert entities == set(saved), "every saved record has its job; the failed one neither"
        # With room again, edits go through.
        store.record_edit("create", None, {"title": "After cleanup"})


def test_import_refuses_ids_repeated_or_already_held_before_saving_any(store: Store) -> None:
    held = store.record_edit("create", None, {"title": "Already here"}).entity_id
    repeated = str(uuid.uuid4())
    records = [{"title": f"Imported {n}"} for n in range(5)]
    records[1]["id"] = repeated
    records[4]["id"] = repeated
    twice = rf"record 5: work order {repeated} is also at record 2"
    with pytest.raises(InvalidEditError, match=twice):
        store.import_records(records, chunk=2)
    records[4]["id"] = held
    with pytest.raises(InvalidEditError, match=rf"record 5: work order {held} already exists"):
        store.import_records(records, chunk=2)
    assert store.cache.count() == 1, "nothing of either attempt was saved"


def test_a_work_order_id_is_one_id_however_it_is_written(store: Store) -> None:
    entity = uuid.uuid4()
    spellings = [str(entity), str(entity).upper(), "{" + str(entity) + "}"]
    with pytest.raises(InvalidEditError, match="is also at record 1"):
        store.import_records([{"id": s, "title": "Pump"} for s in spellings])
    created = store.record_edit("create", spellings[2], {"title": "Pump"}).entity_id
    assert created == str(entity), "kept as the server writes it"
    store.record_edit("update", spellings[1], {"notes": "found by any spelling"})
    assert store.cache.get(str(entity))["notes"] == "found by any spelling"
