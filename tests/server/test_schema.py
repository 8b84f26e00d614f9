"""An older server database gains this release's columns (server/db/schema.py), data kept."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from server.db.store import open_store
from server.embedded import start_server
from tests.support.api import ServerApi
from tests.support.postgres import PostgresCluster

# The two tables as a server before teams created them.
_BEFORE_TEAMS = """
CREATE TABLE device (id INTEGER PRIMARY KEY, name VARCHAR(100) NOT NULL UNIQUE,
  role VARCHAR(16) NOT NULL, token_hash VARCHAR(64) NOT NULL UNIQUE,
  created_at VARCHAR(40) NOT NULL, revoked_at VARCHAR(40));
CREATE TABLE work_order (id VARCHAR(36) PRIMARY KEY, title VARCHAR(200) NOT NULL,
  site VARCHAR(200) NOT NULL, status VARCHAR(16) NOT NULL, priority VARCHAR(16) NOT NULL,
  notes TEXT NOT NULL, assignee VARCHAR(200) NOT NULL, due_date VARCHAR(10),
  deleted INTEGER NOT NULL, version INTEGER NOT NULL, updated_at VARCHAR(40) NOT NULL,
  updated_by VARCHAR(100) NOT NULL, seq INTEGER NOT NULL UNIQUE);
CREATE TABLE change_counter (name VARCHAR(32) PRIMARY KEY, value INTEGER NOT NULL);
INSERT INTO change_counter VALUES ('changes', 1);
INSERT INTO device VALUES (1, 'phone-1', 'worker',
  '6b86b273ff34fce19d6b804eff5a3f5747ada4eaa22f1d49c01e52ddb7875b4b', '2026-01-01T00:00:00Z',
  NULL);
INSERT INTO work_order VALUES ('5b0c7d0e-8f0b-4c43-9d43-0d6c0e1f2a3b', 'Old pump', '', 'open',
  'normal', '', 'ana', NULL, 0, 1, '2026-01-01T00:00:00.000Z', 'phone-1', 1);
"""


def test_an_older_database_gains_team_and_users(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    with sqlite3.connect(path) as connection:
        connection.executescript(_BEFORE_TEAMS)
    url = f"sqlite:///{path}"
    store = open_store(url)
    try:
        devices = store.tables.Device
        assert devices.get(devices.name == "phone-1").user_name == "phone-1"
    finally:
        store.close()
    with start_server(url) as server:
        admin = ServerApi(server.base_url, server.add_device("office", "admin"))
        try:
            [old] = admin.all_changes()
            assert (old["title"], old["assignee"], old["team"]) == ("Old pump", "ana", "")
            changed = admin.update(old["id"], 1, team="north")
            assert changed.status_code == 200, changed.text
            assert changed.json()["record"]["team"] == "north"
        finally:
            admin.close()
    open_store(url).close()  # a second start finds every step applied


def _as_before_the_covering_index(url: str) -> None:
    """Put the feed index back as a server before step 4 left it, step row and all."""
    store = open_store(url)
    try:
        db = store.db
        db.execute_sql('DROP INDEX "scope_entry_key_seq_entity_id"')
        db.execute_sql('CREATE INDEX "scope_entry_key_seq" ON "scope_entry" ("key", "seq")')
        steps = store.tables.SchemaStep
        steps.delete().where(steps.step == 4).execute()
    finally:
        store.close()


def _feed_indexes(url: str) -> dict[str, list[str]]:
    store = open_store(url)
    try:
        return {
            index.name: index.columns
            for index in store.db.get_indexes("scope_entry")
            if index.name.startswith("scope_entry_key")
        }
    finally:
        store.close()


def test_an_older_database_gets_the_covering_feed_index(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'server.sqlite3'}"
    _as_before_the_covering_index(url)
    assert _feed_indexes(url) == {"scope_entry_key_seq_entity_id": ["key", "seq", "entity_id"]}
    with start_server(url) as server:
        admin = ServerApi(server.base_url, server.add_device("office", "admin"))
        worker = ServerApi(server.base_url, server.add_device("ana", "worker"))
        try:
            admin.create(title="Pump", assignee="ana")
            assert [change["title"] for change in worker.all_changes()] == ["Pump"]
        finally:
            admin.close()
            worker.close()
    # The feed's range reads the index alone, never the table's scattered rows.
    with sqlite3.connect(tmp_path / "server.sqlite3") as connection:
        plan = connection.execute(
            'EXPLAIN QUERY PLAN SELECT "entity_id", "seq" FROM "scope_entry" '
            'WHERE "key" = ? AND "seq" > ? ORDER BY "seq" LIMIT 200',
            ("u:ana", 0),
        ).fetchall()
    assert "COVERING INDEX scope_entry_key_seq_entity_id" in " ".join(str(row) for row in plan)


@pytest.mark.postgres
def test_an_older_postgres_database_gets_the_covering_feed_index(
    postgres: PostgresCluster,
) -> None:
    url = postgres.create_database("fieldsync_covering_index")
    _as_before_the_covering_index(url)
    assert _feed_indexes(url) == {"scope_entry_key_seq_entity_id": ["key", "seq", "entity_id"]}


def test_an_older_database_gets_the_change_log(db_url: str) -> None:
    store = open_store(db_url)
    try:
        store.db.execute_sql('DROP TABLE "work_order_change"')
        steps = store.tables.SchemaStep
        steps.delete().where(steps.step == 6).execute()
        assert not store.db.table_exists("work_order_change")
    finally:
        store.close()
    with start_server(db_url) as server:
        assert server.store.db.table_exists("work_order_change")
        indexes = {
            tuple(index.columns) for index in server.store.db.get_indexes("work_order_change")
        }
        assert ("entity_id", "version") in indexes
        phone = ServerApi(server.base_url, server.add_device("phone-1", user="ana"))
        try:
            record = phone.create(title="Pump")
            assert phone.update(record["id"], 1, title="Pump seal").status_code == 200
        finally:
            phone.close()
        log = server.store.tables.WorkOrderChange
        assert [(row.kind, row.device) for row in log.select().order_by(log.version)] == [
            ("create", "phone-1"), ("update", "phone-1"),
        ]  # fmt: skip
    store = open_store(db_url)  # a second start finds every step applied
    try:
        steps = store.tables.SchemaStep
        assert steps.get_or_none(steps.step == 6) is not None
    finally:
        store.close()
