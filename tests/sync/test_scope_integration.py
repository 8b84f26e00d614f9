"""Scoped sync through real HTTP (issue 16): a worker device against the real server on
loopback, its work orders reassigned, pinned, searched, its team changed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from app.events import EventBus
from app.executor import StoreExecutor
from app.store.scope import Identity, read_identity
from app.store.store import Store
from app.sync.conflicts import Conflicts
from app.sync.scope import Finder
from app.sync.transport import ServerClient
from server.embedded import EmbeddedServer
from tests.support.api import ServerApi
from tests.sync.sync_support import close_engine_thread, job_rows, make_engine, sync_until_idle


@pytest.fixture
def ana(server: EmbeddedServer) -> str:
    """A worker's phone: the person ana, in team north."""
    return server.add_device("ana-phone", user="ana", team="north")


@pytest.fixture
async def finder(store: Store, server: EmbeddedServer, ana: str) -> AsyncIterator[Finder]:
    client = ServerClient(server.base_url, lambda: ana)
    executor = StoreExecutor()
    yield Finder(store, executor, client, EventBus())
    await client.aclose()
    executor.submit(store.db.close)
    executor.shutdown()


async def pull_only(store: Store, server: EmbeddedServer, token: str) -> Any:
    """One pull with nothing sent first (a pull while an edit waits for its next attempt)."""
    engine = make_engine(store, server.base_url, token)
    try:
        return await engine.reconciler.run()
    finally:
        await engine.client.aclose()
        close_engine_thread(engine)


def current(api: ServerApi, entity_id: str) -> dict[str, Any]:
    reply = api.client.get(f"/v1/records/{entity_id}")
    assert reply.status_code == 200, reply.text
    record: dict[str, Any] = reply.json()["record"]
    return record


def reassign(api: ServerApi, entity_id: str, **fields: Any) -> dict[str, Any]:
    reply = api.update(entity_id, current(api, entity_id)["version"], **fields)
    assert reply.status_code == 200, reply.text
    record: dict[str, Any] = reply.json()["record"]
    return record


async def left_with_edit(
    store: Store,
    server: EmbeddedServer,
    token: str,
    admin_api: ServerApi,
    edit: dict[str, Any],
    **office: Any,
) -> tuple[dict[str, Any], Any]:
    """A work order of ana's, pulled, edited on her phone, then reassigned by the office (with
    ``office``'s changes) and pulled again before the edit went: the pull's report."""
    order = admin_api.create(title="Pump", assignee="ana")
    await sync_until_idle(store, server.base_url, token)
    assert store.cache.get(order["id"]) is not None
    store.record_edit("update", order["id"], edit)
    reassign(admin_api, order["id"], assignee="bo", **office)
    return order, await pull_only(store, server, token)


def set_team(server: EmbeddedServer, device: str, team: str) -> None:
    """`fieldsync-server set-device NAME --team TEAM`, as an admin runs it."""
    from server.cli import main

    assert main(["set-device", device, "--team", team, "--db", server.settings.db_url]) == 0


async def test_a_reassigned_work_order_leaves_only_after_its_unsent_edit_lands(
    store: Store, server: EmbeddedServer, ana: str, admin_api: ServerApi
) -> None:
    order, report = await left_with_edit(store, server, ana, admin_api, {"notes": "seal replaced"})
    assert read_identity(store) == Identity("ana-phone", "ana", "north", "worker")
    assert report.kept_unsent == 1
    row = store.cache.get(order["id"])
    assert row is not None
    assert row["no_longer_assigned"] is True
    assert row["notes"] == "seal replaced"

    await sync_until_idle(store, server.base_url, ana)
    assert current(admin_api, order["id"])["notes"] == "seal replaced", "the edit landed"
    assert store.cache.get(order["id"]) is None, "then the work order left"
    assert {job["status"] for job in job_rows(store)} == {"done"}


async def test_a_work_order_without_edits_leaves_on_the_next_pull(
    store: Store, server: EmbeddedServer, ana: str, admin_api: ServerApi
) -> None:
    kept = admin_api.create(title="Kept", assignee="ana")
    moved = admin_api.create(title="Moved", assignee="ana")
    await sync_until_idle(store, server.base_url, ana)
    reassign(admin_api, moved["id"], assignee="bo")
    await sync_until_idle(store, server.base_url, ana)
    assert [row["title"] for row in store.cache.query()] == ["Kept"]
    assert kept["id"] in {row["id"] for row in store.cache.query(scope="mine")}


@pytest.mark.parametrize("choice", ["mine", "theirs"])
async def test_a_conflict_on_a_work_order_that_left_is_shown_and_resolvable(
    store: Store, server: EmbeddedServer, ana: str, admin_api: ServerApi, choice: str
) -> None:
    order, _ = await left_with_edit(
        store, server, ana, admin_api, {"title": "Pump (ana)"}, title="Pump (office)"
    )
    await sync_until_idle(store, server.base_url, ana)

    conflicts = Conflicts(store)
    [view] = conflicts.views()
    assert view.entity_id == order["id"]
    row = store.cache.get(order["id"])
    assert row is not None
    assert row["no_longer_assigned"] is True

    conflicts.resolve(view.job_id, choice)  # type: ignore[arg-type]
    await sync_until_idle(store, server.base_url, ana)
    expected = "Pump (ana)" if choice == "mine" else "Pump (office)"
    assert current(admin_api, order["id"])["title"] == expected
    assert store.cache.get(order["id"]) is None


async def test_discarding_the_edits_of_a_work_order_that_left_removes_it(
    store: Store, server: EmbeddedServer, ana: str, admin_api: ServerApi, finder: Finder
) -> None:
    order, _ = await left_with_edit(store, server, ana, admin_api, {"notes": "first"})
    [entry] = await finder.discard_edits(order["id"])
    assert entry["payload"]["fields"] == {"notes": "first"}
    assert store.cache.get(order["id"]) is None
    await sync_until_idle(store, server.base_url, ana)
    assert current(admin_api, order["id"])["notes"] == ""


async def test_pins_keep_other_work_offline_and_survive_a_reinstall(
    store: Store,
    other_store: Store,
    server: EmbeddedServer,
    ana: str,
    admin_api: ServerApi,
    finder: Finder,
) -> None:
    theirs = admin_api.create(title="Valve at the dam", assignee="cy", team="south")
    await sync_until_idle(store, server.base_url, ana)
    assert store.cache.get(theirs["id"]) is None, "outside the scope"

    page = await finder.search("valve")
    [hit] = page.records
    assert hit["id"] == theirs["id"]
    assert hit["available_offline"] is False
    assert await finder.pin(theirs["id"]) == "sent"
    assert await finder.pin(theirs["id"]) == "sent", "idempotent"
    await sync_until_idle(store, server.base_url, ana)
    row = store.cache.get(theirs["id"])
    assert row is not None
    assert row["pinned"] is True
    assert [r["id"] for r in store.cache.query(scope="pinned")] == [theirs["id"]]
    assert (await finder.search("valve")).records[0]["available_offline"] is True

    # The phone reinstalled: a new store, the same person's token.
    await sync_until_idle(other_store, server.base_url, ana)
    again = other_store.cache.get(theirs["id"])
    assert again is not None
    assert again["pinned"] is True

    assert await finder.unpin(theirs["id"]) == "sent"
    await sync_until_idle(store, server.base_url, ana)
    assert store.cache.get(theirs["id"]) is None, "unpinned and outside the scope: gone"


async def test_search_pages_through_every_match_once(
    store: Store, server: EmbeddedServer, ana: str, admin_api: ServerApi, finder: Finder
) -> None:
    made = {admin_api.create(title=f"Hydrant {n}", assignee="zed")["id"] for n in range(7)}
    admin_api.create(title="Fence")
    seen: list[str] = []
    cursor = None
    while True:
        page = await finder.search("hydrant", limit=3, cursor=cursor)
        assert len(page.records) <= 3
        seen.extend(record["id"] for record in page.records)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert sorted(seen) == sorted(made)


async def test_a_new_team_brings_its_work_orders_on_the_next_pull(
    store: Store, server: EmbeddedServer, ana: str, admin_api: ServerApi
) -> None:
    north = admin_api.create(title="North job", team="north")
    south = [admin_api.create(title=f"South job {n}", team="south")["id"] for n in range(3)]
    await sync_until_idle(store, server.base_url, ana)
    assert [row["id"] for row in store.cache.query()] == [north["id"]]

    set_team(server, "ana-phone", "south")
    engine = await sync_until_idle(store, server.base_url, ana)
    assert sorted(row["id"] for row in store.cache.query()) == sorted(south)
    assert read_identity(store) == Identity("ana-phone", "ana", "south", "worker")
    assert [row["title"] for row in store.cache.query(scope="team")][0].startswith("South")
    # Not a full download: only what changed for this device came down.
    assert engine.status.metrics.reconcile_changes <= len(south) + 1
