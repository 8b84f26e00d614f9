"""Attachments on this device: attach, list, remove, retry (blocking: call off the UI loop).

``attach`` copies the file in (`app.attachments.files`, fsynced) and then writes the
attachment's row and its upload job in one transaction: once it returns, a dead battery loses
nothing; when it raises, nothing was saved. The upload job is the queue's (topic
``attachments``, keyed by the attachment id, which is also the tus upload's
``attachment_id``); it waits for its work order's create, never for its edits. Removing is a
queued, idempotent job of the same entity, so it follows the upload.
"""

from __future__ import annotations

import mimetypes
import sqlite3
import unicodedata
import uuid
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from app.attachments import rows
from app.attachments.files import AttachmentFiles, StoredFile
from app.attachments.model import (
    AttachmentConfig,
    AttachmentCounts,
    AttachmentView,
    attachment_state,
    entity_key_of,
)
from app.attachments.retention import Retention
from app.states import AttachmentState, Reason
from app.store.db import WriteTransaction, connection, in_batches
from app.store.errors import InvalidEditError, storage_errors
from app.store.jobs import PRIORITY_BACKGROUND, TOPIC_ATTACHMENTS
from app.store.settings import read_setting
from app.store.store import Store

__all__ = ["SYNC_ON_METERED", "Attachments"]

#: The settings key of "sync on metered connections" (`app.operations` owns the setting).
SYNC_ON_METERED = "ui.sync_on_metered"
_MAX_NAME = 255

_COLUMNS = (
    "a.id, a.entity_id, a.filename, a.content_type, a.size, a.sha256, a.mine, a.created_at, "
    "a.created_by, a.upload_url, a.upload_offset, a.confirmed_at, a.stored, j.status, "
    "j.last_error, (SELECT t.reason_code FROM attempts AS t WHERE t.job_id = j.id "
    "ORDER BY t.id DESC LIMIT 1)"
)
_SELECT = (
    f"SELECT {_COLUMNS} FROM attachments AS a "
    # The upload job carries the attachment's id as its idempotency key (a unique index).
    "LEFT JOIN jobs AS j ON j.idempotency_key = a.id AND j.topic = 'attachments' "
    "WHERE a.removed_at IS NULL"
)


def clean_filename(name: str) -> str:
    """A file name as the server and other devices will show it, or InvalidEditError."""
    name = unicodedata.normalize("NFC", name).strip()
    if not name or name in (".", ".."):
        raise InvalidEditError("The file name is empty")
    if "/" in name or "\\" in name or any(ord(c) < 32 for c in name):
        raise InvalidEditError(f"The file name {name!r} may not hold slashes or control codes")
    if len(name.encode()) > _MAX_NAME:
        raise InvalidEditError(f"The file name is longer than {_MAX_NAME} bytes")
    return name


def content_type_of(filename: str) -> str:
    guessed, _ = mimetypes.guess_type(filename, strict=False)
    return guessed or "application/octet-stream"


class Attachments:
    """The attachments of one store."""

    def __init__(self, store: Store, config: AttachmentConfig | None = None) -> None:
        self.store = store
        self.config = config or AttachmentConfig()
        self.files = AttachmentFiles(store.data_dir)
        self.retention = Retention(store, self.files, self.config)

    # -- writes ------------------------------------------------------------------------------

    def attach(self, entity_id: str, path: Path, filename: str | None = None) -> AttachmentView:
        """Keep a copy of ``path`` on work order ``entity_id`` and queue its upload."""
        path = Path(path)
        name = clean_filename(path.name if filename is None else filename)
        work_order = self.store.cache.get(entity_id)
        if work_order is None:
            raise InvalidEditError(f"No work order {entity_id} on this device")
        if work_order["deleted"]:
            raise InvalidEditError(f"Work order {entity_id} is deleted")
        size = self.files.check_source(path, self.config.max_bytes)
        self.retention.make_room(size)
        attachment_id = str(uuid.uuid4())
        now = self.store.clock()
        stored: StoredFile | None = None
        try:
            # From the copy until its row is committed, no other process deletes the file.
            with self.files.adding():
                stored = self.files.copy_in(path, self.config.max_bytes)
                self._insert(attachment_id, entity_id, name, stored, now)
        except BaseException:
            if stored is not None:
                self.retention.drop_if_unnamed(stored.sha256)
            raise
        view = self.get(attachment_id)
        assert view is not None
        return view

    def _insert(
        self, attachment_id: str, entity_id: str, name: str, stored: StoredFile, now: float
    ) -> None:
        """The attachment's row and its upload job, in one transaction."""
        with WriteTransaction(self.store.db, self.store.path) as conn:
            rows.insert_mine(
                conn,
                attachment_id,
                entity_id,
                name,
                content_type_of(name),
                stored.size,
                stored.sha256,
                now,
            )
            self.store.queue.enqueue(
                TOPIC_ATTACHMENTS,
                _payload("upload", attachment_id, entity_id),
                entity_key_of(attachment_id),
                priority=PRIORITY_BACKGROUND,
                idempotency_key=attachment_id,
                waits_for=entity_id,
                new_entity=True,
            )

    def detach(self, attachment_id: str) -> AttachmentView:
        """Remove an attachment: at once here, on the server by a queued, idempotent job
        (behind its upload, which then ends without sending). Its bytes go unless another
        attachment holds the same content."""
        now = self.store.clock()
        with WriteTransaction(self.store.db, self.store.path) as conn:
            view = self._get(conn, attachment_id)
            if view is None:
                raise InvalidEditError(f"No attachment {attachment_id} on this device")
            rows.mark_removed(conn, attachment_id, now)
            held = conn.execute(
                "SELECT id FROM jobs WHERE idempotency_key = ? AND status IN ('dead', 'conflict')",
                (attachment_id,),
            ).fetchone()
            if held is not None:
                # A failed upload would hold the removal back forever: the person gave it up.
                self.store.queue.discard(int(held[0]))
            self.store.queue.enqueue(
                TOPIC_ATTACHMENTS,
                _payload("remove", attachment_id, view.entity_id),
                entity_key_of(attachment_id),
                priority=PRIORITY_BACKGROUND,
                waits_for=view.entity_id,
            )
        self.retention.drop_if_unnamed(view.sha256)
        self.files.remove_thumbnail(attachment_id)
        return view

    def retry(self, attachment_id: str) -> AttachmentView:
        """Send a failed upload again, under the same key (the server may hold part of it)."""
        row = self.store.read_one(
            "SELECT j.id FROM jobs AS j JOIN attachments AS a ON a.id = j.idempotency_key "
            "WHERE j.idempotency_key = ? AND j.status IN ('dead', 'conflict') "
            "AND a.removed_at IS NULL",
            (attachment_id,),
        )
        if row is None:
            raise InvalidEditError(f"The upload of attachment {attachment_id} has not failed")
        self.store.queue.retry_dead(int(row[0]))
        view = self.get(attachment_id)
        assert view is not None
        return view

    # -- reads -------------------------------------------------------------------------------

    def get(self, attachment_id: str) -> AttachmentView | None:
        with storage_errors(self.store.path):
            return self._get(connection(self.store.db), attachment_id)

    def list_for(self, entity_id: str) -> list[AttachmentView]:
        """A work order's attachments, oldest first (removed ones are gone)."""
        with storage_errors(self.store.path):
            conn = connection(self.store.db)
            rows = conn.execute(
                f"{_SELECT} AND a.entity_id = ? ORDER BY a.created_at, a.id", (entity_id,)
            ).fetchall()
            metered_off = self._metered_off()
        return [self._view(row, metered_off) for row in rows]

    def counts_for(self, entity_ids: Iterable[str]) -> dict[str, AttachmentCounts]:
        """How many attachments each work order has, and how many wait to be uploaded."""
        ids = sorted(set(entity_ids))
        counts: dict[str, AttachmentCounts] = {}
        # Each attachment's state, as its tile shows it (`app.states.attachment_state`).
        tally: dict[str, list[tuple[AttachmentState, bool]]] = defaultdict(list)
        with storage_errors(self.store.path):
            conn = connection(self.store.db)
            for chunk, marks in in_batches(ids):
                rows = conn.execute(
                    "SELECT a.entity_id, a.mine, a.confirmed_at IS NOT NULL, j.status, "
                    "a.upload_url, a.upload_offset, a.content_type LIKE 'image/%' "
                    "FROM attachments AS a "
                    "LEFT JOIN jobs AS j ON j.idempotency_key = a.id AND j.topic = 'attachments' "
                    f"WHERE a.removed_at IS NULL AND a.entity_id IN ({marks})",
                    chunk,
                )
                for entity_id, mine, confirmed, job_status, url, offset, image in rows:
                    state = attachment_state(
                        mine=bool(mine),
                        confirmed=bool(confirmed),
                        job_status=job_status,
                        upload_url=url,
                        offset=int(offset),
                    )
                    tally[entity_id].append((state, bool(image)))
        for entity_id, states in tally.items():
            waiting = [image for state, image in states if state is not AttachmentState.UPLOADED]
            failed = [image for state, image in states if state is AttachmentState.FAILED]
            counts[entity_id] = AttachmentCounts(
                len(states), len(waiting), sum(waiting), len(failed), sum(failed)
            )
        return counts

    def local_file(self, attachment_id: str) -> Path | None:
        view = self.get(attachment_id)
        return None if view is None else view.local_path

    def _get(self, conn: sqlite3.Connection, attachment_id: str) -> AttachmentView | None:
        row = conn.execute(f"{_SELECT} AND a.id = ?", (attachment_id,)).fetchone()
        return None if row is None else self._view(row, self._metered_off())

    def _metered_off(self) -> bool:
        return read_setting(self.store, SYNC_ON_METERED) == "0"

    def _view(self, row: tuple[Any, ...], metered_off: bool) -> AttachmentView:
        (
            attachment_id,
            entity_id,
            filename,
            content_type,
            size,
            sha256,
            mine,
            created_at,
            created_by,
            upload_url,
            offset,
            confirmed_at,
            stored,
            job_status,
            last_error,
            reason_code,
        ) = row
        state = attachment_state(
            mine=bool(mine),
            confirmed=confirmed_at is not None,
            job_status=job_status,
            upload_url=upload_url,
            offset=int(offset),
        )
        failed = state is AttachmentState.FAILED
        unsent = state in (AttachmentState.WAITING, AttachmentState.UPLOADING)
        return AttachmentView(
            id=attachment_id,
            entity_id=entity_id,
            filename=filename,
            content_type=content_type,
            size=int(size),
            sha256=sha256,
            state=state,
            offset=int(size) if state is AttachmentState.UPLOADED else int(offset),
            reason=(last_error or "the upload failed") if failed else None,
            reason_code=_reason(reason_code) if failed else None,
            created_at=float(created_at),
            created_by=created_by,
            mine=bool(mine),
            waits_for_unmetered=unsent and metered_off and int(size) > self.config.large_bytes,
            local_path=self.files.path_for(sha256) if stored else None,
        )


def _payload(op: str, attachment_id: str, entity_id: str) -> dict[str, Any]:
    return {"op": op, "attachment_id": attachment_id, "entity_id": entity_id}


def _reason(code: str | None) -> Reason | None:
    try:
        return None if code is None else Reason(code)
    except ValueError:
        return None
