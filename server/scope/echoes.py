"""A device's own writes left out of its changes feed: it holds them from the mutation replies.

A device that sends 20,000 creates gets each record back in the mutation's reply (the
batch's result), so the feed need not carry them again. A feed entry is left out, its
number still passed by `next`, only when all of these hold:

- the work order's newest version was written by this very device through `POST
  /v1/mutations` (or the batch): the change log (server/records/history.py) says
  `source = "device"` and this device's id at that version. A console edit, an assignment, a
  conflict's decision, another device of the same person: all are someone else's change
  and travel as before;
- the feed position is that write's own number: a later pin or scope stamp moves the work
  order to a number of its own, and is delivered;
- no pin of the person (present, or removed) touched it since the install began (above its
  *floor*, below): the reply does not carry `pinned`, so such a work order travels in full.
  Not "since the device's `since`": an unpin at a lower number than the write is passed
  over unseen once the write is newer (the feed delivers a work order at its newest number
  only), so whether the device learnt it would depend on where its pages ended. A pin
  present when the write lands is restamped to the write's number, so it always travels;
  an unpin since the install began makes the work order travel with each of its writes;
- the device sent `Fieldsync-Install` and the write came from that install: its number lies
  above the install's *floor*.

The install is a random id a device's store makes once (app/sync/engine.py) and sends with
its writes and pulls. A reinstall with the same token (an empty store, a new id) must get
back what the old install wrote, so when the server sees a new id for a device it records a
floor: `ChangeSequence.start` of a write transaction of its own, above every number handed
out before it and below every number handed out after it (SQLite's single writer; on
PostgreSQL the xid blocks of server/db/store.py). The old install's writes lie below the
floor and are delivered; the new one's lie above.

A reply that was lost is no exception: the device still has the mutation queued, sends it
again with the same `Idempotency-Key` and gets the stored reply with the record. Two stores
sending with one token at the same time, each of them writing, would see each other's
writes as their own: a token names one device, and one install uses it at a time.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from server.auth import AuthenticatedDevice
from server.db.store import Store
from server.scope.keys import PIN, Scope

__all__ = [
    "INSTALL_DESCRIPTION",
    "INSTALL_HEADER",
    "Echoes",
    "note_install",
    "own_writes",
    "skip_own_writes",
]

INSTALL_HEADER = "Fieldsync-Install"
INSTALL_DESCRIPTION = (
    "The id of this device's store (1-64 letters, digits, `-` or `_`), sent with its writes "
    "and pulls: the feed then leaves out what this install wrote and holds from the replies. "
    "Anything else is ignored (the feed carries everything)."
)

_INSTALL = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: Positions `skip_own_writes` reads first; each next read is twice as long.
_FIRST_STEP = 32


@dataclass(frozen=True)
class Echoes:
    """Whose writes a feed page may leave out: this device's, numbered above `floor`."""

    device_id: int
    #: Its name, which its writes stamp as `updated_by`: others' rows need no lookup.
    device_name: str
    floor: int


def _valid(install: str | None) -> str | None:
    if install is None or not _INSTALL.fullmatch(install):
        return None
    return install


def note_install(store: Store, device: AuthenticatedDevice, install: str | None) -> Echoes | None:
    """The device's install as of this request (None: it sent none, or another install of
    the same token took over meanwhile); a new one gets its floor first."""
    install = _valid(install)
    if install is None:
        return None
    if install == device.install_id:
        return Echoes(device.id, device.name, device.install_floor)
    devices = store.tables.Device
    with store.write_transaction() as sequence:
        devices.update(install_id=install, install_floor=sequence.start).where(
            devices.id == device.id, devices.install_id != install
        ).execute()
    row = devices.select(devices.install_id, devices.install_floor).where(devices.id == device.id)
    found: Any = row.tuples().first()
    if found is None or found[0] != install:
        return None
    return Echoes(device.id, device.name, int(found[1]))


def _chunks(items: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def own_writes(
    store: Store, echoes: Echoes, user: str, rows: Mapping[str, Mapping[str, Any]]
) -> set[str]:
    """Which of these work orders (their current rows, each at its feed position) the device
    holds as it wrote them: the entries a page leaves out."""
    mine = sorted(
        entity_id
        for entity_id, row in rows.items()
        if int(row["seq"]) > echoes.floor and row["updated_by"] == echoes.device_name
    )
    if not mine:
        return set()
    log = f'"{store.tables.WorkOrderChange._meta.table_name}"'
    entries = f'"{store.tables.ScopeEntry._meta.table_name}"'
    param = store.db.param
    written: set[str] = set()
    pinned: set[str] = set()
    for chunk in _chunks(mine, store.rows_per_statement(1) - 3):
        sql = (
            f'SELECT "entity_id", "version" FROM {log} WHERE "entity_id" IN '
            f'({store.marks(len(chunk))}) AND "device_id" = {param} AND "source" = {param}'
        )
        for entity_id, version in store.db.execute_sql(sql, [*chunk, echoes.device_id, "device"]):
            if int(version) == int(rows[entity_id]["version"]):
                written.add(entity_id)
        sql = (
            f'SELECT "entity_id" FROM {entries} WHERE "key" = {param} AND "entity_id" IN '
            f'({store.marks(len(chunk))}) AND "seq" > {param}'
        )
        values = [PIN + user, *chunk, echoes.floor]
        pinned.update(row[0] for row in store.db.execute_sql(sql, values))
    return written - pinned


def skip_own_writes(
    store: Store, scope: Scope, echoes: Echoes, since: int, upto: int | None, limit: int
) -> int:
    """Where a worker's feed after `since` resumes past the run of this device's own writes
    that starts there (at most `limit` positions, none above `upto`): `since` when the next
    position is anything else.

    The same test as `own_writes` in one statement, with no row, pin list or log read in
    Python: a drain of 20,000 offline creates is passed in one request. It is stricter:
    held means by the work order's own fields (one held only by a pin is left to the page),
    and a file's change or an empty key stops the run. Read after the horizon, like the
    page's positions; the statement sees one state of the tables, so a write landing
    meanwhile either moved the work order past its position (not an echo: the run stops)
    or comes at a number above `upto`."""
    held_by = [
        *([(f"{store.db.param} IN (w.assignee, w.created_by)", scope.user)] if scope.user else []),
        *([(f"w.team = {store.db.param}", scope.team)] if scope.team else []),
    ]  # `Scope.holds` without its pins
    if scope.admin or not held_by:
        return since
    tables = store.tables
    entries = f'"{tables.ScopeEntry._meta.table_name}"'
    param = store.db.param
    capped = "" if upto is None else f' AND "seq" <= {param}'
    keys = scope.scope_keys()
    sources = [
        f'SELECT * FROM (SELECT "entity_id", "seq" FROM {entries} WHERE "key" = {param} '
        f'AND "seq" > {param}{capped} ORDER BY "seq" LIMIT {param}) AS k{number}'
        for number in range(len(keys))
    ]
    held = "(" + " OR ".join(test for test, _ in held_by) + ")"
    sql = (
        f"SELECT s.seq, (w.seq = s.seq AND w.updated_by = {param} AND s.seq > {param} "
        f"AND {held} "
        f'AND EXISTS (SELECT 1 FROM "{tables.WorkOrderChange._meta.table_name}" AS l '
        f"WHERE l.entity_id = w.id AND l.version = w.version AND l.device_id = {param} "
        f"AND l.source = {param}) "
        f"AND NOT EXISTS (SELECT 1 FROM {entries} AS p WHERE p.key = {param} "
        f"AND p.entity_id = w.id AND p.seq > {param}) "
        f'AND NOT EXISTS (SELECT 1 FROM "{tables.Attachment._meta.table_name}" AS a '
        f"WHERE a.seq = s.seq)) "
        f"FROM ({' UNION ALL '.join(sources)}) AS s "
        f'LEFT JOIN "{tables.WorkOrder._meta.table_name}" AS w ON w.id = s.entity_id '
        f"ORDER BY s.seq LIMIT {param}"
    )
    # Parameters bind in the order they appear: the SELECT list's, then the sources'.
    tests = [
        echoes.device_name,
        echoes.floor,
        *(value for _, value in held_by),
        echoes.device_id,
        "device",
        PIN + scope.user,
        echoes.floor,
    ]
    # Every row's test is computed before the rows are ordered: read in steps that grow while
    # the run goes on, so that a feed whose next position is someone else's change pays for
    # a few positions, not for `limit` (10,000 of them: 18 ms on SQLite).
    cap = [] if upto is None else [upto]
    resume, step, read = since, _FIRST_STEP, 0
    while read < limit:
        step = min(step, limit - read)
        window = [value for key in keys for value in (key, resume, *cap, step)]
        rows = store.db.execute_sql(sql, [*tests, *window, step]).fetchall()
        for seq, echo in rows:
            if not echo:
                return resume
            resume = int(seq)
        if len(rows) < step:
            return resume
        read, step = read + step, step * 2
    return resume
