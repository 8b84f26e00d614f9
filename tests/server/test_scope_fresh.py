"""New work orders get their scope entries without reading them back (server/scope/keys.py,
`restamp_changed(fresh=…)`): the same rows the full restamp writes, and the full restamp
still runs for a transaction that changed anything else."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from server.db.store import ChangeSequence, Store, open_store
from server.records.batch import apply_mutation_batch
from server.records.mutations import apply_mutation, validate_mutation

ONE, TWO, THREE = (f"00000000-0000-4000-8000-00000000000{n}" for n in (1, 2, 3))


def _create(entity_id: str, **fields: Any) -> Any:
    body = {"entity_id": entity_id, "op": "create", "base_version": None}
    return validate_mutation({**body, "fields": {"title": "Pump", **fields}})


def _writes(store: Store) -> list[tuple[Any, ...]]:
    """A single create, a batch of new ones, then a batch creating and editing one id."""
    with store.write_transaction() as sequence:
        apply_mutation(store, _create(ONE, assignee="ana", team="north"), "p", sequence,
                       creator="ben")  # fmt: skip
    with store.write_transaction() as sequence:
        apply_mutation_batch(store, [_create(TWO, team="south"), _create(THREE)], "p", sequence,
                             creator="cy")  # fmt: skip
    four = "00000000-0000-4000-8000-000000000004"
    edit = validate_mutation(
        {"entity_id": four, "op": "update", "base_version": 1, "fields": {"assignee": "dee"}}
    )
    with store.write_transaction() as sequence:
        apply_mutation_batch(store, [_create(four, team="north"), edit], "p", sequence,
                             creator="cy")  # fmt: skip
    table = store.tables.ScopeEntry
    query = table.select(table.key, table.entity_id, table.seq, table.present)
    rows: Any = query.order_by(table.entity_id, table.key).tuples()
    return list(rows)


def test_new_work_orders_get_the_entries_a_full_restamp_writes(
    server_sqlite: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "full.sqlite3"
    shutil.copyfile(server_sqlite.removeprefix("sqlite:///"), copy)
    spared: list[bool] = []
    only_fresh = ChangeSequence.only_fresh

    def watched(self: ChangeSequence) -> Any:
        found = only_fresh(self)
        spared.append(found is not None)
        return found

    monkeypatch.setattr(ChangeSequence, "only_fresh", watched)
    store = open_store(server_sqlite)
    try:
        fast = _writes(store)
    finally:
        store.close()
    assert spared == [True, True, False]  # create then edit of one id: the full restamp
    monkeypatch.setattr(ChangeSequence, "only_fresh", lambda self: None)
    store = open_store(f"sqlite:///{copy}")
    try:
        full = _writes(store)
    finally:
        store.close()
    assert fast == full
    assert ("u:ana", ONE, True) in {(key, entity, present) for key, entity, _, present in fast}
