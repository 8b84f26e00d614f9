"""Attachment ids and work-order ids in separate key spaces of `scope_entry` (issue 20): an
upload named like a work order hides nothing, and schema step 20 repairs a database where one
already did. Both modes are affected alike; SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from server.db.store import open_store
from server.embedded import EmbeddedServer, start_server
from server.scope.keys import FILE
from tests.support.api import ServerApi
from tests.support.tus import upload_whole

_open: list[ServerApi] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _open:
        _open.pop().close()


@pytest.fixture
def office(served: EmbeddedServer) -> ServerApi:
    _open.append(ServerApi(served.base_url, served.add_device("office", "admin")))
    return _open[-1]


def phone(server: EmbeddedServer, name: str, team: str) -> ServerApi:
    _open.append(ServerApi(server.base_url, server.add_device(name, user=name, team=team)))
    return _open[-1]


def ids(entries: list[dict[str, Any]]) -> dict[str, bool]:
    """What a device holds after these entries: id → still held."""
    held: dict[str, bool] = {}
    for entry in entries:
        held[entry["id"]] = not entry.get("out_of_scope", False)
    return held


def hide(server: EmbeddedServer, target: dict[str, Any]) -> ServerApi:
    """A south worker who attaches to `target`, north's work order, a file named by its id
    (in `all` mode a worker may attach to any work order)."""
    ben = phone(server, "ben-phone", "south")
    upload_whole(ben.client, target["id"], b"a photo", attachment_id=target["id"])
    return ben


def test_an_upload_named_like_a_work_order_does_not_hide_it(
    served: EmbeddedServer, office: ServerApi
) -> None:
    holder = phone(served, "ana-phone", "north")
    target = office.create(title="north's pump", team="north")
    _, token = holder.pull(None, 100)
    hide(served, target)
    newcomer = phone(served, "cleo-phone", "north")
    entries, _ = newcomer.pull(None, 100)
    assert ids(entries) == {target["id"]: True}
    [record] = entries
    assert [item["id"] for item in record["attachments"]] == [target["id"]]
    # …and a device that holds it still hears that it left.
    assert office.update(target["id"], 1, team="east").status_code == 200
    assert ids(holder.pull(token, 100)[0]) == {target["id"]: False}


def test_schema_step_20_repairs_a_work_order_an_upload_hid(db_url: str) -> None:
    with start_server(db_url, rate_limit_per_second=0) as server:
        office = ServerApi(server.base_url, server.add_device("office", "admin"))
        _open.append(office)
        target = office.create(title="north's pump", team="north")
        hide(server, target)
    # What the server before step 20 left: the file's absent rows over the work order's.
    store = open_store(db_url)
    try:
        entries, steps = store.tables.ScopeEntry, store.tables.SchemaStep
        with store.db.atomic():
            rows = list(entries.select().where(entries.entity_id == FILE + target["id"]))
            assert rows
            entries.delete().where(entries.entity_id == FILE + target["id"]).execute()
            for row in rows:
                entries.insert(
                    key=row.key, entity_id=target["id"], seq=row.seq, present=False
                ).on_conflict(
                    conflict_target=[entries.key, entries.entity_id],
                    update={entries.seq: row.seq, entries.present: False},
                ).execute()
            entries.update(present=False).where(entries.entity_id == target["id"]).execute()
            steps.delete().where(steps.step == 20).execute()
    finally:
        store.close()
    with start_server(db_url, rate_limit_per_second=0) as server:
        hidden = phone(server, "dana-phone", "north")
        entries, _ = hidden.pull(None, 100)
        assert ids(entries) == {target["id"]: True}
        [record] = entries
        assert [item["id"] for item in record["attachments"]] == [target["id"]]
