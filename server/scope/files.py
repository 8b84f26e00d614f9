"""Schema step 20: attachments' scope entries move into a key space of their own.

Before it, an attachment's entries in `scope_entry` were keyed `(key, attachment id)`, the
same space as a work order's `(key, work order id)`. An upload whose `attachment_id` equalled
an existing work order's id overwrote that work order's rows with absent ones: devices of
its team installed afterwards never received it, and devices holding it were never told it
left. Entries of attachments now carry `f:` before the id (server/scope/keys.py `FILE`).

This step moves the existing ones there, and repairs each work order an attachment collided
with: its rows and the attachment's (which cannot be told apart any more) are dropped, both
get a new change number, and the entries are made again from their fields and pins, as a
write would. Every device of the work order's keys then receives it again on its next pull.
"""

from __future__ import annotations

import peewee as pw

from server.db.models import Tables
from server.scope.keys import FILE, PIN, tuples_of, upsert_entries

__all__ = ["separate_file_entries"]


def separate_file_entries(db: pw.Database, tables: Tables) -> None:
    """Prefix the entries of attachments, and repair the work orders whose ids they shared."""
    entries = f'"{tables.ScopeEntry._meta.table_name}"'
    files = f'"{tables.Attachment._meta.table_name}"'
    orders = f'"{tables.WorkOrder._meta.table_name}"'
    if isinstance(db, pw.PostgresqlDatabase):
        db.execute_sql(f'ALTER TABLE {entries} ALTER COLUMN "entity_id" TYPE VARCHAR(38)')
    db.execute_sql(
        f'UPDATE {entries} SET "entity_id" = \'{FILE}\' || "entity_id" '
        f'WHERE "entity_id" IN (SELECT "id" FROM {files}) '
        f'AND "entity_id" NOT IN (SELECT "id" FROM {orders})'
    )
    collided = [
        str(row[0])
        for row in db.execute_sql(
            f'SELECT a."id" FROM {files} AS a JOIN {orders} AS w ON w."id" = a."id" ORDER BY a."id"'
        )
    ]
    if collided:
        _repair(db, tables, collided)


def _repair(db: pw.Database, tables: Tables, collided: list[str]) -> None:
    # server.db.store applies these steps, so its Store is imported only when one is needed.
    from server.db.store import Store

    store = Store(db)
    work_orders, attachments = tables.WorkOrder, tables.Attachment
    pins = tables.Pin
    pinned = list(
        tuples_of(pins.select(pins.user_name, pins.entity_id).where(pins.entity_id.in_(collided)))
    )
    entries = tables.ScopeEntry
    # Numbered as any write is; leaving the block restamps what it changed.
    with store.write_transaction() as sequence:
        entries.delete().where(entries.entity_id.in_(collided)).execute()
        for entity_id in collided:
            work_orders.update(seq=sequence.next()).where(work_orders.id == entity_id).execute()
            attachments.update(seq=sequence.next()).where(attachments.id == entity_id).execute()
        # A pin's entry is the pin's only trace in the scope log: make it again before
        # restamping.
        first = sequence.start + 1
        upsert_entries(store, [(PIN + user, entity_id, first, True) for user, entity_id in pinned])
