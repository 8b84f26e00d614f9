"""Attachments when their work order leaves the device's scope (issues 15 and 16), through the
real server on loopback: a colleague's photo leaves with the work order (row, thumbnail,
budget); a photo of this device not yet uploaded keeps the work order ("No longer assigned to
you") until it is delivered or the person gives it up, and then it leaves."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.attachments import Attachments, AttachmentView
from app.attachments.retention import Retention, Usage
from app.events import EventBus
from app.executor import StoreExecutor
from app.states import AttachmentState
from app.store.store import Store
from app.sync.reconcile import ReconcileReport
from app.sync.scope import Finder
from app.sync.transport import ServerClient
from server.embedded import EmbeddedServer
from tests.attachments.test_real_server import jpeg, served
from tests.support.api import ServerApi
from tests.sync.sync_support import close_engine_thread, make_engine, sync_until_idle
from tests.sync.test_scope_integration import pull_only

pytest.importorskip("PIL")


@pytest.fixture
def ana(server: EmbeddedServer) -> str:
    """A worker's phone: the person ana, in team north."""
    return server.add_device("ana-phone", user="ana", team="north")


@pytest.fixture
def boss(server: EmbeddedServer) -> str:
    return server.add_device("office", "admin", user="office")


@pytest.fixture
def admin_api(server: EmbeddedServer, boss: str) -> Iterator[ServerApi]:
    api = ServerApi(server.base_url, boss)
    yield api
    api.close()


def reassign(api: ServerApi, entity_id: str, assignee: str) -> None:
    record = api.client.get(f"/v1/records/{entity_id}").json()["record"]
    reply = api.update(entity_id, record["version"], assignee=assignee)
    assert reply.status_code == 200, reply.text


async def thumbnail_of(store: Store, server: EmbeddedServer, token: str, attachment_id: str) -> Any:
    viewer = make_engine(store, server.base_url, token)
    try:
        return await viewer.uploader.thumbnail(attachment_id)
    finally:
        await viewer.client.aclose()
        close_engine_thread(viewer)


Left = tuple[dict[str, Any], AttachmentView, ReconcileReport]


@pytest.fixture
async def left_with_photo(
    tmp_path: Path, store: Store, server: EmbeddedServer, ana: str, admin_api: ServerApi
) -> Left:
    """A work order of ana's with a photo taken on her phone, reassigned by the office and
    pulled again before the photo went: the work order, the photo, the pull's report."""
    order = admin_api.create(title="Pump", assignee="ana")
    await sync_until_idle(store, server.base_url, ana)
    view = Attachments(store).attach(order["id"], jpeg(tmp_path / "seal.jpg"))
    reassign(admin_api, order["id"], "bo")
    return order, view, await pull_only(store, server, ana)


def attachment_rows(store: Store) -> list[tuple[Any, ...]]:
    return store.read("SELECT id, entity_id FROM attachments ORDER BY id")


def usage(store: Store) -> Usage:
    files = Attachments(store)
    return Retention(store, files.files, files.config).usage()


async def test_a_colleagues_photo_leaves_with_its_work_order_or_its_removal(
    tmp_path: Path,
    store: Store,
    phone_b: Store,
    server: EmbeddedServer,
    ana: str,
    boss: str,
    admin_api: ServerApi,
) -> None:
    order = admin_api.create(title="Pump", assignee="ana")
    stays = admin_api.create(title="Fence", assignee="ana")
    await sync_until_idle(phone_b, server.base_url, boss)
    photo = Attachments(phone_b).attach(order["id"], jpeg(tmp_path / "pump.jpg"))
    other = Attachments(phone_b).attach(stays["id"], jpeg(tmp_path / "fence.jpg"))
    await sync_until_idle(phone_b, server.base_url, boss)

    await sync_until_idle(store, server.base_url, ana)
    assert [v.id for v in Attachments(store).list_for(order["id"])] == [photo.id]
    thumbnail = await thumbnail_of(store, server, ana, photo.id)
    kept_thumbnail = await thumbnail_of(store, server, ana, other.id)
    assert thumbnail is not None
    assert thumbnail.exists()
    assert usage(store).thumbnails > 0

    reassign(admin_api, order["id"], "bo")
    await sync_until_idle(store, server.base_url, ana)

    assert store.cache.get(order["id"]) is None
    assert attachment_rows(store) == [(other.id, stays["id"])], "the row left with it"
    assert not thumbnail.exists(), "and its cached thumbnail"
    assert kept_thumbnail.exists(), "a work order that stays keeps its thumbnail"
    assert usage(store) == Usage(0, 0, kept_thumbnail.stat().st_size), "budget freed"

    # The other photo is removed by the office: its thumbnail goes too.
    Attachments(phone_b).detach(other.id)
    await sync_until_idle(phone_b, server.base_url, boss)
    await sync_until_idle(store, server.base_url, ana)
    assert Attachments(store).list_for(stays["id"]) == []
    assert not kept_thumbnail.exists(), "a removed photo's thumbnail is not kept"
    assert usage(store) == Usage(0, 0, 0)


async def test_an_unsent_photo_keeps_its_work_order_until_it_is_uploaded(
    store: Store, server: EmbeddedServer, ana: str, boss: str, left_with_photo: Left
) -> None:
    order, view, report = left_with_photo
    attachments = Attachments(store)
    assert (report.left_scope, report.kept_unsent) == (1, 1)
    row = store.cache.get(order["id"])
    assert row is not None
    assert row["no_longer_assigned"] is True
    waiting = attachments.get(view.id)
    assert waiting is not None
    assert waiting.state is AttachmentState.WAITING
    assert waiting.local_path is not None

    await sync_until_idle(store, server.base_url, ana)
    reply = served(server, boss, view.id)
    assert reply.status_code == 200, "the photo reached the server"
    assert hashlib.sha256(reply.content).hexdigest() == view.sha256
    assert store.cache.get(order["id"]) is None, "then the work order left"
    assert attachment_rows(store) == []
    assert not waiting.local_path.exists(), "and the photo's copy with it"
    assert usage(store) == Usage(0, 0, 0)


async def test_giving_up_an_unsent_photo_of_a_work_order_that_left_removes_it(
    store: Store, server: EmbeddedServer, ana: str, boss: str, left_with_photo: Left
) -> None:
    order, view, _ = left_with_photo
    assert store.cache.get(order["id"]) is not None

    client = ServerClient(server.base_url, lambda: ana)
    executor = StoreExecutor()
    events: list[Any] = []
    bus = EventBus()
    bus.subscribe(events.append)
    try:
        [entry] = await Finder(store, executor, client, bus).discard_edits(order["id"])
    finally:
        await client.aclose()
        executor.submit(store.db.close)
        executor.shutdown()
    assert entry["payload"]["attachment_id"] == view.id
    assert store.cache.get(order["id"]) is None
    assert [event.entity_ids for event in events] == [frozenset({order["id"]})]

    await sync_until_idle(store, server.base_url, ana)
    assert served(server, boss, view.id).status_code == 404, "never sent"
    assert attachment_rows(store) == []
    assert usage(store) == Usage(0, 0, 0)
