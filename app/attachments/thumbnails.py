"""Thumbnails of attachments, cached under the attachment budget (blocking: on the executor).

Fetched when a screen shows one (`Uploader.thumbnail`), kept in ``thumbnails/<id>.jpg`` and
counted in the budget; the least recently shown go first when room is needed
(`app.attachments.retention`). A cache: not fsynced, rebuilt from the server when lost.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path

from app.attachments import rows
from app.attachments.files import AttachmentFiles
from app.attachments.model import StorageBudgetFull
from app.attachments.retention import Retention
from app.store.db import WriteTransaction, connection
from app.store.errors import storage_errors
from app.store.store import Store

__all__ = ["Thumbnails"]


class Thumbnails:
    def __init__(self, store: Store, files: AttachmentFiles, retention: Retention) -> None:
        self.store = store
        self.files = files
        self.retention = retention

    def cached(self, attachment_id: str) -> Path | None:
        """The cached thumbnail (marked as just shown), or None."""
        path = self.files.thumbnail_path(attachment_id)
        with storage_errors(self.store.path):
            row = (
                connection(self.store.db)
                .execute(
                    "SELECT thumbnail_size FROM attachments WHERE id = ? AND removed_at IS NULL",
                    (attachment_id,),
                )
                .fetchone()
            )
        if row is None or row[0] is None or not path.exists():
            return None
        with WriteTransaction(self.store.db, self.store.path) as conn:
            rows.touch_thumbnail(conn, attachment_id, self.store.clock())
        return path

    def keep(self, attachment_id: str, image: bytes) -> Path | None:
        """Cache a fetched thumbnail; None when there is no room (unsent files fill the
        budget) or the attachment is gone."""
        try:
            self.retention.make_room(len(image))
        except StorageBudgetFull:
            return None
        path = self.files.thumbnail_path(attachment_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(f".{uuid.uuid4().hex}.part")
        try:
            part.write_bytes(image)
            os.replace(part, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                part.unlink()
        with WriteTransaction(self.store.db, self.store.path) as conn:
            kept = rows.keep_thumbnail(conn, attachment_id, len(image), self.store.clock())
        if not kept:
            path.unlink(missing_ok=True)
            return None
        return path
