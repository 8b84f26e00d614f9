"""A work order deleted before it ever reached the server, while its photo waited for its
create (issue 20): the upload never fails afterwards, and nothing of it waits forever."""

from __future__ import annotations

from pathlib import Path

from app.attachments import Attachments
from app.store.store import Store
from server.embedded import EmbeddedServer
from tests.attachments.conftest import photo
from tests.sync.sync_support import sync_until_idle


async def test_deleting_a_never_synced_work_order_does_not_fail_its_photo_upload(
    tmp_path: Path, store: Store, server: EmbeddedServer
) -> None:
    token = server.add_device("phone-a", user="crew")
    attachments = Attachments(store)
    entity = store.record_edit("create", None, {"title": "Wrong job"}).entity_id
    attachments.attach(entity, photo(tmp_path))
    store.record_edit("delete", entity)

    await sync_until_idle(store, server.base_url, token)

    assert store.stats()["uploads"]["failed"] == 0
    assert (
        store.read("SELECT id, topic, status FROM jobs WHERE status IN ('dead', 'conflict')") == []
    )
    assert store.read("SELECT id FROM jobs WHERE finished_at IS NULL") == []
