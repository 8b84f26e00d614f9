"""Files the store must refuse without touching them: not SQLite, damaged, or too new."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from store_support import sha256, sidecars

from app.store import migrations
from app.store.db import DB_FILENAME, page_check_error
from app.store.errors import (
    CorruptDatabaseError,
    SchemaTooNewError,
    StorageConditionError,
    StorageIOError,
)
from app.store.store import Store

HEADER = b"SQLite format 3\x00"

CORRUPT_FILES: dict[str, Callable[[], bytes]] = {
    "garbage bytes": lambda: bytes(range(256)) * 16,
    "text file": lambda: b"title,site\nPump,North yard\n" * 50,
    "truncated header": lambda: HEADER[:9],
    "header only": lambda: HEADER,
    "header then garbage": lambda: HEADER + os.urandom(4080),
    "zeroed pages": lambda: HEADER + b"\x00" * 8176,
    # A damaged header whose journal byte says WAL: SQLite would make -wal/-shm files for it
    # before noticing the damage (1 random header in 256 did so).
    "garbage saying WAL": lambda: HEADER + b"\x10\x00\x02\x02" + bytes(4) + os.urandom(4072),
    "bad page size saying WAL": lambda: HEADER + b"\x03\x00\x02\x02\x00@  " + os.urandom(4072),
}


@pytest.mark.parametrize("make_bytes", CORRUPT_FILES.values(), ids=CORRUPT_FILES.keys())
def test_corrupt_file_is_refused_and_left_untouched(
    data_dir: Path, make_bytes: Callable[[], bytes]
) -> None:
    data_dir.mkdir()
    path = data_dir / DB_FILENAME
    path.write_bytes(make_bytes())
    before = sha256(path)

    with pytest.raises(CorruptDatabaseError) as caught:
        Store(data_dir)

    message = str(caught.value)
    assert str(path) in message
    assert "left untouched" in message
    assert "\n" not in message
    assert sha256(path) == before
    assert sidecars(path) == [], "no -wal/-shm/-journal was created next to it"
    # Refusing is stable: a second attempt says the same and still writes nothing.
    with pytest.raises(CorruptDatabaseError):
        Store(data_dir)
    assert sha256(path) == before
    assert sidecars(path) == []


def test_directory_in_place_of_the_database_is_refused(data_dir: Path) -> None:
    path = data_dir / DB_FILENAME
    path.mkdir(parents=True)
    (path / "keep.txt").write_text("unsynced notes")

    with pytest.raises(CorruptDatabaseError, match="directory"):
        Store(data_dir)

    assert path.is_dir()
    assert [p.name for p in path.iterdir()] == ["keep.txt"]
    assert sidecars(path) == []


def test_newer_schema_is_refused_and_nothing_changes(data_dir: Path) -> None:
    with Store(data_dir) as store:
        store.record_edit("create", None, {"title": "Pump seal"})
    path = data_dir / DB_FILENAME
    newer = migrations.LATEST_VERSION + 1
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("INSERT INTO schema_version (version, applied_at) VALUES (?, 0)", (newer,))
    conn.close()
    before = sha256(path)

    with pytest.raises(SchemaTooNewError) as caught:
        Store(data_dir)

    assert caught.value.found == newer
    assert caught.value.supported == migrations.LATEST_VERSION
    assert "newer Fieldsync" in str(caught.value)
    assert "Nothing was changed" in str(caught.value)
    assert sha256(path) == before
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        assert conn.execute("SELECT MAX(version) FROM schema_version").fetchone() == (newer,)
        assert conn.execute("SELECT COUNT(*) FROM jobs").fetchone() == (1,)
    finally:
        conn.close()


def test_empty_data_dir_gets_a_fresh_database_with_durable_pragmas(data_dir: Path) -> None:
    with Store(data_dir) as store:
        pragma = store.db.execute_sql
        assert pragma("PRAGMA journal_mode").fetchone() == ("wal",)
        assert pragma("PRAGMA synchronous").fetchone() == (2,)  # FULL
        assert pragma("PRAGMA foreign_keys").fetchone() == (1,)
        assert pragma("PRAGMA busy_timeout").fetchone()[0] >= 1000
        version = pragma("SELECT MAX(version) FROM schema_version").fetchone()
        assert version == (migrations.LATEST_VERSION,)
    with pytest.raises(ValueError, match="synchronous"):
        Store(data_dir, synchronous="OFF")


def _leaf_behind_root(path: Path, name: str) -> int:
    """The right-most leaf page under the root of table or index ``name`` (an interior page)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (name,))
    finally:
        conn.close()
    raw = path.read_bytes()
    start = (root[0] - 1) * page_size
    assert raw[start] in (0x02, 0x05), "still one page: seed more rows"  # interior index, table
    return int.from_bytes(raw[start + 8 : start + 12], "big")


def test_damaged_pages_behind_a_valid_header_are_refused_at_open(data_dir: Path) -> None:
    with Store(data_dir) as store:
        for i in range(300):
            store.record_edit("create", None, {"title": f"Pump {i}", "notes": "seal " * 20})
    path = data_dir / DB_FILENAME
    assert sidecars(path) == [], "closing checkpointed the WAL into the file"
    page = _leaf_behind_root(path, "work_orders_title")
    raw = bytearray(path.read_bytes())
    offset = (page - 1) * 4096
    raw[offset : offset + 4096] = bytes(range(256)) * 16  # one leaf of work orders overwritten
    path.write_bytes(bytes(raw))
    before = sha256(path)
    # The header, the schema and the version table are intact: only a page walk finds it.
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        assert conn.execute("SELECT MAX(version) FROM schema_version").fetchone() == (
            migrations.LATEST_VERSION,
        )
    finally:
        conn.close()

    with pytest.raises(CorruptDatabaseError) as caught:
        Store(data_dir)

    message = str(caught.value)
    assert "damaged pages" in message
    assert "left untouched" in message
    assert "\n" not in message
    assert len(message) < 600
    assert sha256(path) == before
    # The read-only check may leave SQLite's shared-memory index and an empty WAL beside the
    # file (it is in WAL mode), never a frame that could be replayed into it.
    wal = path.with_name(path.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0


def test_unreadable_pages_are_a_storage_condition_not_damage(tmp_path: Path) -> None:
    path = tmp_path / DB_FILENAME
    # quick_check's rows as SQLite writes them; 8458 is SQLITE_IOERR_READ (a failing card).
    unreadable = ["*** in database main ***\nPage 953: unable to get the page. error code=8458"]
    damaged = ["*** in database main ***\nPage 5: btreeInitPage() returns error code 11"]

    assert page_check_error(path, ["ok"]) is None
    condition = page_check_error(path, unreadable)
    assert isinstance(condition, StorageIOError)
    assert "Page 953" in str(condition)
    assert "Queued edits are kept" in str(condition)
    assert "move it aside" not in str(condition)
    assert "***" not in str(condition)
    damage = page_check_error(path, damaged)
    assert isinstance(damage, CorruptDatabaseError)
    assert "damaged pages: Page 5: btreeInitPage() returns error code 11" in str(damage)


def test_open_failures_other_than_damage_are_storage_conditions(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    Store(data_dir).close()

    def cannot_open(*args: object, **kwargs: object) -> sqlite3.Connection:
        error = sqlite3.OperationalError("unable to open database file")
        error.sqlite_errorcode = sqlite3.SQLITE_CANTOPEN  # type: ignore[attr-defined]
        raise error

    # The read-only look before opening (a read-only mount with no -shm fails this way).
    monkeypatch.setattr(sqlite3, "connect", cannot_open)
    with pytest.raises(StorageConditionError, match="cannot be opened"):
        Store(data_dir)
