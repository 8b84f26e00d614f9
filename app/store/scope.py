"""What this device holds (issue 16): who it is, work orders that left its scope, pins.

The server decides the scope (a worker's: work orders assigned to its user or its team, that
it created or pinned) and tells the device in the changes feed: a record inside the scope, or
``{"id": …, "out_of_scope": true}`` once when one leaves it. A work order that leaves goes
from the cache at once, unless an edit of it is not yet acknowledged (pending, sending,
retrying, failed, or held behind a conflict) or the app's editor shows it (unsaved typing,
`app.store.editing`): then it stays, marked ``left_scope_at`` ("No
longer assigned to you"), and goes only when the last of those edits is delivered or a person
discards it (`remove_departed`, called in the same transaction as the ack or the discard).
Nothing typed leaves the device before the server has it.

Pins ("Keep offline") live on the server; a pin asked for offline waits in ``pin_requests``
and is sent before the next pull (`pending_pins`), the last request per work order winning.
Synchronous: call it off the UI loop (the functions taking a connection run inside the
caller's transaction).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, Literal, get_args

from app.store.db import WriteTransaction, connection
from app.store.errors import InvalidEditError, storage_errors
from app.store.jobs import entities_with_open_jobs
from app.store.settings import read_setting, write_setting

__all__ = [
    "FILE_UNSENT",
    "IDENTITY_KEY",
    "LIST_SCOPES",
    "NO_LONGER_ASSIGNED",
    "REMOVE_DEPARTED",
    "Identity",
    "ListScope",
    "apply_departures",
    "discard_left_scope",
    "pending_pins",
    "pin_refused",
    "pin_sent",
    "keep_requested_pins",
    "read_identity",
    "remove_departed",
    "request_pin",
    "returned_to_scope",
    "scope_filter",
    "write_identity",
]

#: The words for a work order kept on the device after it left the scope (issue 16).
NO_LONGER_ASSIGNED = "No longer assigned to you"

#: The work-order list's filters: everything cached, "Mine", "My team", "Pinned".
ListScope = Literal["all", "mine", "team", "pinned"]
LIST_SCOPES: tuple[ListScope, ...] = get_args(ListScope)

#: The settings key of this device's identity as the server last told it (`GET /v1/me`).
IDENTITY_KEY = "scope.identity"


@dataclass(frozen=True)
class Identity:
    """Who this device is on the server: its name, its person, their team, its role."""

    device: str
    user: str
    team: str
    role: str

    @classmethod
    def from_json(cls, data: Any) -> Identity | None:
        """The identity in a ``/v1/me`` body, or None when it is not one."""
        if not isinstance(data, dict):
            return None
        values = {name: data.get(name) for name in ("device", "user", "team", "role")}
        if values["team"] is None:
            values["team"] = ""
        text = {name: value for name, value in values.items() if isinstance(value, str)}
        if len(text) != len(values):
            return None
        return cls(**text)

    def to_json(self) -> dict[str, str]:
        return asdict(self)


def read_identity(store: Any) -> Identity | None:
    """Who the server last said this device is (None: never told, or an older server)."""
    with storage_errors(store.path):
        text = read_setting(store, IDENTITY_KEY)
    return None if text is None else Identity.from_json(json.loads(text))


def write_identity(store: Any, identity: Identity) -> None:
    with WriteTransaction(store.db, store.path):
        write_setting(store, IDENTITY_KEY, json.dumps(identity.to_json(), sort_keys=True))


def scope_filter(scope: ListScope, identity: Identity | None) -> tuple[str, tuple[Any, ...]]:
    """The SQL condition (on ``work_orders AS w``) of a list filter, and its parameters.

    "Mine" and "My team" match the cached (visible) assignee and team against who the server
    says this device is; before it said, they match nothing rather than guess."""
    if scope == "all":
        return "", ()
    if scope == "pinned":
        return "w.pinned = 1", ()
    if scope == "mine":
        return ("w.assignee = ?", (identity.user,)) if identity and identity.user else ("0", ())
    if scope == "team":
        return ("w.team = ?", (identity.team,)) if identity and identity.team else ("0", ())
    raise ValueError(f"unknown list scope {scope!r}: use {', '.join(LIST_SCOPES)}")


# -- leaving the scope (inside the caller's transaction) -------------------------------------


def apply_departures(
    conn: sqlite3.Connection, entity_ids: Iterable[str], now: float
) -> tuple[set[str], set[str]]:
    """Work orders the feed said left the scope: removed, or kept and marked when an edit
    of theirs is unsent. Returns (removed, kept)."""
    ids = sorted(set(entity_ids))
    kept = entities_with_open_jobs(conn, ids) | _with_unsent_files(conn, ids)
    kept |= _open_in_editor(conn, ids)
    gone = [entity_id for entity_id in ids if entity_id not in kept]
    removed: set[str] = set()
    for start in range(0, len(gone), 500):
        chunk = json.dumps(gone[start : start + 500])
        removed.update(
            row[0]
            for row in conn.execute(
                "DELETE FROM work_orders WHERE id IN (SELECT value FROM json_each(?)) RETURNING id",
                (chunk,),
            )
        )
    if kept:
        conn.execute(
            "UPDATE work_orders SET left_scope_at = COALESCE(left_scope_at, ?) "
            "WHERE id IN (SELECT value FROM json_each(?))",
            (now, json.dumps(sorted(kept))),
        )
    return removed, kept


def _with_unsent_files(conn: sqlite3.Connection, ids: list[str]) -> set[str]:
    """Which of these work orders have an attachment whose upload (or removal) is still
    queued: a photo taken on a job is as unsent as a typed note."""
    rows = conn.execute(
        f"SELECT DISTINCT a.entity_id FROM attachments AS a WHERE {FILE_UNSENT} "
        "AND a.entity_id IN (SELECT value FROM json_each(?))",
        (json.dumps(ids),),
    )
    return {row[0] for row in rows}


def _open_in_editor(conn: sqlite3.Connection, ids: list[str]) -> set[str]:
    """Which of these work orders the app's editor shows (`app.store.editing`): typing not
    yet saved is as unsent as a queued edit."""
    rows = conn.execute(
        "SELECT entity_id FROM editing_holds WHERE entity_id IN (SELECT value FROM json_each(?))",
        (json.dumps(ids),),
    )
    return {row[0] for row in rows}


#: An attachment of work order ``a.entity_id`` has a job still open (issue 15's uploads are
#: jobs of their own entity, ``attachment:<id>``, outside the work order's per-entity order).
FILE_UNSENT = (
    "EXISTS (SELECT 1 FROM jobs AS f WHERE f.entity_key = 'attachment:' || a.id "
    "AND f.finished_at IS NULL)"
)


def returned_to_scope(conn: sqlite3.Connection, entity_ids: Iterable[str]) -> None:
    """The feed sent these work orders as records: inside the scope (again)."""
    conn.execute(
        "UPDATE work_orders SET left_scope_at = NULL WHERE left_scope_at IS NOT NULL "
        "AND id IN (SELECT value FROM json_each(?))",
        (json.dumps(sorted(set(entity_ids))),),
    )


def remove_departed(conn: sqlite3.Connection) -> set[str]:
    """Remove the work orders that left the scope and have no unsent edit (or attachment)
    any more (the last was acknowledged, or discarded by the person) and that the editor
    does not show (`app.store.editing`); each pull runs it too,
    so one whose last upload finished goes then. Returns their ids. Cheap: the partial
    index holds only work orders that left the scope."""
    return {row[0] for row in conn.execute(REMOVE_DEPARTED)}


#: `remove_departed`'s statement (its query plan is tested: it runs with every delivery).
REMOVE_DEPARTED = (
    "DELETE FROM work_orders WHERE left_scope_at IS NOT NULL AND NOT EXISTS "
    "(SELECT 1 FROM jobs AS j WHERE j.entity_key = work_orders.id "
    "AND j.finished_at IS NULL) AND NOT EXISTS (SELECT 1 FROM attachments AS a "
    f"WHERE a.entity_id = work_orders.id AND {FILE_UNSENT}) AND NOT EXISTS "
    "(SELECT 1 FROM editing_holds AS e WHERE e.entity_id = work_orders.id) RETURNING id"
)


# -- pins asked for on this device -----------------------------------------------------------


def request_pin(store: Any, entity_id: str, pinned: bool) -> None:
    """Keep a pin (or unpin) to send; the cached work order shows it at once."""
    with WriteTransaction(store.db, store.path) as conn:
        conn.execute(
            "INSERT INTO pin_requests (entity_id, pinned, requested_at) VALUES (?, ?, ?) "
            "ON CONFLICT (entity_id) DO UPDATE SET pinned = excluded.pinned, "
            "requested_at = excluded.requested_at, last_error = NULL",
            (entity_id, int(pinned), store.clock()),
        )
        conn.execute("UPDATE work_orders SET pinned = ? WHERE id = ?", (int(pinned), entity_id))


def pending_pins(store: Any) -> list[tuple[str, bool]]:
    """Pins and unpins still to send, oldest first."""
    with storage_errors(store.path):
        rows = connection(store.db).execute(
            "SELECT entity_id, pinned FROM pin_requests ORDER BY requested_at, entity_id"
        )
        return [(str(entity_id), bool(pinned)) for entity_id, pinned in rows]


def pin_sent(store: Any, entity_id: str, pinned: bool) -> None:
    """The server has the pin: the request goes (unless a newer one replaced it meanwhile)."""
    with WriteTransaction(store.db, store.path) as conn:
        conn.execute(
            "DELETE FROM pin_requests WHERE entity_id = ? AND pinned = ?",
            (entity_id, int(pinned)),
        )
        conn.execute("UPDATE work_orders SET pinned = ? WHERE id = ?", (int(pinned), entity_id))


def pin_refused(store: Any, entity_id: str, pinned: bool) -> None:
    """The server refused the pin for good (no such work order, not allowed): drop the
    request; the work order shows what the server last said."""
    with WriteTransaction(store.db, store.path) as conn:
        conn.execute(
            "DELETE FROM pin_requests WHERE entity_id = ? AND pinned = ?",
            (entity_id, int(pinned)),
        )
        conn.execute(
            "UPDATE work_orders SET pinned = "
            "json_extract(server_snapshot, '$.pinned') WHERE id = ?",
            (entity_id,),
        )


def keep_requested_pins(conn: sqlite3.Connection, entity_ids: Iterable[str]) -> None:
    """A pull overwrote ``pinned`` with the server's word: a request not yet sent still
    shows what the person asked for."""
    conn.execute(
        "UPDATE work_orders SET pinned = (SELECT p.pinned FROM pin_requests AS p "
        "WHERE p.entity_id = work_orders.id) "
        "WHERE id IN (SELECT entity_id FROM pin_requests) "
        "AND id IN (SELECT value FROM json_each(?))",
        (json.dumps(sorted(set(entity_ids))),),
    )


def discard_left_scope(store: Any, entity_id: str) -> list[dict[str, Any]]:
    """The person gives up every unsent edit of a work order that left the scope (pending,
    failed, in conflict; one being sent right now is left to finish), and every upload or
    removal of its attachments still queued: each is kept in the audit log, and the work
    order leaves the device once none is left. Returns the edits given up.
    InvalidEditError when the work order is not one that left the scope."""
    with WriteTransaction(store.db, store.path) as conn:
        row = conn.execute(
            "SELECT left_scope_at FROM work_orders WHERE id = ?", (entity_id,)
        ).fetchone()
        if row is None or row[0] is None:
            raise InvalidEditError(f"work order {entity_id} is not one that left this device")
        entries: list[dict[str, Any]] = store.queue.discard_after(entity_id, 0)
        for (attachment_id,) in conn.execute(
            f"SELECT a.id FROM attachments AS a WHERE a.entity_id = ? AND {FILE_UNSENT} "
            "ORDER BY a.created_at, a.id",
            (entity_id,),
        ).fetchall():
            entries += store.queue.discard_after(f"attachment:{attachment_id}", 0)
        # The person gives up what the editor holds too: the work order may leave now.
        conn.execute("DELETE FROM editing_holds WHERE entity_id = ?", (entity_id,))
        store.cache.restore_visible(entity_id, store.clock())
        remove_departed(conn)
    return entries
