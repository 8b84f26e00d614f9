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
once the device has pulled past them. On a large server that is a million entries: in one
transaction they would hold back every device's feed (its horizon, server/db/store.py) for
the whole time, and past 2^24 outgrow what one transaction may number. So they are written
in batches of work orders in id order, each batch its own write transaction, which also moves
the device's `legacy_ending_after` to the last id it did:

- `set-device` scopes the device's feed at once (user, team, `legacy_ending_after = ""`),
  then runs the batches. Stamps take new numbers, above wherever the device's feed stands, so
  it reads each of them once, whenever it pulls.
- Until the last batch clears `legacy_ending_after`, the device still reaches every work order
  (server/access.py): the ones not yet stamped are still on it, and its edits of them go on.
- A `set-device` killed midway leaves the id of its last committed batch: the next
  `set-device` of that device, or a server's pruner, goes on after it (`finish_legacy_ends`),
  so no work order is stamped twice or skipped. Two finishers of one device take turns (an
  advisory lock on the device; SQLite's one writer) and each rereads the id.
- A work order changed meanwhile needs nothing more: a stamp makes the feed send its state at
  that time (a record if in scope, `out_of_scope` if not), and a change of its keys reaches
  the device through those keys, as for any scoped device.

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
    from server.db.store import Store

__all__ = [
    "backfill_scope_entries",
    "begin_legacy_end",
    "finish_legacy_end",
    "finish_legacy_ends",
    "mark_legacy_devices",
]

_CHUNK = 5000
# Names "ending a legacy device" among advisory locks; the device id is the second key.
_ENDING_LOCK = 0x46534C45


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
    for device_id, created_at in tuples_of(query):
        created = _moment(created_at)
        if scoped_at is None or created is None or created <= scoped_at:
            legacy.append(device_id)
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


def begin_legacy_end(store: Store, device_id: int) -> None:
    """Start ending a legacy device's everything, inside `set_device`'s transaction (which
    has just given the device its scope); `finish_legacy_end` does the rest."""
    devices = store.tables.Device
    devices.update(legacy_scope=False, legacy_ending_after="").where(
        devices.id == device_id
    ).execute()


def finish_legacy_end(store: Store, device_id: int) -> int:
    """Run the device's remaining batches, if its end is under way; return how many work
    orders they told it left."""
    told = 0
    while (batch := _next_batch(store, device_id)) is not None:
        told += batch
    return told


def finish_legacy_ends(store: Store) -> int:
    """Finish every end left under way (a `set-device` killed midway); return as above."""
    devices = store.tables.Device
    query = devices.select(devices.id).where(devices.legacy_ending_after.is_null(False))
    return sum(finish_legacy_end(store, int(row[0])) for row in tuples_of(query))


def _next_batch(store: Store, device_id: int) -> int | None:
    """Tell the device of the next `_CHUNK` work orders (by id) each one that is not in its
    scope; return how many, or None when none was left (the end is over)."""
    devices, orders, pins = store.tables.Device, store.tables.WorkOrder, store.tables.Pin
    with store.write_transaction() as sequence:
        if store.is_postgres:
            store.db.execute_sql("SELECT pg_advisory_xact_lock(%s, %s)", (_ENDING_LOCK, device_id))
        row = devices.get_or_none(devices.id == device_id)
        if row is None or row.legacy_ending_after is None:
            return None
        after = Scope(row.id, row.user_name, row.team, admin=False)
        query = (
            orders.select(
                orders.id, orders.assignee, orders.team, orders.created_by, orders.version
            )
            .where(orders.id > row.legacy_ending_after)
            .order_by(orders.id)
            .limit(_CHUNK)
        )
        rows = list(tuples_of(query))
        if not rows:
            devices.update(legacy_ending_after=None).where(devices.id == device_id).execute()
            return None
        ids = [entity_id for entity_id, *_ in rows]
        pinned = {
            entity_id
            for (entity_id,) in tuples_of(
                pins.select(pins.entity_id).where(
                    pins.user_name == after.user, pins.entity_id.between(ids[0], ids[-1])
                )
            )
        }
        versions = {
            entity_id: int(version)
            for entity_id, assignee, team, created_by, version in rows
            if not after.holds(
                {"assignee": assignee, "team": team, "created_by": created_by},
                entity_id in pinned,
            )
        }
        own = DEVICE + str(device_id)
        upsert_entries(store, [(own, entity_id, sequence.next(), False) for entity_id in versions])
        # It had every one of them: its edits of those still go through (server/access.py).
        note_held(store, device_id, versions)
        devices.update(legacy_ending_after=ids[-1]).where(devices.id == device_id).execute()
        return len(versions)
