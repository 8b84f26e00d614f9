"""Scope mode (`--worker-search scope`) tried as an attacker with known ids would (issue 20):
what a worker may not read answers as missing on every route, no field of it leaves, and no
write changes it; what a worker held and lost it may still edit. SQLite and PostgreSQL, one
server per backend for the module."""

from __future__ import annotations

import io
import itertools
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from PIL import Image

from server.auth import revoke_device, set_device
from server.db.store import open_store
from server.embedded import EmbeddedServer, start_server
from tests.support.api import ServerApi, create_body, new_id
from tests.support.postgres import PostgresCluster
from tests.support.tus import create_upload, file_metadata, upload_whole

_names = itertools.count()
NOT_FOUND = {"error": "not_found"}


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def scoped(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EmbeddedServer]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('scoped') / 'server.sqlite3'}"
    else:
        cluster: PostgresCluster = request.getfixturevalue("postgres")
        url = cluster.create_database(f"access_scope_{uuid.uuid4().hex[:8]}")
    with start_server(url, worker_search="scope", rate_limit_per_second=0) as running:
        yield running


Device = Callable[..., ServerApi]


@pytest.fixture
def device(scoped: EmbeddedServer) -> Iterator[Device]:
    made: list[ServerApi] = []

    def make(role: str = "worker", *, user: str | None = None, team: str = "") -> ServerApi:
        name = f"dev-{next(_names)}-{uuid.uuid4().hex[:6]}"
        token = scoped.add_device(name, role, user=user or name, team=team)  # type: ignore[arg-type]
        made.append(ServerApi(scoped.base_url, token))
        return made[-1]

    yield make
    for api in made:
        api.close()


def team() -> str:
    return f"team-{uuid.uuid4().hex[:8]}"


def jpeg() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 48), (20, 80, 200)).save(out, "JPEG")
    return out.getvalue()


def attach(api: ServerApi, entity_id: str, data: bytes) -> str:
    _, sent = upload_whole(api.client, entity_id, data)
    return sent["attachment_id"]


def as_missing(response: httpx.Response) -> None:
    """The answer a work order that does not exist gets."""
    assert response.status_code == 404, response.text
    assert response.json() == NOT_FOUND


def record(admin: ServerApi, entity_id: str) -> dict[str, Any]:
    answer = admin.client.get(f"/v1/records/{entity_id}")
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()["record"]
    return found


def south_order(device: Device) -> tuple[ServerApi, ServerApi, dict[str, Any]]:
    """An admin, a worker of another team, and a work order of team south's."""
    office = device("admin")
    south = team()
    order = office.create(title="south's secret pump", team=south, notes="gate code 4411")
    return office, device(team=team()), order


def test_updates_deletes_and_batches_of_a_hidden_work_order_change_nothing(
    device: Device,
) -> None:
    office, north, order = south_order(device)
    entity_id = order["id"]
    as_missing(north.update(entity_id, order["version"], title="mine now"))
    delete = {"entity_id": entity_id, "op": "delete", "base_version": 1, "fields": {}}
    as_missing(north.mutate(delete))
    items = [
        {"idempotency_key": new_id(), "entity_id": entity_id, "op": "update",
         "base_version": 1, "fields": {"notes": "overwritten"}},
        {"idempotency_key": new_id(), "entity_id": str(uuid.uuid4()), "op": "update",
         "base_version": 1, "fields": {"notes": "nothing there"}},
    ]  # fmt: skip
    answer = north.batch(items)
    assert answer.status_code == 200
    hidden, missing = answer.json()["results"]
    assert (hidden["status"], hidden["body"]) == (missing["status"], missing["body"]) == (
        404, NOT_FOUND,
    )  # fmt: skip
    assert record(office, entity_id) == order


def test_assigning_a_hidden_work_order_to_oneself_does_not_take_it(device: Device) -> None:
    office, north, order = south_order(device)
    me = north.client.get("/v1/me").json()
    as_missing(north.update(order["id"], 1, assignee=me["user"], team=me["team"]))
    assert record(office, order["id"])["assignee"] == order["assignee"]
    entries, _ = north.pull(None, 100)
    assert order["id"] not in {entry["id"] for entry in entries}


def test_a_create_or_stale_update_of_a_hidden_work_order_carries_no_current(
    device: Device,
) -> None:
    _, north, order = south_order(device)
    for answer in (
        north.mutate(create_body(order["id"], title="same id")),
        north.update(order["id"], 99, title="stale"),
        north.batch([{"idempotency_key": new_id(), **create_body(order["id"])}]),
    ):
        assert "gate code" not in answer.text
        assert "south" not in answer.text
        body = answer.json()
        if "results" in body:
            [item] = body["results"]
            assert (item["status"], item["body"]) == (404, NOT_FOUND)
        else:
            as_missing(answer)


def test_raising_a_conflict_on_a_hidden_work_order_snapshots_nothing(device: Device) -> None:
    office, north, order = south_order(device)
    body = {"entity_id": order["id"], "base_version": 1, "mine": {"title": "x"}}
    answer = north.client.post("/v1/conflicts", json=body, headers={"Idempotency-Key": new_id()})
    as_missing(answer)
    assert north.client.get("/v1/conflicts").json() == {"conflicts": []}
    raised = office.client.get("/v1/conflicts").json()["conflicts"]
    assert order["id"] not in {conflict["entity_id"] for conflict in raised}


def test_files_of_a_work_order_outside_the_scope_are_missing(device: Device) -> None:
    office, north, order = south_order(device)
    photo = attach(office, order["id"], jpeg())
    for path in (f"/v1/attachments/{photo}", f"/v1/attachments/{photo}/thumbnail"):
        as_missing(north.client.get(path))
        assert office.client.get(path).status_code == 200


def test_files_of_a_work_order_that_left_the_scope_are_missing(device: Device) -> None:
    office = device("admin")
    north = team()
    ana = device(team=north)
    order = office.create(title="moving", team=north)
    photo = attach(ana, order["id"], jpeg())
    assert ana.client.get(f"/v1/attachments/{photo}").status_code == 200
    assert office.update(order["id"], 1, team=team()).status_code == 200
    as_missing(ana.client.get(f"/v1/attachments/{photo}"))
    as_missing(ana.client.get(f"/v1/attachments/{photo}/thumbnail"))


def test_removing_another_teams_photo_is_missing_and_keeps_it(device: Device) -> None:
    office, north, order = south_order(device)
    photo = attach(office, order["id"], jpeg())
    answer = north.client.delete(f"/v1/attachments/{photo}", headers={"Idempotency-Key": new_id()})
    as_missing(answer)
    listed = record(office, order["id"])["attachments"]
    assert [item["id"] for item in listed] == [photo]


def test_uploading_to_a_hidden_work_order_is_missing(device: Device) -> None:
    office, north, order = south_order(device)
    data = b"not for south"
    answer = create_upload(north.client, len(data), file_metadata(order["id"], data))
    as_missing(answer)
    missing = create_upload(north.client, len(data), file_metadata(str(uuid.uuid4()), data))
    assert (missing.status_code, missing.json()) == (answer.status_code, answer.json())
    assert "attachments" not in record(office, order["id"])


def test_pin_and_unpin_of_a_hidden_work_order_answer_as_missing(device: Device) -> None:
    office, north, order = south_order(device)
    absent = str(uuid.uuid4())
    for method in ("POST", "DELETE"):
        hidden = north.client.request(method, f"/v1/pins/{order['id']}")
        missing = north.client.request(method, f"/v1/pins/{absent}")
        as_missing(hidden)
        assert (hidden.status_code, hidden.json()) == (missing.status_code, missing.json())


def test_single_reads_and_search_of_a_hidden_work_order_find_nothing(device: Device) -> None:
    _, north, order = south_order(device)
    as_missing(north.client.get(f"/v1/records/{order['id']}"))
    found = north.client.get("/v1/records", params={"q": "south's secret"}).json()
    assert found["records"] == []


def test_an_edit_held_before_reassignment_is_merged_and_applied_after_it(
    device: Device,
) -> None:
    """README "Save still sends the edit": the device had the work order; it left (another
    team); the edit it made meanwhile gets the `current` it needs to merge, and the merged
    edit goes through."""
    office = device("admin")
    north = team()
    ana = device(team=north)
    order = office.create(title="meter", team=north)
    entries, token = ana.pull(None, 100)
    assert order["id"] in {entry["id"] for entry in entries}
    assert office.update(order["id"], 1, team=team(), title="meter (south)").status_code == 200
    stale = ana.update(order["id"], 1, notes="read 4411 kWh")  # made before the move
    assert stale.status_code == 409, stale.text
    current = stale.json()["current"]
    assert current["version"] == 2
    assert current["title"] == "meter (south)"
    merged = ana.update(order["id"], current["version"], notes="read 4411 kWh")
    assert merged.status_code == 200, merged.text
    assert record(office, order["id"])["notes"] == "read 4411 kWh"
    as_missing(ana.update(order["id"], 99, notes="a version it was never sent"))
    # It left: reading it, its files, or pinning it again is not an edit.
    as_missing(ana.client.get(f"/v1/records/{order['id']}"))
    as_missing(ana.client.post(f"/v1/pins/{order['id']}"))
    later, _ = ana.pull(token, 100)
    assert {"id": order["id"], "out_of_scope": True} in later


def test_an_edit_held_before_unpinning_is_applied_after_it(device: Device) -> None:
    office = device("admin")
    ana = device(team=team())
    order = office.create(title="kept offline", team=team())
    assert office.update(order["id"], 1, assignee="ana-for-now").status_code == 200
    ana_user = ana.client.get("/v1/me").json()["user"]
    assert office.update(order["id"], 2, assignee=ana_user).status_code == 200
    assert ana.client.post(f"/v1/pins/{order['id']}").status_code == 200
    assert office.update(order["id"], 3, assignee="carl").status_code == 200
    ana.pull(None, 100)  # holds version 4, pinned
    assert ana.client.delete(f"/v1/pins/{order['id']}").status_code == 200
    applied = ana.update(order["id"], 4, notes="done before unpinning")
    assert applied.status_code == 200, applied.text
    assert record(office, order["id"])["notes"] == "done before unpinning"
    as_missing(ana.client.get(f"/v1/records/{order['id']}"))


def test_a_device_that_never_held_a_work_order_gets_404_for_it_always(device: Device) -> None:
    office = device("admin")
    north = team()
    order = office.create(title="left before the phone came", team=north)
    assert office.update(order["id"], 1, team=team()).status_code == 200
    newcomer = device(team=north)
    newcomer.pull(None, 100)
    for base in (1, 2, 3):
        as_missing(newcomer.update(order["id"], base, notes="guessing"))
    as_missing(newcomer.mutate(create_body(order["id"])))


def test_a_legacy_phones_edit_lands_after_set_device_scoped_it(
    scoped: EmbeddedServer, device: Device
) -> None:
    """A device from before scopes had everything; `set-device` scopes it, and the edits it
    made before still go through for the work orders that left it then."""
    office = device("admin")
    order = office.create(title="before scopes", team=team())
    old = device(team="")
    name = old.client.get("/v1/me").json()["device"]
    store = open_store(scoped.settings.db_url)
    try:
        devices = store.tables.Device
        devices.update(legacy_scope=True).where(devices.name == name).execute()
        assert set_device(store, name, team=team()) is not None
    finally:
        store.close()
    applied = old.update(order["id"], 1, notes="made before the upgrade")
    assert applied.status_code == 200, applied.text
    as_missing(old.client.get(f"/v1/records/{order['id']}"))


def test_revoking_a_device_forgets_what_it_was_sent(scoped: EmbeddedServer, device: Device) -> None:
    office = device("admin")
    north = team()
    ana = device(team=north)
    office.create(title="sent to ana", team=north)
    ana.pull(None, 100)
    name = ana.client.get("/v1/me").json()["device"]
    store = open_store(scoped.settings.db_url)
    try:
        devices, held = store.tables.Device, store.tables.HeldRecord
        ana_id = devices.get(devices.name == name).id
        assert held.select().where(held.device_id == ana_id).count() == 1
        assert revoke_device(store, name)
        assert held.select().where(held.device_id == ana_id).count() == 0
    finally:
        store.close()
