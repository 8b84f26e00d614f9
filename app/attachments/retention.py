"""The attachment budget: what the device keeps, and what it lets go first.

Unsent files (attached here, not yet confirmed by the server) are never evicted. Confirmed
files are kept for ``retention_s`` for viewing, then deleted; under the budget, the oldest
confirmed files go first, then the least recently shown thumbnails. When unsent files alone
fill the budget, attaching raises `StorageBudgetFull`. One content file counts once, however
many attachments share it.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from app.attachments import rows as rows_
from app.attachments.files import AttachmentFiles
from app.attachments.model import AttachmentConfig, StorageBudgetFull
from app.store.db import WriteTransaction, connection
from app.store.errors import storage_errors
from app.store.scope import FILE_UNSENT
from app.store.store import Store

__all__ = ["Retention", "Usage", "forget_departed"]

# A content file may go when no attachment still needs it unsent: every row naming it is
# confirmed, removed, or a colleague's.
_EVICTABLE = (
    "SELECT sha256, MAX(size), MAX(COALESCE(confirmed_at, removed_at, created_at)) AS kept_since "
    "FROM attachments WHERE stored = 1 GROUP BY sha256 "
    "HAVING SUM(mine = 1 AND confirmed_at IS NULL AND removed_at IS NULL) = 0 "
    "ORDER BY kept_since, MIN(created_at), sha256"
)


#: Attachments whose work order is no longer on this device (it left the scope, issue 16),
#: and removed ones still holding a thumbnail: their rows and bytes go. Never one with a job
#: still open: such a work order stays until its uploads are delivered.
_DEPARTED = (
    "SELECT a.id, a.sha256, a.stored, a.thumbnail_size IS NOT NULL, "
    "NOT EXISTS (SELECT 1 FROM work_orders AS w WHERE w.id = a.entity_id) AS gone "
    "FROM attachments AS a WHERE (a.removed_at IS NOT NULL AND a.thumbnail_size IS NOT NULL "
    "OR NOT EXISTS (SELECT 1 FROM work_orders AS w WHERE w.id = a.entity_id)) "
    f"AND NOT {FILE_UNSENT}"
)


def forget_departed(store: Store, files: AttachmentFiles) -> int:
    """Delete the attachments of work orders that left the device (their rows, cached
    thumbnails and kept files), and the thumbnails of removed ones; returns how many rows.

    The bytes go first, then the rows: a crash between leaves rows that name nothing, which
    the next call finishes (each step may run twice). A content file shared with an
    attachment that stays is kept."""
    with storage_errors(store.path):
        rows = connection(store.db).execute(_DEPARTED).fetchall()
    if not rows:
        return 0
    gone = [attachment_id for attachment_id, _, _, _, left in rows if left]
    for attachment_id, _, _, thumbnail, _ in rows:
        if thumbnail:
            files.remove_thumbnail(attachment_id)

    def kept(sha: str) -> bool:
        with storage_errors(store.path):
            return (
                connection(store.db)
                .execute(
                    "SELECT 1 FROM attachments AS a WHERE a.stored = 1 AND a.sha256 = ? "
                    "AND EXISTS (SELECT 1 FROM work_orders AS w WHERE w.id = a.entity_id)",
                    (sha,),
                )
                .fetchone()
                is not None
            )

    for sha in sorted({sha for _, sha, stored, _, left in rows if stored and left}):
        files.remove_unnamed(sha, kept)
    with WriteTransaction(store.db, store.path) as conn:
        rows_.drop_thumbnails_of_removed(conn, [row[0] for row in rows])
        rows_.delete_departed(conn, gone)
    return len(rows)


@dataclass(frozen=True)
class Usage:
    unsent: int
    kept: int
    thumbnails: int

    @property
    def total(self) -> int:
        return self.unsent + self.kept + self.thumbnails


class Retention:
    def __init__(self, store: Store, files: AttachmentFiles, config: AttachmentConfig) -> None:
        self.store = store
        self.files = files
        self.config = config

    def usage(self) -> Usage:
        with storage_errors(self.store.path):
            return _usage(connection(self.store.db))

    def make_room(self, need: int) -> None:
        """Free what may go until ``need`` more bytes fit the budget, or StorageBudgetFull."""
        budget = self.config.budget_bytes
        usage = self.usage()
        if usage.unsent + need > budget:
            raise StorageBudgetFull(usage.unsent, need, budget)
        excess = usage.total + need - budget
        if excess > 0:
            excess -= self._evict_files(excess)
        if excess > 0:
            self._evict_thumbnails(excess)

    def sweep(self) -> int:
        """Delete confirmed files past retention, the attachments of work orders that left
        the device, and files no row names; returns how many."""
        departed = forget_departed(self.store, self.files)
        cutoff = self.store.clock() - self.config.retention_s
        with storage_errors(self.store.path):
            conn = connection(self.store.db)
            expired = [
                sha
                for sha, _, kept_since in conn.execute(_EVICTABLE).fetchall()
                if kept_since < cutoff
            ]
        for sha in expired:
            self._forget(sha)
        with storage_errors(self.store.path):
            named = {
                sha
                for (sha,) in connection(self.store.db).execute(
                    "SELECT DISTINCT sha256 FROM attachments WHERE stored = 1"
                )
            }
        return departed + len(expired) + self.files.sweep_orphans(named, self.store.clock())

    def drop_if_unnamed(self, sha256: str) -> None:
        """Delete a content file no attachment keeps (a failed attach, a removal), unless
        an attach of the same content is under way (`AttachmentFiles.remove_unnamed`)."""
        self.files.remove_unnamed(sha256, self._named)

    def _named(self, sha256: str) -> bool:
        with storage_errors(self.store.path):
            row = (
                connection(self.store.db)
                .execute("SELECT 1 FROM attachments WHERE sha256 = ? AND stored = 1", (sha256,))
                .fetchone()
            )
        return row is not None

    def _evict_files(self, excess: int) -> int:
        freed = 0
        with storage_errors(self.store.path):
            candidates = connection(self.store.db).execute(_EVICTABLE).fetchall()
        for sha, size, _ in candidates:
            if freed >= excess:
                break
            self._forget(sha)
            freed += int(size)
        return freed

    def _forget(self, sha256: str) -> None:
        # The row first: a crash between the two leaves an unnamed file, which the sweep
        # removes, never a row naming bytes that are gone.
        with WriteTransaction(self.store.db, self.store.path) as conn:
            rows_.unstore(conn, sha256)
        self.files.remove_unnamed(sha256, self._named)  # an attach may bring it back

    def _evict_thumbnails(self, excess: int) -> int:
        freed = 0
        rows = self.store.read(
            "SELECT id, thumbnail_size FROM attachments WHERE thumbnail_size IS NOT NULL "
            "ORDER BY thumbnail_used_at, id"
        )
        for attachment_id, size in rows:
            if freed >= excess:
                break
            with WriteTransaction(self.store.db, self.store.path) as conn:
                rows_.drop_thumbnail(conn, attachment_id)
            self.files.remove_thumbnail(attachment_id)
            freed += int(size)
        return freed


def _usage(conn: sqlite3.Connection) -> Usage:
    unsent = kept = 0
    for size, pending in conn.execute(
        "SELECT MAX(size), SUM(mine = 1 AND confirmed_at IS NULL AND removed_at IS NULL) "
        "FROM attachments WHERE stored = 1 GROUP BY sha256"
    ):
        if pending:
            unsent += int(size)
        else:
            kept += int(size)
    (thumbnails,) = conn.execute(
        "SELECT COALESCE(SUM(thumbnail_size), 0) FROM attachments"
    ).fetchone()
    return Usage(unsent, kept, int(thumbnails))
