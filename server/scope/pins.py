"""Pins ("Keep offline"): a person keeps a work order on all their devices, outside the scope.

A pin belongs to the user, not the device, so it survives reinstalling and reaches every
device of that person. Setting or clearing one stamps the work order under `p:<user>` at a
new change number (server/scope/keys.py): the user's devices see it again in their feed, with
`pinned` true, or as `out_of_scope` once an unpinned one is in no other key of theirs.
Both operations are idempotent: a second pin (or unpin) changes nothing and stamps nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from server.db.store import Store
from server.records.mutations import now_iso
from server.scope.keys import PIN, upsert_entries

__all__ = ["pinned_among", "set_pin"]


def set_pin(store: Store, user: str, entity_id: str, pinned: bool) -> bool:
    """Pin (or unpin) a work order for `user`; False if there is no such work order."""
    orders, pins = store.tables.WorkOrder, store.tables.Pin
    with store.write_transaction() as sequence:
        # The work order's lock keeps a write of it (which restamps its pin keys) and
        # another pin of it from passing between the check and the change.
        if store.for_update(orders.select(orders.id).where(orders.id == entity_id)).first() is None:
            return False
        mine = (pins.user_name == user) & (pins.entity_id == entity_id)
        if pins.select().where(mine).exists() == pinned:
            return True
        if pinned:
            pins.insert(user_name=user, entity_id=entity_id, pinned_at=now_iso()).execute()
        else:
            pins.delete().where(mine).execute()
        upsert_entries(store, [(PIN + user, entity_id, sequence.next(), pinned)])
    return True


def pinned_among(store: Store, user: str, entity_ids: Sequence[str]) -> set[str]:
    """Which of these work orders `user` pinned."""
    table = f'"{store.tables.Pin._meta.table_name}"'
    ids = list(dict.fromkeys(entity_ids))
    step = store.rows_per_statement(1) - 1  # one parameter is the user
    pinned: set[str] = set()
    for start in range(0, len(ids), step):
        chunk = ids[start : start + step]
        sql = (
            f'SELECT "entity_id" FROM {table} '
            f'WHERE "user_name" = {store.db.param} AND "entity_id" IN ({store.marks(len(chunk))})'
        )
        pinned.update(str(row[0]) for row in store.db.execute_sql(sql, [user, *chunk]))
    return pinned
