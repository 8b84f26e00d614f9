"""An older server database gains this release's columns (server/db/schema.py), data kept."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import peewee as pw
import psycopg2
import pytest

from server.db.schema import apply_steps
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


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def _backends(url: str, query_prefix: str, *, waiting: bool = False) -> list[int]:
    """The database's other backends whose (last) statement starts with `query_prefix`."""
    with psycopg2.connect(url) as connection, connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND query LIKE %s"
            + (" AND wait_event_type = 'Lock'" if waiting else ""),
            (query_prefix + "%",),
        )
        pids = [int(row[0]) for row in cursor.fetchall()]
    connection.close()
    return pids


def _index_valid(url: str, name: str) -> bool | None:
    """Whether the index is valid (None: there is none)."""
    with psycopg2.connect(url) as connection, connection.cursor() as cursor:
        cursor.execute(
            "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)", (f'"{name}"',)
        )
        row = cursor.fetchone()
    connection.close()
    return None if row is None else bool(row[0])


class _Steps(threading.Thread):
    """One server process's start: the schema steps on its own connection."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.applied: list[int] | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        store = open_store(self.url, create=False)
        try:
            with store.db.connection_context():
                self.applied = apply_steps(store.db, store.tables)
        except BaseException as error:  # handed to the test
            self.error = error
        finally:
            store.close()


@contextmanager
def _writer_in_progress(url: str) -> Iterator[None]:
    """A transaction that wrote to `scope_entry` and stays open: a concurrent index build
    waits for it."""
    connection = psycopg2.connect(url)
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO scope_entry (key, entity_id, seq, present) "
                "VALUES ('u:nobody', 'in-flight', 1, FALSE)"
            )
        yield
    finally:
        connection.rollback()
        connection.close()


_BUILD = "CREATE INDEX CONCURRENTLY"
_WIDE = "scope_entry_key_seq_entity_id"


@pytest.mark.postgres
def test_a_failed_concurrent_build_of_the_feed_index_is_redone(postgres: PostgresCluster) -> None:
    url = postgres.create_server_database("fieldsync_invalid_index")
    _as_before_the_covering_index(url)
    assert _index_valid(url, _WIDE) is None
    with _writer_in_progress(url):
        start = _Steps(url)
        start.start()
        # The build waits for the writer (the table stays writable); cancelled there, it
        # leaves its index behind, INVALID, as a killed build does.
        _wait_for(lambda: bool(_backends(url, _BUILD, waiting=True)), "the build to wait")
        [builder] = _backends(url, _BUILD, waiting=True)
        with psycopg2.connect(url) as admin, admin.cursor() as cursor:
            cursor.execute("SELECT pg_cancel_backend(%s)", (builder,))
        admin.close()
        start.join(timeout=30)
    assert isinstance(start.error, pw.OperationalError), start.error
    assert _index_valid(url, _WIDE) is False
    store = open_store(url)  # the next start builds it again
    try:
        steps = store.tables.SchemaStep
        assert steps.get_or_none(steps.step == 4) is not None
    finally:
        store.close()
    assert _index_valid(url, _WIDE) is True
    assert _feed_indexes(url) == {_WIDE: ["key", "seq", "entity_id"]}


@pytest.mark.postgres
def test_two_servers_starting_at_once_build_the_feed_index_once(
    postgres: PostgresCluster,
) -> None:
    url = postgres.create_server_database("fieldsync_two_starts")
    _as_before_the_covering_index(url)
    with _writer_in_progress(url):
        first = _Steps(url)
        first.start()
        _wait_for(lambda: bool(_backends(url, _BUILD, waiting=True)), "the first build")
        [builder] = _backends(url, _BUILD, waiting=True)
        second = _Steps(url)
        second.start()
        # The second waits for the first's lock between statements, never inside one that
        # the build would in turn wait for.
        _wait_for(
            lambda: bool(set(_backends(url, "SELECT pg_try_advisory_lock")) - {builder}),
            "the second start to wait",
        )
        assert first.is_alive()
        assert second.is_alive()
    for start in (first, second):
        start.join(timeout=60)
        assert start.error is None, start.error
    assert sorted([first.applied, second.applied]) == [[], [4]]
    assert _index_valid(url, _WIDE) is True
    assert _feed_indexes(url) == {_WIDE: ["key", "seq", "entity_id"]}


@pytest.mark.postgres
def test_a_server_starting_beside_a_writer_does_not_wait_for_it(
    postgres: PostgresCluster,
) -> None:
    """A second process starts while the first holds a write open: `CREATE INDEX IF NOT
    EXISTS` would lock each table against writes before finding its index, waiting for the
    writer (and, with more than one table, deadlocking with it)."""
    url = postgres.create_server_database("fieldsync_start_beside_writer")
    with _writer_in_progress(url):
        opened: list[Exception] = []

        def open_and_close() -> None:
            try:
                open_store(url).close()
            except Exception as error:  # handed to the test
                opened.append(error)

        starter = threading.Thread(target=open_and_close, daemon=True)
        starter.start()
        starter.join(timeout=20)
        assert not starter.is_alive(), "the start waited for the open write"
        assert opened == []
