"""Scoped sync at the HTTP edge (issue 16), against `httpx.MockTransport`: departures in the
feed, who the device is, pins (sent, or kept offline and sent before the next pull), search."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from app.events import EventBus, OpChanges
from app.executor import StoreExecutor
from app.store.scope import Identity, pending_pins, read_identity
from app.store.store import Store
from app.sync.reconcile import Reconciler
from app.sync.scope import Finder, NeedsConnection, PinRefused, SearchRefused
from app.sync.transport import ServerClient
from tests.sync.fake_clock import FakeClock
from tests.sync.fake_server import FakeServer, json_response, record
from tests.sync.sync_support import job_rows, make_engine, running, wait_until

URL = "http://fieldsync.test"
Handler = Callable[[httpx.Request], httpx.Response]


class Server:
    """Answers the scope endpoints from plain Python state; everything else is a 404."""

    def __init__(self) -> None:
        self.records: dict[str, dict[str, Any]] = {}
        self.pins: set[str] = set()
        self.feed: list[Any] = []
        self.me: dict[str, Any] | None = {
            "device": "phone-a",
            "user": "ana",
            "team": "north",
            "role": "worker",
        }
        self.reachable = True
        self.requests: list[httpx.Request] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if not self.reachable:
            raise httpx.ConnectError("connection refused", request=request)
        path = request.url.path
        if path == "/v1/me":
            return json_response(404 if self.me is None else 200, self.me or {"error": "x"})
        if path == "/v1/changes":
            page, self.feed = self.feed, []
            # Each record as this device's user sees it: pinned or not, now.
            page = [{**e, "pinned": e["id"] in self.pins} if "title" in e else e for e in page]
            return json_response(200, {"changes": page, "next": "9", "has_more": False})
        if path.startswith("/v1/pins/"):
            entity_id = path.rsplit("/", 1)[1]
            if entity_id not in self.records:
                return json_response(404, {"error": "not_found"})
            if request.method == "POST":
                self.pins.add(entity_id)
            else:
                self.pins.discard(entity_id)
            return json_response(200, {"id": entity_id, "pinned": entity_id in self.pins})
        if path.startswith("/v1/records/"):
            found = self.records.get(path.rsplit("/", 1)[1])
            if found is None:
                return json_response(404, {"error": "not_found"})
            return json_response(200, {"record": found})
        if path == "/v1/records":
            query = request.url.params["q"]
            if len(query) > 100:
                return json_response(422, {"error": "invalid_payload", "detail": "q: too long"})
            hits = sorted(
                (r for r in self.records.values() if query.lower() in r["title"].lower()),
                key=lambda r: r["id"],
            )
            start = int(request.url.params.get("cursor", "0"))
            limit = int(request.url.params["limit"])
            more = start + limit < len(hits)
            return json_response(
                200,
                {
                    "records": hits[start : start + limit],
                    "next_cursor": str(start + limit) if more else None,
                },
            )
        return json_response(404, {"error": "not_found"})

    def add(self, **fields: Any) -> dict[str, Any]:
        created = record(str(uuid.uuid4()), **fields)
        self.records[created["id"]] = created
        return created


@pytest.fixture
def server() -> Server:
    return Server()


@pytest.fixture
async def finder(store: Store, server: Server) -> AsyncIterator[Finder]:
    client = ServerClient(URL, lambda: "t", transport=httpx.MockTransport(server.handle))
    executor = StoreExecutor()
    yield Finder(store, executor, client, EventBus())
    await client.aclose()
    executor.submit(store.db.close)
    executor.shutdown()


async def test_search_pages_and_says_what_is_available_offline(
    finder: Finder, server: Server, store: Store
) -> None:
    found = [server.add(title=f"Pump {n}") for n in range(3)]
    server.add(title="Fence")
    held = sorted(found, key=lambda r: r["id"])[0]
    await finder.executor.run(_cache, store, held)

    first = await finder.search("pump", limit=2)
    assert len(first.records) == 2
    assert first.next_cursor == "2"
    second = await finder.search("pump", limit=2, cursor=first.next_cursor)
    assert second.next_cursor is None
    ids = [r["id"] for r in first.records + second.records]
    assert sorted(ids) == sorted(r["id"] for r in found), "every page, nothing twice"
    offline = {r["id"]: r["available_offline"] for r in first.records + second.records}
    assert offline == {r["id"]: r["id"] == held["id"] for r in found}


async def test_search_without_the_server_says_it_needs_a_connection(
    finder: Finder, server: Server
) -> None:
    server.reachable = False
    with pytest.raises(NeedsConnection, match="search needs a connection to the server"):
        await finder.search("pump")


async def test_a_refused_search_says_why(finder: Finder) -> None:
    with pytest.raises(SearchRefused, match="q: too long"):
        await finder.search("x" * 101)


async def test_pinning_a_search_result_keeps_it_offline_at_once(
    finder: Finder, server: Server, store: Store
) -> None:
    found = server.add(title="Valve")
    told: list[Any] = []
    finder.events.subscribe(told.append)
    assert await finder.pin(found["id"]) == "sent"
    assert server.pins == {found["id"]}
    row = await finder.executor.run(store.cache.get, found["id"])
    assert row is not None
    assert row["pinned"] is True
    assert row["title"] == "Valve"
    assert told == [OpChanges(frozenset({found["id"]}))]
    assert await finder.unpin(found["id"]) == "sent"
    assert server.pins == set()
    assert await finder.unpin(found["id"]) == "sent", "idempotent"


async def test_a_pin_made_offline_is_sent_before_the_next_pull(
    finder: Finder, server: Server, store: Store
) -> None:
    found = server.add(title="Valve")
    await finder.executor.run(_cache, store, found)
    server.reachable = False
    assert await finder.pin(found["id"]) == "queued"
    row = await finder.executor.run(store.cache.get, found["id"])
    assert row is not None
    assert row["pinned"] is True, "shown at once"
    server.reachable = True
    server.feed = [{**found, "version": 2}]
    reconciler = Reconciler(store, finder.client, finder.executor)
    await reconciler.run()
    assert server.pins == {found["id"]}
    paths = [r.url.path for r in server.requests]
    assert paths.index(f"/v1/pins/{found['id']}", 1) < paths.index("/v1/changes")
    assert await finder.executor.run(pending_pins, store) == []
    row = await finder.executor.run(store.cache.get, found["id"])
    assert row is not None
    assert row["pinned"] is True


async def test_a_pin_of_an_unknown_work_order_is_refused(finder: Finder) -> None:
    with pytest.raises(PinRefused, match="refused to pin"):
        await finder.pin(str(uuid.uuid4()))
    assert await finder.executor.run(pending_pins, finder.store) == []
    with pytest.raises(ValueError, match="not a work-order id"):
        await finder.pin("nope")


async def test_the_pull_learns_who_the_device_is(
    finder: Finder, server: Server, store: Store
) -> None:
    reconciler = Reconciler(store, finder.client, finder.executor)
    await reconciler.run()
    assert await finder.identity() == Identity("phone-a", "ana", "north", "worker")
    server.me = None  # an older server: what the device knew stays
    reconciler.scope.identity_stale()
    await reconciler.run()
    assert await finder.executor.run(read_identity, store) == Identity(
        "phone-a", "ana", "north", "worker"
    )


async def test_the_feed_removes_departed_work_orders_and_keeps_unsent_edits(
    finder: Finder, server: Server, store: Store
) -> None:
    quiet, edited = server.add(title="Quiet"), server.add(title="Edited")
    server.feed = [quiet, edited]
    reconciler = Reconciler(store, finder.client, finder.executor)
    await reconciler.run()
    await finder.executor.run(store.record_edit, "update", edited["id"], {"notes": "typed"})
    server.feed = [
        {"id": quiet["id"], "out_of_scope": True},
        {"id": edited["id"], "out_of_scope": True},
    ]
    report = await reconciler.run()
    assert report.left_scope == 2
    assert report.kept_unsent == 1
    assert {quiet["id"], edited["id"]} <= report.changed_ids
    assert await finder.executor.run(store.cache.get, quiet["id"]) is None
    row = await finder.executor.run(store.cache.get, edited["id"])
    assert row is not None
    assert row["no_longer_assigned"] is True
    assert row["notes"] == "typed"


async def test_an_unusable_departure_holds_the_page(
    finder: Finder, server: Server, store: Store
) -> None:
    from app.sync.errors import MalformedReplyError

    server.feed = [{"id": "not-a-uuid", "out_of_scope": True}]
    reconciler = Reconciler(store, finder.client, finder.executor)
    with pytest.raises(MalformedReplyError, match="out-of-scope entry"):
        await reconciler.run()
    token = await finder.executor.run(
        lambda: store.db.execute_sql(
            "SELECT value FROM settings WHERE key='changes_token'"
        ).fetchall()
    )
    assert token == [], "the token did not move past the page"


def _cache(store: Store, found: dict[str, Any]) -> None:
    from app.sync.reconcile import apply_page

    apply_page(store, [found], "1")


async def test_the_engine_keeps_a_departed_work_order_until_its_retried_edit_lands(
    clocked_store: Store, clock: FakeClock
) -> None:
    store = clocked_store
    fake = FakeServer()
    order = record(str(uuid.uuid4()), assignee="ana")
    _cache(store, order)
    store.record_edit("update", order["id"], {"notes": "seal replaced"})
    fake.script = [json_response(503, {"error": "busy"})]  # the first send fails
    fake.changes = [
        json_response(
            200,
            {
                "changes": [{"id": order["id"], "out_of_scope": True}],
                "next": "5",
                "has_more": False,
            },
        )
    ]
    engine = make_engine(store, URL, "t", transport=fake.transport, clock=clock)
    seen: list[dict[str, Any] | None] = []

    def kept() -> bool:
        row = store.cache.get(order["id"])
        seen.append(row)
        return row is not None and row["no_longer_assigned"]

    async with running(engine) as runner:
        await wait_until(engine, runner, kept)
        assert {job["status"] for job in job_rows(store)} == {"pending"}, "still unsent"
        await wait_until(engine, runner, lambda: store.cache.get(order["id"]) is None)
    delivered = [m for body in fake.bodies() for m in body.get("mutations", [body])]
    assert delivered[-1]["fields"] == {"notes": "seal replaced"}
    assert {job["status"] for job in job_rows(store)} == {"done"}
    assert all(row is not None for row in seen), "never gone before the edit landed"
