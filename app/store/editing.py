"""Work orders open in the app's editor: kept on the device while a person works on them.

A pull that says a work order left the device's scope removes it unless an edit of it is
unsent (`app.store.scope`). Typing not yet saved is not in the queue, so the editor says
which work order it shows: `hold_for_editing` when it opens one (in the transaction that
checks the work order is still here, so no pull can slip between), `release_editing` when
it shows something else or closes. While held, a work order that left the scope stays,
marked "No longer assigned to you": the person can still save, and the save is queued and
delivered like any other; it leaves the device when the editor lets go of it and nothing
of it is unsent.

Holds live in the database, not in the app's memory, because the pull may run in another
process (the background worker). A hold is the app's word for its own lifetime: the app
drops every hold when it starts (`release_all_editing`), since typing in a window that
ended is gone with it, unless a draft kept it (`app.store.drafts`): that hold stays until
the draft is saved or discarded. Synchronous: call it off the UI loop.
"""

from __future__ import annotations

from typing import Any

from app.store.db import WriteTransaction
from app.store.scope import remove_departed

__all__ = ["hold_for_editing", "release_all_editing", "release_editing"]


def hold_for_editing(store: Any, entity_id: str) -> bool:
    """Keep ``entity_id`` on the device while the editor shows it. False (and no hold)
    when it is no longer on this device."""
    with WriteTransaction(store.db, store.path) as conn:
        held = conn.execute(
            "INSERT INTO editing_holds (entity_id, held_at) SELECT id, ? FROM work_orders "
            "WHERE id = ? ON CONFLICT (entity_id) DO UPDATE SET held_at = excluded.held_at",
            (store.clock(), entity_id),
        ).rowcount
    return held > 0


def release_editing(store: Any, entity_id: str) -> set[str]:
    """The editor no longer shows ``entity_id``: a work order that left the scope and has
    nothing unsent leaves the device now. Returns the ids that left."""
    with WriteTransaction(store.db, store.path) as conn:
        conn.execute("DELETE FROM editing_holds WHERE entity_id = ?", (entity_id,))
        return remove_departed(conn)


def release_all_editing(store: Any) -> set[str]:
    """The app starts: holds of an earlier run go (its unsaved typing went with it, but for
    drafts, whose holds stay), and what they kept leaves if nothing of it is unsent. Returns
    the ids that left."""
    with WriteTransaction(store.db, store.path) as conn:
        released = conn.execute(
            "DELETE FROM editing_holds WHERE entity_id NOT IN (SELECT entity_id FROM drafts)"
        ).rowcount
        if released == 0:
            return set()
        return remove_departed(conn)
