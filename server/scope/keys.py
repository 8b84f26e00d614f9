"""Who holds which work order: scope keys and the per-key change log behind the scoped feed.

A worker device holds a work order when its user is the `assignee`, when its user created it,
when its team is the work order's `team`, or when its user pinned it; an admin holds
everything. Each rule is a *scope key*; a work order is in some keys, a device reads some:

    work order                     device (worker)
    u:<assignee>, u:<created_by>   u:<user>
    t:<team>                       t:<team>
    p:<each user who pinned it>    p:<user>
                                   d:<device id>   (its own stamps, see `stamp_device_scope`)

`scope_entry` holds one row per (key, work order) that ever met: `seq` is the number of the
last change that touched the pair, `present` whether the work order is in the key now. Every
write transaction ends with `restamp_changed`, which moves each changed work order's present
entries (and the ones it just left) to the change's number, so the feed of a device reads
`(key, seq)` ranges of its own keys: its cost follows the changes in its scope, never the
size of the table. Numbers come from `Store.write_transaction`, and the feed stops at the
horizon below which none can still commit (server/db/store.py), for every key alike.

Events that change what a device may see without changing a work order take their own numbers
from the same counter: a pin stamps `p:<user>`, a device's new user or team stamps `d:<id>`
for every work order of the keys it gained or lost. The feed then shows each such work order
again at that number, as a record (it is in scope) or as `out_of_scope` (it is not).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from server.scope.held import note_held

if TYPE_CHECKING:
    from server.db.store import ChangeSequence, Store

__all__ = [
    "DEVICE",
    "FILE",
    "PIN",
    "TEAM",
    "USER",
    "Scope",
    "record_keys",
    "restamp_changed",
    "tuples_of",
    "stamp_device_scope",
    "upsert_entries",
]

USER, TEAM, PIN, DEVICE = "u:", "t:", "p:", "d:"
#: Before an attachment's id in `scope_entry.entity_id`: files and work orders are separate
#: key spaces there, so an attachment whose id equals a work order's cannot overwrite its rows.
FILE = "f:"

#: (key, entity id, seq, present): one row of `scope_entry`.
Entry = tuple[str, str, int, bool]


@dataclass(frozen=True)
class Scope:
    """What one device may hold."""

    device_id: int
    user: str
    team: str
    admin: bool

    def scope_keys(self) -> list[str]:
        """The scope keys whose change logs the device reads (a worker's; an admin's are pins)."""
        if self.admin:
            return [PIN + self.user]
        keys = [USER + self.user, PIN + self.user, DEVICE + str(self.device_id)]
        if self.team:
            keys.append(TEAM + self.team)
        return keys

    def holds(self, row: Mapping[str, Any], pinned: bool) -> bool:
        """Whether a work order (its columns) is in this scope now."""
        if self.admin or pinned:
            return True
        if self.user and self.user in (row["assignee"], row["created_by"]):
            return True
        return bool(self.team) and row["team"] == self.team


def record_keys(assignee: str, team: str, created_by: str) -> set[str]:
    """The keys a work order's own fields put it in (pins aside)."""
    keys = {USER + name for name in (assignee, created_by) if name}
    if team:
        keys.add(TEAM + team)
    return keys


def tuples_of(query: Any) -> Iterator[tuple[Any, ...]]:
    """A peewee query's rows as tuples (its stubs type them as model instances)."""
    rows: Iterator[tuple[Any, ...]] = iter(query.tuples())
    return rows


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _table(store: Store) -> str:
    return f'"{store.tables.ScopeEntry._meta.table_name}"'


def upsert_entries(store: Store, entries: Sequence[Entry]) -> None:
    """Write entries, replacing the (key, work order) rows that exist."""
    sql_head = f'INSERT INTO {_table(store)} ("key", "entity_id", "seq", "present") VALUES '
    sql_tail = (
        ' ON CONFLICT ("key", "entity_id") DO UPDATE SET "seq" = excluded."seq", '
        '"present" = excluded."present"'
    )
    for chunk in _chunks(entries, store.rows_per_statement(4)):
        params = [value for entry in chunk for value in entry]
        store.db.execute_sql(sql_head + store.values_list(len(chunk), 4) + sql_tail, params)


def _present_keys(store: Store, entity_ids: Sequence[str]) -> dict[str, set[str]]:
    held: dict[str, set[str]] = defaultdict(set)
    for chunk in _chunks(entity_ids, store.rows_per_statement(1)):
        marks = store.marks(len(chunk))
        sql = (
            f'SELECT "key", "entity_id" FROM {_table(store)} '
            f'WHERE "entity_id" IN ({marks}) AND "present"'
        )
        for key, entity_id in store.db.execute_sql(sql, list(chunk)):
            held[entity_id].add(key)
    return held


def restamp_changed(
    store: Store,
    after: int,
    last: int,
    fresh: Mapping[int, tuple[str, str, str, str]] | None = None,
) -> int:
    """Bring the scope entries up to the changes numbered (after, last]; return how many
    changes that was. Runs inside the write transaction.

    A changed work order's present entries (and those of keys it just left) move to its
    change. A changed attachment gets entries of its own (`FILE` + the attachment's id) under
    its work order's keys: attachments never move their work order in the feed.

    `fresh`, when every change of the range is a work order inserted under a new id (number →
    id, assignee, team, creator), spares the reads: a new id has no entries yet (every entry
    is written for a work order that exists, and work orders are never deleted), so its
    entries are its own keys, present, at its number."""
    if fresh is not None:
        new: list[Entry] = [
            (key, entity_id, seq, True)
            for seq, (entity_id, assignee, team, creator) in sorted(fresh.items())
            for key in sorted(record_keys(assignee, team, creator))
        ]
        upsert_entries(store, new)
        return len(fresh)
    # Hand-written SQL: it runs at the end of every write transaction. One query reads the
    # range: the changed work orders with the columns their keys follow (first column NULL),
    # each with one of its present keys per row (NULL: none), then the changed attachments
    # (their id first). One round trip, where reading the keys apart took a second.
    orders = f'"{store.tables.WorkOrder._meta.table_name}"'
    files = f'"{store.tables.Attachment._meta.table_name}"'
    p = store.db.param
    columns = '"id", "seq", "assignee", "team", "created_by"'
    joined = ", ".join(f"o.{name}" for name in columns.split(", "))
    sql = (
        f'SELECT NULL, {joined}, s."key" FROM {orders} AS o LEFT JOIN {_table(store)} AS s '
        f'ON s."entity_id" = o."id" AND s."present" WHERE o."seq" > {p} AND o."seq" <= {p} '
        f'UNION ALL SELECT "id", "entity_id", "seq", NULL, NULL, NULL, NULL FROM {files} '
        f'WHERE "seq" > {p} AND "seq" <= {p}'
    )
    rows: dict[str, tuple[Any, ...]] = {}
    held: dict[str, set[str]] = defaultdict(set)
    attached: list[tuple[str, str, int]] = []
    for attachment_id, *row, key in store.db.execute_sql(sql, [after, last, after, last]):
        if attachment_id is None:
            rows[row[0]] = tuple(row)
            if key is not None:
                held[row[0]].add(key)
        else:
            attached.append((attachment_id, row[0], row[1]))
    changed = {entity_id: row[1] for entity_id, row in rows.items()}
    owners = sorted(set(changed) | {entity_id for _, entity_id, _ in attached})
    if not owners:
        return 0
    others = [entity_id for entity_id in owners if entity_id not in rows]
    held.update(_present_keys(store, others) if others else {})
    for chunk in _chunks(others, store.rows_per_statement(1)):
        marks = ", ".join([p] * len(chunk))
        sql = f'SELECT {columns} FROM {orders} WHERE "id" IN ({marks})'
        rows.update((row[0], row) for row in store.db.execute_sql(sql, list(chunk)))
    keys_now: dict[str, set[str]] = {}
    entries: list[Entry] = []
    for entity_id in owners:
        if entity_id not in rows:
            continue
        _, _, assignee, team, created_by = rows[entity_id]
        now_in = record_keys(assignee, team, created_by)
        mine = held.get(entity_id, set())
        keys_now[entity_id] = now_in | {key for key in mine if key.startswith(PIN)}
        if entity_id not in changed:
            continue
        seq = int(changed[entity_id])
        # A pin keeps its key until it is removed; the others follow the fields.
        entries.extend(
            (key, entity_id, seq, key.startswith(PIN) or key in now_in) for key in sorted(mine)
        )
        entries.extend((key, entity_id, seq, True) for key in sorted(now_in - mine))
    for attachment_id, entity_id, seq in attached:
        entries.extend(
            (key, FILE + attachment_id, int(seq), False)
            for key in sorted(keys_now.get(entity_id, ()))
        )
    upsert_entries(store, entries)
    return len(changed) + len(attached)


def stamp_device_scope(store: Store, before: Scope, after: Scope, sequence: ChangeSequence) -> int:
    """Show a device, at new numbers under its own `d:` key, every work order its new scope
    holds and its old one did not, or the reverse (the feed then says record or
    `out_of_scope`); return how many. What both scopes hold is left alone: the device has it."""
    keys = sorted(set(before.scope_keys()) ^ set(after.scope_keys()))
    if not keys:
        return 0
    marks = store.marks(len(keys))
    sql = (
        f'SELECT DISTINCT "entity_id" FROM {_table(store)} '
        f'WHERE "key" IN ({marks}) AND "present" ORDER BY "entity_id"'
    )
    candidates = [row[0] for row in store.db.execute_sql(sql, keys)]
    orders, pins = store.tables.WorkOrder, store.tables.Pin
    moved: list[str] = []
    lost: dict[str, int] = {}
    for chunk in _chunks(candidates, store.rows_per_statement(1)):
        pinned = set(
            tuples_of(
                pins.select(pins.user_name, pins.entity_id).where(
                    pins.user_name.in_([before.user, after.user]), pins.entity_id.in_(list(chunk))
                )
            )
        )
        query = orders.select(
            orders.id, orders.assignee, orders.team, orders.created_by, orders.version
        ).where(orders.id.in_(list(chunk)))
        for entity_id, assignee, team, created_by, version in tuples_of(query):
            row = {"assignee": assignee, "team": team, "created_by": created_by}
            was = before.holds(row, (before.user, entity_id) in pinned)
            if was != after.holds(row, (after.user, entity_id) in pinned):
                moved.append(entity_id)
                if was:
                    lost[entity_id] = int(version)
    # What it loses was on it: its edits of those still go through (server/access.py).
    note_held(store, after.device_id, lost)
    own = DEVICE + str(after.device_id)
    upsert_entries(store, [(own, entity_id, sequence.next(), False) for entity_id in sorted(moved)])
    return len(moved)
