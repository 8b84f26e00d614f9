"""Pruning scope entries through real HTTP on SQLite and PostgreSQL: what no feed page can
still need goes, and a device that has not pulled for a while still gets its `out_of_scope`
once (issue 16)."""

from __future__ import annotations

import itertools
import sqlite3
import time
from pathlib import Path
from typing import Any

from server.auth import revoke_device, set_device
from server.db.store import Store
from server.embedded import EmbeddedServer, start_server
from server.scope.prune import prune_scope_entries
from tests.support.api import ServerApi

_names = itertools.count()


def pull(api: ServerApi, since: str | None = None) -> tuple[list[Any], str]:
    return api.pull(since, limit=2)


def absent(store: Store, key: str | None = None) -> int:
    sql = 'SELECT COUNT(*) FROM "scope_entry" WHERE NOT "present"'
    params: list[Any] = []
    if key is not None:
        sql += f' AND "key" = {store.db.param}'
        params.append(key)
    return int(store.db.execute_sql(sql, params).fetchone()[0])


def test_entries_go_once_every_reader_pulled_past_them_and_not_before(
    served: EmbeddedServer,
) -> None:
    apis = {
        name: ServerApi(served.base_url, served.add_device(name, role, user=user))
        for name, role, user in (
            ("office", "admin", "office"), ("ana-phone", "worker", "ana"),
            ("ana-laptop", "worker", "ana"), ("ben-phone", "worker", "ben"),
        )
    }  # fmt: skip
    office, phone, laptop = apis["office"], apis["ana-phone"], apis["ana-laptop"]
    try:
        made = [office.create(title=f"job {n}", assignee="ana") for n in range(5)]
        _, phone_since = pull(phone)
        _, laptop_since = pull(laptop)
        for record in made[:3]:
            assert office.update(record["id"], 1, assignee="ben").status_code == 200
        moved = {record["id"] for record in made[:3]}
        gone, phone_since = pull(phone, phone_since)
        assert {e["id"] for e in gone if e.get("out_of_scope")} == moved
        pull(phone, phone_since)  # asks from past them: the phone holds them
        store = served.store
        assert absent(store, "u:ana") == 3
        # The laptop has not pulled since: ana's entries must wait for it.
        prune_scope_entries(store)
        assert absent(store, "u:ana") == 3
        late, laptop_since = pull(laptop, laptop_since)
        assert [e.get("out_of_scope") for e in late] == [True] * 3
        assert {e["id"] for e in late} == moved
        assert pull(laptop, laptop_since)[0] == []
        assert prune_scope_entries(store) >= 3
        assert absent(store, "u:ana") == 0
        # Nothing repeats and nothing is missing afterwards, for old devices and new.
        assert pull(phone, phone_since)[0] == []
        assert pull(laptop, laptop_since)[0] == []
        fresh = ServerApi(served.base_url, served.add_device("ana-tablet", user="ana"))
        try:
            assert {e["id"] for e in pull(fresh)[0]} == {r["id"] for r in made[3:]}
        finally:
            fresh.close()
        assert {e["id"] for e in pull(apis["ben-phone"])[0]} == moved
        # A work order that comes back after its entry was pruned is delivered again.
        assert office.update(made[0]["id"], 2, assignee="ana").status_code == 200
        back, _ = pull(laptop, laptop_since)
        assert [(e["id"], e.get("out_of_scope")) for e in back] == [(made[0]["id"], None)]
    finally:
        for api in apis.values():
            api.close()


def test_a_revoked_devices_stamps_and_a_left_key_without_readers_go(
    served: EmbeddedServer,
) -> None:
    office = ServerApi(served.base_url, served.add_device("office", "admin"))
    ben = ServerApi(served.base_url, served.add_device("ben-phone", user="ben"))
    try:
        north = [office.create(title=f"north {n}", team="north") for n in range(3)]
        carl = office.create(title="for carl", assignee="carl")  # nobody reads u:carl
        pull(ben)
        set_device(served.store, "ben-phone", team="north")  # stamps d:<ben-phone> × 3
        devices = served.store.tables.Device
        ben_id = devices.get(devices.name == "ben-phone").id
        assert absent(served.store, f"d:{ben_id}") == 3
        office.update(north[0]["id"], 1, team="south")  # north loses it: t:north absent
        office.update(carl["id"], 1, assignee="dora")  # u:carl absent, no device reads it
        assert absent(served.store, "u:carl") == 1
        prune_scope_entries(served.store)
        assert absent(served.store, "u:carl") == 0
        assert absent(served.store, f"d:{ben_id}") == 3  # ben-phone has not pulled them
        assert absent(served.store, "t:north") == 1
        assert revoke_device(served.store, "ben-phone")
        prune_scope_entries(served.store)
        assert absent(served.store) == 0
    finally:
        office.close()
        ben.close()


def test_the_running_server_prunes_by_itself(db_url: str) -> None:
    with start_server(db_url, rate_limit_per_second=0, prune_interval_seconds=0.2) as served:
        office = ServerApi(served.base_url, served.add_device("office", "admin"))
        try:
            record = office.create(title="for carl", assignee="carl")
            office.update(record["id"], 1, assignee="dora")
            deadline = time.monotonic() + 20
            while absent(served.store, "u:carl") and time.monotonic() < deadline:
                time.sleep(0.1)
            assert absent(served.store, "u:carl") == 0
        finally:
            office.close()


def test_a_feed_read_does_not_wait_for_a_writer_to_note_its_position(tmp_path: Path) -> None:
    path = tmp_path / "server.sqlite3"
    with start_server(f"sqlite:///{path}", rate_limit_per_second=0) as served:
        office = ServerApi(served.base_url, served.add_device("office", "admin"))
        phone = ServerApi(served.base_url, served.add_device("ana-phone", user="ana"))
        try:
            office.create(title="for ana", assignee="ana")
            _, since = pull(phone)
            devices = served.store.tables.Device
            writer = sqlite3.connect(path)
            writer.execute("BEGIN IMMEDIATE")  # as a long batch holds the write lock
            try:
                started = time.monotonic()
                assert phone.changes(since)["changes"] == []
                waited = time.monotonic() - started
            finally:
                writer.rollback()
                writer.close()
            assert waited < 10  # the busy timeout would have held it for 30 s
            assert devices.get(devices.name == "ana-phone").feed_position == 0
            phone.changes(since)  # noted once the lock is free
            assert devices.get(devices.name == "ana-phone").feed_position == int(since)
        finally:
            office.close()
            phone.close()
