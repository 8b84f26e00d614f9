"""Pruning the scope entries no feed page can still need.

`scope_entry` (server/scope/keys.py) keeps a row per (key, work order) that ever met. A *present*
row is the work order's membership of the key: the feed, the restamping of writes and a
device's scope change all read it, so it stays. An *absent* row (the work order left the
key, an attachment's change, or a `d:` stamp) is only a position in that key's change log,
there so that a device reading the key after it learns of the change once, as a record or
as `out_of_scope`. Once every device that reads the key has pulled past it, nothing needs
it: later pages start above it, and a new device (from 0) is never told `out_of_scope` and
finds what it holds through present rows. So an absent row goes when its number is at or
below the *horizon* of its key: the lowest feed position (`device.feed_position`, the highest
`since` the device pulled from) among the live devices reading the key, or every number when
no live device reads it (its devices were revoked, or the person or team has none left).

A device that has not pulled for months holds the horizon of its keys where it stopped, so it
still gets each of its `out_of_scope` once; revoking a lost device lets its keys be pruned.
Keys a device gains later (a new team) need no absent rows: `set-device` stamps its own `d:`
key for everything that changed for it. Deleting re-checks `NOT present` and the number, so
a row restamped by a write in between (present again, at a new number) is left alone.
"""

from __future__ import annotations

from collections.abc import Iterator

from server.db.best_effort import write_unless_busy
from server.db.models import BIGINT_MAX
from server.db.store import Store
from server.scope.keys import Scope, tuples_of

__all__ = ["key_horizons", "note_feed_position", "prune_scope_entries"]

_READ_ROWS = 5000


def note_feed_position(store: Store, device_id: int, since: int, known: int) -> None:
    """Remember that the device pulled from `since` (it holds every change up to there);
    `known` is the position its row had, so a poll that did not advance writes nothing.

    A feed read must not wait for writers: on SQLite, whose single writer lock a batch may
    hold for a while, the position is skipped when the lock is taken. A position noted late
    (or never) only makes pruning wait longer, never delete too early."""
    if since <= known:
        return
    devices = store.tables.Device
    update = devices.update(feed_position=since).where(
        devices.id == device_id, devices.feed_position < since
    )
    write_unless_busy(store, update.execute)


def key_horizons(store: Store) -> dict[str, int]:
    """For each key some live device reads, the lowest feed position among its readers."""
    devices = store.tables.Device
    query = devices.select(
        devices.id, devices.role, devices.user_name, devices.team, devices.legacy_scope,
        devices.feed_position,
    ).where(devices.revoked_at.is_null())  # fmt: skip
    horizons: dict[str, int] = {}
    for device_id, role, user, team, legacy, position in tuples_of(query):
        scope = Scope(device_id, user, team, admin=role == "admin" or bool(legacy))
        for key in scope.scope_keys():
            horizons[key] = min(horizons.get(key, BIGINT_MAX), int(position))
    return horizons


def _absent_rows(store: Store) -> Iterator[list[tuple[str, str, int]]]:
    """The absent rows, a block at a time, walking the primary key."""
    table = f'"{store.tables.ScopeEntry._meta.table_name}"'
    param = store.db.param
    last = ("", "")
    while True:
        sql = (
            f'SELECT "key", "entity_id", "seq" FROM {table} WHERE NOT "present" AND '
            f'("key", "entity_id") > ({param}, {param}) '
            f'ORDER BY "key", "entity_id" LIMIT {param}'
        )
        rows = [
            (str(key), str(entity_id), int(seq))
            for key, entity_id, seq in store.db.execute_sql(sql, [*last, _READ_ROWS])
        ]
        if not rows:
            return
        yield rows
        last = (rows[-1][0], rows[-1][1])


def prune_scope_entries(store: Store) -> int:
    """Delete the absent scope entries at or below their key's horizon; return how many."""
    horizons = key_horizons(store)
    table = f'"{store.tables.ScopeEntry._meta.table_name}"'
    removed = 0
    for rows in _absent_rows(store):
        doomed = [row for row in rows if row[2] <= horizons.get(row[0], BIGINT_MAX)]
        for start in range(0, len(doomed), store.rows_per_statement(3)):
            part = doomed[start : start + store.rows_per_statement(3)]
            sql = (
                f'DELETE FROM {table} WHERE NOT "present" AND ("key", "entity_id", "seq") IN '
                f"(VALUES {store.values_list(len(part), 3)})"
            )
            with store.db.atomic():
                cursor = store.db.execute_sql(sql, [value for row in part for value in row])
            removed += cursor.rowcount
    return removed
