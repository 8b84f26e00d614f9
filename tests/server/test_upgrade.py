"""Upgrading a server from before scopes, on SQLite and PostgreSQL: its devices keep every work
order (legacy, shown by list-devices) until `set-device` scopes them, which tells them once
what left; new devices see the old work orders of their person (issue 16)."""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg2
import pytest

from server.auth import hash_token
from server.cli import main
from server.embedded import EmbeddedServer, start_server
from server.scope.prune import prune_scope_entries
from tests.support.api import ServerApi
from tests.support.postgres import PostgresCluster

_names = itertools.count()

# A server's tables before users, teams and scopes existed ({serial}, {boolean} per backend).
_BEFORE_SCOPES = """
CREATE TABLE device (id {serial} PRIMARY KEY, name VARCHAR(100) NOT NULL UNIQUE,
  role VARCHAR(16) NOT NULL, token_hash VARCHAR(64) NOT NULL UNIQUE,
  created_at VARCHAR(40) NOT NULL, revoked_at VARCHAR(40));
CREATE TABLE work_order (id VARCHAR(36) PRIMARY KEY, title VARCHAR(200) NOT NULL,
  site VARCHAR(200) NOT NULL, status VARCHAR(16) NOT NULL, priority VARCHAR(16) NOT NULL,
  notes TEXT NOT NULL, assignee VARCHAR(200) NOT NULL, due_date VARCHAR(10),
  deleted {boolean} NOT NULL, version INTEGER NOT NULL, updated_at VARCHAR(40) NOT NULL,
  updated_by VARCHAR(100) NOT NULL, seq BIGINT NOT NULL UNIQUE);
CREATE TABLE change_counter (name VARCHAR(32) PRIMARY KEY, value BIGINT NOT NULL)
"""
_DEVICES = [
    ("phone-1", "worker", None),
    ("phone-2", "worker", None),
    ("office", "admin", None),
    ("lost-phone", "worker", "2026-02-01T00:00:00Z"),
]
_ASSIGNEES = ["ana", "ana", "ben", "", "phone-1", "ben"]


def _old_database(connection: Any, serial: str, boolean: str) -> None:
    cursor = connection.cursor()
    for statement in _BEFORE_SCOPES.format(serial=serial, boolean=boolean).split(";"):
        cursor.execute(statement)
    mark = "?" if isinstance(connection, sqlite3.Connection) else "%s"
    for name, role, revoked in _DEVICES:
        cursor.execute(
            "INSERT INTO device (name, role, token_hash, created_at, revoked_at) "
            f"VALUES ({mark}, {mark}, {mark}, {mark}, {mark})",
            (name, role, hash_token(f"fst_old_{name}"), "2026-01-01T00:00:00Z", revoked),
        )
    for seq, assignee in enumerate(_ASSIGNEES, start=1):
        cursor.execute(
            f"INSERT INTO work_order VALUES ({', '.join([mark] * 13)})",
            (f"5b0c7d0e-8f0b-4c43-9d43-0d6c0e1f2a{seq:02d}", f"Old job {seq}", "", "open",
             "normal", "", assignee, None, False, 1, "2026-01-01T00:00:00.000Z", "office", seq),
        )  # fmt: skip
    cursor.execute(f"INSERT INTO change_counter VALUES ('changes', {len(_ASSIGNEES)})")
    connection.commit()


@pytest.fixture(params=["sqlite", "postgres"])
def old_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        path = tmp_path / "old.sqlite3"
        with sqlite3.connect(path) as connection:
            _old_database(connection, "INTEGER", "INTEGER")
        return f"sqlite:///{path}"
    cluster: PostgresCluster = request.getfixturevalue("postgres")
    url = cluster.create_database(f"upgrade_{next(_names)}")
    connection = psycopg2.connect(url)
    try:
        _old_database(connection, "SERIAL", "BOOLEAN")
    finally:
        connection.close()
    return url


@pytest.fixture
def served(old_url: str) -> Iterator[EmbeddedServer]:
    with start_server(old_url, rate_limit_per_second=0, worker_search="scope") as running:
        yield running


def old_device(served: EmbeddedServer, name: str) -> ServerApi:
    return ServerApi(served.base_url, f"fst_old_{name}")


def pull(api: ServerApi, since: str | None = None) -> tuple[list[Any], str]:
    return api.pull(since, limit=2)


def stamps(served: EmbeddedServer, name: str) -> int:
    """How many scope entries the device's own `d:` key holds."""
    store = served.store
    devices = store.tables.Device
    key = f"d:{devices.get(devices.name == name).id}"
    entries = store.tables.ScopeEntry
    return int(entries.select().where(entries.key == key).count())


def listed(url: str, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    capsys.readouterr()
    assert main(["list-devices", "--db", url]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    return {row[0]: row[6] for row in rows}


def test_old_devices_keep_everything_until_set_device_scopes_them(
    old_url: str, served: EmbeddedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    legacy = "everything (from before scopes: set-device to scope it)"
    assert listed(old_url, capsys) == {
        "phone-1": legacy, "phone-2": legacy, "office": "everything", "lost-phone": "its scope",
    }  # fmt: skip
    phone, office = old_device(served, "phone-1"), old_device(served, "office")
    ana = ServerApi(served.base_url, served.add_device("ana-phone", user="ana"))
    try:
        everything = {f"Old job {n}" for n in range(1, len(_ASSIGNEES) + 1)}
        before, since = pull(phone)
        assert {e["title"] for e in before} == everything
        # Its search, restricted to the scope on this server, still reaches everything.
        found = phone.client.get("/v1/records", params={"q": "old job"}).json()["records"]
        assert {r["title"] for r in found} == everything
        assert all(r["in_scope"] for r in found)
        # A device added after the upgrade sees its person's old work orders.
        assert {e["title"] for e in pull(ana)[0]} == {"Old job 1", "Old job 2"}
        # A change to anyone's work order still reaches the legacy device.
        job3 = next(e for e in before if e["title"] == "Old job 3")
        assert office.update(job3["id"], 1, title="Old job 3, moved").status_code == 200
        changed, since = pull(phone, since)
        assert [e["title"] for e in changed] == ["Old job 3, moved"]

        capsys.readouterr()
        assert main(["set-device", "--db", old_url, "phone-1", "--user", "ana"]) == 0
        assert listed(old_url, capsys)["phone-1"] == "its scope"
        ana_ids = {e["id"] for e in before if e["assignee"] == "ana"}
        left = len(before) - len(ana_ids)
        # The device's own stamps wait for its pull, then pruning removes them.
        prune_scope_entries(served.store)
        assert stamps(served, "phone-1") == left
        after, since = pull(phone, since)
        assert all(e.get("out_of_scope") for e in after)
        assert {e["id"] for e in after} == {e["id"] for e in before} - ana_ids
        assert pull(phone, since)[0] == []
        prune_scope_entries(served.store)
        assert stamps(served, "phone-1") == 0
        assert pull(phone, since)[0] == []
        found = phone.client.get("/v1/records", params={"q": "old job"}).json()["records"]
        assert {r["id"] for r in found} == ana_ids
    finally:
        for api in (phone, office, ana):
            api.close()
    assert listed(old_url, capsys)["phone-2"] == legacy  # a second start changes nothing


def test_a_device_added_after_the_upgrade_is_never_legacy(
    old_url: str, served: EmbeddedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    served.add_device("phone-3")
    assert listed(old_url, capsys)["phone-3"] == "its scope"
    phone = ServerApi(served.base_url, served.add_device("phone-4"))
    try:
        assert pull(phone)[0] == []
    finally:
        phone.close()
