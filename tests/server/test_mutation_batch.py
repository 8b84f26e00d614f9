"""Applying a batch at once answers exactly as applying its items one by one, or falls back."""

from __future__ import annotations

import itertools
import logging
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from server.access import Viewer
from server.auth import add_device
from server.db import claims
from server.db.idempotency import IdempotentCall, Reply, execute_idempotent, request_hash
from server.db.store import ChangeSequence, Store, open_store
from server.gate import Gate
from server.records.batch import RECORD_COLUMNS, apply_mutation_batch
from server.records.mutations import ValidMutation, apply_mutation, validate_mutation
from server.settings import Settings
from tests.support.api import create_body, new_id
from tests.support.postgres import PostgresCluster

_databases = itertools.count()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db_urls(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """Two empty databases of the same kind."""
    if request.param == "sqlite":
        return (f"sqlite:///{tmp_path / 'a.sqlite3'}", f"sqlite:///{tmp_path / 'b.sqlite3'}")
    cluster: PostgresCluster = request.getfixturevalue("postgres")
    return (
        cluster.create_database(f"batch_{next(_databases)}"),
        cluster.create_database(f"batch_{next(_databases)}"),
    )


def random_mutations(
    rng: random.Random, entity_ids: list[str], new_ids: list[str], count: int
) -> list[ValidMutation]:
    """Creates (of `new_ids`), edits and deletes of a few records, with right, stale and
    absurd versions."""
    mutations = []
    for _ in range(count):
        op = rng.choice(["create", "update", "update", "update", "delete"])
        entity_id = rng.choice(new_ids if op == "create" else entity_ids)
        raw: dict[str, Any] = {"entity_id": entity_id, "op": op}
        if op == "create":
            raw["fields"] = {"title": f"t{rng.randrange(100)}", "priority": "high"}
        else:
            raw["base_version"] = rng.choice([1, 2, 3, rng.randrange(1, 40), 10**12])
            if op == "update":
                raw["fields"] = rng.choice(
                    [
                        {"notes": f"n{rng.randrange(100)}"},
                        {"status": "done", "due_date": "2030-01-02"},
                        {"due_date": None, "assignee": None},
                        {"deleted": False, "title": "back"},
                    ]
                )
        mutations.append(validate_mutation(raw))
    return mutations


def without_clock(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_clock(v) for k, v in value.items() if k != "updated_at"}
    return value


def table_state(store: Store) -> list[tuple[Any, ...]]:
    """Each row without its clock, and with its place in the feed instead of its change
    number (on PostgreSQL numbers carry the writing transaction's id: server/db/store.py)."""
    columns = [name for name in RECORD_COLUMNS if name not in ("updated_at", "seq")]
    table = store.tables.WorkOrder
    fields = [getattr(table, name) for name in columns]
    rows = [tuple(row) for row in table.select(table.seq, *fields).order_by(table.seq).tuples()]
    return sorted((*row[1:], place) for place, row in enumerate(rows))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_batch_answers_and_writes_as_one_by_one(db_urls: tuple[str, str], seed: int) -> None:
    rng = random.Random(seed)
    entity_ids = [new_id() for _ in range(12)]
    existing = [validate_mutation(create_body(entity_id)) for entity_id in entity_ids[:6]]
    # The batch takes a create's id to be new (a stored one: the next test), so its creates
    # meet only ids no row has yet, some of them twice (the later one answers a conflict).
    mutations = random_mutations(rng, entity_ids, entity_ids[6:], 400)
    one_by_one, at_once = (open_store(url) for url in db_urls)
    try:
        for store in (one_by_one, at_once):
            with store.write_transaction() as sequence:
                for mutation in existing:
                    apply_mutation(store, mutation, "seed", sequence, creator="seed")
        with one_by_one.write_transaction() as sequence:
            expected = [
                apply_mutation(one_by_one, m, "phone", sequence, creator="phone") for m in mutations
            ]
        with at_once.write_transaction() as sequence:
            got = apply_mutation_batch(at_once, mutations, "phone", sequence, creator="phone")
        assert [(r.status, without_clock(r.body)) for r in got] == [
            (r.status, without_clock(r.body)) for r in expected
        ]
        assert {r.status for r in got} >= {200, 201, 404, 409}
        assert table_state(at_once) == table_state(one_by_one)
    finally:
        one_by_one.close()
        at_once.close()


def test_a_create_of_a_stored_id_rolls_the_batch_back_and_answers_as_one_by_one(
    db_urls: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    stored, fresh = [new_id() for _ in range(3)], new_id()
    mutations = [
        validate_mutation(raw)
        for raw in (
            create_body(fresh),
            # A stored id nothing else in the batch reads: the batch's INSERT meets its row.
            create_body(stored[0], notes="a second create of a stored id"),
            # One the batch reads for its update: answered in the batch itself.
            create_body(stored[1]),
            {"entity_id": stored[1], "op": "update", "base_version": 1, "fields": {"notes": "n"}},
            {"entity_id": fresh, "op": "update", "base_version": 1, "fields": {"status": "done"}},
            {"entity_id": stored[2], "op": "delete", "base_version": 1},
        )
    ]
    one_by_one, at_once = (open_store(url) for url in db_urls)
    try:
        for store in (one_by_one, at_once):
            with store.write_transaction() as sequence:
                for entity_id in stored:
                    seed = validate_mutation(create_body(entity_id))
                    apply_mutation(store, seed, "seed", sequence, creator="seed")
        with one_by_one.write_transaction() as sequence:
            expected = [
                apply_mutation(one_by_one, m, "phone", sequence, creator="phone") for m in mutations
            ]
        calls = [
            IdempotentCall(f"k{i}", request_hash("m", m.canonical()), _effect(at_once, m))
            for i, m in enumerate(mutations)
        ]

        def batch_effect(sequence: ChangeSequence, positions: Any) -> list[Reply]:
            chosen = [mutations[p] for p in positions]
            return apply_mutation_batch(at_once, chosen, "phone", sequence, creator="phone")

        settings = Settings(db_url=db_urls[1])
        caplog.set_level(logging.WARNING, logger="server.idempotency")
        got = execute_idempotent(at_once, 1, calls, settings, batch_effect=batch_effect)
        assert [(r.status, without_clock(r.body)) for r in got] == [
            (r.status, without_clock(r.body)) for r in expected
        ]
        assert [r.status for r in got] == [201, 409, 409, 200, 200, 200]
        assert table_state(at_once) == table_state(one_by_one)
        assert "batch effect rolled back; one by one" in caplog.text
    finally:
        one_by_one.close()
        at_once.close()


def test_a_scoped_workers_batch_reads_pins_and_held_versions_once(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_device(store, "phone", "worker")
    [device_id] = [row.id for row in store.tables.Device.select()]
    statements: list[str] = []
    execute = store.db.execute_sql

    def counted(sql: str, params: Any = None, *args: Any, **kwargs: Any) -> Any:
        statements.append(sql)
        return execute(sql, params, *args, **kwargs)

    monkeypatch.setattr(store.db, "execute_sql", counted)

    def statements_for(creates: int) -> int:
        statements.clear()
        viewer = Viewer(device_id, "phone", "", admin=False, everywhere=False)
        mutations = [validate_mutation(create_body()) for _ in range(creates)]
        with store.write_transaction() as sequence:
            replies = apply_mutation_batch(
                store, mutations, "phone", sequence, creator="phone", gate=Gate(store, viewer)
            )
        assert [reply.status for reply in replies] == [201] * creates
        return len(statements)

    # Each create asked for its own pins and held version (two SELECTs), 100 more for 50.
    assert statements_for(50) == statements_for(5)


def _effect(store: Store, mutation: ValidMutation) -> Callable[[ChangeSequence], Reply]:
    return lambda sequence: apply_mutation(store, mutation, "phone", sequence, creator="phone")


def create_calls(store: Store, count: int) -> tuple[list[IdempotentCall], list[ValidMutation]]:
    mutations = [validate_mutation(create_body()) for _ in range(count)]
    calls = [
        IdempotentCall(f"k{i}", request_hash("m", m.canonical()), _effect(store, m))
        for i, m in enumerate(mutations)
    ]
    return calls, mutations


@pytest.fixture
def store(sqlite_url: str) -> Iterator[Store]:
    opened = open_store(sqlite_url)
    yield opened
    opened.close()


def test_the_batch_effect_replaces_the_per_item_effects(store: Store, sqlite_url: str) -> None:
    settings = Settings(db_url=sqlite_url)

    def must_not_run(sequence: ChangeSequence) -> Reply:
        raise AssertionError("the per-item effect ran")

    calls = [IdempotentCall(f"k{i}", request_hash("m", i), must_not_run) for i in range(3)]

    def batch_effect(sequence: ChangeSequence, positions: Any) -> list[Reply]:
        return [Reply(201, {"n": position, "seq": sequence.next()}) for position in positions]

    first = execute_idempotent(store, 1, calls, settings, batch_effect=batch_effect)
    assert [(r.status, r.body, r.replayed) for r in first] == [
        (201, {"n": 0, "seq": 1}, False),
        (201, {"n": 1, "seq": 2}, False),
        (201, {"n": 2, "seq": 3}, False),
    ]
    again = execute_idempotent(store, 1, calls, settings, batch_effect=batch_effect)
    assert [(r.body, r.replayed) for r in again] == [(r.body, True) for r in first]


def test_a_failed_batch_effect_is_rolled_back_and_items_run_one_by_one(
    store: Store, sqlite_url: str
) -> None:
    settings = Settings(db_url=sqlite_url)
    calls, mutations = create_calls(store, 4)

    def half_then_fail(sequence: ChangeSequence, positions: Any) -> list[Reply]:
        apply_mutation_batch(
            store, [mutations[p] for p in positions[:2]], "phone", sequence, creator="phone"
        )
        raise RuntimeError("refused by the database")

    replies = execute_idempotent(store, 1, calls, settings, batch_effect=half_then_fail)
    assert [r.status for r in replies] == [201] * 4
    table = store.tables.WorkOrder
    # The failed attempt's rows and sequence numbers are gone; the feed has no gap.
    assert [row.seq for row in table.select().order_by(table.seq)] == [1, 2, 3, 4]
    assert [row.id for row in table.select().order_by(table.seq)] == [
        m.entity_id for m in mutations
    ]


class _TakenOverStore(Store):
    """Another server takes over one claim after the claim phase (its lease looked expired)."""

    victim = "k1"

    @contextmanager
    def write_transaction(self) -> Iterator[ChangeSequence]:
        keys = self.tables.IdempotencyKey
        with self.db.atomic():
            keys.update(claim_token="someone-else").where(keys.key == self.victim).execute()
        with super().write_transaction() as sequence:
            yield sequence


def test_a_claim_taken_over_meanwhile_rolls_back_only_its_own_effect(sqlite_url: str) -> None:
    store = _TakenOverStore(open_store(sqlite_url).db)
    settings = Settings(db_url=sqlite_url)
    calls, mutations = create_calls(store, 3)

    def batch_effect(sequence: ChangeSequence, positions: Any) -> list[Reply]:
        return apply_mutation_batch(
            store, [mutations[p] for p in positions], "phone", sequence, creator="phone"
        )

    replies = execute_idempotent(store, 1, calls, settings, batch_effect=batch_effect)
    assert [r.status for r in replies] == [201, 409, 201]
    assert replies[1].body == {"error": "idempotency_key_in_use"}
    table = store.tables.WorkOrder
    applied = [row.id for row in table.select().order_by(table.seq)]
    assert applied == [mutations[0].entity_id, mutations[2].entity_id]
    store.close()


def test_a_claim_row_released_by_another_process_mid_claim_is_in_use_not_a_crash(
    store: Store, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On PostgreSQL each statement reads the latest commit: another process holding the same
    # key can release its claim (its effect failed) between this claim's INSERT ... ON
    # CONFLICT DO NOTHING and its read. That read then lacked the key: KeyError, a 500.
    settings = Settings(db_url=sqlite_url)
    calls, _ = create_calls(store, 3)
    insert = claims._insert_claims

    def released_meanwhile(*args: Any) -> dict[str, int]:
        inserted: dict[str, int] = insert(*args)
        # k1 was the other process's row (this insert did nothing for it), released now.
        inserted.pop("k1")
        keys = store.tables.IdempotencyKey
        keys.delete().where(keys.key == "k1").execute()
        return inserted

    monkeypatch.setattr(claims, "_insert_claims", released_meanwhile)
    replies = execute_idempotent(store, 1, calls, settings)
    assert [r.status for r in replies] == [201, 409, 201]
    assert replies[1].body == {"error": "idempotency_key_in_use"}
    assert replies[1].retry_after == settings.in_use_retry_after_seconds
