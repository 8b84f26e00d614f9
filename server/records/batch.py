"""Applying a batch's mutations at once: one read of the records, a few multi-row writes.

Each mutation gets exactly the answer `apply_mutation` would give if the mutations ran one after
another (a later item sees what earlier items did to the same record), but instead of a SELECT,
an INSERT or UPDATE and two savepoints per item, built by peewee each time, the batch reads
every record it updates or deletes in one query (a create's id is taken to be new), works out
the answers in memory and writes only the final state of each record: new ones in multi-row
INSERTs, changed ones in multi-row UPDATEs.

Runs inside `Store.write_transaction`, like `apply_mutation`: the records are read locked (in
order of id, and on PostgreSQL new ones inserted in order of id, so two batches never wait for
each other in a circle), so they cannot change before the writes. The UPDATE is still a
compare-and-set on the version that was read; if any statement fails or a row does not match,
`BatchWriteMismatch` (or the database error) propagates, the caller rolls the transaction back
and applies the items one by one, so a mismatch costs speed, never correctness.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from server.db.idempotency import Reply
from server.db.store import ChangeSequence, Store
from server.records.history import Author, changed_fields, created_fields, log_entry, write_log
from server.records.mutations import (
    WIRE_FIELDS,
    ValidMutation,
    editable,
    now_iso,
    record_columns_json,
    stamp,
    writable,
)

if TYPE_CHECKING:
    from server.gate import Gate

__all__ = ["RECORD_COLUMNS", "BatchWriteMismatch", "apply_mutation_batch"]

#: The work-order columns, in the order the statements below use them.
RECORD_COLUMNS: tuple[str, ...] = (*WIRE_FIELDS, "seq", "created_by")

_QUOTED = ", ".join(f'"{name}"' for name in RECORD_COLUMNS)


class BatchWriteMismatch(Exception):
    """A multi-row write touched fewer rows than planned; apply the items one by one instead."""


def apply_mutation_batch(
    store: Store,
    mutations: Sequence[ValidMutation],
    device_name: str,
    sequence: ChangeSequence,
    *,
    creator: str,
    gate: Gate | None = None,
    author: Author | None = None,
) -> list[Reply]:
    """Apply `mutations` in order inside a write transaction; one reply per mutation
    (`creator`, `gate` and `author`: as for `apply_mutation`; each item asks the gate on its
    own); the change log gets one entry per applied item, in multi-row INSERTs. The items are
    applied at one moment, in one transaction: they carry one `updated_at`."""
    author = author or Author(creator, "device", None, device_name)
    at = now_iso()
    log: list[tuple[Any, ...]] = []
    # A create's id is taken to be new, unread: were it not, the INSERT below fails on its
    # primary key and the caller applies the items one by one, which answers the conflict.
    # So a batch of a device's new work orders reads nothing.
    loaded = _load(store, {m.entity_id for m in mutations if m.op != "create"})
    if gate is not None:
        # Pins and held versions of every work order of the batch in one read, new ones too:
        # each create's reply asked for its own (two SELECTs per create, for a scoped worker).
        gate.load({mutation.entity_id for mutation in mutations})
    read_version = {entity_id: row["version"] for entity_id, row in loaded.items()}
    records: dict[str, dict[str, Any]] = dict(loaded)
    written: dict[str, None] = {}  # entity ids in first-write order
    replies: list[Reply] = []
    for mutation in mutations:
        current = records.get(mutation.entity_id)
        if current is not None and not writable(gate, current, mutation.base_version):
            replies.append(Reply(404, {"error": "not_found"}))
            continue
        if mutation.op == "create":
            if current is not None:
                replies.append(_conflict(current, gate))
                continue
            record = {
                **mutation.fields,
                "id": mutation.entity_id,
                "created_by": creator,
                **stamp(1, device_name, sequence, at),
            }
            status = 201
            fields = created_fields(record)
        elif current is None:
            replies.append(Reply(404, {"error": "not_found"}))
            continue
        elif current["version"] != mutation.base_version:
            replies.append(_conflict(current, gate))
            continue
        else:
            record = {
                **current,
                **editable(mutation.fields),
                **stamp(current["version"] + 1, device_name, sequence, at),
            }
            status = 200
            fields = changed_fields(current, record)
        log.append(log_entry(author, record["id"], record["version"], record["updated_at"], fields))
        records[mutation.entity_id] = record
        written[mutation.entity_id] = None
        replies.append(Reply(status, {"record": record_columns_json(record)}))
        if gate is not None:  # a later item of the same work order knows it was sent this
            gate.sent({record["id"]: record["version"]})
    created = [records[entity_id] for entity_id in written if entity_id not in read_version]
    # PostgreSQL: in order of id, so that two batches inserting one id never wait for each
    # other in a circle. SQLite has one writer: in order of change number, which its index of
    # them takes as appends (in order of id, 100 inserts cost 0.7 ms more, 40 % of the INSERT).
    order = "id" if store.is_postgres else "seq"
    created.sort(key=lambda record: record[order])
    updated = [
        (records[entity_id], read_version[entity_id])
        for entity_id in written
        if entity_id in read_version
    ]
    _insert(store, created)
    for record in created:  # new ids: the INSERT, which succeeded, found no row of theirs
        sequence.note_fresh(
            record["seq"], record["id"], record["assignee"], record["team"], record["created_by"]
        )
    _update(store, updated)
    # The scope entries of these rows now, not when the transaction ends: written after the
    # log and the stored replies, SQLite took 0.35 ms more of a 16 ms batch for the same rows
    # (the statements' costs, measured one by one, then match the raw driver's).
    store.restamp(sequence)
    write_log(store, log)
    if gate is not None:
        gate.flush()
    return replies


def _conflict(record: dict[str, Any], gate: Gate | None) -> Reply:
    if gate is not None:
        gate.sent({record["id"]: record["version"]})
    return Reply(409, {"error": "version_conflict", "current": record_columns_json(record)})


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _table(store: Store) -> str:
    return f'"{store.tables.WorkOrder._meta.table_name}"'


def _load(store: Store, entity_ids: set[str]) -> dict[str, dict[str, Any]]:
    ordered = sorted(entity_ids)
    found: dict[str, dict[str, Any]] = {}
    for chunk in _chunks(ordered, store.rows_per_statement(1)):
        marks = store.marks(len(chunk))
        sql = f'SELECT {_QUOTED} FROM {_table(store)} WHERE "id" IN ({marks}) ORDER BY "id"'
        if store.is_postgres:
            sql += " FOR UPDATE"
        for values in store.db.execute_sql(sql, list(chunk)).fetchall():
            row = dict(zip(RECORD_COLUMNS, values, strict=True))
            row["deleted"] = bool(row["deleted"])  # SQLite hands back 0/1
            found[row["id"]] = row
    return found


def _insert(store: Store, records: Sequence[dict[str, Any]]) -> None:
    width = len(RECORD_COLUMNS)
    for chunk in _chunks(records, store.rows_per_statement(width)):
        sql = (
            f"INSERT INTO {_table(store)} ({_QUOTED}) VALUES {store.values_list(len(chunk), width)}"
        )
        params = [record[name] for record in chunk for name in RECORD_COLUMNS]
        cursor = store.db.execute_sql(sql, params)
        if cursor.rowcount != len(chunk):
            raise BatchWriteMismatch(f"inserted {cursor.rowcount} of {len(chunk)} records")


def _update(store: Store, records: Sequence[tuple[dict[str, Any], int]]) -> None:
    """Write each record's final state where its version is still the one read."""
    table = _table(store)
    columns = ("read_version", *RECORD_COLUMNS)
    assignments = ", ".join(f'"{name}" = v."{name}"' for name in RECORD_COLUMNS[1:])
    for chunk in _chunks(records, store.rows_per_statement(len(columns))):
        sql = (
            f"UPDATE {table} SET {assignments} FROM {store.values_table(columns, len(chunk))} AS v "
            f'WHERE {table}."id" = v."id" AND {table}."version" = v."read_version"'
        )
        params = [
            value
            for record, read_version in chunk
            for value in (read_version, *(record[name] for name in RECORD_COLUMNS))
        ]
        cursor = store.db.execute_sql(sql, params)
        if cursor.rowcount != len(chunk):
            raise BatchWriteMismatch(f"updated {cursor.rowcount} of {len(chunk)} records")
