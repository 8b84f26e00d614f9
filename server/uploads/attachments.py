"""Attachments of work orders: their place on records and in the changes feed, and removal.

An attachment has a change number of its own from the same counter as work orders, so the
feed orders both in one sequence and an attachment never moves its work order's version (it
cannot conflict with a field edit). Removing one leaves a tombstone in the feed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from server.access import Action, Allowed
from server.db.idempotency import Reply
from server.db.models import Attachment, WorkOrderRow
from server.db.store import ChangeSequence, Store
from server.records.mutations import now_iso

if TYPE_CHECKING:
    from server.gate import Gate

__all__ = [
    "attachment_change_json",
    "attachment_changes",
    "attachment_json",
    "attachment_rows",
    "attachments_of",
    "remove_attachment",
    "with_attachments",
]


_ATTACHMENT_COLUMNS = tuple(Attachment._meta.sorted_field_names)


def attachment_rows(store: Store, column: str, values: Sequence[Any]) -> list[Attachment]:
    """The attachments whose `column` is among `values`, by change number; read with raw
    marks (`Store.marks`), so a window that holds no files costs one cheap query."""
    table = store.tables.Attachment
    names = ", ".join(f'"{name}"' for name in _ATTACHMENT_COLUMNS)
    found: list[Attachment] = []
    step = store.rows_per_statement(1)
    for start in range(0, len(values), step):
        chunk = list(values[start : start + step])
        sql = (
            f'SELECT {names} FROM "{table._meta.table_name}" '
            f'WHERE "{column}" IN ({store.marks(len(chunk))}) ORDER BY "seq"'
        )
        for row in store.db.execute_sql(sql, chunk):
            found.append(table(**dict(zip(_ATTACHMENT_COLUMNS, row, strict=True))))
    return found


def attachments_of(store: Store, entity_ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """The live attachments of these work orders, oldest first, by work order id. A work
    order that never had one is left out: its record keeps the shape it had before
    attachments existed (`attachments` appears once there is, or was, one)."""
    listed: dict[str, list[dict[str, Any]]] = {}
    for row in attachment_rows(store, "entity_id", list(dict.fromkeys(entity_ids))):
        found = listed.setdefault(row.entity_id, [])
        if not row.deleted:
            found.append(attachment_json(row))
    return listed


def with_attachments(
    record: dict[str, Any], listed: dict[str, list[dict[str, Any]]]
) -> dict[str, Any]:
    """`record` plus its `attachments` list, if it has (or had) any."""
    if record["id"] in listed:
        return {**record, "attachments": listed[record["id"]]}
    return record


def attachment_changes(store: Store, after: int, limit: int) -> list[Attachment]:
    """Attachments (tombstones included) whose last change comes after `after`."""
    table = store.tables.Attachment
    return list(table.select().where(table.seq > after).order_by(table.seq).limit(limit))


def order_of(store: Store, row: Attachment | None) -> WorkOrderRow | None:
    """The work order an attachment belongs to (None for none)."""
    if row is None:
        return None
    orders = store.tables.WorkOrder
    found: WorkOrderRow | None = orders.get_or_none(orders.id == row.entity_id)
    return found


def remove_attachment(
    store: Store, gate: Gate, attachment_id: str, device_name: str, sequence: ChangeSequence
) -> Reply:
    """Tombstone an attachment at a new change number (a removed one answers as it is); one
    the access rule does not let the device remove is as missing (server/access.py)."""
    table = store.tables.Attachment
    row: Attachment | None = store.for_update(
        table.select().where(table.id == attachment_id)
    ).first()
    order = order_of(store, row)
    if order is not None:  # its entries follow the work order's keys: hold them still
        orders = store.tables.WorkOrder
        store.for_update(orders.select(orders.id).where(orders.id == order.id)).first()
    if row is None or not isinstance(gate.order(Action.DETACH, row.entity_id, order), Allowed):
        return Reply(404, {"error": "not_found"})
    if not row.deleted:
        row.deleted, row.deleted_at, row.deleted_by = True, now_iso(), device_name
        row.seq = sequence.next()
        table.update(
            deleted=True, deleted_at=row.deleted_at, deleted_by=device_name, seq=row.seq
        ).where(table.id == row.id).execute()
    return Reply(200, {"attachment": attachment_change_json(row)})


def attachment_json(row: Attachment) -> dict[str, Any]:
    """An attachment as a record lists it."""
    return {
        "id": row.id,
        "filename": row.filename,
        "content_type": row.content_type,
        "size": row.size,
        "sha256": row.sha256,
        "created_at": row.created_at,
        "created_by": row.created_by,
    }


def attachment_change_json(row: Attachment) -> dict[str, Any]:
    """An attachment as the changes feed carries it (a removed one is a tombstone)."""
    return {
        **attachment_json(row),
        "entity_id": row.entity_id,
        "deleted": bool(row.deleted),
        "deleted_at": row.deleted_at,
        "deleted_by": row.deleted_by,
    }
