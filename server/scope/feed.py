"""One page of a device's changes feed, read from the change logs of its scope keys.

A page is the next `limit` change numbers after `since` among the device's keys (for an
admin: every work order's own number, plus its pin key). One work order may sit at several
numbers (under several keys); it is delivered only at the highest of them, its *latest*, so
each page carries the latest state of each work order once, as the unscoped feed does:

- in scope now: the record, with `pinned` for the device's user;
- not in scope now: `{"id": …, "out_of_scope": true}`. The device passes that number once,
  so it is told once (a page from `since=0` leaves them out: such a device holds nothing).

Reading order matters without a snapshot: the horizon (`Store.horizon`: no number at or
below it can still commit), positions up to it, then the rows and pins, then the latest
numbers. A change committed after the horizon was read has a higher number than it, so than
every position of the page (server/db/store.py proves it); if it lands before the latest numbers are
read, the work order is skipped here and delivered at its new number on a later page; if it
lands after, the rows read before it are the state as of this page. Nothing is skipped and
nothing is delivered twice for one change.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from server.db.store import Store
from server.records.mutations import WIRE_FIELDS, record_columns_json
from server.scope.echoes import Echoes, own_writes, skip_own_writes
from server.scope.keys import FILE, Scope
from server.scope.pins import pinned_among
from server.uploads.attachments import (
    attachment_change_json,
    attachment_rows,
    attachments_of,
    with_attachments,
)

__all__ = ["feed_page"]

_ROW_COLUMNS = (*WIRE_FIELDS, "seq", "created_by")
#: Pages' worth of positions one page may pass as the device's own writes before reading its
#: window (`skip_own_writes`: about 2 µs a position on SQLite, against 9 through the window).
_SKIP_PAGES = 20


@dataclass(frozen=True)
class Position:
    """One change number of a device's feed: a work order's change, or one of its files'."""

    seq: int
    entity_id: str
    file: bool


def _positions(
    store: Store, scope: Scope, since: int, limit: int, upto: int | None
) -> list[Position]:
    """The next `limit` change numbers after `since` (and at most `upto`) in the device's logs,
    each with its work order and whether it is an attachment's change.

    One bounded, index-ordered range per source (`scope_entry (key, seq)` per key; for an
    admin also `work_order (seq)` and `attachment (seq)`), merged: the cost is
    `sources × limit`, whatever the tables hold. Each source yields distinct numbers, so
    the first `limit` numbers of the merge are complete in every source."""
    param = store.db.param
    entries = f'"{store.tables.ScopeEntry._meta.table_name}"'
    parts: list[str] = []
    params: list[Any] = []

    capped = "" if upto is None else f' AND "seq" <= {param}'
    cap = [] if upto is None else [upto]

    def source(sql: str, *values: Any) -> None:
        parts.append(f'SELECT * FROM ({sql}{capped} ORDER BY "seq" LIMIT {param}) AS s{len(parts)}')
        params.extend([*values, *cap, limit])

    for key in scope.scope_keys():
        source(
            f'SELECT "entity_id", "seq", 0 AS "file" FROM {entries} '
            f'WHERE "key" = {param} AND "seq" > {param}',
            key,
            since,
        )
    if scope.admin:
        for table, owner, file in (
            (store.tables.WorkOrder, "id", 0),
            (store.tables.Attachment, "entity_id", 1),
        ):
            source(
                f'SELECT "{owner}" AS "entity_id", "seq", {file} AS "file" '
                f'FROM "{table._meta.table_name}" WHERE "seq" > {param}',
                since,
            )
    merged: dict[int, Position] = {}
    for entity_id, seq, file in store.db.execute_sql(" UNION ALL ".join(parts), params):
        known = merged.get(int(seq))
        merged[int(seq)] = Position(int(seq), entity_id, bool(file) or bool(known and known.file))
    return [merged[seq] for seq in sorted(merged)[:limit]]


def _rows(store: Store, entity_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    table = f'"{store.tables.WorkOrder._meta.table_name}"'
    columns = ", ".join(f'"{name}"' for name in _ROW_COLUMNS)
    sql = f'SELECT {columns} FROM {table} WHERE "id" IN ({store.marks(len(entity_ids))})'
    found = {}
    for values in store.db.execute_sql(sql, list(entity_ids)):
        row = dict(zip(_ROW_COLUMNS, values, strict=True))
        found[row["id"]] = row
    return found


def _latest(store: Store, scope: Scope, entity_ids: Sequence[str]) -> dict[str, int]:
    keys = scope.scope_keys()
    entries = f'"{store.tables.ScopeEntry._meta.table_name}"'
    sql = (
        f'SELECT "entity_id", MAX("seq") FROM {entries} WHERE "key" IN '
        f'({store.marks(len(keys))}) AND "entity_id" IN ({store.marks(len(entity_ids))}) '
        'GROUP BY "entity_id"'
    )
    rows = store.db.execute_sql(sql, [*keys, *entity_ids])
    return {entity_id: int(seq) for entity_id, seq in rows}


def feed_page(
    store: Store, scope: Scope, since: int, limit: int, echoes: Echoes | None = None
) -> dict[str, Any]:
    """`{"changes": […], "next": token, "has_more": bool}` for this device after `since`,
    plus `attachments` (the file changes of work orders it holds) when there are any.
    With `echoes`, what the device wrote itself and holds is left out (server/scope/echoes.py).

    An attachment's change has a number of its own (a position of its own in a worker's
    keys, under `FILE` + the attachment's id): it travels in `attachments` and never moves its work
    order, whose record lists its live attachments."""
    upto = store.horizon()
    start = since
    if echoes is not None:
        # A run of the device's own writes is passed in one cheap read (a drain's feed).
        since = skip_own_writes(store, scope, echoes, since, upto, limit * _SKIP_PAGES)
    positions = _positions(store, scope, since, limit + 1, upto)
    has_more = len(positions) > limit
    positions = positions[:limit]
    files = _file_changes(store, [position.seq for position in positions])
    owner = {p.seq: str(files[p.seq]["entity_id"]) for p in positions if p.seq in files}
    # A file's entry whose attachment changed again since is no work order's position.
    mine = [p for p in positions if p.seq in owner or not p.entity_id.startswith(FILE)]
    entity_ids = sorted({owner.get(p.seq, p.entity_id) for p in mine})
    changes: list[dict[str, Any]] = []
    held: set[str] = set()
    if entity_ids:
        rows = _rows(store, entity_ids)
        pinned = pinned_among(store, scope.user, entity_ids)
        held = {e for e, row in rows.items() if scope.holds(row, e in pinned)}
        # Work orders' positions (an attachment's travel in `attachments`).
        orders = [p for p in mine if p.seq not in owner and p.entity_id in rows]
        echoed = _echoes(store, scope, echoes, orders, rows, held)
        rest = sorted({p.entity_id for p in orders if p.seq not in echoed})
        latest = _latest(store, scope, rest) if rest else {}
        delivered: dict[int, str] = {}
        for position in orders:
            entity_id = position.entity_id
            if position.seq in echoed:
                continue  # the device's own write: its reply carried it
            newest = max(latest.get(entity_id, 0), rows[entity_id]["seq"] if scope.admin else 0)
            if position.seq != newest:
                continue  # delivered at its newest number, on this page or a later one
            delivered[position.seq] = entity_id
        listed = attachments_of(store, sorted(e for e in delivered.values() if e in held))
        for entity_id in delivered.values():
            row = rows[entity_id]
            if entity_id in held:
                record = {**record_columns_json(row), "pinned": entity_id in pinned}
                changes.append(with_attachments(record, listed))
            elif start > 0:
                changes.append({"id": entity_id, "out_of_scope": True})
    page: dict[str, Any] = {
        "changes": changes,
        "next": str(positions[-1].seq) if positions else str(since),
        "has_more": has_more,
    }
    shown = [files[seq] for seq in sorted(owner) if owner[seq] in held]
    if shown:  # left out when there are none: the page keeps its shape for older clients
        page["attachments"] = shown
    return page


def _echoes(
    store: Store,
    scope: Scope,
    echoes: Echoes | None,
    orders: Sequence[Position],
    rows: dict[str, dict[str, Any]],
    held: set[str],
) -> set[int]:
    """The positions left out as the device's own writes: each the very number of a write
    (not a later pin's or scope stamp's) that `own_writes` finds the device holds.

    Read before the newest numbers, and those only for the rest: a position left out here
    is not delivered whether or not it is its work order's newest (if it is not, the newest
    comes on this page or a later one, judged on its own), so a window of nothing but the
    device's own writes, as a drain of offline creates reads, needs no `_latest`."""
    if echoes is None:
        return set()
    written = {p.entity_id: p.seq for p in orders if rows[p.entity_id]["seq"] == p.seq}
    candidates = {e: rows[e] for e in written if e in held}
    own = own_writes(store, echoes, scope.user, candidates)
    return {written[e] for e in own}


def _file_changes(store: Store, seqs: Sequence[int]) -> dict[int, dict[str, Any]]:
    """The attachment changes at these numbers, by number."""
    if not seqs:
        return {}
    rows = attachment_rows(store, "seq", seqs)
    return {int(row.seq): attachment_change_json(row) for row in rows}
