"""The engine against the real server on loopback (embedded uvicorn, temp SQLite file)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.events import QueueChanged, SyncProgress
from app.executor import StoreExecutor
from app.store.store import Store
from app.sync.conflicts import Conflicts
from app.sync.reconcile import SYNC_TOKEN_KEY, Reconciler, read_setting
from app.sync.transport import ServerClient
from server.embedded import EmbeddedServer
from tests.support.api import ServerApi
from tests.sync.sync_support import (
    FaultTransport,
    close_engine_thread,
    job_rows,
    make_engine,
    sync_until_idle,
)


def server_record(api: ServerApi, entity_id: str) -> dict[str, Any]:
    response = api.client.get(f"/v1/records/{entity_id}")
    assert response.status_code == 200, response.text
    record: dict[str, Any] = response.json()["record"]
    return record


def statuses(store: Store) -> list[str]:
    return [j["status"] for j in job_rows(store)]


async def shared_record(
    server: EmbeddedServer, a: Store, token_a: str, b: Store, token_b: str, **fields: Any
) -> str:
    """A work order created on device A, synced, and pulled by device B."""
    entity = a.record_edit("create", None, {"title": "Pump", "site": "North", **fields}).entity_id
    await sync_until_idle(a, server.base_url, token_a)
    await sync_until_idle(b, server.base_url, token_b)
    assert b.cache.get(entity)["server_version"] == 1
    return entity


async def test_drains_hundreds_of_offline_edits(
    store: Store, server: EmbeddedServer, token_a: str, api_a: ServerApi
) -> None:
    ids = [store.record_edit("create", None, {"title": f"WO {n}"}).entity_id for n in range(200)]
    for entity in ids[:100]:
        store.record_edit("update", entity, {"status": "in_progress"})
    for entity in ids[:50]:
        store.record_edit("update", entity, {"notes": "done soon"})
    for entity in ids[190:]:
        store.record_edit("delete", entity)
    await sync_until_idle(store, server.base_url, token_a, batch_size=100)
    assert set(statuses(store)) == {"done"}
    by_id = {r["id"]: r for r in api_a.all_changes(limit=1000)}
    assert set(by_id) == set(ids)
    for n, entity in enumerate(ids):
        record = by_id[entity]
        expected_version = 1 + (n < 100) + (n < 50) + (n >= 190)
        assert record["version"] == expected_version, (n, record)
        assert record["status"] == ("in_progress" if n < 100 else "open")
        assert record["deleted"] is (n >= 190)
        cached = store.cache.get(entity)
        assert cached["server_version"] == expected_version
        assert cached["origin"] == "server"
        assert cached["pending_edits"] == 0


async def test_same_field_on_two_devices_is_a_conflict_with_base_mine_server(
    store: Store, other_store: Store, server: EmbeddedServer, token_a: str, token_b: str
) -> None:
    entity = await shared_record(server, store, token_a, other_store, token_b)
    other_store.record_edit("update", entity, {"title": "Pump (B)"})
    await sync_until_idle(other_store, server.base_url, token_b)
    job = store.record_edit("update", entity, {"title": "Pump (A)", "notes": "from A"}).job_id
    await sync_until_idle(store, server.base_url, token_a)
    assert statuses(store)[-1] == "conflict"
    view = Conflicts(store).get(job)
    fields = {f.name: f for f in view.fields}
    assert (fields["title"].base, fields["title"].mine, fields["title"].server) == (
        "Pump",
        "Pump (A)",
        "Pump (B)",
    )
    assert fields["title"].state == "overlap"
    assert fields["notes"].state == "mine"
    assert view.kind == "version"
    assert view.server_updated_by == "phone-b"
    assert view.overlapping == ("title",)


async def test_different_fields_on_two_devices_merge_by_themselves(
    store: Store,
    other_store: Store,
    server: EmbeddedServer,
    token_a: str,
    token_b: str,
    api_a: ServerApi,
) -> None:
    entity = await shared_record(server, store, token_a, other_store, token_b)
    other_store.record_edit("update", entity, {"site": "South"})
    await sync_until_idle(other_store, server.base_url, token_b)
    store.record_edit("update", entity, {"notes": "seal ordered"})
    await sync_until_idle(store, server.base_url, token_a)
    assert Conflicts(store).views() == []
    record = server_record(api_a, entity)
    assert (record["site"], record["notes"], record["version"]) == ("South", "seal ordered", 3)
    cached = store.cache.get(entity)
    assert (cached["site"], cached["notes"], cached["server_version"]) == (
        "South",
        "seal ordered",
        3,
    )


@pytest.mark.parametrize(
    ("choice", "title", "notes"),
    [
        ("mine", "Pump (A)", "notes A"),
        ("theirs", "Pump (B)", "notes B"),
        ({"title": "mine", "notes": "theirs"}, "Pump (A)", "notes B"),
    ],
    ids=["mine", "theirs", "per-field"],
)
async def test_resolution_sends_the_merged_record(
    store: Store,
    other_store: Store,
    server: EmbeddedServer,
    token_a: str,
    token_b: str,
    api_a: ServerApi,
    choice: Any,
    title: str,
    notes: str,
) -> None:
    entity = await shared_record(server, store, token_a, other_store, token_b)
    other_store.record_edit("update", entity, {"title": "Pump (B)", "notes": "notes B"})
    await sync_until_idle(other_store, server.base_url, token_b)
    job = store.record_edit(
        "update", entity, {"title": "Pump (A)", "notes": "notes A", "priority": "high"}
    ).job_id
    await sync_until_idle(store, server.base_url, token_a)
    assert Conflicts(store).get(job).overlapping == ("title", "notes")

    outcome = Conflicts(store).resolve(job, choice)
    await sync_until_idle(store, server.base_url, token_a)
    record = server_record(api_a, entity)
    assert (record["title"], record["notes"]) == (title, notes)
    # A field only I changed always survives the resolution.
    assert record["priority"] == "high"
    assert record["version"] == (3 if outcome == "resent" else 2)
    assert Conflicts(store).views() == []
    assert set(statuses(store)) == {"done"}
    cached = store.cache.get(entity)
    assert (cached["title"], cached["notes"], cached["priority"]) == (title, notes, "high")


async def test_edit_against_a_server_delete_offers_restore(
    store: Store,
    other_store: Store,
    server: EmbeddedServer,
    token_a: str,
    token_b: str,
    api_a: ServerApi,
) -> None:
    entity = await shared_record(server, store, token_a, other_store, token_b)
    other_store.record_edit("delete", entity)
    await sync_until_idle(other_store, server.base_url, token_b)
    job = store.record_edit("update", entity, {"notes": "pump replaced"}).job_id
    await sync_until_idle(store, server.base_url, token_a)
    view = Conflicts(store).get(job)
    assert view.kind == "deleted_on_server"
    assert "deleted" in view.overlapping
    # What the person typed is still on the device.
    assert store.cache.get(entity)["notes"] == "pump replaced"

    assert Conflicts(store).resolve(job, "restore") == "resent"
    await sync_until_idle(store, server.base_url, token_a)
    record = server_record(api_a, entity)
    assert (record["deleted"], record["notes"]) == (False, "pump replaced")


async def keep_theirs_before_my_next_edit(
    store: Store,
    server: EmbeddedServer,
    token: str,
    api: ServerApi,
    mine_first: dict[str, Any],
    mine_next: dict[str, Any] | None,
    office: dict[str, Any],
) -> tuple[str, int]:
    """Two offline edits of one work order, the next made on top of the first (None: a
    delete); the office changes it meanwhile. The first edit conflicts and the person keeps
    the office's values; then everything syncs. Returns the work order and the next edit."""
    entity = store.record_edit("create", None, {"title": "Pump"}).entity_id
    await sync_until_idle(store, server.base_url, token)
    first = store.record_edit("update", entity, mine_first).job_id
    op = "delete" if mine_next is None else "update"
    after = store.record_edit(op, entity, mine_next).job_id
    assert api.update(entity, 1, **office).status_code == 200
    await sync_until_idle(store, server.base_url, token)
    assert Conflicts(store).resolve(first, "theirs") == "discarded"
    await sync_until_idle(store, server.base_url, token)
    return entity, after


def status_of(store: Store, job_id: int) -> str:
    return str({row["id"]: row["status"] for row in job_rows(store)}[job_id])


async def test_keeping_theirs_is_not_undone_by_my_next_edit_of_the_same_field(
    store: Store, server: EmbeddedServer, token_a: str, api_a: ServerApi
) -> None:
    # The next edit was made without seeing the office's title either: it must conflict
    # too, not go out against the newest version and overwrite what the person just kept.
    entity, after = await keep_theirs_before_my_next_edit(
        store, server, token_a, api_a, {"title": "A1"}, {"title": "A2"}, {"title": "Office"}
    )
    assert server_record(api_a, entity)["title"] == "Office"
    assert status_of(store, after) == "conflict"
    title = {f.name: f for f in Conflicts(store).get(after).fields}["title"]
    assert (title.mine, title.server) == ("A2", "Office")


async def test_my_next_edit_of_other_fields_goes_through_after_keeping_theirs(
    store: Store, server: EmbeddedServer, token_a: str, api_a: ServerApi
) -> None:
    # A field the office did not touch goes out against its version: no conflict needed.
    entity, after = await keep_theirs_before_my_next_edit(
        store, server, token_a, api_a, {"notes": "mine"}, {"assignee": "Ana"}, {"notes": "office"}
    )
    on_server = server_record(api_a, entity)
    assert (on_server["notes"], on_server["assignee"]) == ("office", "Ana")
    assert status_of(store, after) == "done"
    assert Conflicts(store).views() == []


async def test_my_queued_delete_after_keeping_theirs_is_a_conflict(
    store: Store, server: EmbeddedServer, token_a: str, api_a: ServerApi
) -> None:
    # A delete sets no field, so "the server changed none of its fields" proved nothing:
    # it went out against the office's newer version and removed its changes unseen.
    office = {"notes": "office", "title": "Office title"}
    entity, after = await keep_theirs_before_my_next_edit(
        store, server, token_a, api_a, {"notes": "mine"}, None, office
    )
    assert not server_record(api_a, entity)["deleted"]
    assert status_of(store, after) == "conflict"


async def test_my_edit_after_keeping_their_record_of_the_same_id_is_a_conflict(
    store: Store, server: EmbeddedServer, token_a: str, api_a: ServerApi
) -> None:
    # My create met a record the server already had under that id ("exists"); I keep theirs.
    # My later edit of it was made on my values, not theirs: it must not overwrite theirs.
    entity = api_a.create(title="Office")["id"]
    store.import_records([{"id": entity, "title": "Mine"}])
    later = store.record_edit("update", entity, {"title": "Mine v2"}).job_id
    await sync_until_idle(store, server.base_url, token_a)
    [conflict] = Conflicts(store).views()
    assert conflict.kind == "exists"

    assert Conflicts(store).resolve(conflict.job_id, "theirs") == "discarded"
    await sync_until_idle(store, server.base_url, token_a)

    assert server_record(api_a, entity)["title"] == "Office"
    assert status_of(store, later) == "conflict"
    title = {f.name: f for f in Conflicts(store).get(later).fields}["title"]
    assert (title.mine, title.server) == ("Mine v2", "Office")


async def test_delete_against_a_server_edit_is_a_conflict(
    store: Store,
    other_store: Store,
    server: EmbeddedServer,
    token_a: str,
    token_b: str,
    api_a: ServerApi,
) -> None:
    entity = await shared_record(server, store, token_a, other_store, token_b)
    other_store.record_edit("update", entity, {"notes": "still needed"})
    await sync_until_idle(other_store, server.base_url, token_b)
    job = store.record_edit("delete", entity).job_id
    await sync_until_idle(store, server.base_url, token_a)
    view = Conflicts(store).get(job)
    assert view.kind == "edited_on_server"
    assert server_record(api_a, entity)["deleted"] is False
    assert Conflicts(store).resolve(job, "theirs") == "discarded"
    await sync_until_idle(store, server.base_url, token_a)
    assert server_record(api_a, entity)["deleted"] is False
    cached = store.cache.get(entity)
    assert (cached["deleted"], cached["notes"]) == (False, "still needed")


async def test_escalated_conflict_waits_for_the_admin_and_closes_itself(
    store: Store,
    other_store: Store,
    server: EmbeddedServer,
    token_a: str,
    token_b: str,
    api_a: ServerApi,
    admin_api: ServerApi,
) -> None:
    entity = await shared_record(server, store, token_a, other_store, token_b)
    other_store.record_edit("update", entity, {"title": "Pump (B)"})
    await sync_until_idle(other_store, server.base_url, token_b)
    job = store.record_edit("update", entity, {"title": "Pump (A)"}).job_id
    await sync_until_idle(store, server.base_url, token_a)

    Conflicts(store).escalate(job, note="which pump?")
    await sync_until_idle(store, server.base_url, token_a)
    view = Conflicts(store).get(job)
    assert view.status == "escalated"
    assert view.review_id is not None
    [review] = admin_api.client.get("/v1/conflicts", params={"status": "open"}).json()["conflicts"]
    assert review["entity_id"] == entity
    assert review["mine"] == {"title": "Pump (A)"}
    assert review["note"] == "which pump?"
    assert str(review["id"]) == view.review_id
    # The record waits: nothing was sent over the server's version, and a sync keeps waiting.
    await sync_until_idle(store, server.base_url, token_a)
    assert server_record(api_a, entity)["version"] == 2
    assert Conflicts(store).get(job).status == "escalated"

    decided = admin_api.client.post(
        f"/v1/conflicts/{review['id']}/resolve",
        json={"fields": {"title": "Pump 2 (admin)"}, "base_version": 2},
    )
    assert decided.status_code == 200, decided.text
    await sync_until_idle(store, server.base_url, token_a)
    assert Conflicts(store).views() == []
    assert Conflicts(store).get(job).status == "resolved"
    cached = store.cache.get(entity)
    assert (cached["title"], cached["server_version"], cached["pending_edits"]) == (
        "Pump 2 (admin)",
        3,
        0,
    )


async def test_dismissed_review_closes_the_local_conflict(
    store: Store,
    other_store: Store,
    server: EmbeddedServer,
    token_a: str,
    token_b: str,
    admin_api: ServerApi,
) -> None:
    entity = await shared_record(server, store, token_a, other_store, token_b)
    other_store.record_edit("update", entity, {"title": "Pump (B)"})
    await sync_until_idle(other_store, server.base_url, token_b)
    job = store.record_edit("update", entity, {"title": "Pump (A)"}).job_id
    await sync_until_idle(store, server.base_url, token_a)
    Conflicts(store).escalate(job)
    await sync_until_idle(store, server.base_url, token_a)
    review_id = Conflicts(store).get(job).review_id
    assert admin_api.client.post(f"/v1/conflicts/{review_id}/dismiss", json={}).status_code == 200
    await sync_until_idle(store, server.base_url, token_a)
    assert Conflicts(store).views() == []
    assert store.cache.get(entity)["title"] == "Pump (B)"


async def test_reconnect_after_a_long_offline_period(
    store: Store,
    other_store: Store,
    server: EmbeddedServer,
    token_a: str,
    token_b: str,
    api_a: ServerApi,
) -> None:
    ids = [store.record_edit("create", None, {"title": f"WO {n}"}).entity_id for n in range(60)]
    await sync_until_idle(store, server.base_url, token_a)
    await sync_until_idle(other_store, server.base_url, token_b)
    # Days offline: the office changes 40 records, the device edits 20 (10 on the same field).
    for entity in ids[:40]:
        other_store.record_edit("update", entity, {"site": "Depot", "title": "B title"})
    new_on_server = [
        other_store.record_edit("create", None, {"title": f"New {n}"}).entity_id for n in range(15)
    ]
    await sync_until_idle(other_store, server.base_url, token_b)
    for entity in ids[30:40]:  # same field as the office: conflicts
        store.record_edit("update", entity, {"title": "A title"})
    for entity in ids[40:50]:  # untouched by the office: plain updates
        store.record_edit("update", entity, {"notes": "A notes"})
    for entity in ids[20:30]:  # other fields than the office's: merged
        store.record_edit("update", entity, {"priority": "high"})
    local_new = store.record_edit("create", None, {"title": "Made offline"}).entity_id

    await sync_until_idle(store, server.base_url, token_a)

    open_conflicts = {v.entity_id for v in Conflicts(store).views()}
    assert open_conflicts == set(ids[30:40])
    server_side = {r["id"]: r for r in api_a.all_changes(limit=1000)}
    for entity in [*ids, *new_on_server, local_new]:
        cached = store.cache.get(entity)
        assert cached is not None
        if entity in open_conflicts:
            # The pending edit survived the pull; the server's version is known for the merge.
            assert cached["title"] == "A title"
            assert cached["server_version"] == server_side[entity]["version"]
            continue
        for name in ("title", "site", "notes", "priority"):
            assert cached[name] == server_side[entity][name], (entity, name)
        assert cached["server_version"] == server_side[entity]["version"]
    assert all(server_side[e]["priority"] == "high" for e in ids[20:30])
    assert all(server_side[e]["site"] == "Depot" for e in ids[20:30])
    assert store.cache.count() == 60 + 15 + 1  # nothing wiped


async def test_pull_never_overwrites_pending_local_edits(
    store: Store,
    other_store: Store,
    server: EmbeddedServer,
    token_a: str,
    token_b: str,
) -> None:
    entity = await shared_record(server, store, token_a, other_store, token_b)
    other_store.record_edit("update", entity, {"title": "Office title", "site": "Depot"})
    await sync_until_idle(other_store, server.base_url, token_b)
    store.record_edit("update", entity, {"title": "My title"})
    client = ServerClient(server.base_url, lambda: token_a)
    executor = StoreExecutor()
    try:
        await Reconciler(store, client, executor).pull(report := _report())
    finally:
        await client.aclose()
        executor.submit(store.db.close)
        executor.shutdown()
    cached = store.cache.get(entity)
    assert cached["title"] == "My title"  # the person's edit is still what they see
    assert cached["server_version"] == 2  # while the server's version is known
    assert report.kept_local == 1
    assert statuses(store)[-1] == "pending"


def _report() -> Any:
    from app.sync.reconcile import ReconcileReport

    return ReconcileReport()


class KillAfterPages(FaultTransport):
    """The changes feed dies (as if the process were killed) after ``pages`` answered pages."""

    def __init__(self, pages: int) -> None:
        super().__init__()
        self.pages_left = pages
        self.since: list[str | None] = []
        self.seen: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/changes":
            if self.pages_left == 0:
                raise httpx.ConnectError("killed", request=request)
            self.pages_left -= 1
            self.since.append(request.url.params.get("since"))
            response = await super().handle_async_request(request)
            self.seen.extend(r["id"] for r in __import__("json").loads(response.content)["changes"])
            return response
        return await super().handle_async_request(request)


async def test_changes_token_is_saved_per_page(
    store: Store, other_store: Store, server: EmbeddedServer, token_a: str, token_b: str
) -> None:
    ids = [
        other_store.record_edit("create", None, {"title": f"WO {n}"}).entity_id for n in range(45)
    ]
    await sync_until_idle(other_store, server.base_url, token_b)

    first = KillAfterPages(3)
    await sync_until_idle(
        store, server.base_url, token_a, transport=first, pull_page_size=10, limit_s=1.5,
        expect_idle=False,
    )  # fmt: skip
    assert len(first.seen) == 30
    token_after_kill = read_setting(store, SYNC_TOKEN_KEY)
    assert token_after_kill is not None
    assert store.cache.count() == 30

    second = KillAfterPages(100)
    await sync_until_idle(store, server.base_url, token_a, transport=second, pull_page_size=10)
    assert second.since[0] == token_after_kill  # resumed where the last applied page ended
    assert not set(first.seen) & set(second.seen)  # nothing repeated
    assert sorted(first.seen + second.seen) == sorted(ids)  # nothing skipped
    assert store.cache.count() == 45


async def test_revalidate_fetches_changed_records_and_touches_unchanged(
    store: Store, other_store: Store, server: EmbeddedServer, token_a: str, token_b: str
) -> None:
    entity = await shared_record(server, store, token_a, other_store, token_b)
    same = await shared_record(server, store, token_a, other_store, token_b)
    other_store.record_edit("update", entity, {"site": "Depot"})
    await sync_until_idle(other_store, server.base_url, token_b)
    transport = FaultTransport()
    client = ServerClient(server.base_url, lambda: token_a, transport=transport)
    executor = StoreExecutor()
    report = _report()
    try:
        await Reconciler(store, client, executor).revalidate([entity, same], report)
    finally:
        await client.aclose()
        executor.submit(store.db.close)
        executor.shutdown()
    assert report.changed_ids == {entity}
    assert report.revalidated == 2
    assert [r.headers.get("If-None-Match") for r in transport.requests] == ['"1"', '"1"']
    cached = store.cache.get(entity)
    assert (cached["site"], cached["server_version"]) == ("Depot", 2)


async def test_all_sent_is_shown_when_the_flush_ends_not_after_the_pull(
    store: Store, server: EmbeddedServer, token_a: str
) -> None:
    """The status bar's "all sent" (a QueueChanged with nothing outstanding) comes when the
    last batch is recorded, before the pull that follows the flush, even though queue events
    are throttled while batches drain."""
    store.import_records({"title": f"WO {n}"} for n in range(500))
    timeline: list[str] = []

    def on_event(event: object) -> None:
        if isinstance(event, QueueChanged):
            outstanding = event.depth["pending"] + event.depth["leased"]
            timeline.append("all sent" if outstanding == 0 else "sending")
        elif isinstance(event, SyncProgress) and event.phase == "pull":
            timeline.append("pull")

    engine = make_engine(store, server.base_url, token_a, batch_size=50)
    engine.events.subscribe(on_event)
    try:
        assert await engine.run_until_idle(30.0)
    finally:
        close_engine_thread(engine)
    assert "pull" in timeline
    assert "all sent" in timeline
    assert timeline.index("all sent") < timeline.index("pull"), timeline
    assert timeline.count("sending") < 10  # still throttled: not one event per batch
