"""What recording a batch's replies makes durable, and when: the replies are learnt again (the
jobs are sent again under their keys), files deleted are not."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.attachments import Attachments
from app.attachments.files import AttachmentFiles
from app.store.db import connection
from app.store.jobs import TOPIC_ATTACHMENTS
from app.store.store import Store
from app.sync.delivery import apply_replies, build_mutation
from app.sync.reconcile import apply_page
from app.sync.transport import Reply
from tests.sync.fake_server import record as server_record


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "device") as opened:  # the default durability: synchronous=FULL
        yield opened


def delivered(store: Store, record: dict[str, Any], trace: list[str] | None = None) -> None:
    """Claim the work order's edit and record the server's 200 for it (with ``trace``, the
    statements of the recording)."""
    [job] = store.queue.claim("w")
    reply = Reply(200, {"record": {**record, "version": 2, "notes": "typed"}})
    conn = connection(store.db)
    conn.set_trace_callback(None if trace is None else trace.append)
    try:
        apply_replies(store, [(job, build_mutation(store, job), reply)], 5.0)
    finally:
        conn.set_trace_callback(None)


def test_replies_commit_without_an_fsync_and_leave_the_durability_as_it_was(
    store: Store,
) -> None:
    record = server_record(str(uuid.uuid4()), assignee="ana")
    apply_page(store, [record], "1", ())
    store.record_edit("update", record["id"], {"notes": "typed"})
    seen: list[str] = []
    delivered(store, record, seen)
    begin, commit = seen.index("BEGIN IMMEDIATE"), seen.index("COMMIT")
    assert seen[begin - 1] == "PRAGMA synchronous=NORMAL", seen
    assert seen[commit + 1] == "PRAGMA synchronous=2", seen
    assert connection(store.db).execute("PRAGMA synchronous").fetchone()[0] == 2
    assert store.queue.in_flight() == 0
    row = store.cache.get(record["id"])
    assert row is not None
    assert row["server_version"] == 2


def test_a_departed_work_orders_files_go_only_once_its_removal_is_durable(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = server_record(str(uuid.uuid4()), assignee="ana")
    apply_page(store, [record], "1", ())
    photo = tmp_path / "pump.jpg"
    photo.write_bytes(b"\xff\xd8\xff" + b"0" * 1000)
    Attachments(store).attach(record["id"], photo)
    [upload] = store.queue.claim("w", topic=TOPIC_ATTACHMENTS)
    store.queue.ack(upload)  # the photo is on the server: kept for viewing, not unsent
    store.record_edit("update", record["id"], {"notes": "typed"})
    page = apply_page(store, [], "2", (record["id"],))
    assert page.kept_unsent == {record["id"]}, "its edit is not delivered yet"
    stored = [p for p in (store.data_dir).rglob("*") if p.is_file() and p.stat().st_size == 1003]
    assert stored, "the photo's bytes are on the device"

    steps: list[str] = []
    fsync = os.fsync

    def watched_fsync(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith("-wal"):
            steps.append("log synced")
        fsync(fd)

    remove = AttachmentFiles.remove_unnamed

    def watched_remove(self: AttachmentFiles, *args: Any) -> Any:
        steps.append("files removed")
        return remove(self, *args)

    monkeypatch.setattr(os, "fsync", watched_fsync)
    monkeypatch.setattr(AttachmentFiles, "remove_unnamed", watched_remove)
    delivered(store, record)
    assert store.cache.get(record["id"]) is None
    assert not [p for p in stored if p.exists()], "its photo left with it"
    assert "files removed" in steps
    assert "log synced" in steps[: steps.index("files removed")], steps
