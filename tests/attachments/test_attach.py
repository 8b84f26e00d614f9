"""Attaching a file: the copy, the row and the job, and bad input that saves nothing."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from app.attachments import AttachmentConfig, AttachmentCounts, Attachments, StorageBudgetFull
from app.states import AttachmentState, JobStatus
from app.store.errors import InvalidEditError, StorageFullError
from app.store.jobs import TOPIC_ATTACHMENTS, Outcome
from app.store.store import Store
from tests.attachments.conftest import photo
from tests.chaos.helpers import small_disk


def saved(store: Store) -> tuple[int, int]:
    """(attachment rows, attachment jobs)."""
    rows = store.db.execute_sql("SELECT COUNT(*) FROM attachments").fetchone()[0]
    jobs = store.db.execute_sql(
        "SELECT COUNT(*) FROM jobs WHERE topic = ?", (TOPIC_ATTACHMENTS,)
    ).fetchone()[0]
    return rows, jobs


def content_files(store: Store) -> list[Path]:
    root = store.data_dir / "attachments"
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def test_attach_keeps_a_content_addressed_copy_and_queues_its_upload(
    tmp_path: Path, store: Store, attachments: Attachments, work_order: str
) -> None:
    source = photo(tmp_path)
    view = attachments.attach(work_order, source, "before.jpg")

    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    assert (view.filename, view.size, view.sha256) == ("before.jpg", 300_000, digest)
    assert view.content_type == "image/jpeg"
    assert view.state is AttachmentState.WAITING
    assert view.offset == 0
    copy = store.data_dir / "attachments" / digest[:2] / digest
    assert view.local_path == copy
    assert copy.read_bytes() == source.read_bytes()
    source.unlink()  # the original may go: the device holds its own copy
    job = store.db.execute_sql(
        "SELECT topic, status, idempotency_key, entity_key, waits_for, payload FROM jobs "
        "WHERE topic = ?",
        (TOPIC_ATTACHMENTS,),
    ).fetchone()
    assert job[:5] == (
        TOPIC_ATTACHMENTS,
        JobStatus.PENDING,
        view.id,
        f"attachment:{view.id}",
        work_order,
    )
    assert [v.id for v in attachments.list_for(work_order)] == [view.id]
    attachments.attach(work_order, photo(tmp_path, "report.pdf", seed=2))
    counts = attachments.counts_for([work_order, "no-such-order"])
    assert counts == {work_order: AttachmentCounts(total=2, waiting=2, waiting_images=1)}


def test_the_same_bytes_twice_are_one_file_and_two_attachments(
    tmp_path: Path, store: Store, attachments: Attachments, work_order: str
) -> None:
    source = photo(tmp_path)
    first = attachments.attach(work_order, source)
    second = attachments.attach(work_order, source, "again.jpg")
    assert first.id != second.id
    assert len(content_files(store)) == 1
    attachments.detach(first.id)
    assert content_files(store) == [second.local_path], "still needed by the second"
    attachments.detach(second.id)
    assert content_files(store) == []
    assert attachments.list_for(work_order) == []


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda tmp: tmp / "missing.jpg", "No such file"),
        (lambda tmp: tmp, "is not a file"),
        (lambda tmp: _fifo(tmp), "is not a file"),
        # Regular by its mode, yet reading it fails (EIO): as a failing card would.
        (lambda tmp: Path("/proc/self/mem"), "Cannot read /proc/self/mem"),
    ],
)
def test_a_path_that_cannot_be_read_is_refused_and_saves_nothing(
    tmp_path: Path, store: Store, attachments: Attachments, work_order: str, make, words: str
) -> None:
    with pytest.raises(InvalidEditError, match=words):
        attachments.attach(work_order, make(tmp_path))
    assert saved(store) == (0, 0)
    assert content_files(store) == []


def _fifo(tmp: Path) -> Path:
    path = tmp / "pipe"
    os.mkfifo(path)
    return path


def test_a_file_over_the_limit_is_refused_and_saves_nothing(
    tmp_path: Path, store: Store, work_order: str
) -> None:
    small = Attachments(store, AttachmentConfig(max_bytes=100_000))
    with pytest.raises(InvalidEditError, match=r"over the limit of 0\.1 MiB"):
        small.attach(work_order, photo(tmp_path, size=100_001))
    assert saved(store) == (0, 0)
    assert small.attach(work_order, photo(tmp_path, size=100_000)).size == 100_000


@pytest.mark.parametrize(
    ("entity", "name", "words"),
    [
        ("no-such-order", None, "No work order no-such-order"),
        (None, "", "file name is empty"),
        (None, "a/b.jpg", "slashes"),
    ],
)
def test_bad_work_orders_and_names_are_refused(
    tmp_path: Path,
    store: Store,
    attachments: Attachments,
    work_order: str,
    entity: str | None,
    name: str | None,
    words: str,
) -> None:
    with pytest.raises(InvalidEditError, match=words):
        attachments.attach(entity or work_order, photo(tmp_path), name)
    assert saved(store) == (0, 0)


def test_a_deleted_work_order_takes_no_attachment(
    tmp_path: Path, store: Store, attachments: Attachments, work_order: str
) -> None:
    store.record_edit("delete", work_order)
    with pytest.raises(InvalidEditError, match="is deleted"):
        attachments.attach(work_order, photo(tmp_path))


def test_disk_full_while_copying_is_a_clear_error_and_saves_nothing(tmp_path: Path) -> None:
    try:
        with small_disk(tmp_path / "disk", 2 << 20) as disk, Store(disk / "device") as store:
            entity = store.record_edit("create", None, {"title": "Pump"}).entity_id
            attachments = Attachments(store)
            with pytest.raises(StorageFullError, match="storage is full.*Nothing was saved"):
                attachments.attach(entity, photo(tmp_path, size=3 << 20))
            assert saved(store) == (0, 0)
            assert content_files(store) == [], "no piece of the copy is left"
            # The space is back for what fits: the store still works.
            view = attachments.attach(entity, photo(tmp_path, "small.jpg", size=50_000))
            assert view.state is AttachmentState.WAITING
            assert saved(store) == (1, 1)
    except PermissionError as exc:
        pytest.skip(f"needs a small filesystem to fill: {exc}")


def test_a_budget_full_of_unsent_files_says_so_and_saves_nothing(
    tmp_path: Path, store: Store, work_order: str
) -> None:
    tight = Attachments(store, AttachmentConfig(budget_bytes=700_000))
    tight.attach(work_order, photo(tmp_path, "a.jpg", seed=1))
    tight.attach(work_order, photo(tmp_path, "b.jpg", seed=2))
    with pytest.raises(StorageBudgetFull, match="full of files not yet uploaded") as refused:
        tight.attach(work_order, photo(tmp_path, "c.jpg", seed=3))
    assert refused.value.unsent == 600_000
    assert saved(store) == (2, 2)
    assert len(content_files(store)) == 2


def test_detach_queues_an_idempotent_removal_behind_the_upload(
    tmp_path: Path, store: Store, attachments: Attachments, work_order: str
) -> None:
    view = attachments.attach(work_order, photo(tmp_path))
    attachments.detach(view.id)
    jobs = store.db.execute_sql(
        "SELECT json_extract(payload, '$.op'), entity_key, chained FROM jobs WHERE topic = ? "
        "ORDER BY id",
        (TOPIC_ATTACHMENTS,),
    ).fetchall()
    assert jobs == [("upload", f"attachment:{view.id}", 0), ("remove", f"attachment:{view.id}", 1)]
    assert attachments.get(view.id) is None
    with pytest.raises(InvalidEditError, match="No attachment"):
        attachments.detach(view.id)


def test_retry_refuses_an_upload_that_has_not_failed(
    tmp_path: Path, attachments: Attachments, work_order: str
) -> None:
    view = attachments.attach(work_order, photo(tmp_path))
    with pytest.raises(InvalidEditError, match="has not failed"):
        attachments.retry(view.id)


def test_status_counts_an_upload_given_up_as_failed_not_waiting(
    tmp_path: Path, store: Store, attachments: Attachments, work_order: str
) -> None:
    """A failed upload discarded (the attachment not yet removed: the app stopped between
    the two) is what the strip calls failed; `status --json` says the same."""
    view = attachments.attach(work_order, photo(tmp_path))
    (create,) = store.queue.claim("test")
    store.queue.ack(create, Outcome(http_status=201))
    (upload,) = store.queue.claim("test", topic=TOPIC_ATTACHMENTS)
    store.queue.dead(upload, Outcome(error="content type not allowed", http_status=415))
    store.discard(upload.id)
    now = attachments.get(view.id)
    assert now is not None
    assert now.state is AttachmentState.FAILED
    assert store.stats()["uploads"] == {"waiting": 0, "failed": 1, "bytes_waiting": 0}
