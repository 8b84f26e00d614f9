"""Attachments in the changes feed: colleagues' as metadata, ours confirmed, removals."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.attachments import Attachments
from app.executor import StoreExecutor
from app.states import AttachmentState
from app.store.store import Store
from app.sync.errors import MalformedReplyError
from app.sync.reconcile import Reconciler, ReconcileReport, apply_page
from app.sync.transport import ServerClient
from tests.attachments.conftest import photo
from tests.attachments.fake_tus import FakeTus
from tests.attachments.test_uploader import server, upload_all
from tests.sync.fake_clock import FakeClock
from tests.sync.fake_server import record

__all__ = ["server"]  # the uploader tests' fake tus server


def listed(attachment_id: str, entity_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": attachment_id,
        "filename": "damage.jpg",
        "content_type": "image/jpeg",
        "size": 52_000,
        "sha256": "ab" * 32,
        "created_at": "2026-12-01T09:30:00.000Z",
        "created_by": "phone-b",
        **extra,
    }


def test_a_colleagues_attachment_arrives_as_metadata_and_leaves_as_a_tombstone(
    store: Store, attachments: Attachments
) -> None:
    entity, theirs = str(uuid.uuid4()), str(uuid.uuid4())
    page = [record(entity, attachments=[listed(theirs, entity)])]
    apply_page(store, page, "1")
    [view] = attachments.list_for(entity)
    assert (view.id, view.state, view.mine) == (theirs, AttachmentState.UPLOADED, False)
    assert (view.filename, view.size, view.created_by) == ("damage.jpg", 52_000, "phone-b")
    assert view.local_path is None, "bytes stay on the server; a thumbnail is asked for"
    assert attachments.counts_for([entity])[entity].waiting == 0

    tombstone = {**listed(theirs, entity), "entity_id": entity, "deleted": True}
    apply_page(store, [record(entity, version=1)], "2", attachments=[tombstone])
    assert attachments.list_for(entity) == []


async def test_our_attachment_seen_in_the_feed_is_confirmed_and_not_sent_again(
    tmp_path: Path,
    store: Store,
    attachments: Attachments,
    acked: str,
    server: FakeTus,
    clock: FakeClock,
) -> None:
    view = attachments.attach(acked, photo(tmp_path))
    # Say the upload completed from another process whose reply was lost: the feed tells.
    change = {**listed(view.id, acked), "entity_id": acked, "deleted": False}
    apply_page(store, [], "5", attachments=[change])
    assert attachments.get(view.id).state is AttachmentState.UPLOADED  # type: ignore[union-attr]
    await upload_all(store, server, clock)
    assert server.requests == [], "nothing left to send"
    assert store.queue.in_flight() == 0


@pytest.mark.parametrize(
    "item",
    [{"id": 5}, "not an object", {"id": "a", "filename": "x", "size": "12", "sha256": "ab"}],
)
async def test_an_unusable_attachment_holds_the_page_back(store: Store, item: Any) -> None:
    entity = str(uuid.uuid4())

    def feed(request: httpx.Request) -> httpx.Response:
        body = {"changes": [record(entity)], "next": "9", "has_more": False}
        body["attachments"] = [item]
        return httpx.Response(200, json=body)

    client = ServerClient("http://server.test", lambda: "t", transport=httpx.MockTransport(feed))
    executor = StoreExecutor()
    try:
        with pytest.raises(MalformedReplyError, match="attachment"):
            await Reconciler(store, client, executor).pull(ReconcileReport())
    finally:
        await client.aclose()
        await executor.run(store.db.close)
        executor.shutdown()
    assert store.cache.get(entity) is None, "nothing of the page was applied"
