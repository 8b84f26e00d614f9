"""Devices from before scopes keep seeing everything until an admin says who uses them.

A server from before scopes sent every work order to every device. Its database upgrade
(schema step 1) made each such device its own user (the device's name) with no team, which
would scope a phone to the work orders assigned to a person of that name: most of its work
would silently leave it on the next pull. So schema step 3 marks those devices *legacy*: their
feed stays the whole organisation, as an admin's (and their search too), until `set-device`
names their user or team. `list-devices` says which devices still are.

Ending it stamps the device's own `d:` key (server/scope/keys.py) at a new change number for each
work order its new scope does not hold, so its next pull says `out_of_scope` once for each
of them and keeps what is still its own, without a new download. That is one entry per such
work order: the device held all of them; pruning (server/scope/prune.py) removes the entries
once the device has pulled past them.

Step 3 also gives work orders from before scopes their scope entries (the scoped feed reads
nothing else), and devices their feed position (for pruning).
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

import peewee as pw

from server.db.models import Tables
from server.scope.held import note_held
from server.scope.keys import DEVICE, TEAM, USER, Scope, tuples_of, upsert_entries

if TYPE_CHECKING:
    from server.db.store import ChangeSequence, Store

__all__ = ["backfill_scope_entries", "end_legacy_scope", "mark_legacy_devices"]

_CHUNK = 5000


def _moment(text: str | None) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(text or "")
    except ValueError:
        return None


def mark_legacy_devices(tables: Tables) -> None:
    """Workers provisioned before step 1 whose user and team are still what it gave them."""
    devices, steps = tables.Device, tables.SchemaStep
    scoped_at = _moment(steps.select(steps.applied_at).where(steps.step == 1).scalar())
    legacy = []
    # Only the columns this step knows: later steps add more to the model.
    query = devices.select(devices.id, devices.created_at).where(
        devices.role == "worker",
        devices.revoked_at.is_null(),
        devices.user_name == devices.name,
        devices.team == "",
    )
    for row in query:
        created = _moment(row.created_at)
        if scoped_at is None or created is None or created <= scoped_at:
            legacy.append(row.id)
    if legacy:
        devices.update(legacy_scope=True).where(devices.id.in_(legacy)).execute()


def backfill_scope_entries(db: pw.Database, tables: Tables) -> None:
    """A present entry under each key of every work order that has none (older than scopes)."""
    orders = f'"{tables.WorkOrder._meta.table_name}"'
    entries = f'"{tables.ScopeEntry._meta.table_name}"'
    keys = " UNION ".join(
        f'SELECT \'{prefix}\' || "{column}" AS "key", "id", "seq" FROM {orders} '
        f"WHERE \"{column}\" <> ''"
        for prefix, column in ((USER, "assignee"), (USER, "created_by"), (TEAM, "team"))
    )
    db.execute_sql(
        f'INSERT INTO {entries} ("key", "entity_id", "seq", "present") '
        f'SELECT k."key", k."id", k."seq", TRUE FROM ({keys}) AS k WHERE NOT EXISTS '
        f'(SELECT 1 FROM {entries} AS e WHERE e."entity_id" = k."id") '
        "ON CONFLICT DO NOTHING"
    )


def end_legacy_scope(store: Store, after: Scope, sequence: ChangeSequence) -> int:
    """Tell a device that saw everything that each work order outside `after` left it; return
    how many. Runs inside `set_device`'s write transaction."""
    orders, pins = store.tables.WorkOrder, store.tables.Pin
    pinned = {
        row[0] for row in tuples_of(pins.select(pins.entity_id).where(pins.user_name == after.user))
    }
    own = DEVICE + str(after.device_id)
    left = 0
    last = ""
    while True:
        query = (
            orders.select(
                orders.id, orders.assignee, orders.team, orders.created_by, orders.version
            )
            .where(orders.id > last)
            .order_by(orders.id)
            .limit(_CHUNK)
        )
        rows = list(tuples_of(query))
        if not rows:
            return left
        versions = {
            entity_id: int(version)
            for entity_id, assignee, team, created_by, version in rows
            if not after.holds(
                {"assignee": assignee, "team": team, "created_by": created_by},
                entity_id in pinned,
            )
        }
        gone = [(own, entity_id, sequence.next(), False) for entity_id in versions]
        upsert_entries(store, gone)
        # It had every one of them: its edits of those still go through (server/access.py).
        note_held(store, after.device_id, versions)
        left += len(gone)
        last = rows[-1][0]
