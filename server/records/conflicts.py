"""The review queue: conflicts a field worker raises and an admin resolves or dismisses.

Raising a conflict snapshots the server's current record beside the worker's values. Resolving
applies the admin's merged fields as an ordinary change (version +1, in the changes feed) in the
same transaction that closes the conflict and appends the audit entry; dismissing keeps the
server's version. Every decision is kept in `conflict_audit` (who, when, which values).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from server.access import Action, Allowed
from server.auth import AuthenticatedDevice
from server.db.idempotency import Reply
from server.db.models import Conflict
from server.db.store import ChangeSequence, Store
from server.records.history import Author
from server.records.mutations import conflict_reply, now_iso, record_json, update_record

if TYPE_CHECKING:
    from server.gate import Gate

__all__ = ["OPEN", "STATUSES", "conflict_json", "decide", "load_visible", "raise_conflict"]

OPEN = "open"
RESOLVED = "resolved"
DISMISSED = "dismissed"
STATUSES = (OPEN, RESOLVED, DISMISSED)


def conflict_json(row: Conflict, audit: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": row.id,
        "status": row.status,
        "entity_id": row.entity_id,
        "base_version": row.base_version,
        "mine": json.loads(row.mine),
        "base": json.loads(row.base) if row.base else None,
        "server": json.loads(row.server),
        "note": row.note,
        "device": row.device,
        "created_at": row.created_at,
        "decided_by": row.decided_by,
        "decided_at": row.decided_at,
        "resolution": json.loads(row.resolution) if row.resolution else None,
    }
    if audit is not None:
        body["audit"] = audit
    return body


def raise_conflict(
    store: Store,
    device: AuthenticatedDevice,
    entity_id: str,
    base_version: int | None,
    mine: dict[str, Any],
    note: str | None,
    gate: Gate,
    base: dict[str, Any] | None = None,
) -> Reply:
    """Open a conflict against the current record (runs as an idempotent effect); a work
    order the access rule hides from the device is as missing (no snapshot of it is made)."""
    records = store.tables.WorkOrder
    current = records.get_or_none(records.id == entity_id)
    if current is None:
        return Reply(404, {"error": "not_found"})
    if not isinstance(gate.order(Action.RAISE_CONFLICT, entity_id, current, base_version), Allowed):
        return Reply(404, {"error": "not_found"})
    gate.sent({current.id: current.version})
    gate.flush()
    now = now_iso()
    row = store.tables.Conflict.create(
        entity_id=entity_id,
        base_version=base_version,
        mine=json.dumps(mine),
        base=None if base is None else json.dumps(base),
        server=json.dumps(record_json(current)),
        note=note,
        device_id=device.id,
        device=device.name,
        status=OPEN,
        created_at=now,
    )
    _audit(store, row.id, "raised", device.name, now, {"mine": mine, "note": note})
    return Reply(201, {"conflict": conflict_json(row)})


def load_visible(store: Store, gate: Gate, conflict_id: int) -> Conflict | None:
    """The conflict if the access rule lets this device read it (admins all, workers their own)."""
    table = store.tables.Conflict
    row: Conflict | None = table.get_or_none(table.id == conflict_id)
    owner = row.device_id if row is not None else None
    if not isinstance(gate.owned(Action.READ_CONFLICT, owner), Allowed):
        return None
    return row


def audit_entries(store: Store, conflict_id: int) -> list[dict[str, Any]]:
    table = store.tables.ConflictAudit
    query = table.select().where(table.conflict_id == conflict_id).order_by(table.id)
    return [
        {"action": row.action, "actor": row.actor, "at": row.at, "chosen": json.loads(row.chosen)}
        for row in query
    ]


def _audit(
    store: Store, conflict_id: int, action: str, actor: str, at: str, chosen: dict[str, Any]
) -> None:
    store.tables.ConflictAudit.create(
        conflict_id=conflict_id, action=action, actor=actor, at=at, chosen=json.dumps(chosen)
    )


def decide(
    store: Store,
    admin: AuthenticatedDevice,
    conflict_id: int,
    fields: dict[str, Any] | None,
    base_version: int | None,
) -> Reply:
    """Resolve (with `fields`) or dismiss (`fields is None`) an open conflict, atomically."""
    with store.write_transaction() as sequence:
        return _decide(store, admin, conflict_id, fields, base_version, sequence)


def _decide(
    store: Store,
    admin: AuthenticatedDevice,
    conflict_id: int,
    fields: dict[str, Any] | None,
    base_version: int | None,
    sequence: ChangeSequence,
) -> Reply:
    table = store.tables.Conflict
    row = store.for_update(table.select().where(table.id == conflict_id)).first()
    if row is None:
        return Reply(404, {"error": "not_found"})
    if row.status != OPEN:
        return Reply(409, {"error": "conflict_not_open", "conflict": conflict_json(row)})
    records = store.tables.WorkOrder
    current = store.for_update(records.select().where(records.id == row.entity_id)).first()
    now = now_iso()
    if fields is None:
        chosen: dict[str, Any] = {
            "kept": record_json(current) if current else None,
        }
        reply_body: dict[str, Any] = {}
        status = DISMISSED
    else:
        if current is None:
            return Reply(404, {"error": "not_found"})
        if current.version != base_version:
            return conflict_reply(current)
        author = Author.deciding(admin)
        applied = update_record(store, current, fields, admin.name, sequence, author)
        if applied.status != 200:
            return applied
        record = applied.body["record"]
        chosen = {"fields": fields, "version": record["version"]}
        reply_body = {"record": record}
        status = RESOLVED
    row.status = status
    row.decided_by = admin.name
    row.decided_at = now
    row.resolution = json.dumps(chosen)
    row.save()
    _audit(store, row.id, status, admin.name, now, chosen)
    return Reply(200, {**reply_body, "conflict": conflict_json(row)})
