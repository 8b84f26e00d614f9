"""WriteTransaction (the hot paths' transaction) and the claim's relaxed commit."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from app.store.db import WriteTransaction, connection
from app.store.errors import StorageFullError
from app.store.store import Store


def count(store: Store, table: str) -> int:
    return int(connection(store.db).execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


def insert_counter(conn: sqlite3.Connection, name: str) -> None:
    conn.execute("INSERT INTO counters (name, value) VALUES (?, 1)", (name,))


class Boom(Exception):
    pass


def write_then_fail(store: Store, *names: str, peewee_inside: bool = False) -> None:
    with WriteTransaction(store.db, store.path) as conn:
        for name in names:
            insert_counter(conn, name)
        if peewee_inside:
            with store.db.atomic():  # a savepoint, not a second BEGIN
                insert_counter(conn, "peewee")
        raise Boom


def test_commits_and_leaves_no_transaction_open(store: Store) -> None:
    with WriteTransaction(store.db, store.path) as conn:
        insert_counter(conn, "a")
        assert conn.in_transaction
        assert store.db.in_transaction()  # peewee knows: a db.atomic() inside would nest
    assert not connection(store.db).in_transaction
    assert not store.db.in_transaction()
    assert count(store, "counters") == 1


def test_an_exception_rolls_everything_back_and_propagates(store: Store) -> None:
    with pytest.raises(Boom):
        write_then_fail(store, "a")
    assert count(store, "counters") == 0
    assert not connection(store.db).in_transaction
    assert not store.db.in_transaction()


def test_nested_is_a_savepoint_whose_failure_keeps_the_outer_work(store: Store) -> None:
    with WriteTransaction(store.db, store.path) as conn:
        insert_counter(conn, "outer")
        with pytest.raises(Boom):
            write_then_fail(store, "inner")
        with WriteTransaction(store.db, store.path) as inner:
            insert_counter(inner, "second inner")
    names = {row[0] for row in connection(store.db).execute("SELECT name FROM counters")}
    assert names == {"outer", "second inner"}


def test_peewee_atomic_inside_nests_and_outside_contains_it(store: Store) -> None:
    with pytest.raises(Boom):
        write_then_fail(store, "a", peewee_inside=True)
    assert count(store, "counters") == 0
    with store.db.atomic(), WriteTransaction(store.db, store.path) as conn:
        insert_counter(conn, "c")
    assert count(store, "counters") == 1


def test_a_failing_commit_is_translated_and_rolled_back(store: Store) -> None:
    class FailingCommit:
        """The thread's connection, with COMMIT failing as on a full disk."""

        def __init__(self, real: sqlite3.Connection) -> None:
            self.real = real

        def __getattr__(self, name: str) -> Any:
            return getattr(self.real, name)

        def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
            if sql == "COMMIT":
                error = sqlite3.OperationalError("database or disk is full")
                error.sqlite_errorcode = sqlite3.SQLITE_FULL  # type: ignore[attr-defined]
                raise error
            return self.real.execute(sql, *args)

    real = connection(store.db)
    store.db._state.conn = FailingCommit(real)
    try:
        with pytest.raises(StorageFullError), WriteTransaction(store.db, store.path) as conn:
            insert_counter(conn, "lost")
    finally:
        store.db._state.conn = real
    assert not real.in_transaction
    assert count(store, "counters") == 0


def synchronous(store: Store) -> int:
    return int(connection(store.db).execute("PRAGMA synchronous").fetchone()[0])


def test_claim_restores_full_durability_for_what_follows(store: Store) -> None:
    store.record_edit("create", None, {"title": "A"})
    store.record_edit("create", None, {"title": "B"})
    assert synchronous(store) == 2  # FULL
    jobs = store.queue.claim("w", 1)
    assert len(jobs) == 1
    assert synchronous(store) == 2  # the edit that comes next is fsynced again
    store.queue.ack(jobs[0])
    assert synchronous(store) == 2
    # Inside a caller's transaction the level cannot change: the claim just runs in it.
    with WriteTransaction(store.db, store.path):
        (second,) = store.queue.claim("w", 1)
    assert synchronous(store) == 2
    assert second.id != jobs[0].id


def test_unsynced_commits_skip_the_fsync_then_full_durability_returns(store: Store) -> None:
    with store.queue.unsynced(), WriteTransaction(store.db, store.path) as conn:
        assert synchronous(store) == 1  # NORMAL: this commit is not fsynced
        insert_counter(conn, "offset")
    assert synchronous(store) == 2
    assert count(store, "counters") == 1  # committed all the same
    with pytest.raises(RuntimeError), store.queue.unsynced():
        raise RuntimeError("a failed write")
    assert synchronous(store) == 2
    with WriteTransaction(store.db, store.path), store.queue.unsynced():
        assert synchronous(store) == 2  # inside a caller's transaction nothing changes


def test_a_new_work_order_is_never_chained_and_its_updates_are(store: Store) -> None:
    created = store.record_edit("create", None, {"title": "A"})
    store.record_edit("update", created.entity_id, {"notes": "x"})
    rows = (
        connection(store.db)
        .execute(
            "SELECT chained, base_version FROM jobs WHERE entity_key = ? ORDER BY id",
            (created.entity_id,),
        )
        .fetchall()
    )
    assert rows == [(0, None), (1, None)]
