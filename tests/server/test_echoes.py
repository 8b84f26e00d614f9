"""The feed leaves out what the reading install wrote itself (it holds it), and nothing else."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from server.embedded import EmbeddedServer
from server.scope import feed
from server.scope.echoes import Echoes
from server.scope.feed import feed_page
from server.scope.keys import Scope
from tests.support.api import ServerApi, create_body, new_id

INSTALL = "Fieldsync-Install"

Device = Callable[..., ServerApi]


def device_maker(server: EmbeddedServer) -> tuple[Device, list[ServerApi]]:
    clients: list[ServerApi] = []

    def make(
        name: str | None = None,
        install: str | None = None,
        *,
        role: str = "worker",
        token: str | None = None,
    ) -> ServerApi:
        """A client of the device `name` of the person `ana` (or of `token`)."""
        if token is None:
            assert name is not None
            token = server.add_device(name, role, user="ana")  # type: ignore[arg-type]
        api = ServerApi(server.base_url, token)
        if install is not None:
            api.client.headers[INSTALL] = install
        clients.append(api)
        return api

    return make, clients


@pytest.fixture
def device(server: EmbeddedServer) -> Iterator[Device]:
    make, clients = device_maker(server)
    yield make
    for api in clients:
        api.close()


def versions(entries: list[dict[str, Any]]) -> set[tuple[str, int]]:
    return {(entry["id"], entry["version"]) for entry in entries}


def creates(api: ServerApi, count: int) -> list[str]:
    batch = [{"idempotency_key": new_id(), **create_body()} for _ in range(count)]
    response = api.batch(batch)
    assert response.status_code == 200, response.text
    assert [result["status"] for result in response.json()["results"]] == [201] * count
    return [str(item["entity_id"]) for item in batch]


def test_own_writes_are_left_out_and_the_cursor_passes_them(served: EmbeddedServer) -> None:
    make, clients = device_maker(served)
    try:
        token = served.add_device("phone", user="ana")
        phone = make(token=token, install="install-1")
        older_app = make(token=token)  # no install header: the feed carries everything
        made = creates(phone, 5)
        assert phone.update(made[0], 1, notes="mine").status_code == 200
        entries, cursor = phone.pull(limit=2)
        assert entries == []
        # Windows holding nothing to send are read on: one request passes all six numbers.
        assert phone.changes(limit=2) == {"changes": [], "next": cursor, "has_more": False}
        assert phone.changes(cursor) == {"changes": [], "next": cursor, "has_more": False}
        table = served.store.tables.WorkOrder
        assert int(cursor) >= max(row.seq for row in table.select(table.seq))
        assert versions(older_app.all_changes()) == {(made[0], 2), *((e, 1) for e in made[1:])}
    finally:
        for api in clients:
            api.close()


def test_a_drain_of_own_writes_is_passed_in_one_request(device: Device) -> None:
    """A drain's worth of own writes costs one request, however small its pages: 150 of
    them in pages of 2 would take 75 windows, 8 requests of 10."""
    phone = device("phone", "p-1")
    creates(phone, 150)
    page = phone.changes(limit=2)
    assert (page["changes"], page["has_more"]) == ([], False)
    assert phone.changes(page["next"], limit=2) == page


def test_what_someone_else_wrote_is_delivered(device: Device) -> None:
    phone = device("phone", "p-1")
    sibling = device("tablet", "t-1")  # the same person's other device
    office = device("office", "o-1", role="admin")
    mine, assigned, raced = creates(phone, 3)
    cursor = phone.pull()[1]
    assert sibling.update(mine, 1, notes="from the tablet").status_code == 200
    assert office.update(assigned, 1, assignee="ana", priority="high").status_code == 200
    assert office.update(raced, 1, status="done").status_code == 200
    conflict = phone.update(raced, 1, status="in_progress")
    assert conflict.status_code == 409
    entries, cursor = phone.pull(cursor)
    assert versions(entries) == {(mine, 2), (assigned, 2), (raced, 2)}
    # The tablet's own write is the one thing its feed leaves out.
    assert versions(sibling.pull()[0]) == {(assigned, 2), (raced, 2)}
    # A later version of its own write is again its own.
    assert phone.update(mine, 2, notes="back on the phone").status_code == 200
    assert phone.pull(cursor)[0] == []
    assert versions(sibling.pull()[0]) == {(mine, 3), (assigned, 2), (raced, 2)}


def test_a_lost_reply_is_replayed_with_the_record_the_feed_left_out(device: Device) -> None:
    phone = device("phone", "p-1")
    key, body = new_id(), create_body()
    phone.mutate(body, key)  # its reply never reached the device
    entries, cursor = phone.pull()
    assert entries == []
    again = phone.mutate(body, key)  # the job is still queued: sent again, same key
    assert again.status_code == 201
    assert again.headers["Idempotent-Replayed"] == "true"
    record = again.json()["record"]
    assert (record["id"], record["version"]) == (body["entity_id"], 1)
    stored = phone.client.get(f"/v1/records/{body['entity_id']}").json()["record"]
    assert {**stored, "attachments": None} == {**record, "attachments": None}


def test_a_reinstall_gets_back_what_the_old_install_wrote(served: EmbeddedServer) -> None:
    device, clients = device_maker(served)
    try:
        token = served.add_device("phone", user="ana")
        before = creates(device(token=token, install="first"), 3)
        reinstalled = device(token=token, install="second")
        after = creates(reinstalled, 2)
        entries, cursor = reinstalled.pull(limit=2)
        assert versions(entries) == {(entity_id, 1) for entity_id in before}
        # A reinstall that pulls before it writes gets everything.
        again = device(token=token, install="third")
        assert versions(again.pull(limit=2)[0]) == {(e, 1) for e in before + after}
        # Back to the second: the third took the token meanwhile, so nothing is left out.
        assert versions(reinstalled.pull(limit=2)[0]) == {(e, 1) for e in before + after}
    finally:
        for api in clients:
            api.close()


def test_a_pin_from_another_device_travels_in_full(device: Device) -> None:
    phone = device("phone", "p-1")
    sibling = device("tablet", "t-1")
    [entity_id] = creates(phone, 1)
    cursor = phone.pull()[1]
    assert sibling.client.post(f"/v1/pins/{entity_id}").status_code == 200
    # Pinned, then edited on the phone before it pulled: the reply has no `pinned`.
    assert phone.update(entity_id, 1, notes="edited").status_code == 200
    entries, cursor = phone.pull(cursor)
    assert [(e["id"], e["version"], e["pinned"]) for e in entries] == [(entity_id, 2, True)]
    assert sibling.client.delete(f"/v1/pins/{entity_id}").status_code == 200
    assert phone.update(entity_id, 2, notes="again").status_code == 200
    entries, cursor = phone.pull(cursor)
    assert [(e["id"], e["version"], e["pinned"]) for e in entries] == [(entity_id, 3, False)]
    # Unpinned since this install began: its own writes keep travelling (with `pinned`).
    assert phone.update(entity_id, 3, notes="and again").status_code == 200
    entries, cursor = phone.pull(cursor)
    assert [(e["id"], e["version"], e["pinned"]) for e in entries] == [(entity_id, 4, False)]


def test_an_unpin_reaches_the_device_whatever_page_its_own_write_falls_on(
    device: Device,
) -> None:
    """The unpin's number is passed over (the write after it is newer), and the write is the
    device's own: in pages of one position each, the unpin still arrives, with the write."""
    phone = device("phone", "p-1")
    sibling = device("tablet", "t-1")
    [entity_id] = creates(phone, 1)
    assert sibling.client.post(f"/v1/pins/{entity_id}").status_code == 200
    entries, cursor = phone.pull()
    assert [(e["id"], e["pinned"]) for e in entries] == [(entity_id, True)]
    assert sibling.client.delete(f"/v1/pins/{entity_id}").status_code == 200
    assert phone.update(entity_id, 1, notes="written before pulling").status_code == 200
    entries, cursor = phone.pull(cursor, limit=1)
    assert [(e["id"], e["version"], e["pinned"]) for e in entries] == [(entity_id, 2, False)]


@pytest.mark.parametrize("install", ["", "not an id!", "x" * 65])
def test_an_install_the_server_cannot_read_leaves_nothing_out(device: Device, install: str) -> None:
    phone = device("phone", install)
    made = creates(phone, 2)
    assert versions(phone.pull()[0]) == {(entity_id, 1) for entity_id in made}


def _feed(
    store: Any, scope: Scope, since: int, echoes: Echoes, limit: int
) -> tuple[list[tuple[Any, ...]], int]:
    """Everything the feed delivers from `since` on, page after page, and how many pages."""
    delivered: list[tuple[Any, ...]] = []
    pages = 0
    while True:
        page = feed_page(store, scope, since, limit, echoes)
        pages += 1
        delivered += [
            (c["id"], c.get("version"), c.get("pinned"), c.get("out_of_scope"))
            for c in page["changes"]
        ]
        since = int(page["next"])
        if not page["has_more"]:
            return delivered, pages


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_passing_a_run_of_own_writes_delivers_what_the_pages_would(
    served: EmbeddedServer, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`skip_own_writes` changes where pages end, never what they deliver: from every
    position of a random history (own writes in runs, a sibling's and the office's edits,
    reassignments out of scope, pins and unpins), the feed with it and without it delivers
    the same entries in the same order."""
    make, clients = device_maker(served)
    rng = random.Random(seed)
    try:
        phone = make("phone", "p-1")
        tablet = make("tablet", "t-1")
        office = make("office", "o-1", role="admin")
        version: dict[str, int] = {}
        pinned: set[str] = set()
        bobs: set[str] = set()  # out of ana's scope

        def edit(api: ServerApi, entity_id: str, **fields: Any) -> None:
            response = api.update(entity_id, version[entity_id], **fields)
            assert response.status_code == 200, response.text
            version[entity_id] = response.json()["record"]["version"]

        for _ in range(40):
            step = rng.random()
            known = sorted(set(version) - bobs)
            if step < 0.45 or not known:
                version.update(dict.fromkeys(creates(phone, rng.randint(1, 6)), 1))
            elif step < 0.6:
                edit(phone, rng.choice(known), notes=f"phone {rng.random()}")
            elif step < 0.7:
                edit(tablet, rng.choice(known), notes=f"tablet {rng.random()}")
            elif step < 0.8:
                # The office's own work order, given to ana and taken back: in, then out.
                made = str(office.create(assignee="ana")["id"])
                version[made] = 1
                if rng.random() < 0.5:
                    edit(office, made, assignee="bob")
                    bobs.add(made)
            elif step < 0.9:
                entity_id = rng.choice(known)
                if entity_id in pinned:
                    assert tablet.client.delete(f"/v1/pins/{entity_id}").status_code == 200
                    pinned.discard(entity_id)
                else:
                    assert tablet.client.post(f"/v1/pins/{entity_id}").status_code == 200
                    pinned.add(entity_id)
            else:
                edit(office, rng.choice(known), priority="high")
        assert phone.changes()["changes"] is not None  # the install's floor is recorded

        store = served.store
        devices = store.tables.Device
        row = devices.get(devices.name == "phone")
        echoes = Echoes(row.id, row.name, int(row.install_floor))
        scope = Scope(row.id, "ana", "", admin=False)
        entries = store.tables.ScopeEntry
        positions = sorted({int(e.seq) for e in entries.select(entries.seq)})
        limits = {since: rng.randint(1, 4) for since in [0, *positions]}
        skipped = {since: _feed(store, scope, since, echoes, n) for since, n in limits.items()}
        monkeypatch.setattr(feed, "skip_own_writes", lambda _s, _c, _e, since, *_: since)
        fewer_pages = 0
        for since, (delivered, pages) in skipped.items():
            paged, window_pages = _feed(store, scope, since, echoes, limits[since])
            assert delivered == paged, since
            fewer_pages += pages < window_pages
        assert fewer_pages, "no run of own writes was passed at once"
    finally:
        for api in clients:
            api.close()
