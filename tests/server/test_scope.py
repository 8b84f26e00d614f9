"""Scoped sync through real HTTP on SQLite and PostgreSQL: who sees what, leaving the scope
once, pins, search paging, and a device whose team changes (issue 16)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from server.auth import set_device
from server.embedded import EmbeddedServer, provision_device, start_server
from tests.support.api import ServerApi
from tests.support.postgres import PostgresCluster
from tests.support.serve import ServerProcess

_names = itertools.count()


Device = Callable[..., ServerApi]


@pytest.fixture
def device(served: EmbeddedServer) -> Iterator[Device]:
    made: list[ServerApi] = []

    def make(name: str, role: str = "worker", user: str | None = None, team: str = "") -> ServerApi:
        token = served.add_device(name, role, user=user, team=team)  # type: ignore[arg-type]
        made.append(ServerApi(served.base_url, token))
        return made[-1]

    yield make
    for api in made:
        api.close()


def pull(api: ServerApi, since: str | None = None, limit: int = 3) -> tuple[list[Any], str]:
    """Every entry after `since`, paging by `limit`; and the token to go on from."""
    return api.pull(since, limit)


def held(entries: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """What a device holds after applying `entries` in order."""
    state: dict[str, dict[str, Any]] = {}
    for entry in entries:
        if entry.get("out_of_scope"):
            state.pop(entry["id"], None)
        else:
            state[entry["id"]] = entry
    return state


def titles(entries: list[dict[str, Any]]) -> set[str]:
    return {record["title"] for record in held(entries).values()}


def test_a_worker_sees_its_own_its_teams_and_its_creations_an_admin_everything(
    device: Device,
) -> None:
    office = device("office", "admin")
    ana = device("ana-phone", user="ana", team="north")
    ben = device("ben-phone", user="ben", team="south")
    office.create(title="for ana", assignee="ana")
    office.create(title="for north", team="north")
    office.create(title="for ben", assignee="ben", team="south")
    office.create(title="nobody's")
    ana.create(title="made by ana", assignee="carl")
    assert titles(pull(ana)[0]) == {"for ana", "for north", "made by ana"}
    assert titles(pull(ben)[0]) == {"for ben"}
    everything = pull(office)[0]
    assert titles(everything) == {"for ana", "for north", "for ben", "nobody's", "made by ana"}
    assert all(record["pinned"] is False for record in everything)
    assert ana.client.get("/v1/me").json() == {
        "device": "ana-phone", "user": "ana", "team": "north", "role": "worker",
    }  # fmt: skip


def test_another_device_of_the_same_person_sees_what_the_first_created(device: Device) -> None:
    phone = device("ana-phone", user="ana")
    phone.create(title="made on the phone")
    laptop = device("ana-laptop", user="ana")
    assert titles(pull(laptop)[0]) == {"made on the phone"}


def test_a_reassigned_work_order_leaves_once_and_comes_back_when_assigned_again(
    device: Device,
) -> None:
    office = device("office", "admin")
    ana = device("ana-phone", user="ana", team="north")
    record = office.create(title="valve", assignee="ana")
    first, since = pull(ana)
    assert titles(first) == {"valve"}
    moved = office.update(record["id"], 1, assignee="ben").json()["record"]
    office.update(record["id"], moved["version"], notes="ben's now")  # out of scope: unseen
    left, since = pull(ana, since)
    assert left == [{"id": record["id"], "out_of_scope": True}]
    assert pull(ana, since)[0] == []  # once
    office.update(record["id"], 3, assignee="ana")
    back, _ = pull(ana, since)
    assert [(entry["id"], entry["version"], entry["notes"]) for entry in back] == [
        (record["id"], 4, "ben's now")
    ]


def test_changing_the_team_moves_the_work_order_between_team_members(device: Device) -> None:
    office = device("office", "admin")
    north = device("n1", user="nina", team="north")
    south = device("s1", user="sam", team="south")
    record = office.create(title="pump", team="north")
    _, north_since = pull(north)
    _, south_since = pull(south)
    office.update(record["id"], 1, team="south")
    assert pull(north, north_since)[0] == [{"id": record["id"], "out_of_scope": True}]
    [arrived] = pull(south, south_since)[0]
    assert (arrived["id"], arrived["team"], arrived["version"]) == (record["id"], "south", 2)


def test_a_pin_reaches_every_device_of_the_person_and_unpinning_takes_it_away(
    device: Device,
) -> None:
    office = device("office", "admin")
    phone = device("ana-phone", user="ana")
    laptop = device("ana-laptop", user="ana")
    other = office.create(title="someone else's", assignee="ben")
    _, phone_since = pull(phone)
    for _ in range(2):  # idempotent
        answer = phone.client.post(f"/v1/pins/{other['id']}")
        assert (answer.status_code, answer.json()) == (200, {"id": other["id"], "pinned": True})
    [on_phone] = pull(phone, phone_since)[0]
    assert (on_phone["title"], on_phone["pinned"]) == ("someone else's", True)
    reinstalled, laptop_since = pull(laptop)  # a fresh device of the same person
    assert [(r["id"], r["pinned"]) for r in reinstalled] == [(other["id"], True)]
    _, phone_since = pull(phone, phone_since)
    for _ in range(2):
        answer = laptop.client.delete(f"/v1/pins/{other['id']}")
        assert (answer.status_code, answer.json()) == (200, {"id": other["id"], "pinned": False})
    gone = {"id": other["id"], "out_of_scope": True}
    assert pull(phone, phone_since)[0] == [gone]
    assert pull(laptop, laptop_since)[0] == [gone]
    assert phone.client.post("/v1/pins/6f1c1f0e-0000-4000-8000-000000000000").status_code == 404


def test_unpinning_a_work_order_still_assigned_keeps_it_unpinned(device: Device) -> None:
    office = device("office", "admin")
    ana = device("ana-phone", user="ana")
    mine = office.create(title="mine", assignee="ana")
    assert ana.client.post(f"/v1/pins/{mine['id']}").status_code == 200
    _, since = pull(ana)
    ana.client.delete(f"/v1/pins/{mine['id']}")
    [still] = pull(ana, since)[0]
    assert (still["id"], still["pinned"]) == (mine["id"], False)


def test_a_new_team_brings_its_work_orders_on_the_next_pull_and_the_old_ones_leave(
    device: Device, served: EmbeddedServer
) -> None:
    office = device("office", "admin")
    ana = device("ana-phone", user="ana", team="north")
    north = [office.create(title=f"north {n}", team="north") for n in range(4)]
    south = [office.create(title=f"south {n}", team="south") for n in range(5)]
    office.create(title="ana's own", assignee="ana", team="north")
    before, since = pull(ana)
    assert len(before) == 5
    set_device(served.store, "ana-phone", team="south")
    after, since = pull(ana, since, limit=2)
    assert {e["id"] for e in after if e.get("out_of_scope")} == {r["id"] for r in north}
    assert {e["id"] for e in after if not e.get("out_of_scope")} == {r["id"] for r in south}
    assert titles(before + after) == {f"south {n}" for n in range(5)} | {"ana's own"}
    assert pull(ana, since)[0] == []  # nothing repeats


def test_search_pages_through_every_match_of_the_organisation(device: Device) -> None:
    office = device("office", "admin")
    ana = device("ana-phone", user="ana")
    for n in range(7):
        office.create(title=f"Pump {n}", assignee="ana" if n == 0 else "ben")
    office.create(title="Fence", site="PUMP house")
    office.create(title="Gate")
    found: list[dict[str, Any]] = []
    cursor = None
    pages = 0
    while True:
        params: dict[str, Any] = {"q": "pump", "limit": 3}
        if cursor:
            params["cursor"] = cursor
        answer = ana.client.get("/v1/records", params=params)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        found += body["records"]
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert pages == 3
    assert sorted(r["title"] for r in found) == ["Fence", *(f"Pump {n}" for n in range(7))]
    assert [r["in_scope"] for r in found if r["title"] == "Pump 0"] == [True]
    assert sum(r["in_scope"] for r in found) == 1
    blank = ana.client.get("/v1/records", params={"q": " "})
    assert blank.status_code == 422


def test_worker_search_scope_reaches_only_the_scope(db_url: str) -> None:
    with start_server(db_url, rate_limit_per_second=0, worker_search="scope") as served:
        office = ServerApi(served.base_url, served.add_device("office", "admin"))
        ana = ServerApi(served.base_url, served.add_device("ana-phone", user="ana"))
        try:
            mine = office.create(title="Pump mine", assignee="ana")
            other = office.create(title="Pump other", assignee="ben")
            body = ana.client.get("/v1/records", params={"q": "pump"}).json()
            assert [r["id"] for r in body["records"]] == [mine["id"]]
            assert ana.client.get(f"/v1/records/{other['id']}").status_code == 404
            assert ana.client.post(f"/v1/pins/{other['id']}").status_code == 404
            assert office.client.get(f"/v1/records/{other['id']}").status_code == 200
        finally:
            office.close()
            ana.close()


def test_two_server_processes_share_one_rate_limit(postgres: PostgresCluster) -> None:
    db_url = postgres.create_database(f"shared_limit_{next(_names)}")
    limit = ("--rate-limit-burst", "6", "--rate-limit-per-second", "0.2")
    with ServerProcess(db_url, *limit) as first, ServerProcess(db_url, *limit) as second:
        token = provision_device(db_url, "phone-1")
        headers = {"Authorization": f"Bearer {token}"}
        answers: dict[str, list[int]] = {first.base_url: [], second.base_url: []}
        with httpx.Client(headers=headers, timeout=30) as client:
            for _ in range(8):
                for base_url, statuses in answers.items():
                    statuses.append(client.get(f"{base_url}/v1/changes").status_code)
        allowed = sum(statuses.count(200) for statuses in answers.values())
        # One bucket of 6 for both (plus at most one token refilled while asking); two
        # buckets of their own would have let 12 through.
        assert 6 <= allowed <= 7, answers
        assert all(429 in statuses for statuses in answers.values()), answers
        assert {s for statuses in answers.values() for s in statuses} == {200, 429}


def test_the_database_rate_limit_on_sqlite_is_one_bucket_for_two_servers(tmp_path: Path) -> None:
    db_url = f"sqlite:///{tmp_path / 'shared.sqlite3'}"
    limit = {"rate_limit_shared": True, "rate_limit_burst": 4, "rate_limit_per_second": 0.2}
    with start_server(db_url, **limit) as first, start_server(db_url, **limit) as second:
        token = first.add_device("phone-1")
        statuses = []
        with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
            for _ in range(4):
                for server in (first, second):
                    statuses.append(client.get(f"{server.base_url}/v1/changes").status_code)
        assert 4 <= statuses.count(200) <= 5, statuses
        assert statuses[-2:] == [429, 429]
