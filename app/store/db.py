"""Opening the device database: refuse what is not ours, apply durable pragmas, migrate.

Pragmas, and why:
- ``journal_mode=WAL``: readers (the UI, ``fieldsync status``) never block the worker's writes.
- ``synchronous=FULL`` (default): every commit is fsynced, WAL included. A phone's battery dies
  without warning; an edit the person saw saved must survive it. ``NORMAL`` is accepted for
  benchmarks and bulk imports that choose speed and can be redone. What the device learns
  again commits at ``NORMAL`` (``JobQueue.unsynced``): a claim (a lease forgotten by a power
  cut is a lease expired) and the replies recorded (``apply_replies``: the jobs are sent
  again under their keys). The next fsynced commit makes them durable too.
- ``busy_timeout=5000``: two processes (the GUI and the headless worker) share one file; a
  short wait for the write lock beats failing.
- ``foreign_keys=ON``: attempts are deleted with their job.
- Write transactions start with ``BEGIN IMMEDIATE`` so two writers never deadlock on a lock
  upgrade.

Before anything is written, an existing file is checked read-only: its header, then
``PRAGMA quick_check``: every b-tree page is walked, about 1.9 ms per MB here (0.15 s for an
84 MB file of 100,000 queued creates, page cache warm). Without it, pages that storage flipped
or overwrote behind a valid header fail only when a statement reaches them, and until then
the list silently shows what is still readable.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TypeVar

import peewee as pw
import platformdirs

from app.store.errors import (
    CorruptDatabaseError,
    SchemaTooNewError,
    StoreError,
    from_code,
    storage_errors,
    translate,
)
from app.store.migrations import LATEST_VERSION, migrate

__all__ = [
    "DB_FILENAME",
    "WriteTransaction",
    "connection",
    "default_data_dir",
    "in_batches",
    "open_database",
    "read_schema_version",
    "sync_log",
]

DB_FILENAME = "fieldsync.sqlite3"
_SQLITE_HEADER = b"SQLite format 3\x00"
_HEADER_FIELDS_END = 24  # the magic, page size, versions, reserved bytes, payload fractions
_QUICK_CHECK_PROBLEMS = 3  # how many damaged spots quick_check reports before it stops
_REASON_CHARS = 300
# quick_check reports a page it could not read as a row, not as an exception.
_UNREADABLE_PAGE = re.compile(r"unable to get the page\. error code=(\d+)")
SYNCHRONOUS_MODES = ("FULL", "NORMAL", "EXTRA")
#: Values bound in one ``IN (?, …)`` list: under every SQLite build's limit on parameters (999
#: before 3.32), so a list of any length is read in statements of this many.
IN_BATCH = 500

_T = TypeVar("_T")


def default_data_dir() -> Path:
    """``$FIELDSYNC_DATA_DIR``, else the XDG data dir (Flatpak redirects it per app)."""
    override = os.environ.get("FIELDSYNC_DATA_DIR")
    if override:
        return Path(override)
    return Path(platformdirs.user_data_dir("fieldsync", appauthor=False))


def in_batches(values: Sequence[_T]) -> Iterator[tuple[Sequence[_T], str]]:
    """``values`` ``IN_BATCH`` at a time, each slice with its placeholders for ``IN (…)``:
    ``for chunk, marks in in_batches(ids): conn.execute(f"… IN ({marks})", chunk)``."""
    for start in range(0, len(values), IN_BATCH):
        chunk = values[start : start + IN_BATCH]
        yield chunk, ", ".join("?" * len(chunk))


def connection(db: pw.SqliteDatabase) -> sqlite3.Connection:
    """The thread's sqlite3 connection, for prepared SQL on the hot paths."""
    conn: sqlite3.Connection = db.connection()
    return conn


def sync_log(path: Path) -> None:
    """Make every commit so far durable, as a ``synchronous=FULL`` commit would: fsync the
    write-ahead log of the database at ``path``. For a step that follows commits made without
    an fsync (`JobQueue.unsynced`) and cannot be undone, such as deleting files. No log file
    means it was checkpointed, and a checkpoint syncs it first."""
    try:
        fd = os.open(f"{path}-wal", os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        with storage_errors(path):
            os.fsync(fd)
    finally:
        os.close(fd)


class WriteTransaction:
    """A write transaction on the thread's connection: ``BEGIN IMMEDIATE`` … ``COMMIT``, or a
    savepoint when one is already open; known SQLite conditions leave it as StoreErrors
    (``storage_errors``). Yields the sqlite3 connection for prepared SQL.

    Each edit and each acknowledgement is one of these, so the hot paths pay one statement each
    way instead of peewee's transaction objects (about 6 µs a transaction). It is registered on
    peewee's transaction stack, so a ``db.atomic()`` inside it nests as a savepoint.
    """

    __slots__ = ("_conn", "_db", "_path", "_savepoint")
    _counter = 0

    def __init__(self, db: pw.SqliteDatabase, path: Path) -> None:
        self._db = db
        self._path = path
        self._savepoint: str | None = None

    def __enter__(self) -> sqlite3.Connection:
        with storage_errors(self._path):
            conn = self._conn = connection(self._db)
            if conn.in_transaction:
                WriteTransaction._counter += 1
                self._savepoint = f"fs_write_{WriteTransaction._counter}"
                conn.execute(f"SAVEPOINT {self._savepoint}")
            else:
                conn.execute("BEGIN IMMEDIATE")
        self._db.push_transaction(self)
        return conn

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, _: object
    ) -> None:
        self._db.pop_transaction()
        conn, savepoint = self._conn, self._savepoint
        try:
            if kind is None:
                conn.execute("COMMIT" if savepoint is None else f"RELEASE {savepoint}")
                return
        except Exception as failed:  # a commit that fails (disk full) leaves nothing behind
            exc = failed
        # SQLite may have rolled the whole transaction back already (disk full): then there
        # is nothing left to undo, and the error that did it is the one to report.
        with contextlib.suppress(sqlite3.Error):
            if conn.in_transaction and savepoint is not None:
                conn.execute(f"ROLLBACK TO {savepoint}")
                conn.execute(f"RELEASE {savepoint}")
            elif conn.in_transaction:
                conn.execute("ROLLBACK")
        if isinstance(exc, Exception):
            translated = translate(exc, self._path)
            if translated is not None and translated is not exc:
                raise translated from exc
            if kind is None:
                raise exc


def _check_header(path: Path) -> None:
    """Refuse a file whose header SQLite would refuse, before SQLite opens it.

    SQLite reads the journal mode (byte 19) before the fields it checks for damage (bytes 16
    and 21-23): a damaged header that happens to say WAL would have it create ``-wal`` and
    ``-shm`` files beside the file it then refuses. Checking those fields first, with
    SQLite's own rules, keeps a refused file's directory as it was.
    """
    try:
        with path.open("rb") as fh:
            header = fh.read(_HEADER_FIELDS_END)
    except IsADirectoryError:
        raise CorruptDatabaseError(path, "it is a directory") from None
    magic = header[: len(_SQLITE_HEADER)]
    if magic and magic != _SQLITE_HEADER[: len(magic)]:
        raise CorruptDatabaseError(path, "not an SQLite database")
    if 0 < len(magic) < len(_SQLITE_HEADER):
        raise CorruptDatabaseError(path, "truncated SQLite header")
    if len(header) == _HEADER_FIELDS_END and not _header_fields_valid(header):
        raise CorruptDatabaseError(path, "damaged SQLite header")


def _header_fields_valid(header: bytes) -> bool:
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    power_of_two = page_size & (page_size - 1) == 0
    return (
        512 <= page_size <= 65536
        and power_of_two
        and header[19] in (1, 2)  # the read version: 1 rollback journal, 2 WAL
        and header[21:24] == b"\x40\x20\x20"  # payload fractions, fixed by the format
    )


def _check_pages(path: Path, conn: sqlite3.Connection) -> None:
    found = [row[0] for row in conn.execute(f"PRAGMA quick_check({_QUICK_CHECK_PROBLEMS})")]
    problem = page_check_error(path, found)
    if problem is not None:
        raise problem


def page_check_error(path: Path, found: list[str]) -> StoreError | None:
    """What quick_check's rows mean: None for ``ok``; a storage condition when a page could
    not be read (a failing card is not a damaged file: moving it aside would be wrong
    advice); otherwise damage."""
    if found == ["ok"]:
        return None
    reason = "; ".join(found).replace("*** in database main ***", "")
    reason = " ".join(reason.split()).strip("; ")  # one line, whatever SQLite wrote
    if len(reason) > _REASON_CHARS:
        reason = reason[: _REASON_CHARS - 1] + "…"
    for line in found:
        unreadable = _UNREADABLE_PAGE.search(line)
        if unreadable is not None:
            condition = from_code(int(unreadable[1]), path, f"reading pages: {reason}")
            if condition is not None and not isinstance(condition, CorruptDatabaseError):
                return condition
    return CorruptDatabaseError(path, f"damaged pages: {reason}")


def read_schema_version(path: Path) -> int:
    """The schema version of an existing file, read and page-checked without writing anything
    (0 = new)."""
    if not path.exists() or path.stat().st_size == 0:
        return 0
    _check_header(path)
    uri = f"{path.absolute().as_uri()}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True)
        try:
            has_table = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type='table' AND name='schema_version'"
            ).fetchone()
            _check_pages(path, conn)
            if not has_table:
                return 0
            row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
            return int(row[0] or 0)
        finally:
            conn.close()
    except sqlite3.Error as exc:
        # Damage, and the storage conditions (busy, unreadable, I/O) as every statement has
        # them; anything else is a bug and propagates.
        translated = translate(exc, path)
        if translated is None:
            raise
        raise translated from None


def open_database(path: Path, *, synchronous: str = "FULL") -> pw.SqliteDatabase:
    """Open (creating if needed) and migrate the database at ``path``.

    A file that is not SQLite, is damaged, or was written by a newer schema raises before
    anything is written to it.
    """
    synchronous = synchronous.upper()
    if synchronous not in SYNCHRONOUS_MODES:
        raise ValueError(f"synchronous must be one of {SYNCHRONOUS_MODES}, not {synchronous!r}")
    found = read_schema_version(path)
    if found > LATEST_VERSION:
        raise SchemaTooNewError(path, found, LATEST_VERSION)
    path.parent.mkdir(parents=True, exist_ok=True)
    db = pw.SqliteDatabase(
        str(path),
        pragmas={
            "journal_mode": "wal",
            "synchronous": synchronous,
            "busy_timeout": 5000,
            "foreign_keys": 1,
        },
        lock_type="IMMEDIATE",
        timeout=5,
    )
    with storage_errors(path):
        db.connect(reuse_if_open=True)
        try:
            migrate(db)
        except BaseException:
            db.close()
            raise
    return db
