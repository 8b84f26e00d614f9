"""A removal in one process never deletes the bytes another process has just copied in for
an attach whose row it has not written yet (``fieldsync attach`` while the app runs)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

from app.attachments import Attachments
from app.attachments.retention import forget_departed
from app.store.jobs import TOPIC_ATTACHMENTS
from app.store.store import Store
from tests.attachments.conftest import photo

WORKER = Path(__file__).with_name("attach_worker.py")


def paused_attach(store: Store, work_order: str, source: Path) -> subprocess.Popen[str]:
    """Another process attaching ``source``, stopped once its copy is in (before its row)."""
    worker = subprocess.Popen(
        [sys.executable, str(WORKER), str(store.data_dir), work_order, str(source)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert worker.stdout is not None
    assert worker.stdout.readline().strip() == "copied"
    return worker


def finish(worker: subprocess.Popen[str]) -> str:
    out, _ = worker.communicate("go\n", timeout=60)
    assert worker.returncode == 0
    return out.strip().splitlines()[-1]


def test_a_detach_keeps_the_bytes_of_an_attach_under_way_in_another_process(
    tmp_path: Path, store: Store, attachments: Attachments, acked: str
) -> None:
    source = photo(tmp_path)
    first = attachments.attach(acked, source)
    content = attachments.files.path_for(first.sha256)
    worker = paused_attach(store, acked, source)
    try:
        attachments.detach(first.id)  # no row names the content now: only the worker's copy
        assert content.exists(), "the other process's copy was deleted under it"
    finally:
        second = finish(worker)
    view = attachments.get(second)
    assert view is not None
    assert view.local_path == content
    assert hashlib.sha256(content.read_bytes()).hexdigest() == first.sha256

    attachments.detach(second)  # nothing under way any more: the bytes go
    assert not content.exists()


def test_forgetting_a_departed_work_order_keeps_an_attach_under_way(
    tmp_path: Path, store: Store, attachments: Attachments, acked: str
) -> None:
    source = photo(tmp_path)
    stays = store.record_edit("create", None, {"title": "Fence"}).entity_id
    departed = attachments.attach(acked, source)
    store.queue.ack(store.queue.claim("u", 1, TOPIC_ATTACHMENTS)[0])  # uploaded: may go
    content = attachments.files.path_for(departed.sha256)
    worker = paused_attach(store, stays, source)
    try:
        with store.db.atomic():
            store.db.execute_sql("DELETE FROM work_orders WHERE id = ?", (acked,))
        assert forget_departed(store, attachments.files) == 1
        assert attachments.get(departed.id) is None
        assert content.exists(), "the other process's copy was deleted under it"
    finally:
        second = finish(worker)
    assert attachments.get(second) is not None
    assert content.exists()
