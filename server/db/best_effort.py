"""Bookkeeping writes that a read makes on the side, and that must never make it wait.

A feed read notes the device's position and status as it goes. On SQLite a long batch may
hold the one writer lock for seconds, and the read would wait the whole busy timeout behind
it; such a note is skipped instead, and the next read notes it again. Only notes that lose
nothing when skipped go through here (a position noted late only makes pruning wait; a
status noted late shows the fleet the previous pull a little longer).
"""

from __future__ import annotations

from collections.abc import Callable

import peewee as pw

from server.db.store import Store

__all__ = ["write_unless_busy"]


def write_unless_busy(store: Store, write: Callable[[], object]) -> bool:
    """Run `write` in a transaction now, or not at all when SQLite's writer lock is taken;
    True when it ran. On PostgreSQL it always runs (row locks of the device's own rows)."""
    if store.is_postgres:
        with store.db.atomic():
            write()
        return True
    writer = getattr(store.db, "writer", None)  # this process's writers queue on it
    if writer is not None and not writer.acquire(blocking=False):
        return False
    try:
        return _unless_sqlite_busy(store, write)
    finally:
        if writer is not None:
            writer.release()


def _unless_sqlite_busy(store: Store, write: Callable[[], object]) -> bool:
    waits = store.db.execute_sql("PRAGMA busy_timeout").fetchone()[0]
    store.db.execute_sql("PRAGMA busy_timeout = 0")
    try:
        with store.db.atomic():
            write()
        return True
    except pw.OperationalError as error:
        if "locked" not in str(error) and "busy" not in str(error):
            raise
        return False
    finally:
        store.db.execute_sql(f"PRAGMA busy_timeout = {int(waits)}")
