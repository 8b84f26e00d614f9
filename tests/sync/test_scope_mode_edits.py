"""A real device's pending edit survives its work order leaving the scope in scope mode
(`--worker-search scope`, issue 20): the app's store and engine against the real server on
loopback, on SQLite and PostgreSQL. README "Save still sends the edit"."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.store.store import Store
from app.sync.conflicts import Conflicts
from server.embedded import EmbeddedServer, start_server
from tests.support.api import ServerApi
from tests.support.postgres import PostgresCluster
from tests.sync.sync_support import job_rows, sync_until_idle

_databases = itertools.count()


@pytest.fixture(params=["sqlite", "postgres"])
def scoped(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EmbeddedServer]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'server.sqlite3'}"
    else:
        cluster: PostgresCluster = request.getfixturevalue("postgres")
        url = cluster.create_database(f"scope_mode_{next(_databases)}")
    with start_server(url, rate_limit_per_second=0, worker_search="scope") as running:
        yield running


@pytest.fixture
def office(scoped: EmbeddedServer) -> Iterator[ServerApi]:
    api = ServerApi(scoped.base_url, scoped.add_device("office", "admin"))
    yield api
    api.close()


def server_record(api: ServerApi, entity_id: str) -> dict[str, Any]:
    reply = api.client.get(f"/v1/records/{entity_id}")
    assert reply.status_code == 200, reply.text
    record: dict[str, Any] = reply.json()["record"]
    return record


async def test_an_edit_made_before_reassignment_lands_after_it(
    store: Store, scoped: EmbeddedServer, office: ServerApi
) -> None:
    ana = scoped.add_device("ana-phone", user="ana", team="north")
    order = office.create(title="Pump", team="north")
    await sync_until_idle(store, scoped.base_url, ana)
    assert store.cache.get(order["id"]) is not None
    store.record_edit("update", order["id"], {"notes": "seal replaced"})
    moved = office.update(order["id"], 1, team="south", title="Pump (south)")
    assert moved.status_code == 200, moved.text

    await sync_until_idle(store, scoped.base_url, ana)
    landed = server_record(office, order["id"])
    assert landed["notes"] == "seal replaced", "merged with the move and applied"
    assert landed["team"] == "south"
    assert store.cache.get(order["id"]) is None, "then the work order left the phone"
    assert {job["status"] for job in job_rows(store)} == {"done"}


async def test_a_conflicting_edit_held_for_a_person_lands_after_the_work_order_left(
    store: Store, scoped: EmbeddedServer, office: ServerApi
) -> None:
    ana = scoped.add_device("ana-phone", user="ana", team="north")
    order = office.create(title="Pump", team="north")
    await sync_until_idle(store, scoped.base_url, ana)
    store.record_edit("update", order["id"], {"title": "Pump, seal replaced"})
    moved = office.update(order["id"], 1, team="south", title="Pump (south)")
    assert moved.status_code == 200, moved.text

    await sync_until_idle(store, scoped.base_url, ana)  # the 409 holds it for ana
    [view] = Conflicts(store).views()
    await sync_until_idle(store, scoped.base_url, ana)  # pulls go on past its departure
    assert Conflicts(store).resolve(view.job_id, {"title": "mine"}) == "resent"
    await sync_until_idle(store, scoped.base_url, ana)
    landed = server_record(office, order["id"])
    assert landed["title"] == "Pump, seal replaced"
    assert landed["team"] == "south"
    assert {job["status"] for job in job_rows(store)} == {"done"}


async def test_a_phone_that_never_held_a_work_order_cannot_edit_it(
    store: Store, scoped: EmbeddedServer, office: ServerApi
) -> None:
    order = office.create(title="South's pump", team="south")
    ana = scoped.add_device("ana-phone", user="ana", team="north")
    await sync_until_idle(store, scoped.base_url, ana)
    assert store.cache.get(order["id"]) is None
    ana_api = ServerApi(scoped.base_url, ana)
    try:
        answer = ana_api.update(order["id"], 1, title="taken")
        assert (answer.status_code, answer.json()) == (404, {"error": "not_found"})
    finally:
        ana_api.close()
    assert server_record(office, order["id"])["title"] == "South's pump"
