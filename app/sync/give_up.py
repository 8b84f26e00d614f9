"""The give-up policy: what follows when a person discards a dead or conflicted edit.

The edit queued after the given-up one was made on top of it, on what the person saw then.
It goes against the server's version as it is now only when the server changed none of the
fields it sets since (a delete: none at all); otherwise it goes against the version the person
saw, or, when that is unknown (a create the server turned out to have), it is held as a
conflict right away. Sent against the newest version unchecked, it would overwrite what the
person just chose to keep. The policy decides; the queue (`JobQueue`) writes.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from app.attachments.store import Attachments
from app.mutations import intended_fields
from app.records import EDITABLE_FIELDS
from app.store.db import connection
from app.store.errors import InvalidEditError, storage_errors
from app.store.store import Store
from app.sync.merge import conflict_hold, three_way, unknown_base

__all__ = ["give_up"]

#: Why a job is held before it is sent: the record it was made on is not the server's.
HELD_UNKNOWN_BASE = "made on a record the server had differently"


def give_up(store: Store, job_id: int) -> dict[str, Any]:
    """Discard a dead or conflicted edit (``Store.discard``: kept in the audit log) and settle
    the edit queued after it, atomically. Returns the discarded job as the audit log has it."""
    with storage_errors(store.path), store.db.atomic():
        entry = store.discard(job_id)
        _settle_next(store, entry)
    if entry["payload"].get("op") == "upload":
        # A failed upload given up is an attachment removed: its bytes go, and the server
        # is told in case an earlier try got through.
        with contextlib.suppress(InvalidEditError):
            Attachments(store).detach(str(entry["payload"]["attachment_id"]))
    return entry


def _settle_next(store: Store, given_up: dict[str, Any]) -> None:
    entity = str(given_up["entity_key"])
    after = store.queue.next_chained(entity, given_up["id"])
    server = store.cache.server_snapshot(entity)
    if after is None or server is None:
        return
    job_id, payload = after
    op = str(payload.get("op"))
    mine = intended_fields(payload)
    seen = _seen_before(store, given_up)
    touched = EDITABLE_FIELDS if op == "delete" else tuple(mine)
    if seen is not None and all(seen.get(f) == server.get(f) for f in touched):
        base: int | None = int(server["version"])  # nothing it sets moved: no conflict
    else:
        base = given_up["base_version"]
    if base is not None:
        store.queue.rebase(job_id, base)
        return
    merge = three_way(unknown_base(), mine, server)
    store.queue.hold(
        job_id, HELD_UNKNOWN_BASE, conflict_hold(entity, op, mine, None, server, merge)
    )


def _seen_before(store: Store, given_up: dict[str, Any]) -> dict[str, Any] | None:
    """The values the person saw when making the given-up edit, if the device knows them:
    the base stored with its conflict, or its own fields for a create."""
    row = (
        connection(store.db)
        .execute("SELECT base FROM conflicts WHERE job_id = ?", (given_up["id"],))
        .fetchone()
    )
    if row is not None and row[0]:
        return dict(json.loads(row[0]))
    if given_up["payload"].get("op") == "create":
        return intended_fields(given_up["payload"])
    return None
