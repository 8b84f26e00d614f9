"""Errors of the local store, sorted by what a person or the worker can do about them.

    StoreError                    anything the store reports on purpose
    ├── CorruptDatabaseError      not an SQLite file, or SQLite says it is damaged; left untouched
    ├── SchemaTooNewError         written by a newer Fieldsync; left untouched
    ├── StorageConditionError     a known condition of the device: the queue is kept, tell the user
    │   ├── StorageFullError      SQLITE_FULL: the disk (or the file size limit) is full
    │   ├── StorageBusyError      SQLITE_BUSY/LOCKED beyond busy_timeout
    │   ├── StorageReadOnlyError  SQLITE_READONLY / SQLITE_PERM / SQLITE_CANTOPEN
    │   └── StorageIOError        SQLITE_IOERR
    ├── WorkerLockHeldError       another delivery worker owns this data dir
    └── InvalidEditError          the edit itself is invalid (bad fields, unknown record)

Any other SQLite error is a bug and propagates unchanged. peewee and sqlite3 errors are
translated here only (`translate`), at the store's boundary.
"""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import peewee as pw

__all__ = [
    "CorruptDatabaseError",
    "InvalidEditError",
    "SchemaTooNewError",
    "StorageBusyError",
    "StorageConditionError",
    "StorageFullError",
    "StorageIOError",
    "StorageReadOnlyError",
    "StoreError",
    "WorkerLockHeldError",
    "from_code",
    "storage_errors",
    "translate",
]


class StoreError(Exception):
    """Base class of every error the store raises on purpose."""


class CorruptDatabaseError(StoreError):
    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(
            f"{path} is not a usable Fieldsync database ({reason}). It was left untouched; "
            "move it aside (keep it: it may hold unsynced edits) or choose another --data-dir."
        )
        self.path = path


class SchemaTooNewError(StoreError):
    def __init__(self, path: Path, found: int, supported: int) -> None:
        super().__init__(
            f"{path} was written by a newer Fieldsync (schema {found}, this version reads up to "
            f"{supported}). Nothing was changed; update Fieldsync to open it."
        )
        self.found = found
        self.supported = supported


class StorageConditionError(StoreError):
    """A known condition of the device's storage. Nothing was half-written."""


class StorageFullError(StorageConditionError):
    pass


class StorageBusyError(StorageConditionError):
    pass


class StorageReadOnlyError(StorageConditionError):
    pass


class StorageIOError(StorageConditionError):
    pass


class WorkerLockHeldError(StoreError):
    pass


class InvalidEditError(StoreError):
    pass


_CONDITIONS: dict[int, tuple[type[StorageConditionError], str]] = {
    sqlite3.SQLITE_FULL: (StorageFullError, "the device storage is full"),
    sqlite3.SQLITE_BUSY: (StorageBusyError, "the database is busy (another process holds it)"),
    sqlite3.SQLITE_LOCKED: (StorageBusyError, "the database is locked"),
    sqlite3.SQLITE_READONLY: (StorageReadOnlyError, "the database is read-only"),
    sqlite3.SQLITE_PERM: (StorageReadOnlyError, "no permission to write the database"),
    sqlite3.SQLITE_CANTOPEN: (StorageReadOnlyError, "the database file cannot be opened"),
    sqlite3.SQLITE_IOERR: (StorageIOError, "a disk I/O error occurred"),
}
_CORRUPT_CODES = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}


def _sqlite_errors(exc: BaseException) -> Iterator[sqlite3.Error]:
    """Every sqlite3 error behind peewee's wrappers along the cause/context chain.

    Not just the first: a failed COMMIT is often followed by a failed ROLLBACK ("no
    transaction is active"), which would hide the condition that matters. Past the first
    SQLite error the walk stops at anything that is neither SQLite's nor peewee's: a bug
    raised while handling a known condition stays a bug.
    """
    seen: BaseException | None = exc
    visited: set[int] = set()
    found = False
    while seen is not None and id(seen) not in visited:
        visited.add(id(seen))
        error: sqlite3.Error | None = None
        if isinstance(seen, sqlite3.Error):
            error = seen
        elif seen.args and isinstance(seen.args[0], sqlite3.Error):
            error = seen.args[0]
        if error is not None:
            found = True
            yield error
        elif found and not isinstance(seen, pw.PeeweeException):
            return
        seen = seen.__cause__ or seen.__context__


def from_code(code: int, path: Path, detail: str) -> StoreError | None:
    """The StoreError for an SQLite result code (extended codes included), or None."""
    primary = code & 0xFF
    if primary in _CORRUPT_CODES:
        return CorruptDatabaseError(path, detail)
    known = _CONDITIONS.get(primary)
    if known is None:
        return None
    cls, words = known
    return cls(f"{path}: {words} ({detail}). Queued edits are kept.")


def translate(exc: BaseException, path: Path) -> StoreError | None:
    """The StoreError for a known SQLite condition, or None (a bug: let it propagate)."""
    if isinstance(exc, StoreError):
        return exc
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:  # outside SQLite (the lock file)
        return StorageFullError(f"{path}: the device storage is full")
    for error in _sqlite_errors(exc):
        code = getattr(error, "sqlite_errorcode", None)
        if code is None:
            continue
        translated = from_code(code, path, str(error))
        if translated is not None:
            return translated
    return None


class storage_errors:  # noqa: N801 - used as a function: `with storage_errors(path):`
    """Re-raise known SQLite conditions as StoreErrors; anything else unchanged.

    A class rather than a generator context manager: it wraps every statement of the hot
    paths, where contextlib's machinery would cost more than the statement's Python side.
    """

    __slots__ = ("_path",)

    def __init__(self, path: Path) -> None:
        self._path = path

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, _: object
    ) -> None:
        if isinstance(exc, Exception):
            translated = translate(exc, self._path)
            if translated is not None and translated is not exc:
                raise translated from exc
