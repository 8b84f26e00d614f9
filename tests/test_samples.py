"""First-run sample work orders: marked, for this device's person, one with a photo, one
overdue, one done; added once; removed in one step, the server told too (delete jobs)."""

from __future__ import annotations

import datetime
from pathlib import Path

from app.attachments.store import Attachments
from app.samples import SAMPLE_PREFIX, add_samples, remove_samples, sample_ids
from app.store.store import Store

TODAY = datetime.date(2026, 12, 1)


def test_samples_show_each_state_for_this_devices_person(tmp_path: Path) -> None:
    with Store(tmp_path / "device") as store:
        ids = add_samples(store, "ana", "north", TODAY)
        assert len(ids) == 4
        records = [store.cache.get(entity_id) for entity_id in ids]
        assert all(r is not None and r["title"].startswith(SAMPLE_PREFIX) for r in records)
        assert all(
            r is not None and (r["assignee"], r["team"]) == ("ana", "north") for r in records
        )
        statuses = {r["status"] for r in records if r is not None}
        assert "done" in statuses
        overdue = [r for r in records if r is not None and r["due_date"] and
                   r["due_date"] < TODAY.isoformat()]  # fmt: skip
        assert len(overdue) == 1
        photos = [Attachments(store).list_for(entity_id) for entity_id in ids]
        with_photo = [views for views in photos if views]
        assert len(with_photo) == 1
        assert with_photo[0][0].content_type == "image/png"
        assert store.stats()["queue_depth"]["pending"] >= 4  # synced like any other edit
        assert sample_ids(store) == ids


def test_samples_come_once_and_go_in_one_step(tmp_path: Path) -> None:
    with Store(tmp_path / "device") as store:
        ids = add_samples(store, "ana", today=TODAY)
        assert add_samples(store, "ana", today=TODAY) == []  # never twice, even after removal
        mine = store.record_edit("create", None, {"title": "Not a sample"})
        assert sorted(remove_samples(store)) == sorted(ids)
        assert sample_ids(store) == []
        assert all(store.cache.get(i)["deleted"] for i in ids)  # type: ignore[index]
        deletes = store.read("SELECT COUNT(*) FROM jobs WHERE payload LIKE '%\"delete\"%'")
        assert deletes == [(4,)]  # each removal is sent, so the server drops them too
        assert not store.cache.get(mine.entity_id)["deleted"]  # type: ignore[index]
        assert add_samples(store, "ana", today=TODAY) == []
        assert remove_samples(store) == []
