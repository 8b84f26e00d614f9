"""A lookup by a list of work orders reads any number of them: `IN (…)` lists are bound 500
values at a time (`app.store.db.in_batches`), under every SQLite build's parameter limit."""

from __future__ import annotations

from app.store import deadletters
from app.store.db import IN_BATCH, connection, in_batches
from app.store.jobs import entities_with_open_jobs
from app.store.store import Store


def test_each_slice_comes_with_its_own_placeholders() -> None:
    values = list(range(2 * IN_BATCH + 1))
    batches = list(in_batches(values))
    assert [len(chunk) for chunk, _ in batches] == [IN_BATCH, IN_BATCH, 1]
    assert [value for chunk, _ in batches for value in chunk] == values
    for chunk, marks in batches:
        assert marks.split(", ") == ["?"] * len(chunk)
    assert list(in_batches([])) == []


def test_lookups_of_more_work_orders_than_one_statement_binds(store: Store) -> None:
    ids = store.import_records({"title": f"Pump check {i}"} for i in range(2 * IN_BATCH + 1))
    backwards = ids[::-1]
    assert store.cache.existing([*backwards, "no-such-order"]) == backwards
    assert entities_with_open_jobs(connection(store.db), ids) == set(ids)
    states = deadletters.job_states(store, backwards)
    assert set(states) == set(ids)
    assert {state.pending for state in states.values()} == {1}
