"""The one writer of the device's ``attachments`` table: every insert, update and delete.

Each function takes the connection of a write transaction its caller holds, so that a row
and its job (`app.store.queue`) change together: an attach inserts the row and enqueues the
upload, a confirmed upload marks the row and finishes the job, in one transaction. What the
rows mean (an attachment's state) is read in `app.states.attachment_state`;
`tests/attachments/test_attachments_one_writer.py` keeps every other module from writing here.

The row's life: ``insert_mine`` (attached here) or ``from_feed`` (a colleague's, or ours
confirmed); ``set_upload`` as the server takes its bytes, ``confirm`` once it holds them all;
``mark_removed`` / ``tombstone`` / ``removed_with_work_order`` when removed; ``unstore``
when its bytes leave the device; thumbnails ``keep_thumbnail`` / ``touch_thumbnail`` /
``drop_thumbnail(s)``; and ``delete_departed`` when its work order left the device.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from app.store.scope import FILE_UNSENT

__all__ = [
    "confirm",
    "delete_departed",
    "drop_thumbnail",
    "drop_thumbnails_of_removed",
    "from_feed",
    "insert_mine",
    "keep_thumbnail",
    "mark_removed",
    "removed_with_work_order",
    "set_upload",
    "tombstone",
    "touch_thumbnail",
    "unstore",
]

_INSERT_MINE = (
    "INSERT INTO attachments (id, entity_id, filename, content_type, size, "
    "sha256, mine, created_at, stored) VALUES (?, ?, ?, ?, ?, ?, 1, ?, 1)"
)
#: Seen in the feed: a colleague's (metadata only), or ours, which the server then holds whole.
_FROM_FEED = (
    "INSERT INTO attachments (id, entity_id, filename, content_type, size, sha256, mine, "
    "created_at, created_by, confirmed_at, stored) VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?, ?, 0) "
    "ON CONFLICT (id) DO UPDATE SET confirmed_at = COALESCE(confirmed_at, excluded.confirmed_at), "
    "upload_offset = size, created_by = COALESCE(created_by, excluded.created_by)"
)
# The thumbnail stays counted until `app.attachments.retention.forget_departed` deletes its
# file after the page's transaction (the bytes never go inside one).
_TOMBSTONE = "UPDATE attachments SET removed_at = COALESCE(removed_at, ?), stored = 0 WHERE id = ?"
_SET_UPLOAD = "UPDATE attachments SET upload_url = ?, upload_offset = ? WHERE id = ?"
_NO_THUMBNAIL = "UPDATE attachments SET thumbnail_size = NULL, thumbnail_used_at = NULL"


def insert_mine(
    conn: sqlite3.Connection,
    attachment_id: str,
    entity_id: str,
    filename: str,
    content_type: str,
    size: int,
    sha256: str,
    now: float,
) -> None:
    """A file attached on this device, its bytes stored, nothing sent yet."""
    conn.execute(
        _INSERT_MINE, (attachment_id, entity_id, filename, content_type, size, sha256, now)
    )


def from_feed(conn: sqlite3.Connection, rows: Sequence[tuple[Any, ...]]) -> None:
    """Attachments the changes feed tells of: (id, entity_id, filename, content_type, size,
    sha256, created_at, created_by, now) each (`app.attachments.feed`)."""
    if rows:
        conn.executemany(_FROM_FEED, rows)


def tombstone(conn: sqlite3.Connection, removed: Sequence[tuple[float, str]]) -> None:
    """Attachments the feed says were removed: (now, id) each."""
    if removed:
        conn.executemany(_TOMBSTONE, removed)


def mark_removed(conn: sqlite3.Connection, attachment_id: str, now: float) -> None:
    """Removed on this device: gone from the screens at once; its bytes may go."""
    conn.execute(
        "UPDATE attachments SET removed_at = ?, stored = 0 WHERE id = ?", (now, attachment_id)
    )


def removed_with_work_order(conn: sqlite3.Connection, attachment_id: str, now: float) -> None:
    """Its work order was deleted before the file reached the server: it goes with it (its
    bytes stay until the retention sweep, like any other removed file)."""
    conn.execute(
        "UPDATE attachments SET removed_at = COALESCE(removed_at, ?) WHERE id = ?",
        (now, attachment_id),
    )


def set_upload(conn: sqlite3.Connection, attachment_id: str, url: str | None, offset: int) -> None:
    """Where the server keeps the upload and how many bytes it holds."""
    conn.execute(_SET_UPLOAD, (url, offset, attachment_id))


def confirm(conn: sqlite3.Connection, attachment_id: str, now: float) -> None:
    """The server holds the whole file and it matched its sha256."""
    conn.execute(
        "UPDATE attachments SET upload_offset = size, "
        "confirmed_at = COALESCE(confirmed_at, ?) WHERE id = ?",
        (now, attachment_id),
    )


def unstore(conn: sqlite3.Connection, sha256: str) -> None:
    """The content file goes: no row names it stored any more (the row first, then the file:
    a crash between leaves an unnamed file the sweep removes)."""
    conn.execute("UPDATE attachments SET stored = 0 WHERE sha256 = ?", (sha256,))


def touch_thumbnail(conn: sqlite3.Connection, attachment_id: str, now: float) -> None:
    """The thumbnail was just shown: it is evicted last."""
    conn.execute("UPDATE attachments SET thumbnail_used_at = ? WHERE id = ?", (now, attachment_id))


def keep_thumbnail(conn: sqlite3.Connection, attachment_id: str, size: int, now: float) -> bool:
    """A fetched thumbnail is cached (False: the attachment is gone or removed)."""
    kept = conn.execute(
        "UPDATE attachments SET thumbnail_size = ?, thumbnail_used_at = ? "
        "WHERE id = ? AND removed_at IS NULL",
        (size, now, attachment_id),
    ).rowcount
    return bool(kept)


def drop_thumbnail(conn: sqlite3.Connection, attachment_id: str) -> None:
    conn.execute(f"{_NO_THUMBNAIL} WHERE id = ?", (attachment_id,))


def drop_thumbnails_of_removed(conn: sqlite3.Connection, attachment_ids: Iterable[str]) -> None:
    """The thumbnails of removed attachments among ``attachment_ids`` are no longer kept."""
    conn.execute(
        f"{_NO_THUMBNAIL} WHERE removed_at IS NOT NULL AND id IN (SELECT value FROM json_each(?))",
        (json.dumps(list(attachment_ids)),),
    )


def delete_departed(conn: sqlite3.Connection, attachment_ids: Iterable[str]) -> None:
    """The rows of ``attachment_ids`` whose work order left the device, never one whose
    upload or removal is still to send."""
    conn.execute(
        "DELETE FROM attachments AS a WHERE a.id IN (SELECT value FROM json_each(?)) "
        "AND NOT EXISTS (SELECT 1 FROM work_orders AS w WHERE w.id = a.entity_id) "
        f"AND NOT {FILE_UNSENT}",
        (json.dumps(list(attachment_ids)),),
    )
