"""SQLite whose writers in one process queue on a lock in memory, not on SQLite's busy handler.

Every transaction the server opens is a write transaction (`BEGIN IMMEDIATE`), and SQLite lets
one run at a time. A second one used to wait in SQLite's busy handler, which sleeps 1, 2, 5,
10, 15, 20, 25… ms between tries: when the first commits, the second is mostly still asleep,
the lock stands idle, and the first one's next transaction often takes it again. Two batches in
flight then wrote fewer mutations per second than one. Here a thread takes its process's lock
for the database file before `BEGIN` and gives it back at commit or rollback, so the next
writer of this process starts the moment the lock is free. Writers in other processes
(`--workers`, the CLI) still meet at SQLite's lock, with the busy timeout, as before.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import peewee as pw

__all__ = ["QueuedSqliteDatabase"]

_locks_lock = threading.Lock()
_locks: dict[str, threading.RLock] = {}


def _writer_lock(path: str) -> threading.RLock:
    """The lock of `path` in this process (every connection to one file shares it)."""
    if path == ":memory:" or path.startswith("file:"):
        return threading.RLock()  # a database of its own
    with _locks_lock:
        return _locks.setdefault(os.path.realpath(path), threading.RLock())


class QueuedSqliteDatabase(pw.SqliteDatabase):
    """`pw.SqliteDatabase` whose transactions hold `writer` from `BEGIN` to commit/rollback.

    Reentrant, so a thread that opens a second connection to the file inside a transaction
    meets SQLite's busy timeout as before instead of waiting for itself forever; a wait for
    the lock ends after the busy timeout with SQLite's own "database is locked"."""

    def __init__(self, database: str, **kwargs: Any) -> None:
        super().__init__(database, **kwargs)
        self.writer = _writer_lock(database)
        self._holding = threading.local()

    def begin(self, lock_type: str | None = None) -> None:
        # As long as SQLite's busy handler would have waited, then the error it would raise:
        # a writer stuck behind another never waits forever.
        if not self.writer.acquire(timeout=self.timeout):
            raise pw.OperationalError("database is locked")
        try:
            super().begin(lock_type)
        except BaseException:
            self.writer.release()
            raise
        self._holding.count = getattr(self._holding, "count", 0) + 1

    def _let_go(self) -> None:
        count = getattr(self._holding, "count", 0)
        if count:  # a commit that failed is followed by a rollback: release once
            self._holding.count = count - 1
            self.writer.release()

    def commit(self) -> None:
        try:
            super().commit()
        finally:
            self._let_go()

    def rollback(self) -> None:
        try:
            super().rollback()
        finally:
            self._let_go()
