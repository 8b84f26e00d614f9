"""Ending a legacy device's everything in batches (server/scope/legacy.py), on SQLite and
PostgreSQL: a `set-device` killed midway leaves what it committed, a later run goes on from
there, and the device is told of each work order that left it exactly once."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from server.auth import set_device
from server.cli import main
from server.db.store import open_store
from server.embedded import EmbeddedServer, start_server
from server.scope import legacy
from server.scope.held import note_held
from server.scope.legacy import finish_legacy_ends
from tests.support.api import ServerApi

# Ten work orders, five of them ana's; three a batch, so four batches and an empty fifth.
_ORDERS = 10
_BATCH = 3


class Killed(Exception):
    """The set-device process died here."""


@pytest.fixture
def served(db_url: str) -> Iterator[EmbeddedServer]:
    with start_server(db_url, worker_search="scope", rate_limit_per_second=0) as running:
        yield running


def _legacy_phone(served: EmbeddedServer, name: str) -> ServerApi:
    """A worker device from before scopes: its feed and reach are everything."""
    phone = ServerApi(served.base_url, served.add_device(name))
    devices = served.store.tables.Device
    devices.update(legacy_scope=True).where(devices.name == name).execute()
    return phone


def _stamps(served: EmbeddedServer, name: str) -> int:
    store = served.store
    devices, entries = store.tables.Device, store.tables.ScopeEntry
    key = f"d:{devices.get(devices.name == name).id}"
    return int(entries.select().where(entries.key == key).count())


def _ending_after(served: EmbeddedServer, name: str) -> str | None:
    devices = served.store.tables.Device
    ending: str | None = devices.get(devices.name == name).legacy_ending_after
    return ending


def _wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def _sees(url: str, name: str, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(["list-devices", "--db", url]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    return next(row[6] for row in rows if row[0] == name)


def _die_in_batch(monkeypatch: pytest.MonkeyPatch, number: int) -> None:
    """Make the `number`th batch die after its stamps, before it commits."""
    real = legacy.note_held
    calls = Counter[str]()

    def note_held(*args: Any) -> None:
        calls["batches"] += 1
        if calls["batches"] == number:
            raise Killed
        real(*args)

    monkeypatch.setattr(legacy, "note_held", note_held)


def test_a_killed_end_goes_on_from_its_last_batch_and_tells_each_once(
    db_url: str,
    served: EmbeddedServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    office = ServerApi(served.base_url, served.add_device("office", "admin"))
    phone = _legacy_phone(served, "phone-1")
    try:
        for index in range(_ORDERS):  # ids in this order: the batches' order
            entity_id = f"00000000-0000-4000-8000-{index:012d}"
            office.create(entity_id, title=f"Job {index}", assignee="ana" if index % 2 else "ben")
        held, since = phone.pull()
        assert len(held) == _ORDERS
        ids = sorted(record["id"] for record in held)
        bens = {record["id"] for record in held if record["assignee"] == "ben"}

        monkeypatch.setattr(legacy, "_CHUNK", _BATCH)
        _die_in_batch(monkeypatch, 3)
        with pytest.raises(Killed):
            set_device(served.store, "phone-1", user="ana")
        done = set(ids[: 2 * _BATCH])  # two batches committed, the third rolled back
        assert _stamps(served, "phone-1") == len(bens & done)
        assert _sees(db_url, "phone-1", capsys).startswith("its scope (still ending")

        told: Counter[str] = Counter()
        # Its feed is its scope already: it hears of what the committed batches did.
        entries, since = phone.pull(since)
        assert all(entry.get("out_of_scope") for entry in entries)
        told.update(entry["id"] for entry in entries)
        assert set(told) == bens & done
        # What no batch reached yet is still on it, and its edits of that go on.
        pending = sorted(bens - done)[0]
        edited = phone.update(pending, 1, notes="made while the end went on")
        assert edited.status_code == 200, edited.text
        # One that a batch told it left comes back into its scope meanwhile.
        returning = sorted(bens & done)[0]
        assert office.update(returning, 1, assignee="ana").status_code == 200

        monkeypatch.undo()
        monkeypatch.setattr(legacy, "_CHUNK", _BATCH)
        # A server that starts goes on from the last committed batch (its pruner does).
        with start_server(db_url, worker_search="scope", rate_limit_per_second=0):
            _wait_for(lambda: _ending_after(served, "phone-1") is None)
        entries, since = phone.pull(since)
        told.update(entry["id"] for entry in entries if entry.get("out_of_scope"))
        assert [e["id"] for e in entries if not e.get("out_of_scope")] == [returning]
        assert told == Counter(bens)  # every one of ben's, once
        assert phone.pull(since)[0] == []
        assert _stamps(served, "phone-1") == len(bens)
        assert finish_legacy_ends(served.store) == 0
        assert _sees(db_url, "phone-1", capsys) == "its scope"
        # The end is over: what left is hidden, its own earlier edit of one still lands.
        assert phone.client.get(f"/v1/records/{pending}").status_code == 404
        late = phone.update(sorted(bens - done)[-1], 1, notes="queued before the end")
        assert late.status_code == 200, late.text
    finally:
        office.close()
        phone.close()


def test_set_device_finishes_an_end_left_under_way_before_it_changes_the_scope(
    served: EmbeddedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    office = ServerApi(served.base_url, served.add_device("office", "admin"))
    phone = _legacy_phone(served, "phone-2")
    try:
        for index in range(_ORDERS):
            office.create(title=f"Job {index}", team="north" if index % 2 else "south")
        held, since = phone.pull()
        norths = {record["id"] for record in held if record["team"] == "north"}
        monkeypatch.setattr(legacy, "_CHUNK", _BATCH)
        _die_in_batch(monkeypatch, 2)
        with pytest.raises(Killed):
            set_device(served.store, "phone-2", team="south")
        monkeypatch.undo()
        monkeypatch.setattr(legacy, "_CHUNK", _BATCH)
        # The admin changes their mind: north after all.
        changed = set_device(served.store, "phone-2", team="north")
        assert changed is not None
        assert (changed.team, changed.legacy) == ("north", False)
        assert _ending_after(served, "phone-2") is None
        entries, since = phone.pull(since)
        latest = {entry["id"]: entry for entry in entries}
        assert {i for i, e in latest.items() if e.get("out_of_scope")} == (
            {record["id"] for record in held} - norths
        )
        assert phone.pull(since)[0] == []
    finally:
        office.close()
        phone.close()


def test_two_servers_finishing_one_end_tell_each_work_order_once(
    db_url: str, served: EmbeddedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    office = ServerApi(served.base_url, served.add_device("office", "admin"))
    phone = _legacy_phone(served, "phone-3")
    try:
        for index in range(3 * _ORDERS):
            office.create(title=f"Job {index}", assignee="ben")
        held, since = phone.pull(limit=100)
        monkeypatch.setattr(legacy, "_CHUNK", 1)
        _die_in_batch(monkeypatch, 1)  # killed in its first batch: nothing told yet
        with pytest.raises(Killed):
            set_device(served.store, "phone-3", user="ana")
        monkeypatch.setattr(legacy, "note_held", note_held)
        told: list[int] = []

        def finish() -> None:  # a server's pruner, on its own connection
            store = open_store(db_url)
            try:
                told.append(finish_legacy_ends(store))
            finally:
                store.close()

        pruners = [threading.Thread(target=finish) for _ in range(2)]
        for pruner in pruners:
            pruner.start()
        for pruner in pruners:
            pruner.join(timeout=60)
        assert sum(told) == len(held)  # between them, each batch once
        entries, _ = phone.pull(since, limit=100)
        assert Counter(entry["id"] for entry in entries if entry.get("out_of_scope")) == Counter(
            record["id"] for record in held
        )
    finally:
        office.close()
        phone.close()
