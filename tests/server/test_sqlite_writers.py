"""SQLite writers of one process queue on a lock in memory (server/db/sqlite.py), and a lone
keyed call runs in a transaction of its own (server/db/idempotency.py)."""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import peewee as pw
import pytest

from server.db.best_effort import write_unless_busy
from server.db.idempotency import IdempotentCall, Reply, execute_idempotent
from server.db.sqlite import QueuedSqliteDatabase
from server.db.store import ChangeSequence, Store, open_store
from server.records.mutations import apply_mutation, validate_mutation
from server.settings import Settings


@pytest.fixture
def store(sqlite_url: str) -> Any:
    opened = open_store(sqlite_url)
    yield opened
    opened.close()


def _counter(store: Store) -> int:
    return store._counter_value()


def test_a_second_writer_waits_for_the_first_instead_of_meeting_a_busy_database(
    store: Store,
) -> None:
    counter = store.tables.ChangeCounter
    order: list[str] = []
    first_holds, second_about_to_begin = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def second() -> None:
        try:
            # Without the lock in memory, BEGIN IMMEDIATE would fail at once ("locked").
            store.db.execute_sql("PRAGMA busy_timeout = 0")
            first_holds.wait(10)
            second_about_to_begin.set()
            with store.db.atomic():
                order.append("second began")
                counter.update(value=counter.value + 1).execute()
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            errors.append(error)
        finally:
            store.db.close()

    thread = threading.Thread(target=second)
    thread.start()
    with store.db.atomic():
        counter.update(value=counter.value + 1).execute()
        first_holds.set()
        assert second_about_to_begin.wait(10)
        # The second writer cannot begin while this one holds the lock.
        thread.join(0.2)
        assert thread.is_alive()
        order.append("first commits")
    thread.join(10)
    assert errors == []
    assert order == ["first commits", "second began"]
    assert _counter(store) == 2


@contextlib.contextmanager
def _write_held_by_another_thread(store: Store) -> Iterator[None]:
    """Another thread holds the store's write transaction until the block ends."""
    holding, done = threading.Event(), threading.Event()

    def writer() -> None:
        with store.db.atomic():
            holding.set()
            done.wait(10)
        store.db.close()

    thread = threading.Thread(target=writer)
    thread.start()
    assert holding.wait(10)
    try:
        yield
    finally:
        done.set()
        thread.join(10)


def test_a_writer_waits_no_longer_than_the_busy_timeout(store: Store, sqlite_url: str) -> None:
    impatient = QueuedSqliteDatabase(sqlite_url.removeprefix("sqlite:///"), timeout=0.05)
    with (
        _write_held_by_another_thread(store),
        pytest.raises(pw.OperationalError, match="database is locked"),
        impatient.atomic(),
    ):
        pass
    with impatient.atomic():  # the lock was not kept by the failed attempt
        impatient.execute_sql("SELECT 1")
    impatient.close()


def test_a_best_effort_note_skips_while_another_thread_writes(store: Store) -> None:
    ran: list[bool] = []
    with _write_held_by_another_thread(store):
        assert write_unless_busy(store, lambda: ran.append(True)) is False
    assert ran == []
    assert write_unless_busy(store, lambda: ran.append(True)) is True
    assert ran == [True]


def _create() -> Any:
    body = {"entity_id": str(uuid.uuid4()), "op": "create", "base_version": None,
            "fields": {"title": "Valve", "site": "Depot"}}  # fmt: skip
    return validate_mutation(body)


def test_a_lone_call_whose_effect_fails_answers_500_and_leaves_nothing(store: Store) -> None:
    settings = Settings(db_url="sqlite://unused")
    mutation = _create()
    before = _counter(store)

    def failing(sequence: ChangeSequence) -> Reply:
        apply_mutation(store, mutation, "phone", sequence, creator="phone")
        raise RuntimeError("refused after writing")

    [reply] = execute_idempotent(store, 1, [IdempotentCall("k", "h", failing)], settings)
    assert reply == Reply(500, {"error": "internal_error"})
    assert store.tables.WorkOrder.select().count() == 0  # the write rolled back with it
    assert store.tables.ScopeEntry.select().count() == 0
    assert store.tables.IdempotencyKey.select().count() == 0  # released: a retry runs it
    assert _counter(store) == before

    def works(sequence: ChangeSequence) -> Reply:
        return apply_mutation(store, mutation, "phone", sequence, creator="phone")

    [retried] = execute_idempotent(store, 1, [IdempotentCall("k", "h", works)], settings)
    assert retried.status == 201
    [replayed] = execute_idempotent(store, 1, [IdempotentCall("k", "h", works)], settings)
    assert (replayed.status, replayed.replayed) == (201, True)
    assert store.tables.WorkOrder.select().count() == 1
    assert _counter(store) == before + 1
