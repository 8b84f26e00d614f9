"""Stale-while-revalidate: a record opened on the device is served from the cache at once and
refreshed in the background with If-None-Match when it is older than the TTL."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from app.store.store import Store
from server.embedded import EmbeddedServer
from tests.sync.fake_clock import FakeClock
from tests.sync.sync_support import make_engine


class RecordingTransport(httpx.AsyncHTTPTransport):
    """The real transport, noting each record read and its If-None-Match."""

    def __init__(self) -> None:
        super().__init__()
        self.record_reads: list[tuple[str, str | None, int]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        if request.url.path.startswith("/v1/records/"):
            self.record_reads.append(
                (request.url.path, request.headers.get("if-none-match"), response.status_code)
            )
        return response


async def _open_record(
    store: Store, server: EmbeddedServer, token: str, entity_id: str, **config: Any
) -> RecordingTransport:
    transport = RecordingTransport()
    clock = FakeClock()
    engine = make_engine(
        store, server.base_url, token, transport=transport, pull_interval_s=3600, clock=clock,
        **config,
    )  # fmt: skip
    runner = asyncio.create_task(engine.run())
    try:
        await clock.asleep()  # the start-up reconcile is over; only the read remains
        before = clock.sleeps_begun
        engine.revalidate(entity_id)
        await clock.asleep(since=before)  # the read is done: the engine sleeps again
    finally:
        await engine.stop()
        await runner
    return transport


def test_only_a_stale_record_is_revalidated_with_its_etag(
    store: Store, server: EmbeddedServer, token_a: str
) -> None:
    entity_id = store.record_edit("create", fields={"title": "Pump"}).entity_id
    assert asyncio.run(make_engine(store, server.base_url, token_a).run_until_idle(20))
    path = f"/v1/records/{entity_id}"

    fresh = asyncio.run(_open_record(store, server, token_a, entity_id, stale_after_s=3600))
    assert fresh.record_reads == []

    synced_at = store.cache.get(entity_id)["last_synced_at"]
    store.db.execute_sql("UPDATE work_orders SET last_synced_at = ?", (synced_at - 7200,))
    stale = asyncio.run(_open_record(store, server, token_a, entity_id, stale_after_s=3600))
    assert stale.record_reads == [(path, '"1"', 304)]
    assert store.cache.get(entity_id)["last_synced_at"] > synced_at


def test_a_stale_record_changed_on_the_server_is_refreshed(
    store: Store, other_store: Store, server: EmbeddedServer, token_a: str, token_b: str
) -> None:
    entity_id = store.record_edit("create", fields={"title": "Pump"}).entity_id
    assert asyncio.run(make_engine(store, server.base_url, token_a).run_until_idle(20))
    assert asyncio.run(make_engine(other_store, server.base_url, token_b).run_until_idle(20))
    other_store.record_edit("update", entity_id, {"notes": "changed at the office"})
    assert asyncio.run(make_engine(other_store, server.base_url, token_b).run_until_idle(20))

    transport = asyncio.run(_open_record(store, server, token_a, entity_id, stale_after_s=0))
    record = store.cache.get(entity_id)
    assert (record["server_version"], record["notes"]) == (2, "changed at the office")
    # The start-up pull had already brought version 2, so the read found it current.
    assert transport.record_reads == [(f"/v1/records/{entity_id}", '"2"', 304)]
