"""Scoped sync through real HTTP (issue 16): a worker device against the real server on
loopback, on SQLite and on PostgreSQL, its work orders reassigned (also while open in the
editor), pinned, searched, its team changed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from app.events import EventBus
from app.executor import StoreExecutor
from app.operations import Operations
from app.store.scope import Identity, read_identity
from app.store.store import Store
from app.sync.conflicts import Conflicts
from app.sync.scope import Finder
from app.sync.transport import ServerClient
from server.embedded import EmbeddedServer
from tests.support.api import ServerApi
from tests.sync.sync_support import close_engine_thread, job_rows, make_engine, sync_until_idle


@pytest.fixture
def server(server_on_each_backend: EmbeddedServer) -> EmbeddedServer:
    """Every test here runs against a server on SQLite and one on PostgreSQL."""
    return server_on_each_backend


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


@pytest.fixture
async def operations(store: Store) -> AsyncIterator[Operations]:
    """The core writes the app's editor calls (hold, save, let go), on their own executor."""
    executor = StoreExecutor()
    yield Operations(store, executor, EventBus())
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


async def opened_then_reassigned(
    store: Store, server: EmbeddedServer, token: str, admin_api: ServerApi, ops: Operations
) -> tuple[dict[str, Any], Any]:
    """A work order of ana's, open in her editor (nothing saved yet), reassigned by the
    office and pulled again: the pull's report."""
    order = admin_api.create(title="Pump", assignee="ana")
    await sync_until_idle(store, server.base_url, token)
    assert await ops.hold_for_editing(order["id"]) is True
    reassign(admin_api, order["id"], assignee="bo")
    return order, await pull_only(store, server, token)


async def test_a_work_order_open_in_the_editor_stays_and_its_save_reaches_the_server(
    store: Store, server: EmbeddedServer, ana: str, admin_api: ServerApi, operations: Operations
) -> None:
    order, report = await opened_then_reassigned(store, server, ana, admin_api, operations)
    assert report.kept_unsent == 1
    row = store.cache.get(order["id"])
    assert row is not None, "the person is typing in it: it stays"
    assert row["no_longer_assigned"] is True

    # The person saves what they typed: queued, delivered, accepted (the server lets any
    # device write a work order it may read, inside its scope or not).
    await operations.save_edit("update", order["id"], {"notes": "typed while reassigned"})
    await sync_until_idle(store, server.base_url, ana)
    on_server = current(admin_api, order["id"])
    assert on_server["notes"] == "typed while reassigned"
    assert on_server["assignee"] == "bo", "the office's reassignment stands"
    assert {job["status"] for job in job_rows(store)} == {"done"}
    assert store.cache.get(order["id"]) is not None, "still on screen: it stays"

    # The editor lets go: nothing of it is unsent, so it leaves the device now.
    assert await operations.release_editing(order["id"]) == {order["id"]}
    assert store.cache.get(order["id"]) is None
    await sync_until_idle(store, server.base_url, ana)
    assert store.cache.get(order["id"]) is None, "and does not come back"


async def test_letting_go_of_an_unsaved_work_order_that_left_removes_it(
    store: Store, server: EmbeddedServer, ana: str, admin_api: ServerApi, operations: Operations
) -> None:
    order, _ = await opened_then_reassigned(store, server, ana, admin_api, operations)
    await sync_until_idle(store, server.base_url, ana)
    assert store.cache.get(order["id"]) is not None, "later pulls keep it while it is open"
    assert await operations.release_editing(order["id"]) == {order["id"]}
    assert store.cache.get(order["id"]) is None
    assert current(admin_api, order["id"])["version"] == 2, "nothing was sent"


async def test_an_app_start_lets_go_of_what_an_earlier_run_held(
    store: Store, server: EmbeddedServer, ana: str, admin_api: ServerApi, operations: Operations
) -> None:
    order, _ = await opened_then_reassigned(store, server, ana, admin_api, operations)
    kept = admin_api.create(title="Still mine", assignee="ana")
    await sync_until_idle(store, server.base_url, ana)
    assert await operations.hold_for_editing(kept["id"]) is True
    assert await operations.release_editing() == {order["id"]}, "the one in the scope stays"
    assert [row["id"] for row in store.cache.query()] == [kept["id"]]


async def test_a_work_order_gone_from_the_device_cannot_be_held(
    store: Store, server: EmbeddedServer, ana: str, admin_api: ServerApi, operations: Operations
) -> None:
    order = admin_api.create(title="Pump", assignee="ana")
    await sync_until_idle(store, server.base_url, ana)
    reassign(admin_api, order["id"], assignee="bo")
    await sync_until_idle(store, server.base_url, ana)
    assert await operations.hold_for_editing(order["id"]) is False
    assert store.cache.get(order["id"]) is None


async def test_an_edit_the_server_refuses_after_the_work_order_left_is_kept_for_the_person(
    store: Store, server: EmbeddedServer, ana: str, admin_api: ServerApi, operations: Operations
) -> None:
    order, _ = await opened_then_reassigned(store, server, ana, admin_api, operations)
    version = current(admin_api, order["id"])["version"]
    gone = admin_api.mutate(
        {"entity_id": order["id"], "op": "delete", "base_version": version, "fields": {}}
    )
    assert gone.status_code == 200, gone.text
    await operations.save_edit("update", order["id"], {"notes": "typed before it was deleted"})
    await sync_until_idle(store, server.base_url, ana)

    # The server could not take it (the work order is deleted there): the edit is held for
    # the person, with their words, and the work order stays until they decide.
    [view] = Conflicts(store).views()
    assert view.entity_id == order["id"]
    [held_job] = [job for job in job_rows(store) if job["status"] == "conflict"]
    assert "typed before it was deleted" in held_job["payload"]
    await operations.release_editing(order["id"])
    row = store.cache.get(order["id"])
    assert row is not None, "an edit the server refused keeps it, even after the editor"
    assert row["no_longer_assigned"] is True
