"""What each device was sent: the newest version of each work order, per device.

In scope mode (server/access.py) a work order that left a worker's scope is hidden from it,
except for the edits it made while it still had the work order: those must go through (or
come back as a 409 with the `current` to merge). The server tells the two apart by what it
sent the device: a feed page, a single read, a mutation's reply or a 409 `current` records
`(device, work order) → version`, the newest only. A device never sent a work order has no
row, so every route answers it 404 for that work order, always.

Only scoped workers need the rows (everyone else reaches every work order anyway), so only
they get them, plus a device whose own scope shrinks (`set-device`, the end of a legacy
device's everything): the work orders it loses then were on it. Switching a server from
`all` to scope mode starts the record for the rest then.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # server.db.store imports the scope keys, which record held versions
    from server.db.store import Store

__all__ = ["held_versions", "note_held"]


def held_versions(store: Store, device_id: int, entity_ids: Sequence[str]) -> dict[str, int]:
    """The newest version of each of these work orders the device was sent."""
    table = f'"{store.tables.HeldRecord._meta.table_name}"'
    found: dict[str, int] = {}
    ids = list(dict.fromkeys(entity_ids))
    step = store.rows_per_statement(1) - 1  # one parameter is the device
    for start in range(0, len(ids), step):
        chunk = ids[start : start + step]
        sql = (
            f'SELECT "entity_id", "version" FROM {table} '
            f'WHERE "device_id" = {store.db.param} AND "entity_id" IN ({store.marks(len(chunk))})'
        )
        rows = store.db.execute_sql(sql, [device_id, *chunk])
        found.update((str(entity_id), int(version)) for entity_id, version in rows)
    return found


def note_held(
    store: Store, device_id: int, versions: Mapping[str, int] | Iterable[tuple[str, int]]
) -> None:
    """Record that the device was sent these versions (a lower one never replaces a higher)."""
    pairs = dict(versions.items() if isinstance(versions, Mapping) else versions)
    if not pairs:
        return
    table = f'"{store.tables.HeldRecord._meta.table_name}"'
    rows = sorted(pairs.items())  # one order for every writer: no deadlock between two
    for start in range(0, len(rows), store.rows_per_statement(3)):
        chunk = rows[start : start + store.rows_per_statement(3)]
        sql = (
            f'INSERT INTO {table} ("device_id", "entity_id", "version") VALUES '
            f"{store.values_list(len(chunk), 3)} "
            'ON CONFLICT ("device_id", "entity_id") DO UPDATE SET "version" = excluded."version" '
            f'WHERE {table}."version" < excluded."version"'
        )
        params = [value for pair in chunk for value in (device_id, *pair)]
        with store.db.atomic():
            store.db.execute_sql(sql, params)
