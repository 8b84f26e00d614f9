"""Fault injection between the engine and the real server: every edit still lands once.

`FaultTransport` wraps the real HTTP transport: it can drop a request before it is sent,
forward it and then lose the response (the server applied it), delay, answer 5xx or 429 in the
server's place, or cut the body short. The server's record version counts the effects.
"""

from __future__ import annotations

import time

import pytest

from app.store.store import Store
from app.sync.conflicts import Conflicts
from server.embedded import EmbeddedServer
from tests.support.api import ServerApi
from tests.sync.sync_support import Fault, FaultTransport, counters, job_rows, sync_until_idle


def server_keys(server: EmbeddedServer) -> int:
    keys = server.store.tables.IdempotencyKey
    return int(keys.select().count())


FAULTS = [
    pytest.param([Fault("drop")], False, id="drop-before-send"),
    pytest.param([Fault("lose")], True, id="process-then-lose-response"),
    pytest.param([Fault("timeout")], True, id="process-then-read-timeout"),
    pytest.param([Fault("delay", seconds=0.3)], False, id="delay"),
    pytest.param([Fault("status", status=503)], False, id="503"),
    pytest.param([Fault("status", status=502), Fault("status", status=504)], False, id="502-504"),
    pytest.param([Fault("status", status=429, headers={"Retry-After": "0.3"})], False, id="429"),
    pytest.param([Fault("truncate")], True, id="truncated-body"),
    pytest.param(
        [Fault("lose"), Fault("truncate"), Fault("drop")], True, id="lose-twice-then-drop"
    ),
]


@pytest.mark.parametrize("batch_size", [1, 20])
@pytest.mark.parametrize(("faults", "replays"), FAULTS)
async def test_every_edit_lands_exactly_once(
    store: Store,
    server: EmbeddedServer,
    token_a: str,
    api_a: ServerApi,
    faults: list[Fault],
    replays: bool,
    batch_size: int,
) -> None:
    created = [store.record_edit("create", None, {"title": f"WO {n}"}).entity_id for n in range(3)]
    await sync_until_idle(store, server.base_url, token_a)
    for entity in created:
        store.record_edit("update", entity, {"status": "in_progress"})
    new = store.record_edit("create", None, {"title": "Made offline"}).entity_id
    keys_before = server_keys(server)

    transport = FaultTransport()
    transport.plan(*faults)
    started = time.monotonic()
    await sync_until_idle(
        store, server.base_url, token_a, transport=transport, batch_size=batch_size
    )
    elapsed = time.monotonic() - started

    assert transport.faults == []  # every planned fault was played
    assert set(j["status"] for j in job_rows(store)) == {"done"}
    for entity in created:
        record = api_a.client.get(f"/v1/records/{entity}").json()["record"]
        assert (record["version"], record["status"]) == (2, "in_progress")
    assert api_a.client.get(f"/v1/records/{new}").json()["record"]["version"] == 1
    # One idempotency key per job reached the server: each effect ran once.
    assert server_keys(server) - keys_before == 4
    duplicates = counters(store).get("duplicates_detected", 0)
    if replays:
        assert duplicates >= 1  # the retry met the stored response of the first try
    else:
        assert duplicates == 0
    if any(f.status == 429 for f in faults):
        assert elapsed >= 0.3  # Retry-After honoured


async def test_lost_response_of_a_create_is_not_a_conflict(
    store: Store, server: EmbeddedServer, token_a: str, api_a: ServerApi
) -> None:
    entity = store.record_edit("create", None, {"title": "Pump"}).entity_id
    store.record_edit("update", entity, {"notes": "chained"})
    transport = FaultTransport()
    transport.plan(Fault("lose"))
    await sync_until_idle(store, server.base_url, token_a, transport=transport, batch_size=1)
    record = api_a.client.get(f"/v1/records/{entity}").json()["record"]
    assert (record["version"], record["notes"]) == (2, "chained")
    assert Conflicts(store).views() == []
    assert counters(store).get("duplicates_detected") == 1


async def test_stale_base_is_not_overwritten_after_a_pull_during_backoff(
    store: Store,
    other_store: Store,
    server: EmbeddedServer,
    token_a: str,
    token_b: str,
    api_a: ServerApi,
) -> None:
    """The pull may advance the cached server snapshot while an edit waits for its retry;
    the 409 that follows must still compare against the version the edit was made on."""
    entity = store.record_edit("create", None, {"title": "Pump"}).entity_id
    await sync_until_idle(store, server.base_url, token_a)
    await sync_until_idle(other_store, server.base_url, token_b)
    other_store.record_edit("update", entity, {"title": "Office title"})
    await sync_until_idle(other_store, server.base_url, token_b)

    job = store.record_edit("update", entity, {"title": "My title"}).job_id
    transport = FaultTransport()
    transport.plan(Fault("status", status=503, headers={"Retry-After": "0.3"}))
    await sync_until_idle(store, server.base_url, token_a, transport=transport, batch_size=1)
    assert api_a.client.get(f"/v1/records/{entity}").json()["record"]["title"] == "Office title"
    view = Conflicts(store).get(job)
    assert view.overlapping == ("title",)
