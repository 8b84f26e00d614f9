"""A work order the server never had, given up with photos waiting for its create: the
uploads go with it (kept in the audit log), nothing waits forever, nothing stays behind."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from app.attachments import Attachments
from app.store.jobs import TOPIC_ATTACHMENTS, Outcome
from app.store.store import Store
from app.sync.conflicts import Conflicts
from server.embedded import EmbeddedServer
from tests.attachments.conftest import photo
from tests.attachments.test_scope_exit import reassign
from tests.support.api import ServerApi
from tests.sync.sync_support import close_engine_thread, make_engine, sync_until_idle
from tests.sync.test_scope_integration import pull_only


def _failed_create(store: Store, attachments: Attachments, tmp_path: Path) -> tuple[str, int, str]:
    entity = store.record_edit("create", None, {"title": "Broken meter"}).entity_id
    view = attachments.attach(entity, photo(tmp_path))
    (create,) = store.queue.claim("pipeline", 10)
    store.queue.dead(create, Outcome(error="HTTP 422", http_status=422))
    return entity, create.id, view.id


def test_giving_up_a_never_sent_create_discards_its_waiting_uploads(
    tmp_path: Path, store: Store, attachments: Attachments
) -> None:
    entity, create_id, attachment_id = _failed_create(store, attachments, tmp_path)
    sha = attachments.get(attachment_id).sha256  # type: ignore[union-attr]
    assert attachments.files.path_for(sha).exists()

    Conflicts(store).give_up(create_id)

    assert store.cache.get(entity) is None
    assert attachments.get(attachment_id) is None, "no attachment row of a work order gone"
    assert not attachments.files.path_for(sha).exists(), "its bytes went in the same step"
    assert store.read("SELECT id FROM jobs WHERE finished_at IS NULL") == []
    assert store.queue.claim("uploader", 1, TOPIC_ATTACHMENTS) == [], "nothing left to send"
    assert store.queue.in_flight() == 0
    # Not silently lost: the person's discard of the upload is in the audit log too.
    logged = [
        (key, json.loads(entry)["payload"].get("op"))
        for key, entry in store.read(
            "SELECT entity_key, detail FROM audit_log WHERE action = 'discard' ORDER BY id"
        )
    ]
    assert logged == [(entity, "create"), (f"attachment:{attachment_id}", "upload")]


def test_a_shared_file_stays_for_the_attachment_that_stays(
    tmp_path: Path, store: Store, attachments: Attachments, acked: str
) -> None:
    kept = attachments.attach(acked, photo(tmp_path))
    entity, create_id, attachment_id = _failed_create(store, attachments, tmp_path)
    Conflicts(store).give_up(create_id)
    assert attachments.get(attachment_id) is None
    assert attachments.files.path_for(kept.sha256).exists()
    assert [job.idempotency_key for job in store.queue.claim("u", 5, TOPIC_ATTACHMENTS)] == [
        kept.id
    ]


async def test_the_server_never_hears_of_a_discarded_work_orders_photo(
    tmp_path: Path, store: Store, server: EmbeddedServer
) -> None:
    token = server.add_device("phone-a", user="crew")
    attachments = Attachments(store)
    entity, create_id, attachment_id = _failed_create(store, attachments, tmp_path)
    Conflicts(store).give_up(create_id)

    await sync_until_idle(store, server.base_url, token)

    assert store.stats()["uploads"]["failed"] == 0
    assert store.read("SELECT id, status FROM jobs WHERE status IN ('dead', 'conflict')") == []
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=server.base_url, headers=headers) as client:
        assert (await client.get(f"/v1/records/{entity}")).status_code == 404
        assert (await client.get(f"/v1/attachments/{attachment_id}")).status_code == 404


async def test_an_edits_ack_takes_a_departed_work_orders_photo_in_the_same_step(
    tmp_path: Path, store: Store, server: EmbeddedServer
) -> None:
    """The last unsent edit of a work order that left the scope is delivered: the work
    order and its (uploaded) photo's copy go then, not at the next pull or sweep."""
    ana = server.add_device("ana-phone", user="ana")
    office = ServerApi(server.base_url, server.add_device("office", "admin", user="office"))
    order = office.create(title="Pump", assignee="ana")
    await sync_until_idle(store, server.base_url, ana)
    view = Attachments(store).attach(order["id"], photo(tmp_path))
    await sync_until_idle(store, server.base_url, ana)
    kept = Attachments(store).files.path_for(view.sha256)
    assert kept.exists(), "an uploaded photo is kept for viewing"
    store.record_edit("update", order["id"], {"notes": "seal replaced"})
    reassign(office, order["id"], "bo")
    office.close()
    report = await pull_only(store, server, ana)
    assert report.kept_unsent == 1

    engine = make_engine(store, server.base_url, ana)
    try:
        # The edit only (no pull, no sweep): a 409 on the moved version merges and resends.
        for _ in range(3):
            await engine.pipeline.flush()
    finally:
        await engine.client.aclose()
        close_engine_thread(engine)

    assert store.read("SELECT status FROM jobs WHERE finished_at IS NULL") == []
    assert store.cache.get(order["id"]) is None, "the work order left with its last edit"
    assert store.read("SELECT id FROM attachments") == []
    assert not kept.exists(), "and its photo's copy in the same step"
